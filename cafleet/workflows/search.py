"""`cafleet search` (docs/cli.md §2.34): the query's words, then one repository read."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cafleet import broker, status
from cafleet.workflows.errors import WorkflowError

if TYPE_CHECKING:
    from cafleet.broker.search import SearchHit
    from cafleet.db.runtime import Connection

QUERY_MAX = 1000  # characters
LIMIT_MAX = 1000


class SearchRefused(WorkflowError):
    """A query with nothing to search for, or too long: a usage error, nothing read."""

    error_code = status.CODE_USAGE


def search(conn: Connection, *, query: str, fleet_id: int | None, limit: int) -> list[SearchHit]:
    if len(query) > QUERY_MAX:
        raise SearchRefused(f"the search query is longer than {QUERY_MAX} characters")
    words = broker.search_words(query)
    if not words:
        raise SearchRefused("the search query has no word to search for (letters or digits)")
    return broker.search_text(conn, words, fleet_id=fleet_id, limit=limit)
