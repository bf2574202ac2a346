"""Statements of `cafleet.broker.recovery` (docs/storage.md §7.10)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import case, insert, null, select, update

from cafleet.db.schema import fleets, member_placements, member_spawns, members, messages
from cafleet.db.statements import (
    const,
    member_aliases,
    member_columns,
    member_from,
    param,
    placement_columns,
)
from cafleet.db.statements.members import member_is_active

_m, _f, _p = member_aliases()
_mp = member_placements.c

INSERT_SPAWN = insert(member_spawns).values(
    member_id=param("member_id"),
    prompt=param("prompt"),
    model=param("model"),
    effort=param("effort"),
    worktree_json=param("worktree"),
    permissions=param("permissions"),
)
SPAWN = select(
    member_spawns.c.prompt,
    member_spawns.c.model,
    member_spawns.c.effort,
    member_spawns.c.worktree_json,
    member_spawns.c.permissions,
).where(member_spawns.c.member_id == param("member_id"))
# The worktrees of a fleet's active members (docs/worktrees.md): `member list`, `fleet delete`.
FLEET_WORKTREES = (
    select(member_spawns.c.member_id, member_spawns.c.worktree_json)
    .select_from(member_spawns.join(members, members.c.member_id == member_spawns.c.member_id))
    .where(
        members.c.fleet_id == param("fleet_id"),
        members.c.status == const("active"),
        member_spawns.c.worktree_json.is_not(None),
    )
    .order_by(member_spawns.c.member_id)
)
# Every recorded worktree, any fleet's (docs/worktrees.md §3): `worktree list`, left-behind ones.
ALL_WORKTREES = (
    select(
        member_spawns.c.member_id,
        members.c.fleet_id,
        members.c.name,
        members.c.status,
        fleets.c.deleted_at,
        member_spawns.c.worktree_json,
    )
    .select_from(
        member_spawns.join(members, members.c.member_id == member_spawns.c.member_id).join(
            fleets, fleets.c.fleet_id == members.c.fleet_id
        )
    )
    .where(member_spawns.c.worktree_json.is_not(None))
    .order_by(member_spawns.c.member_id)
)
FLEET_PERMISSIONS = (
    select(member_spawns.c.member_id, member_spawns.c.permissions)
    .select_from(member_spawns.join(_m, _m.c.member_id == member_spawns.c.member_id))
    .where(_m.c.fleet_id == param("fleet_id"))
)
MEMBER = (
    select(*member_columns(_m, _f, _p))
    .select_from(member_from(_m, _f, _p))
    .where(_m.c.member_id == param("member_id"))
)
# Guarded on the pane the caller locked and saw: a placement that moved meanwhile changes nothing.
REBIND = (
    update(member_placements)
    .where(
        _mp.member_id == param("member_id"),
        _mp.backend == param("backend"),
        _mp.mux_session == param("old_session"),
        _mp.mux_pane_id.is_not_distinct_from(param("old_pane")),
        # The placement the caller saw, not a later one on a pane with the same key (a tmux
        # server started again hands out the same ids).
        _mp.created_at == param("old_created"),
        member_is_active(),
    )
    .values(
        mux_session=param("session"),
        mux_window_id=param("window"),
        mux_pane_id=param("pane"),
        coding_agent=param("agent"),
        created_at=param("now"),
        lost_at=null(),
        mux_socket=param("socket"),
        host_id=param("host"),
        mux_server_pid=param("server_pid"),
        mux_server_start=param("server_start"),
        mux_pane_pid=param("pane_pid"),
    )
    .returning(*placement_columns(member_placements))
)
PLACED = (
    select(*member_columns(_m, _f, _p))
    .select_from(member_from(_m, _f, _p))
    .where(
        _m.c.fleet_id == param("fleet_id"),
        _m.c.status == const("active"),
        _p.c.mux_pane_id.is_not(None),
    )
    .order_by(_m.c.member_id)
)
MARK_LOST = (
    update(member_placements)
    .where(
        _mp.member_id == param("member_id"),
        _mp.backend == param("backend"),
        _mp.mux_session == param("session"),
        _mp.mux_pane_id == param("pane"),
        # The placement the tick saw, not a later one on a pane with the same key (a tmux
        # server started again hands out the same ids).
        _mp.created_at == param("created"),
        _mp.lost_at.is_(None),
        member_is_active(),
    )
    .values(lost_at=param("now"))
)
# The report: a unicast delivery in the root Director's inbox (born notified when the Director
# reports to itself, as any self-send; otherwise never typed: the Director is never notified).
INSERT_REPORT = (
    insert(messages)
    .values(
        owner_member_id=param("director_id"),
        from_member_id=param("sender_id"),
        to_member_id=param("director_id"),
        type=const("unicast"),
        created_at=param("now"),
        status_state=const("input_required"),
        status_timestamp=param("now"),
        origin_message_id=null(),
        text=param("text"),
        notified_at=case((param("sender_id") == param("director_id"), param("now")), else_=null()),
    )
    .returning(messages.c.message_id)
)

STATEMENTS: dict[str, Any] = {
    "INSERT_SPAWN": INSERT_SPAWN,
    "SPAWN": SPAWN,
    "FLEET_WORKTREES": FLEET_WORKTREES,
    "ALL_WORKTREES": ALL_WORKTREES,
    "FLEET_PERMISSIONS": FLEET_PERMISSIONS,
    "MEMBER": MEMBER,
    "REBIND": REBIND,
    "PLACED": PLACED,
    "MARK_LOST": MARK_LOST,
    "INSERT_REPORT": INSERT_REPORT,
}
