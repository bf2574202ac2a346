"""The WebUI's reads (docs/runtime.md §7.3, docs/storage.md §7.8 and §8): the lean roster, per-member
activity, the timeline and the inbox/sent views. Each owns one read transaction."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import text

from cafleet.broker._common import MESSAGE_COLUMNS, member_columns, member_from
from cafleet.broker.errors import FleetDeleted, FleetNotFound
from cafleet.broker.members import (
    LAST_ACK_SQL,
    LAST_RECV_SQL,
    LAST_SENT_SQL,
    UNACKED_COUNT_SQL,
    idle_seconds,
)
from cafleet.db import tx
from cafleet.db.runtime import Connection
from cafleet.db.timefmt import utcnow
from cafleet.records import MESSAGE_STATES, Member, Message, member_from_row, message_from_row

TIMELINE_LIMIT = 200
# Two compound terms per member (one per state); SQLite allows 500 terms per compound SELECT.
_TIMELINE_BATCH = 250

_FLEET_STATE = text("SELECT deleted_at FROM fleets WHERE fleet_id = :fleet_id")
# Seed 002: active members, plus deregistered ones only when they own a message.
_IN_ROSTER = (
    "m.fleet_id = :fleet_id AND (m.status = 'active' OR EXISTS "
    "(SELECT 1 FROM messages AS o WHERE o.owner_member_id = m.member_id))"
)
_ROSTER = text(
    f"SELECT {member_columns()} FROM {member_from()} WHERE {_IN_ROSTER} ORDER BY m.member_id"
)
_ACTIVITY = text(
    f"SELECT m.member_id AS member_id, ({LAST_SENT_SQL}) AS last_sent, "
    f"({LAST_RECV_SQL}) AS last_recv, ({LAST_ACK_SQL}) AS last_ack, "
    f"({UNACKED_COUNT_SQL}) AS unacked FROM members AS m WHERE {_IN_ROSTER} ORDER BY m.member_id"
)
_FLEET_MEMBER_IDS = text("SELECT member_id FROM members WHERE fleet_id = :fleet_id")
_TIMELINE_ORDER = "ORDER BY status_timestamp DESC, message_id DESC"
_INBOX = text(
    f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE to_member_id = :member_id "
    f"{_TIMELINE_ORDER} LIMIT :limit"
)
_SENT = text(
    f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE from_member_id = :member_id "
    f"{_TIMELINE_ORDER} LIMIT :limit"
)


def _check_live(conn: Connection, fleet_id: int) -> None:
    fleet = conn.execute(_FLEET_STATE, {"fleet_id": fleet_id}).first()
    if fleet is None:
        raise FleetNotFound(fleet_id)
    if fleet[0] is not None:
        raise FleetDeleted(fleet_id)


def web_roster(conn: Connection, *, fleet_id: int) -> list[Member]:
    """Members of a live fleet that are active or own a message, with placements, by id. No
    activity columns (seed 002: WebUI rosters query member and placement data directly)."""
    with tx.read(conn):
        _check_live(conn, fleet_id)
        rows = conn.execute(_ROSTER, {"fleet_id": fleet_id}).mappings().all()
    return [member_from_row(row) for row in rows]


def roster_activity(
    conn: Connection, *, fleet_id: int, now: datetime | None = None
) -> list[tuple[int, int | None, int]]:
    """`(member_id, idle, unacked)` for the web roster's members, by id: idle as `member list`
    computes it, unacked = owned `input_required` unicast deliveries."""
    with tx.read(conn):
        _check_live(conn, fleet_id)
        rows = conn.execute(_ACTIVITY, {"fleet_id": fleet_id}).mappings().all()
    moment = now if now is not None else utcnow()
    return [
        (
            row["member_id"],
            idle_seconds(row["last_sent"], row["last_recv"], row["last_ack"], moment),
            row["unacked"],
        )
        for row in rows
    ]


def _timeline_sql(terms: int) -> str:
    """The newest `:limit` unicast rows owned by `terms` (owner, state) pairs.

    Each term reads at most `:limit` entries of `idx_messages_owner_type_state_ts` in index order
    (its trailing `status_timestamp` and the rowid are the ORDER BY), so the cost follows the
    number of members, not the history; the plain join sorts every row of the fleet (300 ms on
    100,000 messages against ~6 ms, docs/performance.md). The newest `:limit` of the union of
    every pair's newest `:limit` are the newest `:limit` overall.
    """
    term = (
        "SELECT * FROM (SELECT message_id, status_timestamp FROM messages "
        "WHERE owner_member_id = :o{i} AND type = 'unicast' AND status_state = :s{i} "
        f"{_TIMELINE_ORDER} LIMIT :limit)"
    )
    union = " UNION ALL ".join(term.format(i=i) for i in range(terms))
    return (
        f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE message_id IN "
        f"(SELECT message_id FROM ({union}) {_TIMELINE_ORDER} LIMIT :limit) {_TIMELINE_ORDER}"
    )


def timeline(conn: Connection, *, fleet_id: int, limit: int = TIMELINE_LIMIT) -> list[Message]:
    """The newest `limit` unicast deliveries owned by the fleet's members (any status),
    `status_timestamp DESC, message_id DESC` (docs/storage.md §8). Broadcast summaries never take up
    the cap; a broadcast may be cut."""
    with tx.read(conn):
        _check_live(conn, fleet_id)
        owners = sorted(r[0] for r in conn.execute(_FLEET_MEMBER_IDS, {"fleet_id": fleet_id}))
        rows: list[Message] = []
        for start in range(0, len(owners), _TIMELINE_BATCH):
            batch = owners[start : start + _TIMELINE_BATCH]
            pairs = [(owner, state) for owner in batch for state in MESSAGE_STATES]
            params: dict[str, object] = {"limit": limit}
            for i, (owner, state) in enumerate(pairs):
                params[f"o{i}"] = owner
                params[f"s{i}"] = state
            found = conn.execute(text(_timeline_sql(len(pairs))), params).mappings().all()
            rows.extend(message_from_row(row) for row in found)
    if len(owners) > _TIMELINE_BATCH:
        rows.sort(key=lambda m: (m.status_timestamp, m.message_id), reverse=True)
        del rows[limit:]
    return rows


def inbox_view(conn: Connection, *, member_id: int, limit: int) -> list[Message]:
    """Messages addressed to the member, newest state change first."""
    with tx.read(conn):
        rows = conn.execute(_INBOX, {"member_id": member_id, "limit": limit}).mappings().all()
    return [message_from_row(row) for row in rows]


def sent_view(conn: Connection, *, member_id: int, limit: int) -> list[Message]:
    """Messages the member sent (broadcast summaries included), newest state change first."""
    with tx.read(conn):
        rows = conn.execute(_SENT, {"member_id": member_id, "limit": limit}).mappings().all()
    return [message_from_row(row) for row in rows]


__all__ = [
    "TIMELINE_LIMIT",
    "inbox_view",
    "roster_activity",
    "sent_view",
    "timeline",
    "web_roster",
]
