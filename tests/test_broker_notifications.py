"""Notification state (docs/storage.md §7.6, docs/runtime.md §4.1; docs/storage.md §9 item 54)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from cafleet import broker
from cafleet.db.runtime import Connection
from tests.broker_helpers import raw_connect, ts
from tests.factories import add_member, make_fleet

_INSERT = (
    "INSERT INTO messages (owner_member_id, from_member_id, to_member_id, type, created_at, "
    "status_state, status_timestamp, origin_message_id, text, notified_at) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, NULL, ?, ?)"
)


def _plain(
    path: Path,
    owner: int,
    sender: int,
    *,
    type_: str = "unicast",
    state: str = "input_required",
    created: str = "2026-01-01T00:00:00.000000+00:00",
    notified: str | None = None,
) -> int:
    db = raw_connect(path)
    try:
        cur = db.execute(
            _INSERT,
            (
                owner,
                sender,
                owner if type_ == "unicast" else None,
                type_,
                created,
                state,
                created,
                "raw",
                notified,
            ),
        )
        assert cur.lastrowid is not None
        return cur.lastrowid
    finally:
        db.close()


def _drain_ids(conn: Connection, **scope: int) -> list[int]:
    """Everything next_pending_notification yields, one at a time, excluding what it gave."""
    seen: list[int] = []
    while True:
        got = broker.next_pending_notification(conn, exclude=seen, **scope)
        if got is None:
            return seen
        seen.append(got.message.message_id)


def test_pending_selection_skips_ineligible_rows(conn: Connection, head_db: Path) -> None:
    boot = make_fleet(conn)
    fid = boot.fleet.fleet_id
    d, mon = boot.director.member_id, boot.monitor.member_id
    w = add_member(conn, fid, name="w").member_id

    def send(to: int, now: datetime, sender: int = d) -> int:
        return broker.send_message(
            conn, from_member_id=sender, to_member_id=to, text="t", now=now
        ).message_id

    good = send(w, ts(3))
    acked = send(w, ts(1))
    broker.ack_message(conn, message_id=acked)
    stamped = send(w, ts(1))
    assert broker.stamp_notified(conn, message_id=stamped)
    broker.send_message(conn, from_member_id=w, to_member_id=w, text="self")  # born notified
    raw_self = _plain(head_db, w, w)  # a self row that nobody stamped is still not pending
    raw_summary = _plain(head_db, w, w, type_="broadcast_summary")  # un-stamped summary
    bc = broker.broadcast_message(conn, from_member_id=w, text="bc", now=ts(4))  # summary + 2
    to_director = send(d, ts(0), sender=w)
    to_monitor = send(mon, ts(2), sender=w)
    paneless = add_member(conn, fid, name="paneless", placed=False).member_id
    pending_pane = add_member(conn, fid, name="pending", pane_id=None).member_id
    on_director_pane = add_member(conn, fid, name="shares", pane_id="%0").member_id
    gone = add_member(conn, fid, name="gone").member_id
    for target in (paneless, pending_pane, on_director_pane, gone):
        send(target, ts(0))
    broker.deregister_member(conn, member_id=gone)
    # a deleted fleet's members are never pending either
    dead = make_fleet(conn, name="dead")
    dead_worker = add_member(conn, dead.fleet.fleet_id, name="dw").member_id
    broker.send_message(
        conn, from_member_id=dead.director.member_id, to_member_id=dead_worker, text="x"
    )
    broker.delete_fleet(
        conn, fleet_id=dead.fleet.fleet_id, locked_panes=set(), try_lock=lambda k: True
    )
    ids = _drain_ids(conn, fleet_id=fid)
    bc_to_monitor = next(m.message_id for m in bc.deliveries if m.to_member_id == mon)
    # order: (created_at, message_id); the broadcast delivery to the Director never shows
    assert ids == [to_monitor, good, bc_to_monitor]
    assert to_director not in ids and raw_self not in ids and raw_summary not in ids
    assert _drain_ids(conn, recipient_id=w) == [good]
    assert _drain_ids(conn, recipient_id=d) == []
    assert _drain_ids(conn, recipient_id=dead_worker) == []
    for member in (paneless, pending_pane, on_director_pane):
        assert _drain_ids(conn, recipient_id=member) == []
    assert _drain_ids(conn, fleet_id=dead.fleet.fleet_id) == []
    # excluded ids are skipped
    got = broker.next_pending_notification(conn, fleet_id=fid, exclude=[to_monitor])
    assert got is not None and got.message.message_id == good


def test_pending_record_and_ordering_ties(conn: Connection, head_db: Path) -> None:
    boot = make_fleet(conn)
    fid = boot.fleet.fleet_id
    w = add_member(conn, fid, name="w", coding_agent="opencode")
    same = [
        broker.send_message(
            conn,
            from_member_id=boot.director.member_id,
            to_member_id=w.member_id,
            text=str(i),
            now=ts(7),
        ).message_id
        for i in range(3)
    ]
    older = broker.send_message(
        conn,
        from_member_id=boot.monitor.member_id,
        to_member_id=w.member_id,
        text="o",
        now=ts(6),
    ).message_id
    orphan = _plain(head_db, w.member_id, 4242, created="2026-01-02T03:04:12.000000+00:00")
    assert _drain_ids(conn, recipient_id=w.member_id) == [older, *same, orphan]
    first = broker.next_pending_notification(conn, recipient_id=w.member_id)
    assert first is not None
    assert first.sender_name == "monitor"
    assert first.recipient == broker.get_member(conn, w.member_id)
    assert first.placement == w.placement and first.placement.coding_agent == "opencode"
    assert first.message == broker.get_message(conn, older)
    last = broker.next_pending_notification(conn, recipient_id=w.member_id, exclude=[older, *same])
    assert last is not None and last.sender_name is None  # no sender row
    both = broker.next_pending_notification(conn, recipient_id=w.member_id, fleet_id=fid)
    assert both is not None and both.message.message_id == older
    assert broker.next_pending_notification(conn, recipient_id=w.member_id, fleet_id=999) is None


def test_stamp_after_concurrent_ack_returns_false(conn: Connection, head_db: Path) -> None:
    boot = make_fleet(conn)
    w = add_member(conn, boot.fleet.fleet_id).member_id
    msg = broker.send_message(
        conn, from_member_id=boot.director.member_id, to_member_id=w, text="x"
    )
    selected = broker.next_pending_notification(conn, recipient_id=w)
    assert selected is not None
    broker.ack_message(conn, message_id=msg.message_id)  # ACKed while it was being typed
    assert broker.stamp_notified(conn, message_id=msg.message_id) is False
    db = raw_connect(head_db)
    row = db.execute(
        "SELECT notified_at, status_state FROM messages WHERE message_id = ?", (msg.message_id,)
    ).fetchone()
    db.close()
    assert row == (None, "completed")


def test_stamp_changes_only_notified_at(conn: Connection, head_db: Path) -> None:
    boot = make_fleet(conn)
    w = add_member(conn, boot.fleet.fleet_id).member_id
    msg = broker.send_message(
        conn, from_member_id=boot.director.member_id, to_member_id=w, text="x"
    )
    assert broker.stamp_notified(conn, message_id=msg.message_id, now=ts())
    assert broker.stamp_notified(conn, message_id=msg.message_id) is False  # already stamped
    after = broker.get_message(conn, msg.message_id)
    assert after == msg  # state, timestamps, everything public unchanged
    db = raw_connect(head_db)
    assert db.execute(
        "SELECT notified_at FROM messages WHERE message_id = ?", (msg.message_id,)
    ).fetchone() == ("2026-01-02T03:04:05.000000+00:00",)
    db.close()
    assert [m.message_id for m in broker.poll_inbox(conn, w)] == [msg.message_id]


def test_recheck_pending(conn: Connection, head_db: Path) -> None:
    from cafleet.mux import PaneKey

    boot = make_fleet(conn)
    fid = boot.fleet.fleet_id
    d = boot.director.member_id
    w = add_member(conn, fid, name="w", pane_id="%31")
    key = ("tmux", "s", "%31")

    def send() -> int:
        return broker.send_message(
            conn, from_member_id=d, to_member_id=w.member_id, text="x"
        ).message_id

    m = send()
    assert broker.recheck_pending(conn, message_id=m, pane_key=key) == "pending"
    assert broker.recheck_pending(conn, message_id=m, pane_key=PaneKey(*key)) == "pending"
    assert broker.recheck_pending(conn, message_id=m, pane_key=("tmux", "s", "%99")) == "rebound"
    db = raw_connect(head_db)
    db.execute(
        "UPDATE member_placements SET mux_pane_id = '%32' WHERE member_id = ?", (w.member_id,)
    )
    assert broker.recheck_pending(conn, message_id=m, pane_key=key) == "rebound"
    db.execute(
        "UPDATE member_placements SET mux_pane_id = '%0' WHERE member_id = ?", (w.member_id,)
    )  # now the Director's pane: never typed into
    assert broker.recheck_pending(conn, message_id=m, pane_key=("tmux", "s", "%0")) == (
        "not_pending"
    )
    db.execute(
        "UPDATE member_placements SET mux_pane_id = NULL WHERE member_id = ?", (w.member_id,)
    )
    assert broker.recheck_pending(conn, message_id=m, pane_key=key) == "not_pending"
    db.execute(
        "UPDATE member_placements SET mux_pane_id = '%31' WHERE member_id = ?", (w.member_id,)
    )
    db.close()
    assert broker.recheck_pending(conn, message_id=m, pane_key=key) == "pending"
    acked = send()
    broker.ack_message(conn, message_id=acked)
    assert broker.recheck_pending(conn, message_id=acked, pane_key=key) == "not_pending"
    stamped = send()
    broker.stamp_notified(conn, message_id=stamped)
    assert broker.recheck_pending(conn, message_id=stamped, pane_key=key) == "not_pending"
    to_director = broker.send_message(
        conn, from_member_id=w.member_id, to_member_id=d, text="x"
    ).message_id
    assert (
        broker.recheck_pending(conn, message_id=to_director, pane_key=("tmux", "s", "%0"))
        == "not_pending"
    )
    assert broker.recheck_pending(conn, message_id=12345, pane_key=key) == "not_pending"
    broker.deregister_member(conn, member_id=w.member_id)
    assert broker.recheck_pending(conn, message_id=m, pane_key=key) == "not_pending"
