"""Statements of `cafleet.broker.fleets` (docs/storage.md §7.3)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, func, insert, null, select, update

from cafleet.db.schema import fleets, member_placements, members, monitor_runtime
from cafleet.db.statements import (
    active_monitor_id,
    const,
    insert_member,
    member_aliases,
    member_columns,
    member_from,
    param,
    placement_columns,
)

_m, _f, _p = member_aliases()
_FLEET_COLUMNS = (
    fleets.c.fleet_id,
    fleets.c.name,
    fleets.c.created_at,
    fleets.c.deleted_at,
    fleets.c.director_member_id,
)

INSERT_FLEET = insert(fleets).values(
    name=param("name"),
    created_at=param("now"),
    deleted_at=null(),
    director_member_id=null(),
    member_defaults_json=param("defaults"),
)
MEMBER_DEFAULTS = select(fleets.c.member_defaults_json).where(
    fleets.c.fleet_id == param("fleet_id")
)
INSERT_MEMBER = insert_member()
INSERT_PLACEMENT = insert(member_placements).values(
    member_id=param("member_id"),
    mux_session=param("session"),
    mux_window_id=param("window"),
    mux_pane_id=param("pane"),
    backend=param("backend"),
    coding_agent=param("agent"),
    created_at=param("now"),
    mux_socket=param("socket"),
    host_id=param("host"),
    mux_server_pid=param("server_pid"),
    mux_server_start=param("server_start"),
    mux_pane_pid=param("pane_pid"),
)
SET_DIRECTOR = (
    update(fleets)
    .where(fleets.c.fleet_id == param("fleet_id"))
    .values(director_member_id=param("member_id"))
)
FLEET_BY_ID = select(*_FLEET_COLUMNS).where(fleets.c.fleet_id == param("fleet_id"))
MEMBERS_BY_FLEET = (
    select(*member_columns(_m, _f, _p))
    .select_from(member_from(_m, _f, _p))
    .where(_m.c.fleet_id == param("fleet_id"))
    .order_by(_m.c.member_id)
)
SOFT_DELETE = (
    update(fleets)
    .where(fleets.c.fleet_id == param("fleet_id"), fleets.c.deleted_at.is_(None))
    .values(deleted_at=param("now"))
)


def _placements(*extra: Any) -> Any:
    return (
        select(*placement_columns(_p))
        .select_from(_m.join(_p, _p.c.member_id == _m.c.member_id))
        .where(_m.c.fleet_id == param("fleet_id"), *extra)
        .order_by(_m.c.member_id)
    )


FLEET_PLACEMENTS = _placements()
FLEET_CONCRETE_PLACEMENTS = _placements(_p.c.mux_pane_id.is_not(None))
DIRECTOR_PLACEMENT = (
    select(_f.c.fleet_id.label("fleet_id"), *placement_columns(_p))
    .select_from(_f.outerjoin(_p, _p.c.member_id == _f.c.director_member_id))
    .where(_f.c.fleet_id == param("fleet_id"))
)
DEREGISTER_FLEET_MEMBERS = (
    update(members)
    .where(members.c.fleet_id == param("fleet_id"), members.c.status == const("active"))
    .values(status=const("deregistered"), deregistered_at=param("now"))
)
DELETE_FLEET_PLACEMENTS = delete(member_placements).where(
    member_placements.c.member_id.in_(
        select(members.c.member_id).where(members.c.fleet_id == param("fleet_id"))
    )
)
DELETE_RUNTIME = delete(monitor_runtime).where(monitor_runtime.c.fleet_id == param("fleet_id"))


def _summary() -> Any:
    return select(
        _f.c.fleet_id.label("fleet_id"),
        _f.c.name.label("name"),
        _f.c.created_at.label("created_at"),
        _f.c.deleted_at.label("deleted_at"),
        _f.c.director_member_id.label("director_member_id"),
        active_monitor_id(_f.c.fleet_id).label("monitor_member_id"),
        select(func.count())
        .select_from(members)
        .where(members.c.fleet_id == _f.c.fleet_id, members.c.status == const("active"))
        .scalar_subquery()
        .label("member_count"),
    )


LIST_FLEETS = (
    _summary()
    .where(_f.c.deleted_at.is_(None))
    .order_by(_f.c.created_at.desc(), _f.c.fleet_id.desc())
)
FLEET_SUMMARY = _summary().where(_f.c.fleet_id == param("fleet_id"))

# One live fleet per Director pane (docs/cli.md §2.3): the live fleet whose active root Director's
# placement names the pane key.
_d = members.alias("d")
FLEET_DIRECTED_FROM = (
    select(
        _f.c.fleet_id.label("fleet_id"),
        _f.c.name.label("name"),
        _f.c.created_at.label("created_at"),
        _f.c.deleted_at.label("deleted_at"),
        _f.c.director_member_id.label("director_member_id"),
        _p.c.host_id.label("director_host_id"),
    )
    .select_from(
        _f.join(_d, _d.c.member_id == _f.c.director_member_id).join(
            _p, _p.c.member_id == _d.c.member_id
        )
    )
    .where(
        _f.c.deleted_at.is_(None),
        _d.c.status == const("active"),
        _p.c.backend == param("backend"),
        _p.c.mux_session == param("session"),
        _p.c.mux_pane_id == param("pane"),
    )
    .order_by(_f.c.fleet_id)
)
# Panes of the fleet's active members that an active member of another fleet also names
# (`fleet delete` never kills those), with the lowest such member.
_op = member_placements.alias("op")
_o = members.alias("o")
SHARED_OUTSIDE = (
    select(_p.c.backend, _p.c.mux_session, _p.c.mux_pane_id, func.min(_o.c.member_id))
    .select_from(
        _m.join(_p, _p.c.member_id == _m.c.member_id)
        .join(
            _op,
            (_op.c.backend == _p.c.backend)
            & (_op.c.mux_session == _p.c.mux_session)
            & (_op.c.mux_pane_id == _p.c.mux_pane_id),
        )
        .join(_o, _o.c.member_id == _op.c.member_id)
    )
    .where(
        _m.c.fleet_id == param("fleet_id"),
        _m.c.status == const("active"),
        _p.c.mux_pane_id.is_not(None),
        _o.c.fleet_id != param("fleet_id"),
        _o.c.status == const("active"),
    )
    .group_by(_p.c.backend, _p.c.mux_session, _p.c.mux_pane_id)
)

STATEMENTS: dict[str, Any] = {
    "INSERT_FLEET": INSERT_FLEET,
    "MEMBER_DEFAULTS": MEMBER_DEFAULTS,
    "INSERT_MEMBER": INSERT_MEMBER,
    "INSERT_PLACEMENT": INSERT_PLACEMENT,
    "SET_DIRECTOR": SET_DIRECTOR,
    "FLEET_BY_ID": FLEET_BY_ID,
    "MEMBERS_BY_FLEET": MEMBERS_BY_FLEET,
    "SOFT_DELETE": SOFT_DELETE,
    "FLEET_PLACEMENTS": FLEET_PLACEMENTS,
    "FLEET_CONCRETE_PLACEMENTS": FLEET_CONCRETE_PLACEMENTS,
    "DIRECTOR_PLACEMENT": DIRECTOR_PLACEMENT,
    "DEREGISTER_FLEET_MEMBERS": DEREGISTER_FLEET_MEMBERS,
    "DELETE_FLEET_PLACEMENTS": DELETE_FLEET_PLACEMENTS,
    "DELETE_RUNTIME": DELETE_RUNTIME,
    "LIST_FLEETS": LIST_FLEETS,
    "FLEET_SUMMARY": FLEET_SUMMARY,
    "FLEET_DIRECTED_FROM": FLEET_DIRECTED_FROM,
    "SHARED_OUTSIDE": SHARED_OUTSIDE,
}
