"""Full-text search over message bodies and tasks' titles, bodies and results (docs/cli.md
§2.34, docs/storage.md §2.13).

The user's query is never handed to the search engine's syntax: it is cut into words (letters
and digits, as SQLite's unicode61 tokenizer cuts them), and each word is searched for literally,
all of them required. A `"`, `*`, `-` or `AND` therefore never raises a syntax error. Each kind
is ranked among its 500 newest matches, then the kinds are merged by score; the snippet is cut
here from the matched text, the same on both dialects.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any, NamedTuple

from cafleet.broker.errors import FleetNotFound
from cafleet.db import tx
from cafleet.db.catalog import search as q
from cafleet.db.runtime import Connection

_WORD = re.compile(r"[^\W_]+")
SNIPPET_WORDS = 12  # words of context a snippet shows around its first match


class SearchHit(NamedTuple):
    kind: str  # "message" | "task"
    id: int
    fleet_id: int
    title: str | None  # a task's title; None for a message
    snippet: str  # one line, the query's words in [brackets]
    score: float  # lower is better


def search_words(query: str) -> list[str]:
    """The words `query` searches for, folded, each once, in order."""
    words: list[str] = []
    for match in _WORD.finditer(query):
        word = _fold(match.group())
        if word not in words:
            words.append(word)
    return words


def search_text(
    conn: Connection, words: list[str], *, fleet_id: int | None = None, limit: int = 20
) -> list[SearchHit]:
    """The best `limit` hits for all of `words` (from `search_words`, not empty), in the
    fleet `fleet_id` (deleted or not) or in every live fleet."""
    if not words:
        raise ValueError("search needs at least one word")
    params = {"query": conn.text_query(words), "fleet": fleet_id, "limit": limit}
    with tx.read(conn):
        if fleet_id is not None and conn.execute(q.FLEET, {"fleet_id": fleet_id}).first() is None:
            raise FleetNotFound(fleet_id)
        rows = [("message", r) for r in conn.execute(q.MESSAGES, params).all()]
        rows += [("task", r) for r in conn.execute(q.TASKS, params).all()]
    rows.sort(key=lambda kr: (kr[1]["score"], kr[0], -kr[1]["id"]))
    return [_hit(kind, row, set(words)) for kind, row in rows[:limit]]


def _hit(kind: str, row: Any, words: set[str]) -> SearchHit:
    fields = [row["body"], row["result"], row["title"]]
    text = next((f for f in fields if f and _matches(f, words)), row["title"] or row["body"])
    return SearchHit(
        kind, row["id"], row["fleet_id"], row["title"], snippet(text, words), float(row["score"])
    )


def _fold(word: str) -> str:
    """Case and diacritics folded, as the index folds them."""
    decomposed = unicodedata.normalize("NFKD", word.casefold())
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def _matches(text: str, words: set[str]) -> bool:
    return any(_fold(m.group()) in words for m in _WORD.finditer(text))


def snippet(text: str, words: set[str]) -> str:
    """One line of `text` around its first matched word, matches in [brackets], cut ends
    marked with an ellipsis."""
    tokens = list(_WORD.finditer(text))
    hits = [i for i, m in enumerate(tokens) if _fold(m.group()) in words]
    first = hits[0] if hits else 0
    start = max(0, first - SNIPPET_WORDS // 3)
    end = min(len(tokens), start + SNIPPET_WORDS)
    if not tokens:
        return " ".join(text.split())[:80]
    begin = 0 if start == 0 else tokens[start].start()
    finish = len(text) if end == len(tokens) else tokens[end - 1].end()
    parts: list[str] = []
    at = begin
    for i in range(start, end):
        m = tokens[i]
        if i in hits:
            parts.append(text[at : m.start()] + "[" + m.group() + "]")
            at = m.end()
    parts.append(text[at:finish])
    line = " ".join("".join(parts).split())
    return ("\u2026" if begin else "") + line + ("\u2026" if finish < len(text) else "")
