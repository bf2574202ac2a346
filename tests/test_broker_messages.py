"""Messages (docs/storage.md §7.5; §9 items 51, 52, 53) and the inbox reads."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from cafleet import broker
from cafleet.broker.errors import (
    CannotAck,
    MemberNotFound,
    MessageNotFound,
    NotSameFleet,
    RecipientNotFound,
    SenderNotActive,
)
from cafleet.db.runtime import Connection
from tests.broker_helpers import raw_connect, table_counts, ts
from tests.factories import add_member, make_fleet

_ROW = (
    "SELECT owner_member_id, from_member_id, to_member_id, type, created_at, status_state, "
    "status_timestamp, origin_message_id, text, notified_at FROM messages WHERE message_id = ?"
)


def _row(path: Path, message_id: int) -> tuple[object, ...]:
    db = raw_connect(path)
    try:
        return db.execute(_ROW, (message_id,)).fetchone()
    finally:
        db.close()


# --- §9 item 51 send ------------------------------------------------------------------------------


def test_send_message_stores_the_unicast_row(conn: Connection, head_db: Path) -> None:
    boot = make_fleet(conn)
    w = add_member(conn, boot.fleet.fleet_id)
    d = boot.director.member_id
    msg = broker.send_message(conn, from_member_id=d, to_member_id=w.member_id, text="hello")
    stamp = msg.created_at
    assert len(stamp) == 32 and stamp.endswith("+00:00")
    assert _row(head_db, msg.message_id) == (
        w.member_id,
        d,
        w.member_id,
        "unicast",
        stamp,
        "input_required",
        stamp,
        None,
        "hello",
        None,
    )
    assert broker.get_message(conn, msg.message_id) == msg
    assert not hasattr(msg, "notified_at")


def test_self_send_is_born_notified_and_stays_until_acked(conn: Connection, head_db: Path) -> None:
    boot = make_fleet(conn)
    w = add_member(conn, boot.fleet.fleet_id).member_id
    msg = broker.send_message(conn, from_member_id=w, to_member_id=w, text="note", now=ts())
    row = _row(head_db, msg.message_id)
    assert row[9] == row[4] == "2026-01-02T03:04:05.000000+00:00"  # notified_at = created_at
    assert row[5] == "input_required"
    assert broker.next_pending_notification(conn, recipient_id=w) is None
    assert [m.message_id for m in broker.poll_inbox(conn, w)] == [msg.message_id]
    broker.ack_message(conn, message_id=msg.message_id)
    assert broker.poll_inbox(conn, w) == []


def test_send_message_party_errors(conn: Connection, head_db: Path) -> None:
    a = make_fleet(conn, name="a")
    b = make_fleet(conn, name="b")
    w = add_member(conn, a.fleet.fleet_id, name="w").member_id
    gone = add_member(conn, a.fleet.fleet_id, name="gone").member_id
    broker.deregister_member(conn, member_id=gone)
    d = a.director.member_id
    before = table_counts(head_db)
    cases: list[tuple[int, int, type[Exception], str]] = [
        (gone, w, SenderNotActive, f"member {gone} is deregistered"),
        (999, w, SenderNotActive, "member 999 not found"),
        (d, gone, RecipientNotFound, f"member {gone} is deregistered"),
        (d, 999, RecipientNotFound, "member 999 not found"),
        (999, 998, SenderNotActive, "member 999 not found"),
        (
            d,
            b.director.member_id,
            NotSameFleet,
            f"members {d} and {b.director.member_id} are not in the same fleet.",
        ),
    ]
    for sender, recipient, error, text in cases:
        with pytest.raises(error) as info:
            broker.send_message(conn, from_member_id=sender, to_member_id=recipient, text="x")
        assert str(info.value) == text
    assert table_counts(head_db) == before
    assert not conn.in_transaction()


@pytest.mark.parametrize(
    "body",
    [
        "line one\r\nline two\r\n",
        "tab\there",
        "esc \x1b[31mred\x1b[0m",
        "nul \x00 inside\x00",
        "emoji 🚀👩‍💻 and U+2028\u2028 and U+FEFF\ufeff",
        "",
        "x" * (1024 * 1024),
    ],
    ids=["crlf", "tab", "esc", "nul", "emoji", "empty", "1MiB"],
)
def test_bodies_round_trip_unchanged(
    conn: Connection, head_db: Path, body: str, dialect: str
) -> None:
    boot = make_fleet(conn)
    w = add_member(conn, boot.fleet.fleet_id).member_id
    if dialect == "postgresql" and "\x00" in body:
        # PostgreSQL's text cannot hold U+0000 (docs/storage.md §10.5): refused, nothing written.
        before = table_counts(head_db)
        with pytest.raises(sqlite3.DataError) as refused:
            broker.send_message(
                conn, from_member_id=boot.director.member_id, to_member_id=w, text=body
            )
        assert str(refused.value) == (
            "text contains a NUL character (U+0000), which PostgreSQL cannot store"
        )
        assert table_counts(head_db) == before
        assert not conn.in_transaction()
        return
    msg = broker.send_message(
        conn, from_member_id=boot.director.member_id, to_member_id=w, text=body
    )
    assert msg.text == body
    assert broker.get_message(conn, msg.message_id).text == body
    assert broker.poll_inbox(conn, w)[0].text == body
    assert broker.unacked_deliveries(conn, w)[0].text == body
    assert _row(head_db, msg.message_id)[8] == body
    pending = broker.next_pending_notification(conn, recipient_id=w)
    assert pending is not None and pending.message.text == body


# --- §9 item 52 broadcast -------------------------------------------------------------------------


def test_broadcast_writes_summary_first_then_deliveries(conn: Connection, head_db: Path) -> None:
    boot = make_fleet(conn)
    fid = boot.fleet.fleet_id
    a = add_member(conn, fid, name="a").member_id
    b = add_member(conn, fid, name="b", placed=False).member_id
    gone = add_member(conn, fid, name="gone").member_id
    broker.deregister_member(conn, member_id=gone)
    other = make_fleet(conn, name="other")
    before = table_counts(head_db)["messages"]
    result = broker.broadcast_message(conn, from_member_id=a, text="status?", now=ts())
    t0 = "2026-01-02T03:04:05.000000+00:00"
    s = result.summary
    assert table_counts(head_db)["messages"] == before + 4  # N + 1
    assert _row(head_db, s.message_id) == (
        a,
        a,
        None,
        "broadcast_summary",
        t0,
        "completed",
        t0,
        s.message_id,
        "Broadcast sent to 3 recipients",
        t0,
    )
    assert broker.get_message(conn, s.message_id) == s
    recipients = [m.to_member_id for m in result.deliveries]
    assert recipients == [boot.director.member_id, boot.monitor.member_id, b]  # by id
    assert other.director.member_id not in recipients and a not in recipients
    ids = [m.message_id for m in result.deliveries]
    assert ids == sorted(ids) and min(ids) > s.message_id
    for m in result.deliveries:
        assert _row(head_db, m.message_id) == (
            m.to_member_id,
            a,
            m.to_member_id,
            "unicast",
            t0,
            "input_required",
            t0,
            s.message_id,
            "status?",
            None,
        )
        assert broker.get_message(conn, m.message_id) == m
    # summaries never count as recipients or ACKs, and are never pending
    assert broker.poll_inbox(conn, a) == []
    assert broker.next_pending_notification(conn, recipient_id=a) is None


def test_broadcast_singular_and_empty(conn: Connection, head_db: Path) -> None:
    boot = make_fleet(conn)
    d = boot.director.member_id
    broker.deregister_member(conn, member_id=boot.monitor.member_id)
    alone = broker.broadcast_message(conn, from_member_id=d, text="anyone?")
    assert alone.summary.text == "Broadcast sent to 0 recipients"
    assert alone.deliveries == ()
    assert table_counts(head_db)["messages"] == 1
    w = add_member(conn, boot.fleet.fleet_id).member_id
    one = broker.broadcast_message(conn, from_member_id=d, text="hi")
    assert one.summary.text == "Broadcast sent to 1 recipient"
    assert [m.to_member_id for m in one.deliveries] == [w]
    with pytest.raises(SenderNotActive, match="^member 404 not found$"):
        broker.broadcast_message(conn, from_member_id=404, text="x")


# --- §9 item 53 ACK -------------------------------------------------------------------------------


def test_ack_completes_once_and_leaves_notified_at(conn: Connection, head_db: Path) -> None:
    boot = make_fleet(conn)
    w = add_member(conn, boot.fleet.fleet_id).member_id
    d = boot.director.member_id
    plain = broker.send_message(conn, from_member_id=d, to_member_id=w, text="a", now=ts(0))
    typed = broker.send_message(conn, from_member_id=d, to_member_id=w, text="b", now=ts(1))
    assert broker.stamp_notified(conn, message_id=typed.message_id, now=ts(2))
    acked = broker.ack_message(conn, message_id=plain.message_id, now=ts(10))
    assert (acked.status_state, acked.status_timestamp, acked.created_at) == (
        "completed",
        "2026-01-02T03:04:15.000000+00:00",
        plain.created_at,
    )
    assert _row(head_db, plain.message_id)[9] is None  # notified_at untouched
    broker.ack_message(conn, message_id=typed.message_id, now=ts(11))
    assert _row(head_db, typed.message_id)[9] == "2026-01-02T03:04:07.000000+00:00"
    with pytest.raises(CannotAck, match="^Cannot ACK message in state completed$") as info:
        broker.ack_message(conn, message_id=plain.message_id)
    assert info.value.state == "completed"
    assert broker.get_message(conn, plain.message_id).status_timestamp == acked.status_timestamp
    summary = broker.broadcast_message(conn, from_member_id=d, text="x").summary
    with pytest.raises(CannotAck, match="^Cannot ACK message in state completed$"):
        broker.ack_message(conn, message_id=summary.message_id)
    with pytest.raises(MessageNotFound, match="^message 9999 not found$"):
        broker.ack_message(conn, message_id=9999)
    with pytest.raises(MessageNotFound, match="^message 9999 not found$"):
        broker.get_message(conn, 9999)


# --- inbox reads -------------------------------------------------------------------------------


def test_poll_inbox_order_and_filter(conn: Connection) -> None:
    boot = make_fleet(conn)
    w = add_member(conn, boot.fleet.fleet_id).member_id
    d = boot.director.member_id
    m1 = broker.send_message(conn, from_member_id=d, to_member_id=w, text="1", now=ts(5))
    m2 = broker.send_message(conn, from_member_id=d, to_member_id=w, text="2", now=ts(1))
    m3 = broker.send_message(conn, from_member_id=d, to_member_id=w, text="3", now=ts(5))
    m4 = broker.send_message(conn, from_member_id=d, to_member_id=w, text="4", now=ts(2))
    broker.stamp_notified(conn, message_id=m3.message_id)  # notified rows stay in the inbox
    broker.ack_message(conn, message_id=m4.message_id)
    broker.send_message(conn, from_member_id=w, to_member_id=d, text="out")
    broker.broadcast_message(conn, from_member_id=w, text="bc")  # w's summary is not inbox
    got = [m.message_id for m in broker.poll_inbox(conn, w)]
    assert got == [m3.message_id, m1.message_id, m2.message_id]
    asc = [m.message_id for m in broker.unacked_deliveries(conn, w)]
    assert asc == [m1.message_id, m2.message_id, m3.message_id]
    after = broker.unacked_deliveries(conn, w, after_message_id=m1.message_id)
    assert [m.message_id for m in after] == [m2.message_id, m3.message_id]
    with pytest.raises(MemberNotFound, match="^member 999 not found$"):
        broker.poll_inbox(conn, 999)
    broker.deregister_member(conn, member_id=w)
    # a deregistered member's un-ACKed messages can still be polled (and ACKed)
    assert [m.message_id for m in broker.poll_inbox(conn, w)] == got
    # unacked_deliveries does not check status: what was committed stays readable
    assert [m.message_id for m in broker.unacked_deliveries(conn, w)] == asc


@pytest.mark.sqlite_only  # observes the statement order with SQLite triggers
def test_broadcast_summary_is_inserted_unlinked_then_self_linked(
    conn: Connection, head_db: Path
) -> None:
    """The insert order of §7.5, observed by an auxiliary log table and triggers (auxiliary
    objects keep the file current)."""
    boot = make_fleet(conn)
    db = raw_connect(head_db)
    db.executescript(
        """
        CREATE TABLE test_log (seq INTEGER PRIMARY KEY, op TEXT, message_id INTEGER,
                               type TEXT, origin INTEGER);
        CREATE TRIGGER test_log_insert AFTER INSERT ON messages BEGIN
            INSERT INTO test_log (op, message_id, type, origin)
            VALUES ('insert', NEW.message_id, NEW.type, NEW.origin_message_id);
        END;
        CREATE TRIGGER test_log_update AFTER UPDATE OF origin_message_id ON messages BEGIN
            INSERT INTO test_log (op, message_id, type, origin)
            VALUES ('link', NEW.message_id, NEW.type, NEW.origin_message_id);
        END;
        """
    )
    result = broker.broadcast_message(conn, from_member_id=boot.director.member_id, text="x")
    log = db.execute("SELECT op, message_id, type, origin FROM test_log ORDER BY seq").fetchall()
    db.close()
    s = result.summary.message_id
    (delivery,) = result.deliveries
    assert log == [
        ("insert", s, "broadcast_summary", None),
        ("link", s, "broadcast_summary", s),
        ("insert", delivery.message_id, "unicast", s),
    ]
