"""The WebUI's reads (docs/runtime.md §7.3, docs/storage.md §7.8 and §8): the lean roster, per-member
activity, the timeline and the inbox/sent views. Each owns one read transaction."""

from __future__ import annotations

import json
from datetime import datetime

from cafleet.broker.errors import FleetDeleted, FleetNotFound
from cafleet.broker.members import idle_seconds
from cafleet.db import tx
from cafleet.db.catalog.sqlite import views as q
from cafleet.db.runtime import Connection
from cafleet.db.timefmt import utcnow
from cafleet.records import MESSAGE_STATES, Member, Message, member_from_row, message_from_row


def _check_live(conn: Connection, fleet_id: int) -> None:
    fleet = conn.execute(q.FLEET_STATE, {"fleet_id": fleet_id}).first()
    if fleet is None:
        raise FleetNotFound(fleet_id)
    if fleet[0] is not None:
        raise FleetDeleted(fleet_id)


def web_roster(conn: Connection, *, fleet_id: int) -> list[Member]:
    """Members of a live fleet that are active or own a message, with placements, by id. No
    activity columns (seed 002: WebUI rosters query member and placement data directly)."""
    with tx.read(conn):
        _check_live(conn, fleet_id)
        rows = conn.execute(q.ROSTER, {"fleet_id": fleet_id}).mappings().all()
    return [member_from_row(row) for row in rows]


def roster_activity(
    conn: Connection, *, fleet_id: int, now: datetime | None = None
) -> list[tuple[int, int | None, int]]:
    """`(member_id, idle, unacked)` for the web roster's members, by id: idle as `member list`
    computes it, unacked = owned `input_required` unicast deliveries."""
    with tx.read(conn):
        _check_live(conn, fleet_id)
        rows = conn.execute(q.ACTIVITY, {"fleet_id": fleet_id}).mappings().all()
    moment = now if now is not None else utcnow()
    return [
        (
            row["member_id"],
            idle_seconds(row["last_sent"], row["last_recv"], row["last_ack"], moment),
            row["unacked"],
        )
        for row in rows
    ]


def timeline(conn: Connection, *, fleet_id: int, limit: int) -> list[Message]:
    """The newest `limit` unicast deliveries owned by the fleet's members (any status),
    `status_timestamp DESC, message_id DESC` (docs/storage.md §8). Broadcast summaries never take up
    the cap; a broadcast may be cut.

    Each (owner, state) pair reads at most `limit` entries of `idx_messages_owner_type_state_ts` in
    index order, so the cost follows the number of members, not the history (the plain join
    sorts every row of the fleet: 300 ms on 100,000 messages against ~6 ms, docs/performance.md);
    the newest `limit` of every pair's newest `limit` are the newest `limit` overall.
    """
    with tx.read(conn):
        _check_live(conn, fleet_id)
        owners = sorted(r[0] for r in conn.execute(q.FLEET_MEMBER_IDS, {"fleet_id": fleet_id}))
        heads: list[tuple[str, int]] = []
        for owner in owners:
            for state in MESSAGE_STATES:
                params = {"owner": owner, "state": state, "limit": limit}
                heads.extend((r[1], r[0]) for r in conn.execute(q.TIMELINE_PAIR, params))
        heads.sort(reverse=True)
        ids = json.dumps([message_id for _ts, message_id in heads[:limit]])
        rows = conn.execute(q.MESSAGES_BY_IDS, {"ids": ids}).all()
    return [message_from_row(row) for row in rows]


def inbox_view(conn: Connection, *, member_id: int, limit: int) -> list[Message]:
    """Messages addressed to the member, newest state change first."""
    with tx.read(conn):
        rows = conn.execute(q.INBOX, {"member_id": member_id, "limit": limit}).mappings().all()
    return [message_from_row(row) for row in rows]


def sent_view(conn: Connection, *, member_id: int, limit: int) -> list[Message]:
    """Messages the member sent (broadcast summaries included), newest state change first."""
    with tx.read(conn):
        rows = conn.execute(q.SENT, {"member_id": member_id, "limit": limit}).mappings().all()
    return [message_from_row(row) for row in rows]


def history_view(conn: Connection, *, member_id: int, limit: int) -> list[Message]:
    """The newest `limit` messages of the member's history, oldest first (`created_at`, then
    id): the deliveries addressed to it, any state, and what it sent (a broadcast as its
    summary). Three index searches, each at most `limit` rows (docs/storage.md §2.7)."""
    with tx.read(conn):
        found: dict[int, Message] = {}
        for statement, params in (
            (q.HISTORY_OWNED, {"member_id": member_id, "type": "unicast", "limit": limit}),
            (
                q.HISTORY_OWNED,
                {"member_id": member_id, "type": "broadcast_summary", "limit": limit},
            ),
            (q.HISTORY_SENT, {"member_id": member_id, "limit": limit}),
        ):
            for row in conn.execute(statement, params).mappings():
                found[row["message_id"]] = message_from_row(row)
    newest = sorted(found.values(), key=lambda m: (m.created_at, m.message_id))
    return newest[-limit:]


__all__ = [
    "history_view",
    "inbox_view",
    "roster_activity",
    "sent_view",
    "timeline",
    "web_roster",
]
