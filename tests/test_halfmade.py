"""A killed command leaves nothing half-made (docs/cli.md §2.7, §2.10; docs/worktrees.md §3).

Real git repositories, the private tmux server with fake agents, and kill -9 at the moments that
matter: `member create --worktree` after its worktree was made (before the spawn) and right after
the spawn (before the pane id is recorded), both by the tmux shim's `kill_caller_after`; `member
delete` after the deregistration, before `git worktree remove`, by a `git` first on PATH that
blocks there until the test kills the command. `fleet show`, `doctor` and the next command that
touches the member find each, and running the command again completes it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.fleet_helpers import FleetIds, create_fleet, ok, stop_loop
from tests.git_helpers import branches, init_repo
from tests.harness.fixtures import TmuxHarness
from tests.harness.util import retry_until, start_record

pytestmark = pytest.mark.tmux


@pytest.fixture
def repo(tmux_db: TmuxHarness) -> Path:
    return init_repo(tmux_db.project_dir)


@pytest.fixture
def fleet(tmux_db: TmuxHarness, repo: Path) -> FleetIds:
    ids = create_fleet(tmux_db)
    stop_loop(tmux_db, ids.fleet_id)
    return ids


CREATE = ("member", "create", "--name", "alice", "--description", "d", "--worktree", "hi")


def killed_create(h: TmuxHarness, fleet_id: int, rule: dict[str, Any]) -> int:
    """Run `member create --worktree` until the shim SIGKILLs it at ``rule``; the member id."""
    h.set_faults([{**rule, "action": "kill_caller_after", "times": 1}])
    proc = h.popen_cli(*CREATE[:2], "--fleet-id", str(fleet_id), *CREATE[2:])
    assert proc.wait(timeout=60) == -signal.SIGKILL, proc.communicate()
    h.clear_faults()
    rows = h.sqlite(
        "SELECT m.member_id, m.status, p.mux_pane_id FROM members m "
        "JOIN member_placements p USING (member_id) WHERE m.name = 'alice'"
    )
    assert len(rows) == 1 and rows[0][1:] == ("active", None), rows  # active, pending
    return int(rows[0][0])


def problems(h: TmuxHarness, fleet_id: int) -> list[dict[str, Any]]:
    data = json.loads(ok(h.cli("fleet", "show", str(fleet_id), "--json")).stdout)
    return [p for p in data["problems"] if p["kind"] != "loop"]


def doctor_problems(h: TmuxHarness, fleet_id: int) -> tuple[bool, list[str]]:
    fleets = json.loads(h.cli("doctor", "--json").stdout)["fleets"]
    mine = next(f for f in fleets["fleets"] if f["fleet_id"] == fleet_id)
    return fleets["ok"], [p["line"] for p in mine["problems"] if p["kind"] != "loop"]


def test_create_killed_after_its_worktree_is_finished_by_running_it_again(
    tmux_db: TmuxHarness, repo: Path, fleet: FleetIds
) -> None:
    h, f = tmux_db, fleet.fleet_id
    panes = h.live_panes()
    m = killed_create(h, f, {"command": "display-message", "contains": "window_panes"})
    path = str(repo / ".cafleet" / "worktrees" / f"{f}-alice")
    assert Path(path).is_dir() and f"cafleet/{f}-alice" in branches(repo)
    assert h.live_panes() == panes  # killed before the spawn

    # fleet show, member list and doctor name it, and the command that finishes it.
    line = f"member {m} (alice) has no pane: the 'cafleet member create' (pid "
    [found] = problems(h, f)
    assert found["kind"] == "half_made" and found["line"].startswith(line), found
    assert found["line"].endswith(
        f"was interrupted; run 'cafleet member respawn {m}' (or remove it: "
        f"'cafleet member delete {m}')"
    )
    assert f"problem: {found['line']}" in ok(h.cli("member", "list", str(f))).stdout
    healthy, lines = doctor_problems(h, f)
    assert not healthy and lines == [found["line"]]

    # The same command again completes it: the same member, its worktree, one agent.
    r = ok(h.cli(*CREATE[:2], "--fleet-id", str(f), *CREATE[2:]))
    first, worktree, note = r.stdout.splitlines()
    assert first.startswith(f"{m} alice agent=claude pane=%"), r.stdout
    assert worktree == f"worktree: {path} (branch cafleet/{f}-alice from main)"
    assert note == "(finished the interrupted 'member create' that registered it)"
    pane = first.rsplit("pane=", 1)[1]
    assert start_record(pane)["cwd"] == path
    assert h.sqlite("SELECT count(*) FROM members WHERE name = 'alice'") == [(1,)]
    assert h.live_panes() - panes == {pane}  # one agent
    assert problems(h, f) == []
    # Once whole, running it again is refused as any create of an existing branch is.
    again = h.cli(*CREATE[:2], "--fleet-id", str(f), *CREATE[2:])
    assert again.returncode == 1 and "already exists" in again.stderr


def test_create_killed_after_its_spawn_keeps_one_agent(
    tmux_db: TmuxHarness, repo: Path, fleet: FleetIds
) -> None:
    """Killed between the spawn and the patch, the agent already runs in an unrecorded pane:
    `member respawn` makes that pane the member's instead of starting a second agent."""
    h, f = tmux_db, fleet.fleet_id
    panes = h.live_panes()
    m = killed_create(h, f, {"command": "split-window"})
    [orphan] = h.live_panes() - panes
    start_record(orphan)
    [found] = problems(h, f)
    assert found["fix"] == f"cafleet member respawn {m}"

    r = ok(h.cli("member", "respawn", str(m)))
    assert r.stdout == (
        f"Respawned member alice ({m}) in pane {orphan} (was pending: its interrupted create "
        "finished; agent claude).\n"
    )
    assert h.sqlite("SELECT mux_pane_id FROM member_placements WHERE member_id = ?", m) == [
        (orphan,)
    ]
    assert h.live_panes() - panes == {orphan}
    assert problems(h, f) == []


def test_delete_of_a_half_made_member_removes_its_pane_worktree_and_branch(
    tmux_db: TmuxHarness, repo: Path, fleet: FleetIds
) -> None:
    h, f = tmux_db, fleet.fleet_id
    panes = h.live_panes()
    before = branches(repo)
    m = killed_create(h, f, {"command": "split-window"})
    [orphan] = h.live_panes() - panes
    path = repo / ".cafleet" / "worktrees" / f"{f}-alice"
    # Commands that need its pane say what happened and what finishes it.
    [found] = problems(h, f)
    for command in (("ping", str(m)), ("prompt", str(m), "x"), ("capture", str(m))):
        r = h.cli("member", *command)
        assert (r.returncode, r.stderr) == (1, f"Error: {found['line']}\n"), command
    r = ok(h.cli("member", "delete", str(m)))
    assert r.stdout == (
        f"Member deleted.\n  member_id: {m}\n  pane_id:   {orphan} (killed)\n"
        f"  worktree:  removed {path} (its branch cafleet/{f}-alice deleted: no commits beyond "
        "main)\n"
    )
    assert h.live_panes() == panes and not path.exists() and branches(repo) == before
    assert problems(h, f) == []


def blocking_git(h: TmuxHarness, at: str) -> tuple[dict[str, str], Path]:
    """A `git` first on PATH that, for a command containing ``at``, writes its pid to the
    returned file and waits to be killed; every other command is the real git."""
    real = subprocess.run(["which", "git"], capture_output=True, text=True, check=True)
    wrapper_dir = h.dir / "git-wrapper"
    wrapper_dir.mkdir()
    mark = h.dir / "git-blocked"
    script = wrapper_dir / "git"
    script.write_text(
        "#!/bin/sh\n"
        f'case " $* " in *" {at} "*) echo $$ > "{mark}"; while :; do sleep 1; done;; esac\n'
        f'exec {real.stdout.strip()} "$@"\n'
    )
    script.chmod(0o755)
    return {"PATH": f"{wrapper_dir}{os.pathsep}{h.env['PATH']}"}, mark


def test_delete_killed_before_git_worktree_remove_is_completed_by_running_it_again(
    tmux_db: TmuxHarness, repo: Path, fleet: FleetIds
) -> None:
    h, f = tmux_db, fleet.fleet_id
    before = branches(repo)
    r = ok(h.cli(*CREATE[:2], "--fleet-id", str(f), *CREATE[2:]))
    m = int(r.stdout.split()[0])
    path = repo / ".cafleet" / "worktrees" / f"{f}-alice"
    env, mark = blocking_git(h, "worktree remove")
    proc = h.popen_cli("member", "delete", str(m), env=env)
    retry_until(lambda: mark.exists() and mark.read_text().strip(), timeout=60)
    proc.send_signal(signal.SIGKILL)
    os.kill(int(mark.read_text()), signal.SIGKILL)
    assert proc.wait(timeout=10) == -signal.SIGKILL
    # Deregistered, its pane killed; its worktree and branch still there.
    assert h.sqlite("SELECT status FROM members WHERE member_id = ?", m) == [("deregistered",)]
    assert path.is_dir() and f"cafleet/{f}-alice" in branches(repo)

    line = (
        f"the worktree {path} (branch cafleet/{f}-alice) of deleted member {m} (alice) is still "
        f"there; run 'cafleet worktree remove {path}' (add --discard to drop its changes)"
    )
    assert [p["line"] for p in problems(h, f)] == [line]
    assert doctor_problems(h, f) == (False, [line])

    r = ok(h.cli("member", "delete", str(m)))
    assert r.stdout == (
        f"Member deleted.\n  member_id: {m}\n  pane_id:   (already deregistered)\n"
        f"  worktree:  removed {path} (its branch cafleet/{f}-alice deleted: no commits beyond "
        "main)\n"
    )
    assert not path.exists() and branches(repo) == before
    assert problems(h, f) == []
    # Nothing left: a further delete is the plain refusal.
    again = h.cli("member", "delete", str(m))
    assert (again.returncode, again.stderr) == (1, f"Error: member {m} is deregistered\n")


def test_fleet_delete_kills_the_pane_a_killed_create_spawned(
    tmux_db: TmuxHarness, repo: Path, fleet: FleetIds
) -> None:
    h, f = tmux_db, fleet.fleet_id
    panes = h.live_panes()
    m = killed_create(h, f, {"command": "split-window"})
    [orphan] = h.live_panes() - panes
    data = json.loads(ok(h.cli("fleet", "delete", str(f), "--json")).stdout)
    assert {"member_id": m, "pane_id": orphan, "pane_status": "killed"} in data["panes"]
    assert orphan not in h.live_panes()
    assert [t["status"] for t in data["worktrees"]] == ["removed"]


@pytest.mark.parametrize(
    "rule",
    [{"command": "display-message", "contains": "window_panes"}, {"command": "split-window"}],
    ids=["before-the-spawn", "after-the-spawn"],
)
def test_fleet_restore_finishes_a_half_made_member(
    tmux_db: TmuxHarness, repo: Path, fleet: FleetIds, rule: dict[str, Any]
) -> None:
    """`fleet restore` finishes the create a kill -9 interrupted, as `member respawn` does:
    the agent the killed create spawned becomes the member's, else one is started in its
    worktree; one agent either way, and a second restore leaves it alone."""
    h, f = tmux_db, fleet.fleet_id
    panes = h.live_panes()
    m = killed_create(h, f, rule)
    orphans = h.live_panes() - panes

    r = ok(h.cli("fleet", "restore", str(f), "--json", timeout=120))
    data = json.loads(r.stdout)
    [pane] = h.live_panes() - panes  # one agent
    if orphans:
        assert orphans == {pane}
    outcome = next(o for o in data["members"] if o["member_id"] == m)
    assert (outcome["outcome"], outcome["detail"]) == ("finished", f"pane {pane}"), data
    path = str(repo / ".cafleet" / "worktrees" / f"{f}-alice")
    assert start_record(pane)["cwd"] == path
    assert h.sqlite("SELECT mux_pane_id FROM member_placements WHERE member_id = ?", m) == [(pane,)]
    assert problems(h, f) == []
    again = ok(h.cli("fleet", "restore", str(f), timeout=120)).stdout
    assert f"member {m} (alice): alive in pane {pane}, left alone" in again.splitlines()
    assert h.live_panes() - panes == {pane}


def test_respawn_resume_of_a_half_made_member_is_honoured(
    tmux_db: TmuxHarness, repo: Path, fleet: FleetIds
) -> None:
    """`member respawn --resume` of a half-made member continues its known session (in that
    session's directory), and without one is refused as for any member: nothing spawned,
    nothing written."""
    from tests.fleet_helpers import sql_write
    from tests.test_sessions_cli import claude_record

    h, f = tmux_db, fleet.fleet_id
    panes = h.live_panes()
    m = killed_create(h, f, {"command": "display-message", "contains": "window_panes"})
    before = h.sqlite("SELECT * FROM member_placements ORDER BY member_id")

    refused = h.cli("member", "respawn", "--resume", str(m))
    assert (refused.returncode, refused.stderr) == (
        1,
        f"Error: member {m} has no known agent session to resume (none was learned from its "
        f"agent's records); run 'cafleet member respawn {m}' to start it afresh\n",
    )
    assert h.sqlite("SELECT * FROM member_placements ORDER BY member_id") == before
    assert h.live_panes() == panes

    path = repo / ".cafleet" / "worktrees" / f"{f}-alice"
    claude_record("dddddddd-0001", "hi", path)
    sql_write(
        h, "UPDATE member_spawns SET agent_session_id = 'dddddddd-0001' WHERE member_id = ?", m
    )
    r = ok(h.cli("member", "respawn", "--resume", str(m)))
    [pane] = h.live_panes() - panes
    assert r.stdout == (
        f"Respawned member alice ({m}) in pane {pane} (was pending: its interrupted create "
        "finished; agent claude; resumed session dddddddd-0001).\n"
    )
    started = start_record(pane)
    assert started["argv"][-2:] == ["--resume", "dddddddd-0001"]
    assert started["cwd"] == str(path)
    assert problems(h, f) == []
