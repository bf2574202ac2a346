"""The agent session id of each member (docs/storage.md §7.10; `member_spawns.agent_session_id`,
revision 0005): learned once after a spawn, bound to the member whose agent created it, cleared
when the member is respawned afresh."""

from __future__ import annotations

from cafleet.db import tx
from cafleet.db.catalog import sessions as q
from cafleet.db.runtime import Connection


def session_id(conn: Connection, member_id: int) -> str | None:
    """The member's learned session id (None: not learned, or no spawn record)."""
    with tx.read(conn):
        row = conn.execute(q.SESSION_ID, {"member_id": member_id}).first()
    return None if row is None else row[0]


def session_owner(conn: Connection, session_id: str) -> int | None:
    """The member a session id is bound to, if any."""
    with tx.read(conn):
        row = conn.execute(q.SESSION_OWNER, {"session_id": session_id}).first()
    return None if row is None else int(row[0])


def fleet_sessions(conn: Connection, fleet_id: int) -> dict[int, str | None]:
    """member id -> session id for every member of the fleet with a spawn record."""
    with tx.read(conn):
        rows = conn.execute(q.FLEET_SESSIONS, {"fleet_id": fleet_id}).all()
    return {int(r[0]): r[1] for r in rows}


def set_session_id(conn: Connection, member_id: int, session_id: str) -> bool:
    """Store a learned session id; False when one is already stored or another member holds
    this one (nothing changes then)."""
    params = {"member_id": member_id, "session_id": session_id}
    result, _ = tx.write_one(conn, q.SET_SESSION, params)
    return result.rowcount == 1


def clear_session_id(conn: Connection, member_id: int) -> None:
    """Forget the member's session id (it was respawned afresh: a new session is learned)."""
    tx.write_one(conn, q.CLEAR_SESSION, {"member_id": member_id})


__all__ = [
    "clear_session_id",
    "fleet_sessions",
    "session_id",
    "session_owner",
    "set_session_id",
]
