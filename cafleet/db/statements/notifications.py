"""Statements of `cafleet.broker.notifications` (docs/storage.md §7.6, docs/runtime.md §4.1).

The partial index is usable only when the query repeats its predicate literally (a bound
parameter hides it), and left alone the planner prefers the wider owner indexes; hence the
literal predicate and INDEXED BY, which makes a predicate drift fail loudly at prepare time.
Excluded ids travel as one JSON array (`json_each`): the statement text never changes with their
number, so it is prepared once, and thousands of ids cost one bound parameter.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import FromClause, Join, and_, not_, select, update

from cafleet.db.predicates import PENDING_NOTIFICATION_PREDICATE
from cafleet.db.schema import member_placements, members, messages
from cafleet.db.statements import (
    const,
    cross_join,
    indexed_by,
    json_ids,
    member_aliases,
    member_columns,
    message_columns,
    param,
    predicate,
)

PENDING_INDEX = "idx_messages_pending_notification"

_m, _f, _p = member_aliases()
_x = messages.alias("x")
_dp = member_placements.alias("dp")
_s = members.alias("s")

_MEMBER_ELIGIBLE = (
    _m.c.status == const("active"),
    _f.c.deleted_at.is_(None),
    _m.c.member_id.is_distinct_from(_f.c.director_member_id),
    _p.c.mux_pane_id.is_not(None),
    not_(
        and_(
            _dp.c.mux_pane_id.is_not(None),
            _dp.c.backend == _p.c.backend,
            _dp.c.mux_session == _p.c.mux_session,
            _dp.c.mux_pane_id == _p.c.mux_pane_id,
        )
    ),
)
_ELIGIBLE = (
    predicate(PENDING_NOTIFICATION_PREDICATE),
    _x.c.from_member_id != _x.c.owner_member_id,
    _x.c.message_id.not_in(json_ids("exclude")),
    *_MEMBER_ELIGIBLE,
)
_COLUMNS = (
    *message_columns(_x, "x_"),
    _s.c.name.label("sender_name"),
    _dp.c.host_id.label("d_host_id"),
    *member_columns(_m, _f, _p),
)


def _joins(start: FromClause) -> Join:
    return (
        start.join(_f, _f.c.fleet_id == _m.c.fleet_id)
        .join(_p, _p.c.member_id == _m.c.member_id)
        .outerjoin(_dp, _dp.c.member_id == _f.c.director_member_id)
        .outerjoin(_s, _s.c.member_id == _x.c.from_member_id)
    )


_OLDEST_FIRST = (_x.c.created_at, _x.c.message_id)
_BY_RECIPIENT = _joins(_x.join(_m, _m.c.member_id == _x.c.owner_member_id))


def _next(from_: FromClause, *where: Any) -> Any:
    return indexed_by(
        select(*_COLUMNS)
        .select_from(from_)
        .where(*where, *_ELIGIBLE)
        .order_by(*_OLDEST_FIRST)
        .limit(const(1)),
        _x,
        PENDING_INDEX,
    )


# By recipient: one range search of the pending index, in its own order.
NEXT_FOR_RECIPIENT = _next(_BY_RECIPIENT, _x.c.owner_member_id == param("recipient_id"))
# By fleet: the fleet's active members (idx_members_fleet_status) drive one pending-index search
# each (CROSS JOIN fixes that nesting order), then the rows found are sorted.
NEXT_FOR_FLEET = _next(
    _joins(cross_join(_m, _x, _x.c.owner_member_id == _m.c.member_id)),
    _m.c.fleet_id == param("fleet_id"),
    _m.c.status == const("active"),
)
NEXT_FOR_BOTH = _next(
    _BY_RECIPIENT,
    _x.c.owner_member_id == param("recipient_id"),
    _m.c.fleet_id == param("fleet_id"),
)

# Each eligible member's oldest pending message, in one statement: per member, one correlated
# search of the pending index for its first row (the same range search as NEXT_FOR_RECIPIENT),
# then the message row by its primary key. The unqualified predicate binds to `y`, the innermost
# `messages`, so the partial index applies.
_y = messages.alias("y")
_HEAD_OF_MEMBER = _x.c.message_id == (
    indexed_by(
        select(_y.c.message_id)
        .where(
            _y.c.owner_member_id == _m.c.member_id,
            predicate(PENDING_NOTIFICATION_PREDICATE),
            _y.c.from_member_id != _y.c.owner_member_id,
            _y.c.message_id.not_in(json_ids("exclude")),
        )
        .order_by(_y.c.created_at, _y.c.message_id)
        .limit(const(1)),
        _y,
        PENDING_INDEX,
    ).scalar_subquery()
)
_HEADS = _joins(cross_join(_m, _x, _HEAD_OF_MEMBER))


def _heads(*where: Any) -> Any:
    return (
        select(*_COLUMNS)
        .select_from(_HEADS)
        .where(*where, *_MEMBER_ELIGIBLE)
        .order_by(*_OLDEST_FIRST)
    )


HEADS_FOR_FLEET = _heads(_m.c.fleet_id == param("fleet_id"))
HEADS_FOR_MEMBERS = _heads(_m.c.member_id.in_(json_ids("members")))
# A host's delivery loop (docs/runtime.md §10.4): the lines for panes recorded on that host in
# fleets whose root Director is on another one (no fleet loop runs on this host for them).
HEADS_FOR_HOST = _heads(
    _p.c.host_id == param("host"), _dp.c.host_id.is_distinct_from(param("host"))
)

RECHECK = (
    select(
        _x.c.type.label("type"),
        _x.c.status_state.label("status_state"),
        _x.c.notified_at.label("notified_at"),
        _x.c.from_member_id.label("from_member_id"),
        _x.c.owner_member_id.label("owner_member_id"),
        _m.c.status.label("status"),
        _f.c.deleted_at.label("deleted_at"),
        _f.c.director_member_id.label("director_member_id"),
        _p.c.backend.label("backend"),
        _p.c.mux_session.label("mux_session"),
        _p.c.mux_pane_id.label("mux_pane_id"),
        _dp.c.backend.label("d_backend"),
        _dp.c.mux_session.label("d_mux_session"),
        _dp.c.mux_pane_id.label("d_mux_pane_id"),
    )
    .select_from(
        _x.join(_m, _m.c.member_id == _x.c.owner_member_id)
        .join(_f, _f.c.fleet_id == _m.c.fleet_id)
        .outerjoin(_p, _p.c.member_id == _m.c.member_id)
        .outerjoin(_dp, _dp.c.member_id == _f.c.director_member_id)
    )
    .where(_x.c.message_id == param("message_id"))
)
STAMP = (
    update(messages)
    .where(
        messages.c.message_id == param("message_id"),
        messages.c.notified_at.is_(None),
        messages.c.status_state == const("input_required"),
    )
    .values(notified_at=param("now"))
)

STATEMENTS: dict[str, Any] = {
    "NEXT_FOR_RECIPIENT": NEXT_FOR_RECIPIENT,
    "NEXT_FOR_FLEET": NEXT_FOR_FLEET,
    "NEXT_FOR_BOTH": NEXT_FOR_BOTH,
    "HEADS_FOR_FLEET": HEADS_FOR_FLEET,
    "HEADS_FOR_MEMBERS": HEADS_FOR_MEMBERS,
    "HEADS_FOR_HOST": HEADS_FOR_HOST,
    "RECHECK": RECHECK,
    "STAMP": STAMP,
}
