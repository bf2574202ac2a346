"""Statements of `cafleet.broker.sessions` (docs/storage.md §7.10): the agent session id each
member's agent runs (`member_spawns.agent_session_id`, revision 0005)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import exists, null, select, update

from cafleet.db.schema import member_spawns, members
from cafleet.db.statements import param

_s = member_spawns.c
_other = member_spawns.alias("other")

SESSION_ID = select(_s.agent_session_id).where(_s.member_id == param("member_id"))
# Learned once: only while none is stored, and never an id another member already holds (a
# session is bound to the member that created it).
SET_SESSION = (
    update(member_spawns)
    .where(
        _s.member_id == param("member_id"),
        _s.agent_session_id.is_(None),
        ~exists()
        .where(
            _other.c.agent_session_id == param("session_id"),
            _other.c.member_id != param("member_id"),
        )
        .correlate(None),
    )
    .values(agent_session_id=param("session_id"))
)
CLEAR_SESSION = (
    update(member_spawns).where(_s.member_id == param("member_id")).values(agent_session_id=null())
)
SESSION_OWNER = select(_s.member_id).where(_s.agent_session_id == param("session_id"))
FLEET_SESSIONS = (
    select(_s.member_id, _s.agent_session_id)
    .select_from(member_spawns.join(members, members.c.member_id == _s.member_id))
    .where(members.c.fleet_id == param("fleet_id"))
    .order_by(_s.member_id)
)

STATEMENTS: dict[str, Any] = {
    "SESSION_ID": SESSION_ID,
    "SET_SESSION": SET_SESSION,
    "CLEAR_SESSION": CLEAR_SESSION,
    "SESSION_OWNER": SESSION_OWNER,
    "FLEET_SESSIONS": FLEET_SESSIONS,
}
