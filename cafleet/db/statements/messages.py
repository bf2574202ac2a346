"""Statements of `cafleet.broker.messages` (docs/storage.md §7.5)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import case, func, insert, null, select, update

from cafleet.db.schema import fleets, member_placements, members, messages
from cafleet.db.statements import const, indexed_by, message_columns, param

_INSERT_COLUMNS = [
    "owner_member_id",
    "from_member_id",
    "to_member_id",
    "type",
    "created_at",
    "status_state",
    "status_timestamp",
    "origin_message_id",
    "text",
    "notified_at",
]
_TOKEN_COLUMNS = [*_INSERT_COLUMNS, "client_token"]
_s = members.alias("s")
_r = members.alias("r")

# One statement validates both parties and inserts the row; only a refusal costs a second one.
SEND = (
    insert(messages)
    .from_select(
        _TOKEN_COLUMNS,
        select(
            _r.c.member_id,
            _s.c.member_id,
            _r.c.member_id,
            const("unicast"),
            param("now"),
            const("input_required"),
            param("now"),
            null(),
            param("text"),
            case((_s.c.member_id == _r.c.member_id, param("now")), else_=null()),
            param("token"),
        )
        .select_from(_s.join(_r, _r.c.member_id == param("to_id")))
        .where(
            _s.c.member_id == param("from_id"),
            _s.c.status == const("active"),
            _r.c.status == const("active"),
            _r.c.fleet_id == _s.c.fleet_id,
        ),
    )
    .returning(messages.c.message_id)
)
PARTIES = select(members.c.member_id, members.c.fleet_id, members.c.status).where(
    members.c.member_id.in_([param("from_id"), param("to_id")])
)
BROADCAST_SENDER = select(
    _s.c.fleet_id.label("fleet_id"),
    _s.c.status.label("status"),
    select(func.count())
    .select_from(_r)
    .where(
        _r.c.fleet_id == _s.c.fleet_id,
        _r.c.status == const("active"),
        _r.c.member_id != _s.c.member_id,
    )
    .scalar_subquery()
    .label("recipients"),
).where(_s.c.member_id == param("from_id"))
INSERT_SUMMARY = insert(messages).values(
    owner_member_id=param("from_id"),
    from_member_id=param("from_id"),
    to_member_id=null(),
    type=const("broadcast_summary"),
    created_at=param("now"),
    status_state=const("completed"),
    status_timestamp=param("now"),
    origin_message_id=null(),
    text=param("text"),
    notified_at=param("now"),
    client_token=param("token"),
)
LINK_SUMMARY = (
    update(messages)
    .where(messages.c.message_id == param("summary_id"))
    .values(origin_message_id=param("summary_id"))
)
INSERT_DELIVERIES = (
    insert(messages)
    .from_select(
        _INSERT_COLUMNS,
        select(
            _r.c.member_id,
            param("from_id"),
            _r.c.member_id,
            const("unicast"),
            param("now"),
            const("input_required"),
            param("now"),
            param("summary_id"),
            param("text"),
            null(),
        )
        .where(
            _r.c.fleet_id == param("fleet_id"),
            _r.c.status == const("active"),
            _r.c.member_id != param("from_id"),
        )
        .order_by(_r.c.member_id),
    )
    .returning(messages.c.message_id, messages.c.to_member_id)
)
ACK = (
    update(messages)
    .where(
        messages.c.message_id == param("message_id"),
        messages.c.status_state == const("input_required"),
    )
    .values(status_state=const("completed"), status_timestamp=param("now"))
    .returning(*message_columns(messages))
)
MESSAGE_BY_ID = select(*message_columns(messages)).where(
    messages.c.message_id == param("message_id")
)
# The row a sender's token stored (idx_messages_client_token; its predicate is implied).
MESSAGE_BY_TOKEN = select(*message_columns(messages)).where(
    messages.c.from_member_id == param("from_id"),
    messages.c.client_token == param("token"),
)
# A broadcast's deliveries, found from its summary: same sender and stamp, then its origin
# (idx_messages_from_created).
DELIVERIES_OF = (
    select(*message_columns(messages))
    .where(
        messages.c.from_member_id == param("from_id"),
        messages.c.created_at == param("created_at"),
        messages.c.origin_message_id == param("summary_id"),
        messages.c.type == const("unicast"),
    )
    .order_by(messages.c.message_id)
)
MEMBER_STATUS = select(members.c.status).where(members.c.member_id == param("member_id"))


def _inbox(*extra: Any) -> Any:
    return indexed_by(
        select(*message_columns(messages)).where(
            messages.c.owner_member_id == param("member_id"),
            messages.c.type == const("unicast"),
            messages.c.status_state == const("input_required"),
            *extra,
        ),
        messages,
        "idx_messages_owner_type_state_ts",
    )


# Equality on the index's first three columns; its order (status_timestamp, then rowid) is the
# ORDER BY, so the cost follows the un-ACKed rows only (docs/storage.md §7.5).
POLL = _inbox().order_by(messages.c.status_timestamp.desc(), messages.c.message_id.desc())
UNACKED = _inbox(messages.c.message_id > param("after")).order_by(messages.c.message_id)

# One identity per pane (docs/cli.md §1.5): the active members whose live placement names the
# pane, each with its server's socket and its host (its placement's, else its root Director's;
# NULL: not recorded). Here, beside the statements every messaging command already loads. A scan
# of member_placements, which holds only live members' rows.
_ip, _im = member_placements.alias("ip"), members.alias("im")
_df, _dp = fleets.alias("df"), member_placements.alias("dp")
PANE_MEMBERS = (
    select(
        _im.c.member_id,
        _im.c.name,
        _ip.c.mux_socket,
        func.coalesce(
            _ip.c.host_id,
            select(_dp.c.host_id)
            .select_from(_df.join(_dp, _dp.c.member_id == _df.c.director_member_id))
            .where(_df.c.fleet_id == _im.c.fleet_id)
            .scalar_subquery(),
        ).label("host_id"),
    )
    .select_from(_ip.join(_im, _im.c.member_id == _ip.c.member_id))
    .where(
        _ip.c.backend == const("tmux"),
        _ip.c.mux_pane_id == param("pane"),
        _ip.c.lost_at.is_(None),
        _im.c.status == const("active"),
    )
    .order_by(_im.c.member_id)
)

STATEMENTS: dict[str, Any] = {
    "SEND": SEND,
    "PARTIES": PARTIES,
    "BROADCAST_SENDER": BROADCAST_SENDER,
    "INSERT_SUMMARY": INSERT_SUMMARY,
    "LINK_SUMMARY": LINK_SUMMARY,
    "INSERT_DELIVERIES": INSERT_DELIVERIES,
    "ACK": ACK,
    "MESSAGE_BY_ID": MESSAGE_BY_ID,
    "MESSAGE_BY_TOKEN": MESSAGE_BY_TOKEN,
    "DELIVERIES_OF": DELIVERIES_OF,
    "MEMBER_STATUS": MEMBER_STATUS,
    "POLL": POLL,
    "UNACKED": UNACKED,
    "PANE_MEMBERS": PANE_MEMBERS,
}
