"""Statements of `cafleet.broker.members` (docs/storage.md §7.4, §7.8)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import FromClause, delete, exists, func, insert, null, select, update

from cafleet.db.predicates import ACTIVE_MONITOR_PREDICATE
from cafleet.db.schema import fleets, member_placements, members, messages
from cafleet.db.statements import (
    active_monitor_id,
    const,
    insert_member,
    json_ids,
    member_aliases,
    member_columns,
    member_from,
    param,
    placement_columns,
    predicate,
)

_m, _f, _p = member_aliases()

ACTIVE_MONITOR = select(members.c.member_id).where(
    members.c.fleet_id == param("fleet_id"), predicate(ACTIVE_MONITOR_PREDICATE)
)
_d = members.alias("d")
REGISTER_CHECK = (
    select(
        _f.c.deleted_at.label("deleted_at"),
        _f.c.director_member_id.label("director_member_id"),
        _d.c.status.label("director_status"),
        active_monitor_id(_f.c.fleet_id).label("monitor_member_id"),
    )
    .select_from(_f.outerjoin(_d, _d.c.member_id == _f.c.director_member_id))
    .where(_f.c.fleet_id == param("fleet_id"))
)
INSERT_MEMBER = insert_member()
INSERT_PENDING_PLACEMENT = insert(member_placements).values(
    member_id=param("member_id"),
    mux_session=param("session"),
    mux_window_id=param("window"),
    mux_pane_id=null(),
    backend=param("backend"),
    coding_agent=param("agent"),
    created_at=param("now"),
    mux_socket=param("socket"),
    host_id=param("host"),
)
_mp = member_placements.c


def member_is_active() -> Any:
    """`EXISTS (SELECT 1 FROM members WHERE member_id = :member_id AND status = 'active')`."""
    return exists(
        select(const(1))
        .select_from(members)
        .where(members.c.member_id == param("member_id"), members.c.status == const("active"))
    )


PATCH_PANE = (
    update(member_placements)
    .where(_mp.member_id == param("member_id"), _mp.mux_pane_id.is_(None), member_is_active())
    .values(
        mux_pane_id=param("pane_id"),
        mux_window_id=func.coalesce(param("window_id"), _mp.mux_window_id),
        mux_server_pid=param("server_pid"),
        mux_server_start=param("server_start"),
        mux_pane_pid=param("pane_pid"),
    )
    .returning(*placement_columns(member_placements))
)
MEMBER_BY_ID = (
    select(*member_columns(_m, _f, _p))
    .select_from(member_from(_m, _f, _p))
    .where(_m.c.member_id == param("member_id"))
)
DEREGISTER = (
    update(members)
    .where(members.c.member_id == param("member_id"), members.c.status == const("active"))
    .values(status=const("deregistered"), deregistered_at=param("now"))
)
DELETE_PLACEMENT = delete(member_placements).where(_mp.member_id == param("member_id"))
ACTIVE_MONITOR_MEMBER = (
    select(*member_columns(_m, _f, _p))
    .select_from(member_from(_m, _f, _p))
    .where(_m.c.member_id == active_monitor_id(param("fleet_id")))
)
FLEET_STATE = select(fleets.c.deleted_at).where(fleets.c.fleet_id == param("fleet_id"))
_pp = member_placements.alias("p")
_pm = members.alias("m")
_pf, _pd = fleets.alias("pf"), member_placements.alias("pd")
# Every other active member whose placement names the pane key, with the host its pane is on
# (its placement's, else its root Director's; NULL: not recorded). The caller keeps those on
# its own host: the same key on another host names another pane (docs/runtime.md §10.2).
PANE_SHARED_WITH = (
    select(
        _pp.c.member_id,
        func.coalesce(
            _pp.c.host_id,
            select(_pd.c.host_id)
            .select_from(_pf.join(_pd, _pd.c.member_id == _pf.c.director_member_id))
            .where(_pf.c.fleet_id == _pm.c.fleet_id)
            .scalar_subquery(),
        ).label("host_id"),
    )
    .select_from(_pp.join(_pm, _pm.c.member_id == _pp.c.member_id))
    .where(
        _pp.c.backend == param("backend"),
        _pp.c.mux_session == param("session"),
        _pp.c.mux_pane_id == param("pane"),
        _pp.c.member_id != param("member_id"),
        _pm.c.status == const("active"),
    )
    .order_by(_pp.c.member_id)
)


def activity(m: FromClause) -> dict[str, Any]:
    """Per-member activity for member alias `m`: each correlated subquery is one seek to the end
    of a range of its covering index (docs/storage.md §7.8, §2.7), so its cost does not grow
    with the member's history."""
    x = messages.alias("x")
    owned_unicast = (x.c.owner_member_id == m.c.member_id, x.c.type == const("unicast"))
    return {
        "last_sent": select(func.max(x.c.created_at))
        .where(x.c.from_member_id == m.c.member_id)
        .scalar_subquery(),
        "last_recv": select(func.max(x.c.created_at)).where(*owned_unicast).scalar_subquery(),
        "last_ack": select(func.max(x.c.status_timestamp))
        .where(*owned_unicast, x.c.status_state == const("completed"))
        .scalar_subquery(),
        "unacked": select(func.count())
        .select_from(x)
        .where(*owned_unicast, x.c.status_state == const("input_required"))
        .scalar_subquery(),
    }


_activity = activity(_m)
_ACTIVE_IN_FLEET = (_m.c.fleet_id == param("fleet_id"), _m.c.status == const("active"))
ROSTER = (
    select(
        *member_columns(_m, _f, _p),
        *[_activity[k].label(k) for k in ("last_sent", "last_recv", "last_ack")],
    )
    .select_from(member_from(_m, _f, _p))
    .where(*_ACTIVE_IN_FLEET)
    .order_by(_m.c.member_id)
)
WAKE_ROSTER = (
    select(*member_columns(_m, _f, _p), _activity["unacked"].label("unacked"))
    .select_from(member_from(_m, _f, _p))
    .where(*_ACTIVE_IN_FLEET)
    .order_by(_m.c.member_id)
)
# The ids travel as one JSON array (json_each): one parameter, one prepared text.
NAMES = (
    select(members.c.member_id, members.c.name)
    .where(members.c.member_id.in_(json_ids("ids")))
    .order_by(members.c.member_id)
)

STATEMENTS: dict[str, Any] = {
    "ACTIVE_MONITOR": ACTIVE_MONITOR,
    "REGISTER_CHECK": REGISTER_CHECK,
    "INSERT_MEMBER": INSERT_MEMBER,
    "INSERT_PENDING_PLACEMENT": INSERT_PENDING_PLACEMENT,
    "PATCH_PANE": PATCH_PANE,
    "MEMBER_BY_ID": MEMBER_BY_ID,
    "DEREGISTER": DEREGISTER,
    "DELETE_PLACEMENT": DELETE_PLACEMENT,
    "ACTIVE_MONITOR_MEMBER": ACTIVE_MONITOR_MEMBER,
    "FLEET_STATE": FLEET_STATE,
    "PANE_SHARED_WITH": PANE_SHARED_WITH,
    "ROSTER": ROSTER,
    "WAKE_ROSTER": WAKE_ROSTER,
    "NAMES": NAMES,
}
