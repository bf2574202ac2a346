"""Members (docs/storage.md §7.4, §7.8; §9 items 46, 47, 50, 55, 56, 58, 60)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cafleet import broker
from cafleet.broker.errors import (
    CannotDeregisterRootDirector,
    FleetDeleted,
    FleetNotFound,
    MemberDeregistered,
    MemberNotFound,
    MonitorSlotTaken,
    NoActiveMonitor,
    PlacementVanished,
    RootDirectorInactive,
)
from cafleet.broker.members import _insert_member
from cafleet.config import db_dir_of
from cafleet.db import tx
from cafleet.db.runtime import Connection, close_connection
from cafleet.records import PlacementSpec, member_card
from tests.broker_helpers import raw_connect, table_counts, ts
from tests.factories import add_member, make_fleet
from tests.storage_helpers import recording_statements


@pytest.fixture
def conn_b(head_db: Path) -> Iterator[Connection]:
    from cafleet.cli.guard import open_validated_connection

    second = open_validated_connection(str(head_db))
    yield second
    close_connection(second)


def _autocommit(c: Connection) -> bool:
    # (PostgreSQL's connection has no such attribute: its in_transaction() reads the driver)
    return not c.in_transaction() and not getattr(c.driver, "in_transaction", False)


# --- registration -------------------------------------------------------------------------------


def test_register_member_writes_card_and_pending_placement(conn: Connection, head_db: Path) -> None:
    boot = make_fleet(conn)
    member = broker.register_member(
        conn,
        fleet_id=boot.fleet.fleet_id,
        name="coder",
        description="writes code",
        role="member",
        placement=PlacementSpec("sess", "@2", "opencode"),
        require_monitor=True,
        skills=("a", {"b": 1}),
        now=ts(),
    )
    assert (member.kind, member.status, member.registered_at) == (
        "member",
        "active",
        "2026-01-02T03:04:05.000000+00:00",
    )
    assert member.skills == ["a", {"b": 1}]
    assert member.placement is not None and member.placement.mux_pane_id is None
    assert broker.get_member(conn, member.member_id) == member
    db = raw_connect(head_db)
    row = db.execute(
        "SELECT member_card_json FROM members WHERE member_id = ?", (member.member_id,)
    ).fetchone()
    db.close()
    assert row[0] == '{"name":"coder","description":"writes code","skills":["a",{"b":1}]}'
    patched = broker.set_placement_pane(conn, member_id=member.member_id, pane_id="%9")
    assert patched.pane_key == ("tmux", "sess", "%9")
    with pytest.raises(PlacementVanished, match="^placement row vanished before pane-id patch$"):
        broker.set_placement_pane(conn, member_id=member.member_id, pane_id="%10")


def test_set_placement_pane_refuses_deregistered_member(conn: Connection) -> None:
    boot = make_fleet(conn)
    member = add_member(conn, boot.fleet.fleet_id, pane_id=None)
    broker.deregister_member(conn, member_id=member.member_id)
    with pytest.raises(PlacementVanished):
        broker.set_placement_pane(conn, member_id=member.member_id, pane_id="%1")


def test_register_member_fleet_and_director_checks(conn: Connection, head_db: Path) -> None:
    boot = make_fleet(conn)
    fid = boot.fleet.fleet_id

    def register(fleet_id: int, role: str = "member", require: bool = True) -> Any:
        return broker.register_member(
            conn,
            fleet_id=fleet_id,
            name="n",
            description="d",
            role=role,  # type: ignore[arg-type]
            placement=PlacementSpec("s", "@1", "claude"),
            require_monitor=require,
        )

    with pytest.raises(FleetNotFound, match=r"^fleet 42 not found$"):
        register(42)
    broker.deregister_member(conn, member_id=boot.monitor.member_id)
    with pytest.raises(
        NoActiveMonitor,
        match=rf"^fleet {fid} has no active monitor member; spawn one with --role monitor first$",
    ):
        register(fid)
    assert register(fid, require=False).kind == "member"
    db = raw_connect(head_db)
    db.execute(
        "UPDATE members SET status = 'deregistered' WHERE member_id = ?",
        (boot.director.member_id,),
    )
    db.close()
    with pytest.raises(
        RootDirectorInactive,
        match=rf"^fleet {fid}'s root Director \(member {boot.director.member_id}\) is not active\.$",
    ):
        register(fid, role="monitor")
    other = make_fleet(conn, name="gone")
    broker.delete_fleet(
        conn, fleet_id=other.fleet.fleet_id, locked_panes=set(), try_lock=lambda k: True
    )
    with pytest.raises(FleetDeleted, match=rf"^fleet {other.fleet.fleet_id} is deleted$"):
        register(other.fleet.fleet_id)
    assert _autocommit(conn)


# --- §9 item 46 the monitor race ------------------------------------------------------------------


def test_monitor_race_loser_gets_slot_taken_and_writes_nothing(
    conn: Connection, conn_b: Connection, head_db: Path
) -> None:
    boot = make_fleet(conn)
    fid = boot.fleet.fleet_id
    broker.deregister_member(conn, member_id=boot.monitor.member_id)
    # both pre-check an empty slot
    assert broker.get_active_monitor(conn, fid) is None
    assert broker.get_active_monitor(conn_b, fid) is None

    def register(c: Connection) -> Any:
        return broker.register_member(
            c,
            fleet_id=fid,
            name="monitor",
            description="Monitor member for this fleet",
            role="monitor",
            placement=PlacementSpec("s", "@1", "claude"),
            require_monitor=False,
        )

    winner = register(conn)
    assert winner.kind == "monitor"
    before = table_counts(head_db)
    with pytest.raises(MonitorSlotTaken) as info:
        register(conn_b)
    assert str(info.value) == (
        f"fleet {fid} already has an active monitor member (member {winner.member_id})"
    )
    assert (info.value.fleet_id, info.value.member_id) == (fid, winner.member_id)
    assert table_counts(head_db) == before
    assert _autocommit(conn) and _autocommit(conn_b)
    got = broker.get_active_monitor(conn_b, fid)
    assert got is not None and got.member_id == winner.member_id


def test_unique_index_violation_becomes_slot_taken_naming_current_monitor(
    conn: Connection, head_db: Path
) -> None:
    """The path that skips the in-transaction check: the partial unique index fires and the
    error names the current monitor, read on the same transaction before the rollback."""
    boot = make_fleet(conn)
    fid = boot.fleet.fleet_id
    before = table_counts(head_db)
    with pytest.raises(MonitorSlotTaken) as info, tx.write(conn):
        _insert_member(
            conn,
            fleet_id=fid,
            name="second",
            description="d",
            card=member_card("second", "d", monitor=True),
            now="2026-01-01T00:00:00.000000+00:00",
        )
    assert info.value.member_id == boot.monitor.member_id
    assert isinstance(info.value.__cause__, sqlite3.IntegrityError)
    assert table_counts(head_db) == before
    assert _autocommit(conn)


def test_unrelated_unique_violation_keeps_its_own_text(conn: Connection, head_db: Path) -> None:
    boot = make_fleet(conn)
    fid = boot.fleet.fleet_id
    db = raw_connect(head_db)  # an auxiliary index keeps the file current (§9 item 29)
    db.execute("CREATE UNIQUE INDEX aux_member_names ON members (fleet_id, name)")
    db.close()
    before = table_counts(head_db)
    with pytest.raises(sqlite3.IntegrityError) as info:
        broker.register_member(
            conn,
            fleet_id=fid,
            name="Director",
            description="d",
            role="member",
            placement=PlacementSpec("s", "@1", "claude"),
            require_monitor=True,
        )
    assert str(info.value) == "UNIQUE constraint failed: members.fleet_id, members.name"
    assert table_counts(head_db) == before
    assert _autocommit(conn)


def test_failed_placement_insert_undoes_the_member(conn: Connection, head_db: Path) -> None:
    boot = make_fleet(conn)
    before = table_counts(head_db)
    with pytest.raises(sqlite3.IntegrityError) as info:
        broker.register_member(
            conn,
            fleet_id=boot.fleet.fleet_id,
            name="n",
            description="d",
            role="member",
            placement=PlacementSpec(None, "@1", "claude"),  # type: ignore[arg-type]
            require_monitor=True,
        )
    assert str(info.value) == "NOT NULL constraint failed: member_placements.mux_session"
    assert table_counts(head_db) == before


# --- §9 item 47 the partial unique index under direct SQL -----------------------------------------


def test_direct_sql_cannot_create_a_second_active_monitor(conn: Connection, head_db: Path) -> None:
    a = make_fleet(conn, name="a")
    b = make_fleet(conn, name="b")
    fa, fb = a.fleet.fleet_id, b.fleet.fleet_id
    mon = member_card("m2", "d", monitor=True)
    db = raw_connect(head_db)
    insert = (
        "INSERT INTO members (fleet_id, name, description, status, registered_at, "
        "member_card_json) VALUES (?, ?, 'd', ?, '2026-01-01T00:00:00.000000+00:00', ?)"
    )
    duplicate = "UNIQUE constraint failed: members.fleet_id"
    with pytest.raises(sqlite3.IntegrityError, match=duplicate):
        db.execute(insert, (fa, "m2", "active", mon))  # insert
    dead = db.execute(insert, (fa, "old", "deregistered", mon)).lastrowid  # accepted
    with pytest.raises(sqlite3.IntegrityError, match=duplicate):  # re-activation
        db.execute("UPDATE members SET status = 'active' WHERE member_id = ?", (dead,))
    plain = db.execute(insert, (fa, "plain", "active", member_card("plain", "d"))).lastrowid
    with pytest.raises(sqlite3.IntegrityError, match=duplicate):  # card edit
        db.execute("UPDATE members SET member_card_json = ? WHERE member_id = ?", (mon, plain))
    with pytest.raises(sqlite3.IntegrityError, match=duplicate):  # fleet move
        db.execute("UPDATE members SET fleet_id = ? WHERE member_id = ?", (fb, a.monitor.member_id))
    for marker in ('"Monitor"', '"monitoring-member"', "null"):
        card = '{"name":"x","description":"d","skills":[],"cafleet":{"kind":' + marker + "}}"
        db.execute(insert, (fa, "x", "active", card))  # not monitors
    db.execute(insert, (fb, "other", "deregistered", mon))  # other fleet, deregistered
    db.close()
    assert broker.get_active_monitor(conn, fa).member_id == a.monitor.member_id  # type: ignore[union-attr]
    roster = broker.member_roster(conn, fleet_id=fa)
    assert [e.member.kind for e in roster].count("monitor") == 1
    # after deregistration, a new monitor registers
    broker.deregister_member(conn, member_id=a.monitor.member_id)
    new = broker.register_member(
        conn,
        fleet_id=fa,
        name="monitor",
        description="d",
        role="monitor",
        placement=None,
        require_monitor=False,
    )
    assert broker.get_active_monitor(conn, fa).member_id == new.member_id  # type: ignore[union-attr]


# --- §9 item 50 deregistration --------------------------------------------------------------------


def test_deregister_member_refuses_root_director_and_removes_placement(
    conn: Connection, head_db: Path
) -> None:
    boot = make_fleet(conn)
    worker = add_member(conn, boot.fleet.fleet_id)
    with pytest.raises(CannotDeregisterRootDirector) as info:
        broker.deregister_member(conn, member_id=boot.director.member_id)
    assert str(info.value) == (
        "cannot deregister the root Director; use 'cafleet fleet delete' instead"
    )
    assert broker.get_member(conn, boot.director.member_id).status == "active"
    gone = broker.deregister_member(conn, member_id=worker.member_id, now=ts(1))
    assert (gone.status, gone.deregistered_at, gone.placement) == (
        "deregistered",
        "2026-01-02T03:04:06.000000+00:00",
        None,
    )
    assert broker.get_member(conn, worker.member_id) == gone
    db = raw_connect(head_db)
    assert (
        db.execute(
            "SELECT COUNT(*) FROM member_placements WHERE member_id = ?", (worker.member_id,)
        ).fetchone()[0]
        == 0
    )
    db.close()
    with pytest.raises(MemberDeregistered, match=rf"^member {worker.member_id} is deregistered$"):
        broker.deregister_member(conn, member_id=worker.member_id)
    with pytest.raises(MemberNotFound, match="^member 999 not found$"):
        broker.deregister_member(conn, member_id=999)
    with pytest.raises(MemberNotFound, match="^member 999 not found$"):
        broker.get_member(conn, 999)


# --- §9 item 58 placement states ------------------------------------------------------------------


def test_missing_placement_differs_from_pending(conn: Connection) -> None:
    boot = make_fleet(conn)
    none = add_member(conn, boot.fleet.fleet_id, name="none", placed=False)
    pending = add_member(conn, boot.fleet.fleet_id, name="pending", pane_id=None)
    assert none.placement is None
    assert pending.placement is not None and pending.placement.mux_pane_id is None
    assert pending.placement.pane_key is None and not pending.placement.is_concrete
    roster = {e.member.member_id: e.member for e in broker.member_roster(conn, fleet_id=1)}
    assert roster[none.member_id].placement is None
    assert roster[pending.member_id].placement == pending.placement


# --- §9 item 55 roster and activity ---------------------------------------------------------------


def test_member_roster_activity_and_idle(conn: Connection, head_db: Path) -> None:
    boot = make_fleet(conn, now=ts(0))
    fid = boot.fleet.fleet_id
    d, mon = boot.director.member_id, boot.monitor.member_id
    a = add_member(conn, fid, name="a", now=ts(0)).member_id
    b = add_member(conn, fid, name="b", now=ts(0)).member_id
    quiet = add_member(conn, fid, name="quiet", placed=False, now=ts(0)).member_id
    gone = add_member(conn, fid, name="gone", now=ts(0)).member_id
    broker.deregister_member(conn, member_id=gone)
    m1 = broker.send_message(conn, from_member_id=b, to_member_id=a, text="1", now=ts(10))
    broker.send_message(conn, from_member_id=d, to_member_id=a, text="2", now=ts(20))
    broker.ack_message(conn, message_id=m1.message_id, now=ts(30))
    # a's broadcast: last_sent includes the summary; the summary (owned by a) is not a receipt
    bc = broker.broadcast_message(conn, from_member_id=a, text="all", now=ts(40))
    assert {x.to_member_id for x in bc.deliveries} == {d, mon, b, quiet}
    # b ACKs its broadcast delivery at a future time; the monitor gets an unparseable send
    b_delivery = next(x for x in bc.deliveries if x.to_member_id == b)
    broker.ack_message(conn, message_id=b_delivery.message_id, now=ts(1000))
    db = raw_connect(head_db)
    db.execute(
        "INSERT INTO messages (owner_member_id, from_member_id, to_member_id, type, created_at, "
        "status_state, status_timestamp, origin_message_id, text, notified_at) "
        "VALUES (?, ?, ?, 'unicast', 'zz-not-a-time', 'input_required', 'zz-not-a-time', NULL, "
        "'x', NULL)",
        (d, mon, d),
    )
    db.close()
    now = ts(100)
    roster = broker.member_roster(conn, fleet_id=fid, now=now)
    assert [e.member.member_id for e in roster] == [d, mon, a, b, quiet]  # active only, by id
    by = {e.member.member_id: e for e in roster}
    t = lambda s: f"2026-01-02T03:04:{5 + s:02d}.000000+00:00"  # noqa: E731
    assert (by[a].last_sent, by[a].last_recv, by[a].last_ack) == (t(40), t(20), t(30))
    assert by[a].idle == 60
    assert (by[b].last_sent, by[b].last_recv, by[b].last_ack) == (
        t(10),
        t(40),
        "2026-01-02T03:20:45.000000+00:00",
    )
    assert by[b].idle == 0  # future ACK: clamped at zero
    assert (by[mon].last_sent, by[mon].idle) == ("zz-not-a-time", None)  # greatest does not parse
    assert by[mon].last_recv == t(40)  # parses, but no fall-back to it
    assert (by[quiet].last_sent, by[quiet].last_recv, by[quiet].last_ack) == (None, t(40), None)
    assert by[quiet].idle == 60
    # the Director's last_recv is the unparseable row; its idle follows the greatest string
    assert by[d].last_recv == "zz-not-a-time" and by[d].idle is None
    fresh = add_member(conn, fid, name="fresh").member_id
    entry = {e.member.member_id: e for e in broker.member_roster(conn, fleet_id=fid, now=now)}
    assert (entry[fresh].last_sent, entry[fresh].last_recv, entry[fresh].last_ack) == (
        None,
        None,
        None,
    )
    assert entry[fresh].idle is None


def test_member_roster_unknown_and_deleted_fleet(conn: Connection) -> None:
    boot = make_fleet(conn)
    with pytest.raises(FleetNotFound, match=r"^fleet 5 not found$"):
        broker.member_roster(conn, fleet_id=5)
    broker.delete_fleet(
        conn, fleet_id=boot.fleet.fleet_id, locked_panes=set(), try_lock=lambda k: True
    )
    with pytest.raises(FleetDeleted, match=rf"^fleet {boot.fleet.fleet_id} is deleted$"):
        broker.member_roster(conn, fleet_id=boot.fleet.fleet_id)


def test_idle_seconds_rules() -> None:
    now = ts(100)
    assert broker.idle_seconds(None, None, None, now) is None
    assert broker.idle_seconds("2026-01-02T03:04:05.5+00:00", None, None, now) == 99
    assert broker.idle_seconds(" 2026-01-02T03:04:05 ", None, None, now) == 100  # lenient, naive
    assert broker.idle_seconds("2026-01-02T03:04:05.000000+00:00", "garbage", None, now) is None
    assert broker.idle_seconds("2999-01-01T00:00:00.000000+00:00", None, None, now) == 0


# --- wake roster -----------------------------------------------------------------------------------


def test_wake_roster_members_with_placement_and_director(conn: Connection) -> None:
    boot = make_fleet(conn)
    fid = boot.fleet.fleet_id
    a = add_member(conn, fid, name="a", coding_agent="codex")
    pending = add_member(conn, fid, name="p", pane_id=None, coding_agent="opencode")
    add_member(conn, fid, name="unplaced", placed=False)
    gone = add_member(conn, fid, name="gone")
    broker.deregister_member(conn, member_id=gone.member_id)
    for _ in range(2):
        broker.send_message(
            conn, from_member_id=boot.director.member_id, to_member_id=a.member_id, text="x"
        )
    m = broker.send_message(
        conn, from_member_id=a.member_id, to_member_id=boot.director.member_id, text="y"
    )
    broker.stamp_notified(conn, message_id=m.message_id)  # counted whatever notified_at
    broker.broadcast_message(conn, from_member_id=a.member_id, text="z")  # summary not counted
    roster = broker.wake_roster(conn, fleet_id=fid)
    assert [(e.member_id, e.name, e.coding_agent, e.unacked) for e in roster.members] == [
        (a.member_id, "a", "codex", 2),
        (pending.member_id, "p", "opencode", 1),
    ]
    assert roster.director is not None
    assert (roster.director.member_id, roster.director.coding_agent, roster.director.unacked) == (
        boot.director.member_id,
        "claude",
        2,
    )


# --- §9 item 56 member_names ----------------------------------------------------------------------


def test_member_names_batches_of_500(conn: Connection) -> None:
    boot = make_fleet(conn)
    fid = boot.fleet.fleet_id
    extra = [add_member(conn, fid, name=f"m{i}", placed=False) for i in range(3)]
    broker.deregister_member(conn, member_id=extra[1].member_id)
    known = [boot.director.member_id, boot.monitor.member_id] + [m.member_id for m in extra]
    ids = list(range(1, 1202)) + [1, 2, 3, 1201, 600] * 3  # 1,201 distinct plus duplicates
    statements: list[str] = []

    batches: list[list[int]] = []

    def record(statement: str, parameters: Any) -> None:
        statements.append(statement)
        if "FROM members" in statement:
            batches.append(
                json.loads(
                    list(parameters)[0] if not isinstance(parameters, dict) else parameters["ids"]
                )
            )  # the ids travel as one JSON array

    with recording_statements(conn, record):
        names = broker.member_names(conn, reversed(ids))
        assert [len(b) for b in batches] == [500, 500, 201]
        assert sorted(i for b in batches for i in b) == sorted(set(ids))
        statements.clear()
        assert broker.member_names(conn, []) == []
        assert statements == []  # no SQL at all, not even BEGIN
    assert names == [
        (boot.director.member_id, "Director"),
        (boot.monitor.member_id, "monitor"),
        (extra[0].member_id, "m0"),
        (extra[1].member_id, "m1"),  # deregistered members are known too
        (extra[2].member_id, "m2"),
    ]
    assert [n[0] for n in names] == sorted(known)


# --- §9 item 60 pane keys select shared lock files ------------------------------------------------


def test_same_pane_key_maps_to_same_lock_file(conn: Connection, head_db: Path) -> None:
    from cafleet.mux import PaneKey
    from cafleet.mux.locks import pane_lock_path, try_pane_lock

    boot = make_fleet(conn)
    fid = boot.fleet.fleet_id
    a = add_member(conn, fid, name="a", pane_id="%50")
    b = add_member(conn, fid, name="b", pane_id="%50")
    c = add_member(conn, fid, name="c", pane_id="%51")
    keys = {m.member_id: PaneKey(*m.placement.pane_key) for m in (a, b, c)}  # type: ignore[union-attr,misc]
    db_dir = db_dir_of(str(head_db))
    paths = {mid: pane_lock_path(db_dir, key) for mid, key in keys.items()}  # type: ignore[arg-type]
    assert paths[a.member_id] == paths[b.member_id] != paths[c.member_id]
    for path in paths.values():
        assert Path(path).parent == Path(db_dir) / "locks"
        assert Path(path).name.startswith("pane-") and path.endswith(".lock")
    held = try_pane_lock(db_dir, keys[a.member_id])  # type: ignore[arg-type]
    assert held is not None
    try:
        assert try_pane_lock(db_dir, keys[b.member_id]) is None  # type: ignore[arg-type]
        other = try_pane_lock(db_dir, keys[c.member_id])  # type: ignore[arg-type]
        assert other is not None
        other.release()
    finally:
        held.release()
    # the same key read back through the fleet placements
    got = {PaneKey(*p.pane_key) for p in broker.fleet_placements(conn, fid)}  # type: ignore[misc]
    assert got >= set(keys.values())


def test_pane_shared_with_names_the_lowest_other_active_member_on_the_key(
    conn: Connection,
) -> None:
    boot = make_fleet(conn)
    fid = boot.fleet.fleet_id
    a = add_member(conn, fid, name="a", pane_id="%60")
    b = add_member(conn, fid, name="b", pane_id="%60")
    c = add_member(conn, fid, name="c", pane_id="%60")
    alone = add_member(conn, fid, name="alone", pane_id="%61")
    assert a.placement and b.placement and c.placement and alone.placement
    assert broker.pane_shared_with(conn, a.placement) == b.member_id
    assert broker.pane_shared_with(conn, c.placement) == a.member_id
    assert broker.pane_shared_with(conn, alone.placement) is None
    broker.deregister_member(conn, member_id=a.member_id)
    broker.deregister_member(conn, member_id=b.member_id)
    assert broker.pane_shared_with(conn, c.placement) is None  # deregistered members do not count


def test_a_pane_key_on_another_host_is_not_shared(
    conn: Connection, head_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/runtime.md §10.2: the same (session, pane id) on two hosts names two panes, so only
    a member on this host (or whose host is not recorded) shares a key."""

    boot = make_fleet(conn)
    fid = boot.fleet.fleet_id
    a = add_member(conn, fid, name="a", pane_id="%70")
    b = add_member(conn, fid, name="b", pane_id="%70")
    assert a.placement and b.placement and boot.fleet.director_member_id is not None

    def place(member_id: int, host: str | None) -> None:
        db = raw_connect(head_db)
        db.execute(
            "UPDATE member_placements SET host_id = ? WHERE member_id = ?", (host, member_id)
        )
        db.close()

    monkeypatch.setenv("CAFLEET_HOST_ID", "here")
    place(boot.fleet.director_member_id, "here")
    place(a.member_id, "here")
    place(b.member_id, "there")
    assert broker.pane_shared_with(conn, a.placement) is None
    place(b.member_id, None)  # not recorded: its root Director's host, this one
    assert broker.pane_shared_with(conn, a.placement) == b.member_id
    place(boot.fleet.director_member_id, "there")
    assert broker.pane_shared_with(conn, a.placement) is None
    place(boot.fleet.director_member_id, None)  # nothing recorded: every host's
    assert broker.pane_shared_with(conn, a.placement) == b.member_id


def test_recorded_worktrees_of_every_fleet_with_their_owners(conn: Connection) -> None:
    """`cafleet worktree list` and the left-behind check read every member's worktree, any
    fleet's, with whether its member is active and its fleet deleted (both dialects)."""
    from cafleet.records import SpawnSpec, WorktreeSpec

    def member(fleet_id: int, name: str, path: str) -> int:
        spec = WorktreeSpec(path, f"cafleet/{name}", "main")
        return broker.register_member(
            conn, fleet_id=fleet_id, name=name, description="d", role="member",
            placement=None, require_monitor=False,
            spawn=SpawnSpec(prompt=None, model=None, effort=None, worktree=spec),
        ).member_id  # fmt: skip

    live = make_fleet(conn, name="live").fleet.fleet_id
    gone = make_fleet(conn, name="gone").fleet.fleet_id
    a = member(live, "a", "/r/.cafleet/worktrees/a")
    b = member(live, "b", "/r/.cafleet/worktrees/b")
    c = member(gone, "c", "/r/.cafleet/worktrees/c")
    add_member(conn, live, name="plain")  # no worktree: not listed
    broker.deregister_member(conn, member_id=b)
    broker.delete_fleet(conn, fleet_id=gone, locked_panes=set(), try_lock=lambda _key: True)
    found = [
        (r.member_id, r.fleet_id, r.member_name, r.member_active, r.fleet_deleted, r.spec.branch)
        for r in broker.recorded_worktrees(conn)
    ]
    assert found == [
        (a, live, "a", True, False, "cafleet/a"),
        (b, live, "b", False, False, "cafleet/b"),
        (c, gone, "c", False, True, "cafleet/c"),
    ]
