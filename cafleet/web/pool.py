"""The server's connections: each handler holds its own for the length of its request, and gives
it back for a later request to reuse (docs/storage.md §8: validated once at start-up, one connection
per handler). Reuse keeps SQLite's page cache and prepared statements warm: a fresh connection
for every request doubled the timeline's time on 100,000 messages (docs/performance.md §8).

Every connection is opened by the guard's `open_revalidated_connection`; a reused one is checked
again with `recheck_schema` (one `PRAGMA schema_version` read), so a file whose schema changed is
refused with the guard's text whichever connection a request gets.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from cafleet.db.guard import open_revalidated_connection, recheck_schema
from cafleet.db.runtime import close_connection

if TYPE_CHECKING:
    from cafleet.db.runtime import Connection

KEEP_IDLE = 4  # the page's refresh makes 6 requests; FastAPI's thread pool runs them in parallel


class Connections:
    def __init__(self, path: str, schema_version: int | None, keep: int = KEEP_IDLE) -> None:
        self.path = path
        self.schema_version = schema_version
        self.keep = keep
        self._idle: list[Connection] = []
        self._lock = threading.Lock()

    def take(self) -> Connection:
        """A connection for one request, current per the guard (else `GuardRefused`)."""
        with self._lock:
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            return open_revalidated_connection(self.path, self.schema_version)
        try:
            recheck_schema(conn)
        except BaseException:
            close_connection(conn, guarded=bool(conn.info.get("cafleet.refused")))
            raise
        return conn

    def give(self, conn: Connection) -> None:
        """Back from a finished request; kept for reuse unless refused, mid-transaction or
        surplus."""
        reusable = not conn.info.get("cafleet.refused") and not conn.in_transaction()
        if reusable:
            with self._lock:
                if len(self._idle) < self.keep:
                    self._idle.append(conn)
                    return
        close_connection(conn, guarded=bool(conn.info.get("cafleet.refused")))

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            close_connection(conn)
