"""Messages: send, broadcast, ACK and the inbox reads (docs/storage.md §7.5)."""

from __future__ import annotations

import sqlite3
from datetime import datetime
from typing import NamedTuple, NoReturn

from cafleet.broker._common import stamp
from cafleet.broker.errors import (
    CannotAck,
    KeyReused,
    MemberNotFound,
    MessageNotFound,
    NotSameFleet,
    RecipientNotFound,
    SenderNotActive,
)
from cafleet.db import tx
from cafleet.db.catalog.sqlite import messages as q
from cafleet.db.runtime import Connection
from cafleet.records import Broadcast, Message, message_from_row


def summary_text(recipients: int) -> str:
    return f"Broadcast sent to {recipients} recipient{'' if recipients == 1 else 's'}"


class Stored(NamedTuple):
    """What a send or broadcast with a client token stored: ``new`` False when the token had
    stored it already (a retry), and nothing new was written."""

    message: Message
    new: bool


def send_message(
    conn: Connection,
    *,
    from_member_id: int,
    to_member_id: int,
    text: str,
    now: datetime | None = None,
) -> Message:
    """Insert one unicast delivery. A self-send is born notified (`notified_at = created_at`)
    and stays `input_required` until ACKed."""
    return store_send(
        conn, from_member_id=from_member_id, to_member_id=to_member_id, text=text, now=now
    ).message


def store_send(
    conn: Connection,
    *,
    from_member_id: int,
    to_member_id: int,
    text: str,
    token: str | None = None,
    now: datetime | None = None,
) -> Stored:
    """`send_message` carrying the sender's client token (docs/storage.md §2.4): a token that
    already stored a message returns that message (``new`` False) when its recipient and text
    are these, else `KeyReused`; nothing is written either way."""
    params = {"text": text, "from_id": from_member_id, "to_id": to_member_id, "token": token}
    try:
        result, ts = tx.write_one(conn, q.SEND, params, now)
        rows = result.all()
    except sqlite3.IntegrityError as e:
        if "messages.client_token" not in str(e):
            raise
        rows = []  # the token is taken: the slow path returns its message
    if not rows:
        # Refused or a retry: decide in one transaction (the parties may have changed meanwhile).
        with tx.write(conn):
            ts = stamp(now)
            earlier = _by_token(conn, from_member_id, token)
            if earlier is not None:
                if (earlier.type, earlier.to_member_id, earlier.text) != (
                    "unicast",
                    to_member_id,
                    text,
                ):
                    raise KeyReused(str(token), earlier.message_id)
                return Stored(earlier, False)
            rows = conn.execute(q.SEND, {**params, "now": ts}).all()
            if not rows:
                _refuse_send(conn, from_member_id, to_member_id)
    return Stored(_delivery(rows[0][0], from_member_id, to_member_id, ts, text, origin=None), True)


def _by_token(conn: Connection, from_member_id: int, token: str | None) -> Message | None:
    if token is None:
        return None
    row = (
        conn.execute(q.MESSAGE_BY_TOKEN, {"from_id": from_member_id, "token": token})
        .mappings()
        .first()
    )
    return None if row is None else message_from_row(row)


def find_sent(conn: Connection, from_member_id: int, token: str) -> Message | None:
    """The message the sender's ``token`` stored (a unicast, or a broadcast's summary), if any."""
    with tx.read(conn):
        return _by_token(conn, from_member_id, token)


def _delivery(
    message_id: int, sender: int, recipient: int, ts: str, text: str, *, origin: int | None
) -> Message:
    """The record of a delivery just inserted (docs/storage.md §2.4's row at insert time)."""
    return Message(
        message_id=message_id,
        owner_member_id=recipient,
        from_member_id=sender,
        to_member_id=recipient,
        type="unicast",
        created_at=ts,
        status_state="input_required",
        status_timestamp=ts,
        origin_message_id=origin,
        text=text,
    )


def _refuse_send(conn: Connection, from_member_id: int, to_member_id: int) -> NoReturn:
    parties = {
        row[0]: (row[1], row[2])
        for row in conn.execute(q.PARTIES, {"from_id": from_member_id, "to_id": to_member_id})
    }
    sender = parties.get(from_member_id)
    if sender is None or sender[1] != "active":
        raise SenderNotActive(from_member_id, deregistered=sender is not None)
    recipient = parties.get(to_member_id)
    if recipient is None or recipient[1] != "active":
        raise RecipientNotFound(to_member_id, deregistered=recipient is not None)
    raise NotSameFleet(from_member_id, to_member_id)


def broadcast_message(
    conn: Connection, *, from_member_id: int, text: str, now: datetime | None = None
) -> Broadcast:
    """N+1 rows: the self-linked summary first, then one delivery per other active member of
    the sender's fleet (root Director and monitor included), in member-id order."""
    return store_broadcast(conn, from_member_id=from_member_id, text=text, now=now)[0]


def store_broadcast(
    conn: Connection,
    *,
    from_member_id: int,
    text: str,
    token: str | None = None,
    now: datetime | None = None,
) -> tuple[Broadcast, bool]:
    """`broadcast_message` carrying the sender's client token, kept on the summary: a token
    that already stored a broadcast returns it and False (its deliveries as stored), or
    `KeyReused` when its text differs; nothing is written either way."""
    with tx.write(conn):
        ts = stamp(now)
        earlier = _by_token(conn, from_member_id, token)
        if earlier is not None:
            return _stored_broadcast(conn, earlier, str(token), text), False
        sender = conn.execute(q.BROADCAST_SENDER, {"from_id": from_member_id}).mappings().first()
        if sender is None or sender["status"] != "active":
            raise SenderNotActive(from_member_id, deregistered=sender is not None)
        fleet_id, count = sender["fleet_id"], sender["recipients"]
        body = summary_text(count)
        summary_id = conn.execute(
            q.INSERT_SUMMARY, {"from_id": from_member_id, "now": ts, "text": body, "token": token}
        ).lastrowid
        conn.execute(q.LINK_SUMMARY, {"summary_id": summary_id})
        delivered: list[tuple[int, int]] = []
        if count:
            delivered = sorted(
                (row[0], row[1])
                for row in conn.execute(
                    q.INSERT_DELIVERIES,
                    {
                        "from_id": from_member_id,
                        "now": ts,
                        "summary_id": summary_id,
                        "text": text,
                        "fleet_id": fleet_id,
                    },
                )
            )
    assert summary_id is not None
    summary = Message(
        message_id=summary_id,
        owner_member_id=from_member_id,
        from_member_id=from_member_id,
        to_member_id=None,
        type="broadcast_summary",
        created_at=ts,
        status_state="completed",
        status_timestamp=ts,
        origin_message_id=summary_id,
        text=body,
    )
    deliveries = tuple(
        _delivery(message_id, from_member_id, recipient, ts, text, origin=summary_id)
        for message_id, recipient in delivered
    )
    return Broadcast(summary=summary, deliveries=deliveries), True


def _stored_broadcast(conn: Connection, summary: Message, token: str, text: str) -> Broadcast:
    """The broadcast ``token`` stored earlier, as stored; `KeyReused` unless it is a summary
    whose deliveries carry ``text`` (one with no recipient has nothing to compare)."""
    if summary.type != "broadcast_summary":
        raise KeyReused(token, summary.message_id)
    rows = conn.execute(
        q.DELIVERIES_OF,
        {
            "from_id": summary.from_member_id,
            "created_at": summary.created_at,
            "summary_id": summary.message_id,
        },
    ).mappings()
    deliveries = tuple(message_from_row(row) for row in rows)
    if any(d.text != text for d in deliveries):
        raise KeyReused(token, summary.message_id)
    return Broadcast(summary=summary, deliveries=deliveries)


def ack_message(conn: Connection, *, message_id: int, now: datetime | None = None) -> Message:
    """Complete an `input_required` row once; `notified_at` is not touched."""
    row = tx.write_one(conn, q.ACK, {"message_id": message_id}, now)[0].first()
    if row is None:
        # Refused: decide why in one transaction (it may be ACKable by now).
        with tx.write(conn):
            ts = stamp(now)
            row = conn.execute(q.ACK, {"now": ts, "message_id": message_id}).first()
            if row is None:
                current = conn.execute(q.MESSAGE_BY_ID, {"message_id": message_id}).first()
                if current is None:
                    raise MessageNotFound(message_id)
                raise CannotAck(message_from_row(current).status_state, message_id)
    return message_from_row(row)


def get_message(conn: Connection, message_id: int) -> Message:
    """Any message by id, any type and state; `MessageNotFound` when absent."""
    with tx.read(conn):
        row = conn.execute(q.MESSAGE_BY_ID, {"message_id": message_id}).mappings().first()
    if row is None:
        raise MessageNotFound(message_id)
    return message_from_row(row)


def poll_inbox(conn: Connection, member_id: int) -> list[Message]:
    """The member's un-ACKed deliveries, newest state change first (regardless of
    `notified_at`); a deregistered member's too (they stay ACKable); `MemberNotFound` when no
    such member exists."""
    with tx.read(conn):
        status = conn.execute(q.MEMBER_STATUS, {"member_id": member_id}).scalar()
        if status is None:
            raise MemberNotFound(member_id)
        rows = conn.execute(q.POLL, {"member_id": member_id}).mappings().all()
    return [message_from_row(row) for row in rows]


def unacked_deliveries(
    conn: Connection, member_id: int, after_message_id: int | None = None
) -> list[Message]:
    """Un-ACKed deliveries owned by the member with id > `after_message_id`, ascending id.

    Read-only and status-blind (for `message wait` and `message stream`).
    """
    with tx.read(conn):
        rows = (
            conn.execute(q.UNACKED, {"member_id": member_id, "after": after_message_id or 0})
            .mappings()
            .all()
        )
    return [message_from_row(row) for row in rows]


def pane_members(conn: Connection, pane_id: str) -> list[tuple[int, str, str | None, str | None]]:
    """(member id, name, socket, host) of each active member whose live tmux placement names
    ``pane_id``, on any server and host (the caller keeps its own); for one identity per pane
    (docs/cli.md §1.5)."""
    with tx.read(conn):
        rows = conn.execute(q.PANE_MEMBERS, {"pane": pane_id}).all()
    return [(int(r[0]), str(r[1]), r[2], r[3]) for r in rows]


__all__ = [
    "Stored",
    "ack_message",
    "broadcast_message",
    "find_sent",
    "get_message",
    "pane_members",
    "poll_inbox",
    "send_message",
    "store_broadcast",
    "store_send",
    "summary_text",
    "unacked_deliveries",
]
