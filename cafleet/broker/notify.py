"""Notification channels and their outbox (docs/storage.md §2.14, docs/cli.md §2.35).

An event is recorded once per channel that takes it, keyed by its event key: recording the same
key again adds nothing (the outbox's unique index), so a retried report never sends twice. The
monitor loop's sender reads the due rows and marks each sent, or failed with its next try.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime
from typing import Any

from cafleet.broker._common import stamp
from cafleet.broker.errors import FleetDeleted, FleetNotFound, MemberNotFound
from cafleet.db import tx
from cafleet.db.catalog import notify as q
from cafleet.db.runtime import Connection
from cafleet.records.notify import (
    AnswerLink,
    Channel,
    OutboxEntry,
    channel_from_row,
    outbox_from_row,
)


def add_channel(
    conn: Connection,
    *,
    fleet_id: int,
    kind: str,
    target: str | None,
    events: tuple[str, ...] | None,
    answer_base: str | None = None,
    now: datetime | None = None,
) -> Channel:
    with tx.write(conn):
        fleet = conn.execute(q.FLEET, {"fleet_id": fleet_id}).first()
        if fleet is None:
            raise FleetNotFound(fleet_id)
        if fleet["deleted_at"] is not None:
            raise FleetDeleted(fleet_id)
        channel_id = conn.execute(
            q.INSERT_CHANNEL,
            {
                "fleet_id": fleet_id,
                "kind": kind,
                "target": target,
                "events": None if events is None else ",".join(events),
                "answer_base": answer_base,
                "now": stamp(now),
            },
        ).scalar_one()
        row = conn.execute(q.CHANNEL, {"channel_id": channel_id}).first()
        assert row is not None
        return channel_from_row(row)


def notify_channels(conn: Connection, fleet_id: int | None = None) -> list[Channel]:
    """A fleet's channels (every fleet's when ``fleet_id`` is None), in id order."""
    with tx.read(conn):
        return [channel_from_row(r) for r in conn.execute(q.CHANNELS, {"fleet_id": fleet_id}).all()]


def get_channel(conn: Connection, channel_id: int) -> Channel | None:
    with tx.read(conn):
        row = conn.execute(q.CHANNEL, {"channel_id": channel_id}).first()
        return None if row is None else channel_from_row(row)


def remove_channel(conn: Connection, channel_id: int) -> Channel | None:
    """Delete a channel and its outbox; None when there is no such channel."""
    with tx.write(conn):
        row = conn.execute(q.CHANNEL, {"channel_id": channel_id}).first()
        if row is None:
            return None
        conn.execute(q.DELETE_OUTBOX, {"channel_id": channel_id})
        conn.execute(q.DELETE_CHANNEL, {"channel_id": channel_id})
        return channel_from_row(row)


def record_event(
    conn: Connection,
    *,
    fleet_id: int,
    event: str,
    event_key: str,
    payload: dict[str, Any],
    channel_id: int | None = None,
    now: datetime | None = None,
) -> int:
    """Queue ``payload`` for every channel of the fleet that takes ``event`` (or for
    ``channel_id`` only); a key already queued for a channel is skipped. Returns rows added."""
    added = 0
    at = stamp(now)
    body = json.dumps(payload, sort_keys=True)
    with tx.write(conn):
        for row in conn.execute(q.CHANNELS, {"fleet_id": fleet_id}).all():
            channel = channel_from_row(row)
            if channel_id is not None and channel.channel_id != channel_id:
                continue
            if not channel.takes(event):
                continue
            try:
                conn.execute(
                    q.INSERT_EVENT,
                    {
                        "channel_id": channel.channel_id,
                        "event_key": event_key,
                        "event": event,
                        "payload_json": body,
                        "now": at,
                    },
                )
            except sqlite3.IntegrityError:
                continue  # already queued: at least once, never twice
            added += 1
    return added


def due_events(
    conn: Connection, *, limit: int = 50, now: datetime | None = None
) -> list[tuple[OutboxEntry, Channel]]:
    """Outbox rows whose next try is due, oldest first, each with its channel."""
    with tx.read(conn):
        rows = conn.execute(q.DUE, {"now": stamp(now), "limit": limit}).all()
        out = []
        for row in rows:
            channel = conn.execute(q.CHANNEL, {"channel_id": row["channel_id"]}).first()
            if channel is not None:
                out.append((outbox_from_row(row), channel_from_row(channel)))
        return out


def outbox_of(conn: Connection, channel_id: int) -> list[OutboxEntry]:
    with tx.read(conn):
        rows = conn.execute(q.OUTBOX_OF, {"channel_id": channel_id}).all()
        return [outbox_from_row(r) for r in rows]


def pending_count(conn: Connection, channel_id: int) -> int:
    with tx.read(conn):
        return len(conn.execute(q.PENDING_COUNT, {"channel_id": channel_id}).all())


def mark_sent(
    conn: Connection, *, outbox_id: int, channel_id: int, now: datetime | None = None
) -> None:
    with tx.write(conn):
        conn.execute(q.MARK_SENT, {"outbox_id": outbox_id, "now": stamp(now)})
        conn.execute(q.CHANNEL_OK, {"channel_id": channel_id})


def mark_failed(
    conn: Connection,
    *,
    outbox_id: int,
    channel_id: int,
    error: str,
    next_at: datetime | None,
    now: datetime | None = None,
) -> None:
    """One failed try: ``next_at`` None gives the row up and marks the channel failing."""
    with tx.write(conn):
        conn.execute(
            q.MARK_FAILED,
            {
                "outbox_id": outbox_id,
                "next_at": None if next_at is None else stamp(next_at),
                "error": error,
            },
        )
        conn.execute(q.CHANNEL_FAILED, {"channel_id": channel_id, "error": error})
        if next_at is None:
            conn.execute(q.CHANNEL_FAILING, {"channel_id": channel_id, "now": stamp(now)})


def channel_result(
    conn: Connection, *, channel_id: int, error: str | None, now: datetime | None = None
) -> None:
    """`notify test`'s outcome on the channel's health: a success clears it, a failure counts."""
    with tx.write(conn):
        if error is None:
            conn.execute(q.CHANNEL_OK, {"channel_id": channel_id})
        else:
            conn.execute(q.CHANNEL_FAILED, {"channel_id": channel_id, "error": error})


def create_answer_link(
    conn: Connection,
    *,
    token_hash: str,
    member_id: int,
    digest: str,
    expires_at: datetime,
    now: datetime | None = None,
) -> None:
    with tx.write(conn):
        if conn.execute(q.MEMBER, {"member_id": member_id}).first() is None:
            raise MemberNotFound(member_id)
        conn.execute(
            q.INSERT_LINK,
            {
                "token_hash": token_hash,
                "member_id": member_id,
                "digest": digest,
                "now": stamp(now),
                "expires_at": stamp(expires_at),
            },
        )


def answer_link(conn: Connection, token_hash: str) -> AnswerLink | None:
    with tx.read(conn):
        row = conn.execute(q.LINK, {"token_hash": token_hash}).first()
        if row is None:
            return None
        return AnswerLink(
            member_id=row["member_id"],
            prompt_digest=row["prompt_digest"],
            created_at=row["created_at"],
            expires_at=row["expires_at"],
            used_at=row["used_at"],
        )


def use_answer_link(conn: Connection, token_hash: str, now: datetime | None = None) -> bool:
    """Mark the link used; False when it already was (it works once)."""
    with tx.write(conn):
        return conn.execute(q.USE_LINK, {"token_hash": token_hash, "now": stamp(now)}).rowcount > 0
