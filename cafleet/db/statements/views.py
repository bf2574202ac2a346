"""Statements of `cafleet.broker.views`: the WebUI's reads (docs/runtime.md §7.3, docs/storage.md
§7.8 and §8)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import exists, select

from cafleet.db.schema import fleets, members, messages
from cafleet.db.statements import (
    const,
    json_ids,
    member_aliases,
    member_columns,
    member_from,
    message_columns,
    param,
)
from cafleet.db.statements.members import activity

_m, _f, _p = member_aliases()
_x = messages.c

FLEET_STATE = select(fleets.c.deleted_at).where(fleets.c.fleet_id == param("fleet_id"))
# Seed 002: active members, plus deregistered ones only when they own a message.
_o = messages.alias("o")
_IN_ROSTER = (
    _m.c.fleet_id == param("fleet_id"),
    (_m.c.status == const("active"))
    | exists(select(const(1)).select_from(_o).where(_o.c.owner_member_id == _m.c.member_id)),
)
ROSTER = (
    select(*member_columns(_m, _f, _p))
    .select_from(member_from(_m, _f, _p))
    .where(*_IN_ROSTER)
    .order_by(_m.c.member_id)
)
_activity = activity(_m)
ACTIVITY = (
    select(
        _m.c.member_id.label("member_id"),
        *[_activity[k].label(k) for k in ("last_sent", "last_recv", "last_ack", "unacked")],
    )
    .select_from(_m)
    .where(*_IN_ROSTER)
    .order_by(_m.c.member_id)
)
FLEET_MEMBER_IDS = select(members.c.member_id).where(members.c.fleet_id == param("fleet_id"))
_NEWEST_FIRST = (_x.status_timestamp.desc(), _x.message_id.desc())
INBOX = (
    select(*message_columns(messages))
    .where(_x.to_member_id == param("member_id"))
    .order_by(*_NEWEST_FIRST)
    .limit(param("limit"))
)
SENT = (
    select(*message_columns(messages))
    .where(_x.from_member_id == param("member_id"))
    .order_by(*_NEWEST_FIRST)
    .limit(param("limit"))
)
# `message history` (docs/cli.md §2.31) in index searches: what the member owns of one type
# (its deliveries, or its broadcast summaries; `idx_messages_owner_type_created`), and the
# unicasts it sent (`idx_messages_from_created`; a broadcast's deliveries are its summary's), each
# the newest `:limit` by creation.
_NEWEST_CREATED = (_x.created_at.desc(), _x.message_id.desc())
HISTORY_OWNED = (
    select(*message_columns(messages))
    .where(_x.owner_member_id == param("member_id"), _x.type == param("type"))
    .order_by(*_NEWEST_CREATED)
    .limit(param("limit"))
)
HISTORY_SENT = (
    select(*message_columns(messages))
    .where(_x.from_member_id == param("member_id"), _x.origin_message_id.is_(None))
    .order_by(*_NEWEST_CREATED)
    .limit(param("limit"))
)
# The timeline, in two steps: each (owner, state) pair's newest `:limit` unicast rows, read in
# `idx_messages_owner_type_state_ts` order (its trailing `status_timestamp` and the rowid are the
# ORDER BY), so the cost follows the number of members, not the history; then the newest
# `:limit` of all the pairs' rows, fetched by id.
TIMELINE_PAIR = (
    select(_x.message_id, _x.status_timestamp)
    .where(
        _x.owner_member_id == param("owner"),
        _x.type == const("unicast"),
        _x.status_state == param("state"),
    )
    .order_by(*_NEWEST_FIRST)
    .limit(param("limit"))
)
MESSAGES_BY_IDS = (
    select(*message_columns(messages))
    .where(_x.message_id.in_(json_ids("ids")))
    .order_by(*_NEWEST_FIRST)
)

STATEMENTS: dict[str, Any] = {
    "FLEET_STATE": FLEET_STATE,
    "ROSTER": ROSTER,
    "ACTIVITY": ACTIVITY,
    "FLEET_MEMBER_IDS": FLEET_MEMBER_IDS,
    "INBOX": INBOX,
    "SENT": SENT,
    "HISTORY_OWNED": HISTORY_OWNED,
    "HISTORY_SENT": HISTORY_SENT,
    "TIMELINE_PAIR": TIMELINE_PAIR,
    "MESSAGES_BY_IDS": MESSAGES_BY_IDS,
}
