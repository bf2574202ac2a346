"""After a write's connection failed (docs/storage.md §4.6): is the connection gone, get a new
one, and has the old session ended (so a look-up sees whatever it committed, for good)?

Only PostgreSQL loses a connection; on SQLite the connection stays usable after a failed write
and SQLite's own transaction is atomic, so a read on it already tells what was stored.
"""

from __future__ import annotations

from typing import Any

from cafleet.db.runtime import connection_lost, is_postgres_connection


def session_of(conn: Any) -> int | None:
    """This connection's server session (its backend pid; None on SQLite), read before a write
    so that `session_ended` can ask about it after a failure."""
    if not is_postgres_connection(conn):
        return None
    from cafleet.db.pg.runtime import backend_pid

    return backend_pid(conn)


def is_lost(conn: Any) -> bool:
    return connection_lost(conn)


def reconnect(conn: Any, seconds: float) -> None:
    """A new session for a lost connection, trying for at most about ``seconds`` (libpq's
    connect timeout, at least 2 s); failures raise `sqlite3.OperationalError`."""
    from cafleet.db.pg.runtime import reconnect as pg_reconnect

    pg_reconnect(conn, connect_timeout=max(2, int(seconds + 0.999)))


def session_ended(conn: Any, session: int | None) -> bool:
    """True once the earlier session ``session`` can commit nothing more: its server process
    is gone (after a server restart, always). SQLite and an unknown session: True."""
    if session is None or not is_postgres_connection(conn):
        return True
    from cafleet.db.pg.runtime import backend_alive

    return not backend_alive(conn, session)


__all__ = ["is_lost", "reconnect", "session_ended", "session_of"]
