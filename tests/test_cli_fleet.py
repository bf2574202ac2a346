"""`cafleet fleet list/show/delete` (docs/cli.md §2.4–§2.6; §4 items 34–36, 79)."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.cli_helpers import (
    assert_unchanged,
    call_main,
    hold_flock,
    query,
    run_cli,
    snapshot,
    sql,
    stamp,
    start_cli,
)
from tests.delivery_helpers import holds_open
from tests.factories import Db, FakePane
from tests.harness.util import retry_until

T0 = datetime(2026, 11, 28, 9, 0, 0, tzinfo=UTC)


# --- fleet list ----------------------------------------------------------------------------------


def test_empty_list(head_db: Path) -> None:
    assert call_main(["fleet", "list"]) == (0, "0 fleets.\n", "")
    assert call_main(["fleet", "list", "--json"]) == (0, "[]\n", "")


def test_list_order_table_and_hidden_deleted(head_db: Path) -> None:
    with Db(head_db) as db:
        build = db.fleet("build", now=T0)  # 1: director 1, monitor 2
        review = db.fleet("review", now=T0 + timedelta(days=1))  # 2: 3, 4
        same_time = db.fleet("同時", now=T0 + timedelta(days=1))  # 3: 5, 6
        gone = db.fleet("gone", now=T0 + timedelta(days=2))  # 4: 7, 8
        db.member(review.fleet.fleet_id, "coder")
        db.member(review.fleet.fleet_id, "tester", placed=False)
        db.deregister(build.monitor.member_id)
    code, out, err = call_main(["fleet", "delete", str(gone.fleet.fleet_id), "--keep-panes"])
    assert code == 0, err
    code, out, err = call_main(["fleet", "list"])
    assert (code, err) == (0, "")
    day1 = stamp(T0 + timedelta(days=1))
    assert out == (
        "3 fleets:\n"
        "  fleet_id  name    director  monitor  members  created_at\n"
        "  --------  ------  --------  -------  -------  --------------------------------\n"
        f"  {same_time.fleet.fleet_id}         同時    5         6        2        {day1}\n"
        f"  {review.fleet.fleet_id}         review  3         4        4        {day1}\n"
        f"  {build.fleet.fleet_id}         build   1         -        1        {stamp(T0)}\n"
    )
    code, out, _ = call_main(["fleet", "list", "--json"])
    data = json.loads(out)
    assert [f["fleet_id"] for f in data] == [3, 2, 1]
    assert data[2] == {
        "fleet_id": 1,
        "name": "build",
        "created_at": stamp(T0),
        "deleted_at": None,
        "director_member_id": 1,
        "monitor_member_id": None,
        "member_count": 1,
    }


def test_single_fleet_count_line(head_db: Path) -> None:
    with Db(head_db) as db:
        db.fleet("solo")
    assert call_main(["fleet", "list"])[1].startswith("1 fleet:\n")


def test_list_is_read_only(head_db: Path) -> None:
    with Db(head_db) as db:
        db.fleet("a")
    before = snapshot(head_db)
    assert run_cli("fleet", "list")[0] == 0
    assert_unchanged(before, head_db)


# --- fleet show ----------------------------------------------------------------------------------


def test_show_live_and_deleted(head_db: Path) -> None:
    with Db(head_db) as db:
        fleet = db.fleet("build", now=T0)
        fleet_id = fleet.fleet.fleet_id
    code, out, _ = call_main(["fleet", "show", str(fleet_id)])
    assert (code, out) == (
        0,
        f"fleet_id:   {fleet_id}\n"
        "name:       build\n"
        f"created_at: {stamp(T0)}\n"
        "director:   1\n"
        "monitor:    2\n"
        "members:    2\n"
        "loop:       never started\n"  # docs/cli.md §2.5: the loop and the panes
        "panes:      not checked: not inside a tmux session (TMUX is not set)\n"
        "problems:   the monitor loop is not running: no scheduled wakes; run "
        f"'cafleet monitor start {fleet_id}'\n",
    )
    assert call_main(["fleet", "delete", str(fleet_id), "--keep-panes"])[0] == 0
    deleted_at = query(head_db, "SELECT deleted_at FROM fleets WHERE fleet_id = ?", (fleet_id,))[0][
        0
    ]
    code, out, _ = call_main(["fleet", "show", str(fleet_id)])
    assert out == (
        f"fleet_id:   {fleet_id}\n"
        "name:       build\n"
        f"created_at: {stamp(T0)}\n"
        f"deleted_at: {deleted_at}\n"
        "director:   1\n"
        "monitor:    -\n"
        "members:    0\n"
        "loop:       stopped (fleet deleted)\n"  # not "never started": its delete stopped it
    )
    code, out, _ = call_main(["fleet", "show", str(fleet_id), "--json"])
    assert json.loads(out) == {
        "fleet_id": fleet_id,
        "name": "build",
        "created_at": stamp(T0),
        "deleted_at": deleted_at,
        "director_member_id": 1,
        "monitor_member_id": None,
        "member_count": 0,
        "loop": {
            "state": "stopped",
            "pid": None,
            "pid_running": None,
            "started_at": None,
            "last_tick_at": None,
            "heartbeat_age": None,
            "tick_seconds": None,
            "held": False,
            "log_path": f"{head_db}.monitor-{fleet_id}.log",
        },
        "panes": [],
        "received": [],
        "problems": [],  # a deleted fleet has nothing left to fix
    }


def test_show_unknown(head_db: Path) -> None:
    before = snapshot(head_db)
    assert run_cli("fleet", "show", "77") == (1, "", "Error: fleet 77 not found\n")
    assert_unchanged(before, head_db)


# --- fleet delete --------------------------------------------------------------------------------


def test_delete_deregisters_keeps_messages(head_db: Path) -> None:
    with Db(head_db) as db:
        fleet = db.fleet("build")
        fleet_id = fleet.fleet.fleet_id
        worker = db.member(fleet_id, "coder")
        db.member(fleet_id, "pending", pane=None)
        db.send(fleet.director.member_id, worker.member_id, "hello")
        db.broadcast(worker.member_id, "all")
        other = db.fleet("other")
    sql(
        head_db,
        f"INSERT INTO monitor_runtime (fleet_id, pid, started_at, last_tick_at) "
        f"VALUES ({fleet_id}, 999999, 'x', 'x')",
    )
    messages = query(head_db, "SELECT * FROM messages ORDER BY message_id")
    # Outside tmux the panes cannot be killed: refused, nothing changed.
    before = snapshot(head_db)
    assert run_cli("fleet", "delete", str(fleet_id)) == (
        1,
        "",
        f"Error: cannot kill the panes of fleet {fleet_id}: not inside a tmux session (TMUX is "
        "not set); run the command inside the fleet's tmux server, or pass --keep-panes to "
        "leave the panes running\n",
    )
    assert_unchanged(before, head_db)
    d_pane = fleet.director.placement.mux_pane_id  # type: ignore[union-attr]
    m_pane = fleet.monitor.placement.mux_pane_id  # type: ignore[union-attr]
    w_pane = worker.placement.mux_pane_id  # type: ignore[union-attr]
    d, m, w = fleet.director.member_id, fleet.monitor.member_id, worker.member_id
    code, out, err = run_cli("fleet", "delete", str(fleet_id), "--keep-panes")
    assert (code, err) == (0, "")
    assert out == (
        f"Deleted fleet {fleet_id}. Deregistered 4 members.\n"
        "  member_id  name      pane_id    pane\n"
        "  ---------  --------  ---------  -------------------------------------\n"
        f"  {d}          Director  {d_pane:<9}  not killed (the root Director's pane)\n"
        f"  {m}          monitor   {m_pane:<9}  kept (--keep-panes)\n"
        f"  {w}          coder     {w_pane:<9}  kept (--keep-panes)\n"
        f"  {w + 1}          pending   (pending)  -\n"
    )
    assert query(
        head_db,
        "SELECT count(*) FROM members WHERE fleet_id = ? AND status = 'active'",
        (fleet_id,),
    ) == [(0,)]
    assert query(
        head_db,
        "SELECT count(*) FROM member_placements p JOIN members m USING (member_id) "
        "WHERE m.fleet_id = ?",
        (fleet_id,),
    ) == [(0,)]
    assert query(
        head_db, "SELECT count(*) FROM monitor_runtime WHERE fleet_id = ?", (fleet_id,)
    ) == [(0,)]
    assert query(head_db, "SELECT * FROM messages ORDER BY message_id") == messages
    # the other fleet is untouched
    assert query(
        head_db,
        "SELECT count(*) FROM members WHERE fleet_id = ? AND status = 'active'",
        (other.fleet.fleet_id,),
    ) == [(2,)]


def test_a_second_delete_is_refused(head_db: Path) -> None:
    """A fleet already deleted: `fleet <id> is deleted` (exit 1, code `deleted`), nothing
    changed, instead of a silent exit 0."""
    with Db(head_db) as db:
        fleet_id = db.fleet("gone").fleet.fleet_id
    assert run_cli("fleet", "delete", str(fleet_id), "--keep-panes")[0] == 0
    before = snapshot(head_db)
    code, out, err = run_cli("fleet", "delete", str(fleet_id), "--json")
    assert (code, out) == (1, "")
    assert json.loads(err) == {
        "error": {"code": "deleted", "message": f"fleet {fleet_id} is deleted"}
    }
    assert run_cli("fleet", "delete", str(fleet_id)) == (
        1,
        "",
        f"Error: fleet {fleet_id} is deleted\n",
    )
    assert_unchanged(before, head_db)


def test_delete_one_member_plural(head_db: Path) -> None:
    with Db(head_db) as db:
        fleet = db.fleet()
        db.deregister(fleet.monitor.member_id)
    code, out, _ = call_main(["fleet", "delete", str(fleet.fleet.fleet_id), "--keep-panes"])
    assert out.startswith(f"Deleted fleet {fleet.fleet.fleet_id}. Deregistered 1 member.\n")


def test_delete_unknown(head_db: Path) -> None:
    before = snapshot(head_db)
    assert run_cli("fleet", "delete", "5") == (1, "", "Error: fleet 5 not found\n")
    assert_unchanged(before, head_db)


def _pane_lock_file(db_dir: Path, session: str, pane: str) -> Path:
    from cafleet.mux import PaneKey
    from cafleet.mux.locks import pane_lock_path

    return Path(pane_lock_path(str(db_dir), PaneKey("tmux", session, pane)))


@pytest.mark.parametrize("held", ["director", "worker"])
def test_delete_with_a_held_pane_lock(head_db: Path, held: str) -> None:
    """79: the lock message names that placement's member; unchanged; the lock is tried once."""
    with Db(head_db) as db:
        fleet = db.fleet("build", director_pane=FakePane("s", "@1", "%1"))
        worker = db.member(fleet.fleet.fleet_id, "coder", pane="%9")
    member_id = fleet.director.member_id if held == "director" else worker.member_id
    pane = "%1" if held == "director" else "%9"
    lock = _pane_lock_file(head_db.parent, "s", pane)
    holder = hold_flock(lock, 30)
    try:
        before = snapshot(head_db)
        start = time.monotonic()
        proc = start_cli(
            "fleet",
            "delete",
            str(fleet.fleet.fleet_id),
            "--keep-panes",
            env={"CAFLEET_PANE_LOCK_TIMEOUT": "1"},
        )
        # The wait is timed from the moment the delete opens the held lock file, so the
        # interpreter's start-up (seconds on a loaded machine) is not counted against it.
        retry_until(
            lambda: holds_open(proc.pid, lock) or proc.poll() is not None, timeout=30, interval=0.01
        )
        waiting = time.monotonic()
        out_b, err_b = proc.communicate(timeout=60)
        elapsed = time.monotonic() - start
        waited = time.monotonic() - waiting
        code, out, err = proc.returncode, out_b.decode(), err_b.decode()
    finally:
        holder.kill()
        holder.wait()
    assert (code, out) == (1, "")
    assert err == (
        f"Error: member {member_id}'s pane is receiving another keystroke; retry in a few seconds\n"
    )
    assert elapsed >= 1.0  # spawn to exit: at least the 1 s lock wait
    assert waited < 5.0, waited  # from the wait's start: 1 s, then a prompt exit (not 30 s)
    assert_unchanged(before, head_db)
    # once the lock is free, the delete goes through
    assert run_cli("fleet", "delete", str(fleet.fleet.fleet_id), "--keep-panes")[0] == 0


def test_delete_releases_its_locks(head_db: Path) -> None:
    with Db(head_db) as db:
        fleet = db.fleet("build", director_pane=FakePane("s", "@1", "%1"))
    assert run_cli("fleet", "delete", str(fleet.fleet.fleet_id), "--keep-panes")[0] == 0
    from cafleet.mux import PaneKey
    from cafleet.mux.locks import try_pane_lock

    lock = try_pane_lock(str(head_db.parent), PaneKey("tmux", "s", "%1"))
    assert lock is not None
    lock.release()
