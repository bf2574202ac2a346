"""Nothing of a deleted member keeps running (docs/runtime.md §1.10): `member delete` and `fleet
delete` end the pane's process tree and what it daemonised (double fork, setsid), found by the
pane's environment on this run of the tmux server, even once the pane itself is gone. The fake
agents leave such processes with `#fake daemon`; the real Codex's app-server daemon is
tests/test_real_reaping.py."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator

import pytest

from tests.fleet_helpers import create_fleet, create_member, ok
from tests.harness.fixtures import TmuxHarness
from tests.harness.util import fake_log, pid_alive, retry_until, start_record

pytestmark = pytest.mark.tmux

DAEMONS = "leaves daemons {member_id}\n#fake daemon"


def _leftovers(pane: str) -> list[int]:
    """The agent's own pid, its SIGHUP-ignoring child and its setsid daemon."""
    agent = start_record(pane, timeout=20)["pid"]
    record = next(r for r in fake_log(pane) if r["kind"] == "daemon")
    pids = [agent, *record["pids"]]
    assert all(pid_alive(p) for p in pids)
    return [int(p) for p in pids]


@pytest.fixture
def decoy(tmux_db: TmuxHarness) -> Iterator[subprocess.Popen[bytes]]:
    """A process whose environment names pane %2 of another run of the harness's server (same
    socket, another server pid): never one of ours."""
    h = tmux_db
    env = dict(os.environ, TMUX=f"{h.socket_path},{2**22 + 1},0", TMUX_PANE="%2")
    proc = subprocess.Popen(["sleep", "300"], env=env)
    yield proc
    proc.kill()
    proc.wait()


@pytest.mark.parametrize("agent", ["claude", "codex", "opencode"])
def test_member_delete_ends_everything_its_agent_started(
    tmux_db: TmuxHarness, agent: str, decoy: subprocess.Popen[bytes]
) -> None:
    h = tmux_db
    fleet = create_fleet(h)
    member, pane = create_member(h, fleet.fleet_id, "worker", DAEMONS, "--coding-agent", agent)
    assert pane == "%2"  # the pane the decoy names, on another run of the server
    pids = _leftovers(pane)
    others = [start_record(p)["pid"] for p in (h.director_pane, fleet.monitor_pane)]

    result = ok(h.cli("member", "delete", str(member)))

    assert f"pane_id:   {pane} (killed)" in result.stdout
    # The moment the command returned: the agent, its child and its daemon are gone.
    assert [p for p in pids if pid_alive(p)] == []
    assert all(pid_alive(p) for p in others)  # the Director's and the monitor's agents
    assert decoy.poll() is None


@pytest.mark.parametrize("command", ["member", "fleet"])
def test_a_delete_ends_what_a_gone_pane_left_running(tmux_db: TmuxHarness, command: str) -> None:
    """The agent's pane was killed outside cafleet: its agent died, the child that ignores
    SIGHUP and the daemon did not; deleting the member (or its fleet) ends them."""
    h = tmux_db
    fleet = create_fleet(h)
    member, pane = create_member(h, fleet.fleet_id, "worker", DAEMONS)
    agent, *left = _leftovers(pane)
    h.tmux("kill-pane", "-t", pane)
    retry_until(lambda: not pid_alive(agent), timeout=10, message="the agent outlived its pane")
    assert all(pid_alive(p) for p in left)

    target = str(member) if command == "member" else str(fleet.fleet_id)
    result = ok(h.cli(command, "delete", target))

    assert "already gone" in result.stdout, result.stdout
    assert [p for p in left if pid_alive(p)] == []


def test_a_process_of_another_server_run_is_never_signalled(tmux_db: TmuxHarness) -> None:
    """*(unit, real /proc)* Without the server's pid nothing is found for a gone pane; with it,
    only processes of that run of the server are."""
    from cafleet.procs import pane_processes

    h = tmux_db
    ours = subprocess.Popen(
        ["sleep", "300"], env=dict(os.environ, TMUX=f"{h.socket_path},4242,0", TMUX_PANE="%77")
    )
    theirs = subprocess.Popen(
        ["sleep", "300"], env=dict(os.environ, TMUX=f"{h.socket_path},4343,0", TMUX_PANE="%77")
    )
    try:
        assert pane_processes(h.socket_path, {}, gone=["%77"]) == {"%77": set()}
        found = pane_processes(h.socket_path, {}, gone=["%77"], server_pid=4242)["%77"]
        assert {p.pid for p in found} == {ours.pid}
    finally:
        for proc in (ours, theirs):
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()


def test_respawn_ends_what_a_gone_pane_left_running(tmux_db: TmuxHarness) -> None:
    """The agent's pane was killed outside cafleet; its child that ignores SIGHUP and its
    daemon outlived it. `member respawn` ends them before it starts the member's one agent."""
    from tests.fleet_helpers import stop_loop

    h = tmux_db
    fleet = create_fleet(h)
    stop_loop(h, fleet.fleet_id)
    member, pane = create_member(h, fleet.fleet_id, "worker", DAEMONS)
    agent, *left = _leftovers(pane)
    h.tmux("kill-pane", "-t", pane)
    retry_until(lambda: not pid_alive(agent), timeout=10, message="the agent outlived its pane")
    assert all(pid_alive(p) for p in left)
    others = [start_record(p)["pid"] for p in (h.director_pane, fleet.monitor_pane)]

    result = ok(h.cli("member", "respawn", str(member)))

    assert f"(was {pane};" in result.stdout, result.stdout
    assert [p for p in left if pid_alive(p)] == []
    new = result.stdout.split(" in pane ", 1)[1].split()[0]
    assert pid_alive(start_record(new, timeout=20)["pid"])  # the member's one agent
    assert all(pid_alive(p) for p in others)


def test_restore_ends_what_the_old_servers_panes_left_running(
    tmux_db: TmuxHarness, decoy: subprocess.Popen[bytes]
) -> None:
    """The fleet's tmux server was killed: the member's agent died with it, its child that
    ignores SIGHUP and its daemon did not. On a new server on the same socket (whose panes take
    the old ids) `fleet restore` ends them, found by the old server's pid its placement
    records, and touches nothing of the new server's panes."""
    from tests.fleet_helpers import stop_loop
    from tests.test_restart_safety import new_server

    h = tmux_db
    fleet = create_fleet(h)
    stop_loop(h, fleet.fleet_id)
    _, pane = create_member(h, fleet.fleet_id, "worker", DAEMONS)
    agent, *left = _leftovers(pane)

    ids, here = new_server(h, 3)  # %0 (the caller), %1, %2: the member's old id included
    retry_until(lambda: not pid_alive(agent), timeout=10, message="the agent outlived its server")
    assert all(pid_alive(p) for p in left) and pane in ids
    strangers = [int(h.pane_format(p, "#{pane_pid}")) for p in ids]

    result = ok(h.cli("fleet", "restore", str(fleet.fleet_id), env=here, timeout=120))

    assert "(worker): started afresh in pane %" in result.stdout, result.stdout
    assert [p for p in left if pid_alive(p)] == []
    assert all(pid_alive(p) for p in strangers)  # the new server's panes with the old ids
    assert decoy.poll() is None
