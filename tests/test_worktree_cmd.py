"""Worktrees left behind have a next step (docs/worktrees.md §3, docs/cli.md §2.30): `fleet
delete` names the command in the line of a worktree it kept, `cafleet worktree list` shows every
fleet's (deleted ones too), `cafleet worktree remove PATH [--discard]` removes one, and a
member's branch goes with its worktree when it has no commit beyond its base. Real git
repositories and fake-agent panes on the private tmux server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.fleet_helpers import create_fleet, ok, stop_loop, table_dump
from tests.git_helpers import branches, init_repo
from tests.harness.fixtures import TmuxHarness
from tests.harness.util import fake_run

pytestmark = pytest.mark.tmux


@pytest.fixture
def repo(tmux_db: TmuxHarness) -> Path:
    return init_repo(tmux_db.project_dir)


def create(h: TmuxHarness, fleet_id: int, name: str) -> tuple[int, str, str]:
    """`member create --worktree`: (member id, pane, worktree path)."""
    r = ok(
        h.cli(
            "member", "create", "--fleet-id", str(fleet_id), "--name", name, "--description",
            "d", "--worktree", "--json", "hi",
        )
    )  # fmt: skip
    data = json.loads(r.stdout)
    return data["member_id"], data["placement"]["mux_pane_id"], data["worktree"]["path"]


def sh(pane: str, script: str) -> None:
    rec = fake_run(pane, ["sh", "-c", script])
    assert rec["rc"] == 0, rec


def listed(h: TmuxHarness) -> dict[str, dict[str, Any]]:
    return {row["path"]: row for row in json.loads(ok(h.cli("worktree", "list", "--json")).stdout)}


def test_worktrees_a_deleted_fleet_kept_are_listed_and_removed(
    tmux_db: TmuxHarness, repo: Path
) -> None:
    h = tmux_db
    ids = create_fleet(h)
    f = ids.fleet_id
    stop_loop(h, f)
    dirty, dirty_pane, dirty_path = create(h, f, "dirty")
    done, done_pane, done_path = create(h, f, "done")
    idle, _, idle_path = create(h, f, "idle")
    sh(dirty_pane, "echo mine > untracked.txt")
    sh(done_pane, "echo work >> shared.txt && git commit -qam work")

    # Every worktree of every fleet, with its state and member.
    rows = listed(h)
    assert set(rows) == {dirty_path, done_path, idle_path}
    assert rows[dirty_path] == {
        "path": dirty_path, "branch": f"cafleet/{f}-dirty", "base": "main", "exists": True,
        "head_branch": f"cafleet/{f}-dirty", "dirty": True, "ahead": 0, "error": None,
        "fleet_id": f, "fleet_deleted": False, "member_id": dirty, "member_name": "dirty",
        "member_active": True, "left_behind": False,
    }  # fmt: skip
    # An active member's worktree is its member's: `member delete` removes it.
    before = table_dump(h)
    r = h.cli("worktree", "remove", idle_path)
    assert (r.returncode, r.stdout) == (1, "")
    assert r.stderr == (
        f"Error: {idle_path} is the worktree of member {idle} (idle), which is active; delete "
        f"the member instead: 'cafleet member delete {idle}'\n"
    )
    r = h.cli("worktree", "remove", str(repo / "elsewhere"))
    assert r.stderr == (
        f"Error: {repo / 'elsewhere'} is not a worktree cafleet made; 'cafleet worktree list' "
        "shows them\n"
    )
    assert table_dump(h) == before and Path(idle_path).is_dir()

    # fleet delete: the clean worktrees go (a branch with nothing beyond main too), the dirty
    # one stays, and its line says how to remove it later.
    r = ok(h.cli("fleet", "delete", str(f)))
    assert (
        f"Worktree of member {dirty}: kept {dirty_path} (branch cafleet/{f}-dirty): it has "
        f"uncommitted changes; remove it later with 'cafleet worktree remove {dirty_path}' "
        "(add --discard to drop its changes).\n" in r.stdout
    )
    assert (
        f"Worktree of member {done}: removed {done_path} (branch cafleet/{f}-done kept: 1 "
        "commit beyond main).\n" in r.stdout
    )
    assert (
        f"Worktree of member {idle}: removed {idle_path} (its branch cafleet/{f}-idle deleted: "
        "no commits beyond main).\n" in r.stdout
    )
    assert branches(repo) == {"main", f"cafleet/{f}-dirty", f"cafleet/{f}-done"}

    # The fleet is gone; its kept worktree is still listed, and fleet show and doctor name it.
    row = listed(h)[dirty_path]
    assert (row["fleet_deleted"], row["member_active"], row["left_behind"]) == (True, False, True)
    text = ok(h.cli("worktree", "list")).stdout.splitlines()
    assert text[0] == "1 worktree:" and text[1].split() == [
        "path", "branch", "state", "member", "fleet"
    ]  # fmt: skip
    assert text[3].split() == [
        dirty_path, f"cafleet/{f}-dirty", "dirty", str(dirty), "dirty", "(deleted)", str(f),
        "(deleted)",
    ]  # fmt: skip
    line = (
        f"the worktree {dirty_path} (branch cafleet/{f}-dirty) of deleted member {dirty} (dirty) "
        f"is still there; run 'cafleet worktree remove {dirty_path}' (add --discard to drop its "
        "changes)"
    )
    shown = ok(h.cli("fleet", "show", str(f))).stdout
    assert f"problems:   {line}\n" in shown
    doctor = json.loads(h.cli("doctor", "--json").stdout)["fleets"]
    assert not doctor["ok"] and [p["line"] for p in doctor["left_worktrees"]] == [line]

    # remove: refused while it holds changes (nothing touched), done with --discard.
    r = h.cli("worktree", "remove", dirty_path)
    assert (r.returncode, r.stdout) == (1, "")
    assert r.stderr == (
        f"Error: kept {dirty_path} (branch cafleet/{f}-dirty): it has uncommitted changes; "
        "nothing was removed (--discard removes it anyway; its changes are lost)\n"
    )
    assert Path(dirty_path, "untracked.txt").read_text() == "mine\n"
    r = ok(h.cli("worktree", "remove", dirty_path, "--discard", "--json"))
    assert json.loads(r.stdout) == {
        "member_id": dirty, "path": dirty_path, "branch": f"cafleet/{f}-dirty",
        "status": "removed", "reason": None, "branch_deleted": True, "next": None,
    }  # fmt: skip
    assert not Path(dirty_path).exists() and branches(repo) == {"main", f"cafleet/{f}-done"}
    assert ok(h.cli("worktree", "list")).stdout == "0 worktrees.\n"
    assert "problems" not in ok(h.cli("fleet", "show", str(f))).stdout
