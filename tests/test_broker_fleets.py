"""Fleets (docs/storage.md §7.3; §9 items 15, 45, 48, 49, 59)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from cafleet import broker
from cafleet.broker.errors import BootstrapAborted, FleetNotFound, PlacementsChanged
from cafleet.db.runtime import Connection
from cafleet.records import PaneKey
from tests.broker_helpers import raw_connect, table_counts, ts
from tests.factories import FakePane, add_member, make_fleet


@pytest.fixture
def head_db(bare_head_db: Path) -> Path:
    """These tests write asset_installs rows as their probe: the db half only, no asset rows."""
    return bare_head_db


DIRECTOR_CARD = '{"name":"Director","description":"Root Director for this fleet","skills":[]}'
MONITOR_CARD = (
    '{"name":"monitor","description":"Monitor member for this fleet","skills":[],'
    '"cafleet":{"kind":"monitor"}}'
)


def _is_ts(value: object) -> bool:
    return isinstance(value, str) and len(value) == 32 and value.endswith("+00:00")


# --- §9 item 45 bootstrap -------------------------------------------------------------------------


def test_bootstrap_writes_fleet_director_backref_monitor_and_placements(
    conn: Connection, head_db: Path
) -> None:
    seen: dict[str, object] = {}

    def spawn(fleet_id: int, director_id: int, monitor_id: int) -> FakePane:
        seen["args"] = (fleet_id, director_id, monitor_id)
        db = raw_connect(head_db)  # another connection sees nothing before the commit
        seen["fleets_during"] = db.execute("SELECT COUNT(*) FROM fleets").fetchone()[0]
        seen["members_during"] = db.execute("SELECT COUNT(*) FROM members").fetchone()[0]
        db.close()
        return FakePane("sess", "@7", "%42")

    boot = broker.create_fleet(
        conn,
        name="alpha",
        backend="tmux",
        coding_agent="codex",
        director_pane=FakePane("sess", "@7", "%3"),
        spawn_monitor=spawn,
    )
    assert seen["fleets_during"] == 0 and seen["members_during"] == 0
    fleet, director, monitor = boot.fleet, boot.director, boot.monitor
    assert seen["args"] == (fleet.fleet_id, director.member_id, monitor.member_id)
    assert fleet.director_member_id == director.member_id and fleet.name == "alpha"
    assert (director.name, director.description, director.kind) == (
        "Director",
        "Root Director for this fleet",
        "director",
    )
    assert (monitor.name, monitor.description, monitor.kind) == (
        "monitor",
        "Monitor member for this fleet",
        "monitor",
    )
    assert director.placement is not None and monitor.placement is not None
    assert director.placement.pane_key == ("tmux", "sess", "%3")
    assert monitor.placement.pane_key == ("tmux", "sess", "%42")
    assert monitor.placement.mux_window_id == "@7"
    assert director.placement.coding_agent == monitor.placement.coding_agent == "codex"

    db = raw_connect(head_db)
    f = db.execute("SELECT name, created_at, deleted_at, director_member_id FROM fleets").fetchall()
    assert f == [("alpha", fleet.created_at, None, director.member_id)]
    members = db.execute(
        "SELECT member_id, name, status, registered_at, deregistered_at, member_card_json "
        "FROM members ORDER BY member_id"
    ).fetchall()
    assert [(m[0], m[1], m[2], m[4], m[5]) for m in members] == [
        (director.member_id, "Director", "active", None, DIRECTOR_CARD),
        (monitor.member_id, "monitor", "active", None, MONITOR_CARD),
    ]
    placements = db.execute(
        "SELECT member_id, mux_session, mux_window_id, mux_pane_id, backend, coding_agent, "
        "created_at FROM member_placements ORDER BY member_id"
    ).fetchall()
    assert [p[:6] for p in placements] == [
        (director.member_id, "sess", "@7", "%3", "tmux", "codex"),
        (monitor.member_id, "sess", "@7", "%42", "tmux", "codex"),
    ]
    stamps = [fleet.created_at] + [m[3] for m in members] + [p[6] for p in placements]
    assert all(_is_ts(s) for s in stamps), stamps
    assert len(set(stamps)) == 1  # one `now` stamps everything the call writes
    db.close()
    assert not conn.in_transaction()


def test_failing_callback_leaves_no_rows_and_propagates_unchanged(
    conn: Connection, head_db: Path
) -> None:
    class SpawnFailed(Exception):
        pass

    def spawn(fleet_id: int, director_id: int, monitor_id: int) -> FakePane:
        raise SpawnFailed("tmux split-window failed: boom")

    with pytest.raises(SpawnFailed, match="^tmux split-window failed: boom$"):
        broker.create_fleet(
            conn,
            name="x",
            backend="tmux",
            coding_agent="claude",
            director_pane=FakePane("s", "@1", "%0"),
            spawn_monitor=spawn,
        )
    assert table_counts(head_db) == dict.fromkeys(table_counts(head_db), 0)
    assert not conn.in_transaction()
    assert not getattr(conn.driver, "in_transaction", False)  # (PostgreSQL: in_transaction())


def test_failure_after_callback_raises_bootstrap_aborted_with_the_pane(
    conn: Connection, head_db: Path
) -> None:
    pane = FakePane(None, "@1", "%77")  # type: ignore[arg-type]  # NOT NULL mux_session fails
    with pytest.raises(BootstrapAborted) as info:
        broker.create_fleet(
            conn,
            name="x",
            backend="tmux",
            coding_agent="claude",
            director_pane=FakePane("s", "@1", "%0"),
            spawn_monitor=lambda f, d, m: pane,
        )
    assert info.value.spawned_pane is pane
    assert info.value.rollback_error is None
    assert str(info.value) == "NOT NULL constraint failed: member_placements.mux_session"
    assert table_counts(head_db) == dict.fromkeys(table_counts(head_db), 0)
    assert not conn.in_transaction()
    assert not getattr(conn.driver, "in_transaction", False)  # (PostgreSQL: in_transaction())
    # the connection is usable again
    assert make_fleet(conn).fleet.fleet_id >= 1


# --- §9 item 15 a writer queued behind the bootstrap's spawn --------------------------------------

_WRITER = textwrap.dedent(
    """
    import json, sys, time
    from cafleet.cli.guard import open_validated_connection
    from cafleet import broker
    conn = open_validated_connection(sys.argv[1])
    print("ready", flush=True)
    started = time.time()
    broker.record_asset_install(conn, coding_agent="claude", path="/p", cafleet_version="1")
    print(json.dumps({"started": started, "done": time.time()}), flush=True)
    """
)


def test_writer_started_during_callback_succeeds_right_after_commit(
    conn: Connection, head_db: Path
) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(head_db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
    )
    marks: dict[str, float] = {}

    def spawn(fleet_id: int, director_id: int, monitor_id: int) -> FakePane:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # the writer is connected and about to write
        assert line == "ready\n", line + (proc.stderr.read() if proc.stderr else "")
        time.sleep(0.2)  # let it block on the writer lock
        assert proc.poll() is None
        time.sleep(0.8)
        marks["callback_end"] = time.time()
        return FakePane("s", "@1", "%9")

    broker.create_fleet(
        conn,
        name="slow",
        backend="tmux",
        coding_agent="claude",
        director_pane=FakePane("s", "@1", "%0"),
        spawn_monitor=spawn,
    )
    committed = time.time()
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    result = json.loads(out.strip().splitlines()[-1])
    assert result["started"] < marks["callback_end"]  # it was waiting during the callback
    assert result["done"] >= marks["callback_end"]
    assert result["done"] - committed < 1.0  # and went through right after the commit
    assert table_counts(head_db)["asset_installs"] == 1


# --- §9 item 48 kinds -----------------------------------------------------------------------------


def test_kind_director_beats_marker_monitor_and_member(
    conn: Connection, head_db: Path, dialect: str
) -> None:
    boot = make_fleet(conn)
    worker = add_member(conn, boot.fleet.fleet_id)
    assert broker.get_member(conn, boot.monitor.member_id).kind == "monitor"
    assert worker.kind == "member"
    assert broker.get_member(conn, boot.director.member_id).kind == "director"
    # free the monitor slot, then hand-add the marker to the Director's card
    broker.deregister_member(conn, member_id=boot.monitor.member_id)
    db = raw_connect(head_db)
    db.execute(
        "UPDATE members SET member_card_json = json_set(member_card_json, '$.cafleet', "
        'json(\'{"kind":"monitor"}\')) WHERE member_id = ?'
        if dialect == "sqlite"
        else "UPDATE members SET member_card_json = jsonb_set(member_card_json::jsonb, "
        "'{cafleet}', '{\"kind\":\"monitor\"}')::text WHERE member_id = ?",
        (boot.director.member_id,),
    )
    # a deregistered member with a malformed card reads `member` with no skills
    db.execute(
        "UPDATE members SET member_card_json = '{not json' WHERE member_id = ?",
        (boot.monitor.member_id,),
    )
    db.close()
    assert broker.get_member(conn, boot.director.member_id).kind == "director"
    dead = broker.get_member(conn, boot.monitor.member_id)
    assert (dead.kind, dead.skills) == ("member", [])
    kinds = [e.member.kind for e in broker.member_roster(conn, fleet_id=boot.fleet.fleet_id)]
    assert kinds == ["director", "member"]


# --- §9 item 49 delete_fleet ----------------------------------------------------------------------


def _keys(conn: Connection, fleet_id: int) -> set[PaneKey]:
    keys = set()
    for placement in broker.fleet_placements(conn, fleet_id):
        assert placement.pane_key is not None
        keys.add(placement.pane_key)
    return keys


def test_delete_fleet_deregisters_everyone_and_keeps_messages(
    conn: Connection, head_db: Path
) -> None:
    boot = make_fleet(conn)
    fid = boot.fleet.fleet_id
    worker = add_member(conn, fid)
    pending = add_member(conn, fid, name="pending", pane_id=None)
    unplaced = add_member(conn, fid, name="unplaced", placed=False)
    other = make_fleet(conn, name="other")
    broker.send_message(
        conn, from_member_id=boot.director.member_id, to_member_id=worker.member_id, text="hi"
    )
    broker.broadcast_message(conn, from_member_id=worker.member_id, text="all")
    assert broker.claim_monitor(
        conn, fleet_id=fid, pid=os.getpid(), tick_seconds=None, wake_interval_seconds=60
    )
    assert pending.placement is not None and pending.placement.mux_pane_id is None
    assert len(broker.fleet_placements(conn, fid, concrete_only=False)) == 4
    calls: list[PaneKey] = []

    def try_lock(key: PaneKey) -> bool:
        calls.append(key)
        return False

    before = table_counts(head_db)
    count = broker.delete_fleet(
        conn, fleet_id=fid, locked_panes=_keys(conn, fid), try_lock=try_lock, now=ts(5)
    )
    assert count == 5  # Director, monitor, worker, pending, unplaced
    assert calls == []
    fleet = broker.get_fleet(conn, fid)
    assert fleet.deleted_at == "2026-01-02T03:04:10.000000+00:00"
    for member_id in (
        boot.director.member_id,
        boot.monitor.member_id,
        worker.member_id,
        pending.member_id,
        unplaced.member_id,
    ):
        member = broker.get_member(conn, member_id)
        assert (member.status, member.deregistered_at, member.placement) == (
            "deregistered",
            "2026-01-02T03:04:10.000000+00:00",
            None,
        )
    after = table_counts(head_db)
    assert after["messages"] == before["messages"] == 6  # send + summary + 4 deliveries
    assert after["member_placements"] == 2  # only the other fleet's
    assert after["monitor_runtime"] == 0
    assert broker.get_member(conn, other.director.member_id).status == "active"
    # idempotent
    assert broker.delete_fleet(conn, fleet_id=fid, locked_panes=set(), try_lock=try_lock) == 0
    assert calls == []
    with pytest.raises(FleetNotFound, match=r"^fleet 999 not found$"):
        broker.delete_fleet(conn, fleet_id=999, locked_panes=set(), try_lock=try_lock)


def test_delete_fleet_placement_outside_locked_set_that_cannot_be_locked(
    conn: Connection, head_db: Path
) -> None:
    boot = make_fleet(conn)
    fid = boot.fleet.fleet_id
    locked = _keys(conn, fid)  # the caller's read, before the member got its pane
    late = add_member(conn, fid, name="late", pane_id="%555")
    calls: list[PaneKey] = []

    def try_lock(key: PaneKey) -> bool:
        calls.append(key)
        return False

    before = table_counts(head_db)
    with pytest.raises(PlacementsChanged) as info:
        broker.delete_fleet(conn, fleet_id=fid, locked_panes=locked, try_lock=try_lock)
    assert (info.value.member_id, info.value.pane_id) == (late.member_id, "%555")
    assert calls == [("tmux", "s", "%555")]
    assert broker.get_fleet(conn, fid).deleted_at is None
    assert broker.get_member(conn, late.member_id).status == "active"
    assert table_counts(head_db) == before
    assert not conn.in_transaction()


def test_delete_fleet_tries_each_new_key_once(conn: Connection) -> None:
    boot = make_fleet(conn)
    fid = boot.fleet.fleet_id
    locked = _keys(conn, fid)
    add_member(conn, fid, name="a", pane_id="%600")
    add_member(conn, fid, name="b", pane_id="%600")  # shares the pane, and its lock
    calls: list[PaneKey] = []

    def try_lock(key: PaneKey) -> bool:
        calls.append(key)
        return True

    assert broker.delete_fleet(conn, fleet_id=fid, locked_panes=locked, try_lock=try_lock) == 4
    assert calls == [("tmux", "s", "%600")]


# --- §9 item 59 list_fleets / get_fleet / fleet_summary -------------------------------------------


def test_list_fleets_order_counts_and_deleted(conn: Connection) -> None:
    a = make_fleet(conn, name="a", now=ts(0))
    b = make_fleet(conn, name="b", now=ts(10))
    c = make_fleet(conn, name="c", now=ts(10))
    d = make_fleet(conn, name="d", now=ts(20))
    add_member(conn, a.fleet.fleet_id, name="w1")
    gone = add_member(conn, a.fleet.fleet_id, name="w2")
    broker.deregister_member(conn, member_id=gone.member_id)
    broker.deregister_member(conn, member_id=c.monitor.member_id)
    broker.delete_fleet(
        conn, fleet_id=d.fleet.fleet_id, locked_panes=set(), try_lock=lambda k: True
    )
    fleets = broker.list_fleets(conn)
    assert [f.fleet_id for f in fleets] == [c.fleet.fleet_id, b.fleet.fleet_id, a.fleet.fleet_id]
    by_id = {f.fleet_id: f for f in fleets}
    fa = by_id[a.fleet.fleet_id]
    assert (fa.name, fa.member_count, fa.monitor_member_id, fa.director_member_id) == (
        "a",
        3,
        a.monitor.member_id,
        a.director.member_id,
    )
    assert (by_id[c.fleet.fleet_id].member_count, by_id[c.fleet.fleet_id].monitor_member_id) == (
        1,
        None,
    )
    deleted = broker.get_fleet(conn, d.fleet.fleet_id)
    assert deleted.deleted_at is not None and len(deleted.deleted_at) == 32
    summary = broker.fleet_summary(conn, d.fleet.fleet_id)
    assert (summary.deleted_at, summary.member_count, summary.monitor_member_id) == (
        deleted.deleted_at,
        0,
        None,
    )
    assert broker.fleet_summary(conn, a.fleet.fleet_id) == fa
    with pytest.raises(FleetNotFound, match=r"^fleet 77 not found$"):
        broker.get_fleet(conn, 77)
    with pytest.raises(FleetNotFound):
        broker.fleet_summary(conn, 77)
    assert broker.list_fleets(conn)[0].created_at == "2026-01-02T03:04:15.000000+00:00"


# --- one live fleet per Director pane (docs/cli.md §2.3) ----------------------------------------------


def test_a_live_fleets_director_pane_cannot_bootstrap_another(
    conn: Connection, head_db: Path
) -> None:
    from cafleet.broker.errors import PaneDirectsFleet

    pane = FakePane("s", "@1", "%7")
    first = make_fleet(conn, name="first", director_pane=pane)
    key = ("tmux", "s", "%7")
    assert broker.fleet_directed_from(conn, key) == first.fleet
    assert broker.fleet_directed_from(conn, ("tmux", "other", "%7")) is None
    before = table_counts(head_db)
    spawned: list[int] = []
    with pytest.raises(PaneDirectsFleet) as info:
        broker.create_fleet(
            conn,
            name="second",
            backend="tmux",
            coding_agent="claude",
            director_pane=pane,
            spawn_monitor=lambda f, d, m: spawned.append(f) or FakePane("s", "@1", "%8"),
        )
    assert str(info.value) == (
        f"pane %7 is already the root Director of live fleet {first.fleet.fleet_id} (first); "
        f"delete it first ('cafleet fleet delete {first.fleet.fleet_id}') or use another pane"
    )
    assert (info.value.fleet_id, info.value.pane_id) == (first.fleet.fleet_id, "%7")
    assert spawned == [] and table_counts(head_db) == before and not conn.in_transaction()
    # A member placement naming the pane is not a Director placement: no refusal from it.
    add_member(conn, first.fleet.fleet_id, pane_id="%9")
    assert broker.fleet_directed_from(conn, ("tmux", "s", "%9")) is None
    # Once the fleet is deleted the pane may direct a new one.
    broker.delete_fleet(
        conn, fleet_id=first.fleet.fleet_id, locked_panes=set(), try_lock=lambda k: True
    )
    assert broker.fleet_directed_from(conn, key) is None
    second = make_fleet(conn, name="second", director_pane=pane)
    assert broker.fleet_directed_from(conn, key) == second.fleet


def test_the_same_pane_key_on_another_host_directs_another_fleet(
    conn: Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/runtime.md §10.2: a pane key names one pane per host, so the pane `s %7` of host
    `there` and the pane `s %7` of host `here` each direct a live fleet of their own."""
    pane = FakePane("s", "@1", "%7")
    key = ("tmux", "s", "%7")
    monkeypatch.setenv("CAFLEET_HOST_ID", "there")
    there = make_fleet(conn, name="there", director_pane=pane)
    monkeypatch.setenv("CAFLEET_HOST_ID", "here")
    assert broker.fleet_directed_from(conn, key) is None
    here = broker.create_fleet(
        conn,
        name="here",
        backend="tmux",
        coding_agent="claude",
        director_pane=pane,
        spawn_monitor=lambda f, d, m: FakePane("s", "@1", "%8"),
    )
    assert broker.fleet_directed_from(conn, key) == here.fleet
    monkeypatch.setenv("CAFLEET_HOST_ID", "there")
    assert broker.fleet_directed_from(conn, key) == there.fleet
