"""A loop waits out its database (docs/runtime.md §5.4): a database that stays busy (SQLite's
`database is locked`, PostgreSQL's writer lock) or a connection the server dropped (a restart, a
crash) never ends a fleet or host loop. The loop logs the outage once, backs off, reconnects a
lost PostgreSQL connection in place (listening again where it listened), and logs the end of the
outage after its next successful pass; what ends a loop otherwise still does, once the database
answers again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from cafleet.db.errors import DatabaseBusy
from cafleet.db.runtime import connection_lost, is_busy, reconnect
from cafleet.errors import error_text

if TYPE_CHECKING:
    from cafleet.db.runtime import Connection

BACKOFF_FIRST = 0.2  # seconds before the first retry; doubled after each, up to BACKOFF_MAX
BACKOFF_MAX = 2.0  # so a loop is back at most ~2 s after its database is
SLEEP_STEP = 0.2  # the stop flag is read at least this often while waiting


def is_transient(conn: Connection, exc: BaseException) -> bool:
    """Whether ``exc`` is the database being busy or out of reach, not a fault of the tick: a
    busy error anywhere in its chain (the schema re-check wraps what it could not read), or a
    connection whose server is gone."""

    seen: BaseException | None = exc
    for _ in range(8):  # a bounded walk of the cause chain
        if seen is None:
            break
        if isinstance(seen, DatabaseBusy) or is_busy(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    try:
        return connection_lost(conn)
    except Exception:
        return False


class Outage:
    """One loop's view of its database's outages: `wait_out` after each transient failure,
    `over` after each successful pass."""

    def __init__(
        self, conn: Connection, log: Callable[[str], None], stop_requested: Callable[[], bool]
    ) -> None:
        self.conn = conn
        self.log = log
        self.stop_requested = stop_requested
        self.since: float | None = None  # monotonic start of the current outage
        self.delay = BACKOFF_FIRST

    def wait_out(self, exc: BaseException) -> None:
        """Log the outage when it starts, then back off; a lost connection is reconnected,
        retrying with backoff until the server answers or a stop is requested. Returns when the
        next pass may try the database again."""

        # The schema re-check marks a connection it could not read as refused; this was not a
        # refusal (the next re-check decides again).
        self.conn.info.pop("cafleet.refused", None)
        if self.since is None:
            self.since = time.monotonic()
            self.log(f"database unavailable: {error_text(exc)}; retrying until it answers")
        while not self.stop_requested():
            self._pause()
            if self.stop_requested() or not connection_lost(self.conn):
                return
            try:
                reconnect(self.conn)
            except Exception:  # still unreachable: back off further
                continue
            return

    def over(self) -> None:
        """A pass succeeded: an outage in progress ended."""
        if self.since is not None:
            self.log(f"database available again after {time.monotonic() - self.since:.1f} s")
        self.since = None
        self.delay = BACKOFF_FIRST

    def _pause(self) -> None:
        until = time.monotonic() + self.delay
        self.delay = min(self.delay * 2, BACKOFF_MAX)
        while not self.stop_requested():
            left = until - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(SLEEP_STEP, left))


__all__ = ["Outage", "is_transient"]
