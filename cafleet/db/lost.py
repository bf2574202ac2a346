"""After a write's connection failed (docs/storage.md §4.6): is the connection gone, get a new
one, and has the old session ended (so a look-up sees whatever it committed, for good)?

Only PostgreSQL loses a connection; on SQLite the connection stays usable after a failed write
and SQLite's own transaction is atomic, so a read on it already tells what was stored.
"""

from __future__ import annotations

from cafleet.db.connection import Connection


def session_of(conn: Connection) -> int | None:
    """This connection's server session (its backend pid; None on SQLite), read before a write
    so that `session_ended` can ask about it after a failure."""
    return conn.session()


def is_lost(conn: Connection) -> bool:
    return conn.lost()


def reconnect(conn: Connection, seconds: float) -> None:
    """A new session for a lost connection, trying for at most about ``seconds`` (libpq's
    connect timeout, at least 2 s); failures raise `sqlite3.OperationalError`."""
    conn.reconnect(connect_timeout=max(2, int(seconds + 0.999)))


def session_ended(conn: Connection, session: int | None) -> bool:
    """True once the earlier session ``session`` can commit nothing more: its server process
    is gone (after a server restart, always). SQLite and an unknown session: True."""
    return session is None or conn.session_ended(session)


__all__ = ["is_lost", "reconnect", "session_ended", "session_of"]
