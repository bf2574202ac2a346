"""Review and merge with real agents (docs/cli.md §2.37): two real Claude Code members, driven
by the scripted model (tests/harness/scripted_model.py), each in its own worktree of a real
repository, change the same line of shared.txt for their tasks and mark them done. The first
task merges; the second conflicts, so `task merge` sends it back: the member is told the file
and what to do, merges the target into its branch (keeping both lines), commits and marks the
task done again, and the second merge brings both changes home. Judged by the board, the
branches, the files and the task's thread."""

from __future__ import annotations

import json
import os
import re

import pytest

from tests.fleet_helpers import create_fleet, ok
from tests.git_helpers import git
from tests.harness.fixtures import TmuxHarness
from tests.harness.real_member import RealMember
from tests.harness.scripted_model import ScriptedModel
from tests.harness.util import retry_until
from tests.test_worktrees import CREATED, make_repo

pytestmark = [pytest.mark.real_agent, pytest.mark.tmux]


def _member(h: TmuxHarness, model: ScriptedModel, fleet_id: int, name: str) -> RealMember:
    member = RealMember(h, "claude", name, model_url=model.base_url(name), cwd=h.project_dir)
    who = {k: member.real.env[k] for k in ("HOME", "CLAUDE_CONFIG_DIR")}
    ok(h.cli("setup", "--coding-agent", "claude", env=who))
    env = {"PATH": os.pathsep.join([str(member.bin_dir), h.env["PATH"]])}
    result = ok(
        h.cli("member", "create", "--fleet-id", str(fleet_id), "--name", name,
              "--description", f"real claude {name}", "--coding-agent", "claude", "--worktree",
              env=env, timeout=120)
    )  # fmt: skip
    m = CREATED.fullmatch(result.stdout)
    assert m, result.stdout
    member.member_id, member.pane = int(m.group(1)), m.group(4)
    member.real.pane = member.pane
    return member


def _state(h: TmuxHarness, task_id: int) -> tuple[str, str | None]:
    (row,) = h.sqlite("SELECT state, git_head FROM tasks WHERE task_id = ?", task_id)
    return row[0], row[1]


def test_two_real_members_conflict_and_the_second_fixes_its_branch(
    tmux_db: TmuxHarness, model_server: ScriptedModel
) -> None:
    h = tmux_db
    repo = make_repo(h.project_dir)
    ids = create_fleet(h)
    f = ids.fleet_id
    members: dict[str, RealMember] = {}
    try:
        for name in ("alice", "bob"):
            members[name] = _member(h, model_server, f, name)
        tasks = {}
        for name, member in members.items():
            body = f"run: echo {name} >> shared.txt && git commit -qam {name}"
            made = json.loads(ok(h.cli(
                "task", "create", "--fleet-id", str(f), "--title", f"{name}'s line",
                "--body", body, "--assign", str(member.member_id), "--json",
            )).stdout)  # fmt: skip
            tasks[name] = made["task"]["task_id"]
        ta, tb = tasks["alice"], tasks["bob"]
        for t in tasks.values():
            retry_until(lambda t=t: _state(h, t)[0] == "done" or None, timeout=300, interval=1.0,
                        message=lambda: _diagnosis(h, model_server))  # fmt: skip
        first_head = _state(h, tb)[1]
        assert first_head is not None

        ok(h.cli("task", "merge", str(ta)))
        before = git(repo, "rev-parse", "main").strip()
        failed = h.cli("task", "merge", str(tb))
        assert failed.returncode == 1, failed
        assert "conflicts in shared.txt" in failed.stderr
        assert git(repo, "rev-parse", "main").strip() == before

        # The member merges main into its branch and marks the task done again.
        retry_until(
            lambda: (_state(h, tb)[0] == "done" and _state(h, tb)[1] != first_head) or None,
            timeout=300, interval=1.0, message=lambda: _diagnosis(h, model_server),
        )  # fmt: skip
        merged = json.loads(ok(h.cli("task", "merge", str(tb), "--json")).stdout)
        assert merged["task"]["state"] == "merged"
        main = git(repo, "rev-parse", "main").strip()
        assert merged["task"]["merge_commit"] == main
        lines = (repo / "shared.txt").read_text().splitlines()
        assert lines[0] == "line 0" and sorted(lines[1:]) == ["alice", "bob"]
        bob_branch = f"cafleet/{f}-bob"
        assert git(repo, "merge-base", "--is-ancestor", bob_branch, "main") == ""

        # The thread: the sent-back message to bob (ACKed), its report, the done notices.
        thread = json.loads(ok(h.cli("task", "show", str(tb), "--json")).stdout)["thread"]
        bob = members["bob"].member_id
        back = [m for m in thread if "was not merged" in m["text"]]
        assert len(back) == 1 and back[0]["to_member_id"] == bob, thread
        assert "Conflicting files: shared.txt" in back[0]["text"]
        assert back[0]["status"] == "completed", thread
        reports = [m["text"] for m in thread if m["from_member_id"] == bob]
        assert any(re.fullmatch(r"done \d+: merged main into my branch", r) for r in reports)
        director = [m["text"] for m in thread if m["to_member_id"] == ids.director_id]
        assert f"[cafleet] task {tb} not merged into main: conflict in shared.txt; sent back to " \
               f"member {bob}" in director  # fmt: skip
    finally:
        for member in members.values():
            member.stop()


def _diagnosis(h: TmuxHarness, model: ScriptedModel) -> str:
    from tests.fleet_helpers import pane_captures

    board = h.sqlite("SELECT task_id, state, git_head FROM tasks ORDER BY task_id")
    return f"board: {board}\n" + "\n".join(pane_captures(h))
