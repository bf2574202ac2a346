"""Fleet lifecycle against a private tmux server (docs/cli.md §2.3, §2.6):
`fleet delete` kills the fleet's panes under the pane locks and leaves no process of the fleet
(checked in /proc); one live fleet per Director pane."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from tests.fleet_helpers import (
    create_fleet,
    create_member,
    ok,
    runtime_row,
    stop_loop,
    table_dump,
)
from tests.harness.fixtures import TmuxHarness
from tests.harness.util import (
    command_records,
    hold_pane_lock,
    pid_alive,
    retry_until,
    start_record,
)
from tests.storage_helpers import snapshot

pytestmark = pytest.mark.tmux

# A member whose agent leaves a child behind that ignores SIGHUP and is no longer in the pane's
# process tree (its shell exited): only the pane's environment still names it.
STUBBORN = (
    "stubborn {member_id}\n"
    "#fake run sh -c 'trap \"\" HUP; sleep 300 </dev/null >/dev/null 2>&1 & echo $!'"
)


def _stubborn_pid(pane: str) -> int:
    record = retry_until(
        lambda: next((r for r in command_records(pane) if r["source"] == "run"), None),
        timeout=20,
        message=f"{pane} ran nothing",
    )
    assert record["rc"] == 0, record
    return int(record["stdout"].strip())


def _row(member_id: int, name: str, pane: str, status: str) -> str:
    return f"  {str(member_id).ljust(9)}  {name.ljust(8)}  {pane.ljust(7)}  {status}"


def _header(status_width: int) -> list[str]:
    return [
        "  member_id  name      pane_id  pane",
        f"  ---------  --------  -------  {'-' * status_width}",
    ]


def test_fleet_delete_kills_every_member_pane_and_process(tmux_db: TmuxHarness) -> None:
    h = tmux_db
    ids = create_fleet(h)
    f = ids.fleet_id
    a, a_pane = create_member(h, f, "alpha", STUBBORN)
    b, b_pane = create_member(h, f, "beta", "plain {member_id}", "--coding-agent", "codex")
    stubborn = _stubborn_pid(a_pane)
    agents = {pane: start_record(pane)["pid"] for pane in (ids.monitor_pane, a_pane, b_pane)}
    director_agent = start_record(h.director_pane)["pid"]
    fleet_pids = [*agents.values(), stubborn, ids.loop_pid]
    assert all(pid_alive(p) for p in fleet_pids)
    calls = len(h.shim_calls())

    result = ok(h.cli("fleet", "delete", str(f)))

    # The moment the command returned, no process of the fleet runs (agents, the child that
    # ignores SIGHUP, the loop); the Director's pane and agent are untouched.
    assert [p for p in fleet_pids if pid_alive(p)] == []
    assert pid_alive(director_agent) and h.director_pane in h.live_panes()
    assert not {ids.monitor_pane, a_pane, b_pane} & h.live_panes()
    director_status = "not killed (the root Director's pane)"
    assert result.stdout.splitlines() == [
        f"Deleted fleet {f}. Deregistered 4 members.",
        *_header(len(director_status)),
        _row(ids.director_id, "Director", h.director_pane, director_status),
        _row(ids.monitor_id, "monitor", ids.monitor_pane, "killed"),
        _row(a, "alpha", a_pane, "killed"),
        _row(b, "beta", b_pane, "killed"),
        f"Stopped monitor loop (pid {ids.loop_pid}).",
    ]
    assert result.stderr == ""
    killed = [c["argv"] for c in h.shim_calls()[calls:] if c["command"] == "kill-pane"]
    assert sorted(k[-1] for k in killed) == sorted([ids.monitor_pane, a_pane, b_pane])
    assert h.sqlite("SELECT COUNT(*) FROM members WHERE status = 'active'") == [(0,)]
    assert h.sqlite("SELECT COUNT(*) FROM member_placements") == [(0,)]
    assert runtime_row(h, f) is None

    # A repeat is refused (the fleet is deleted) and kills nothing.
    calls = len(h.shim_calls())
    again = h.cli("fleet", "delete", str(f))
    assert (again.returncode, again.stdout, again.stderr) == (
        1,
        "",
        f"Error: fleet {f} is deleted\n",
    )
    assert not any(c["command"] == "kill-pane" for c in h.shim_calls()[calls:])


def test_fleet_delete_keep_panes_kills_nothing(tmux_db: TmuxHarness) -> None:
    h = tmux_db
    ids = create_fleet(h)
    f = ids.fleet_id
    a, a_pane = create_member(h, f, "alpha")
    agent = start_record(a_pane)["pid"]
    calls = len(h.shim_calls())
    result = ok(h.cli("fleet", "delete", str(f), "--keep-panes", "--json"))
    assert json.loads(result.stdout) == {
        "fleet_id": f,
        "deregistered_count": 3,
        "panes": [
            {"member_id": ids.director_id, "pane_id": h.director_pane, "pane_status": "director"},
            {"member_id": ids.monitor_id, "pane_id": ids.monitor_pane, "pane_status": "kept"},
            {"member_id": a, "pane_id": a_pane, "pane_status": "kept"},
        ],
        "loop_stopped_pid": None,
    }
    assert {ids.monitor_pane, a_pane} <= h.live_panes() and pid_alive(agent)
    assert not any(c["command"] == "kill-pane" for c in h.shim_calls()[calls:])
    # The loop is not signalled; it notices the deletion at its next tick (5 s).
    retry_until(lambda: not pid_alive(ids.loop_pid), timeout=20, message="the loop still runs")


def test_fleet_delete_waits_for_the_pane_locks(tmux_db: TmuxHarness) -> None:
    """The kills happen under the pane locks: a held member lock refuses the delete (lock
    timeout 1 s) before anything is killed or written."""
    h = tmux_db
    ids = create_fleet(h)
    a, a_pane = create_member(h, ids.fleet_id, "alpha")
    from cafleet.mux import PaneKey

    before, panes, calls = table_dump(h), h.live_panes(), len(h.shim_calls())
    with hold_pane_lock(h.db_path.parent, PaneKey("tmux", h.session_name, a_pane)):
        result = h.cli("fleet", "delete", str(ids.fleet_id), env={"CAFLEET_PANE_LOCK_TIMEOUT": "1"})
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        f"Error: member {a}'s pane is receiving another keystroke; retry in a few seconds\n"
    )
    assert table_dump(h) == before and h.live_panes() == panes
    assert not any(c["command"] == "kill-pane" for c in h.shim_calls()[calls:])
    assert pid_alive(ids.loop_pid)


def test_one_live_fleet_per_director_pane(tmux_db: TmuxHarness) -> None:
    h = tmux_db
    ids = create_fleet(h, name="first")
    stop_loop(h, ids.fleet_id)  # a live loop's heartbeats would change the file meanwhile
    ok(h.cli("fleet", "list"))  # any command leaves the (empty) -wal behind: the steady state
    state, panes, calls = snapshot(h.db_path), h.live_panes(), len(h.shim_calls())
    for extra in ([], ["--json"]):
        result = h.cli("fleet", "create", "--name", "second", "--coding-agent", "claude", *extra)
        assert (result.returncode, result.stdout) == (1, "")
        message = (
            f"pane {h.director_pane} is already the root Director of live fleet "
            f"{ids.fleet_id} (first); delete it first ('cafleet fleet delete {ids.fleet_id}') "
            "or use another pane"
        )
        if extra:  # --json: one error object on stderr (docs/cli.md's one error style)
            assert json.loads(result.stderr) == {"error": {"code": "error", "message": message}}
        else:
            assert result.stderr == f"Error: {message}\n"
    assert snapshot(h.db_path) == state and h.live_panes() == panes
    assert not any(c["command"] == "split-window" for c in h.shim_calls()[calls:])

    # Another pane may direct a fleet of its own meanwhile.
    other = h.spawn_fake("claude")
    second = ok(
        h.cli(
            "fleet", "create", "--name", "other", "--coding-agent", "claude",
            env={"TMUX_PANE": other},
        )
    )  # fmt: skip
    assert second.stdout.startswith(f"{ids.fleet_id + 1} director=")

    # Once the first fleet is deleted, its pane may start a new one.
    ok(h.cli("fleet", "delete", str(ids.fleet_id)))
    third = create_fleet(h, name="third")
    assert third.fleet_id == ids.fleet_id + 2


def test_racing_creates_in_one_pane_make_one_fleet(tmux_db: TmuxHarness) -> None:
    """Two `fleet create` started together in one pane: the bootstrap transaction re-checks the
    pane, so exactly one fleet exists and the loser printed the refusal."""
    h = tmux_db
    env = dict(h.env)
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "cafleet", "fleet", "create", "--name", f"r{i}",
             "--coding-agent", "claude"],
            env=env, cwd=str(h.project_dir), stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for i in range(2)
    ]  # fmt: skip
    for p in procs:
        h.track(p)
    results = [(p.wait(timeout=120), *p.communicate()) for p in procs]
    codes = sorted(r[0] for r in results)
    assert codes == [0, 1], results
    loser = next(r for r in results if r[0] == 1)
    assert loser[2].startswith(f"Error: pane {h.director_pane} is already the root Director of")
    assert h.sqlite("SELECT COUNT(*) FROM fleets WHERE deleted_at IS NULL") == [(1,)]
    assert h.sqlite("SELECT COUNT(*) FROM members WHERE status = 'active'") == [(2,)]


def test_stop_fleet_loop_only_signals_that_fleets_loop() -> None:
    """*(unit)* A pid that is not `cafleet monitor <F>` is never signalled."""
    from cafleet.workflows.teardown import _is_loop_of, stop_fleet_loop

    assert _is_loop_of(["/usr/bin/python3", "-m", "cafleet", "monitor", "7"], 7)
    assert _is_loop_of(["/venv/bin/python", "/venv/bin/cafleet", "monitor", "--tick", "1", "7"], 7)
    assert not _is_loop_of(["/usr/bin/python3", "-m", "cafleet", "monitor", "17"], 7)
    assert not _is_loop_of(["sleep", "monitor", "7"], 7)
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        assert stop_fleet_loop(7, sleeper.pid) is False
        assert sleeper.poll() is None
    finally:
        sleeper.kill()
        sleeper.wait()
    assert stop_fleet_loop(7, None) is False


def test_pane_processes_and_end_processes(tmp_path: object) -> None:
    """*(unit, real /proc)* The pane's tree and every process whose environment names the pane
    are found; `end_processes` escalates to SIGKILL for one that ignores SIGTERM."""
    from cafleet.procs import alive, end_processes, identify, pane_processes

    env = dict(os.environ, TMUX="/tmp/fake-socket,1,0", TMUX_PANE="%4242")
    script = "trap '' HUP TERM; sleep 300 </dev/null >/dev/null 2>&1 & echo $!; exec sleep 300"
    root = subprocess.Popen(["sh", "-c", script], env=env, stdout=subprocess.PIPE, text=True)
    assert root.stdout is not None
    child = int(root.stdout.readline())
    other = subprocess.Popen(["sleep", "300"], env=dict(env, TMUX_PANE="%1"))
    try:
        found = pane_processes("/tmp/fake-socket", {"%4242": root.pid})["%4242"]
        pids = {p.pid for p in found}
        assert {root.pid, child} <= pids and other.pid not in pids
        left = end_processes(found, grace=0.2, term_grace=0.3, kill_grace=5.0)
        assert left == []
        assert not any(alive(p) for p in found)
        assert identify(other.pid) is not None  # untouched
    finally:
        for proc in (root, other):
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        if pid_alive(child):
            os.kill(child, signal.SIGKILL)
