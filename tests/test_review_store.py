"""Review and merge on both dialects (docs/cli.md §2.37, docs/storage.md §3.15): what `task done`
records, the fleet's gate, a merge and a conflict through the CLI on a real git repository, the
sent-back task's messages, and the refusals that write nothing. The members here have no panes:
the messages wait in their inboxes."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from cafleet import broker
from cafleet.broker.errors import TaskRefused
from cafleet.records.tasks import GitWork
from tests.cli_helpers import run_cli
from tests.factories import Db, connect
from tests.git_helpers import git, init_repo


@pytest.fixture
def team(head_db: Path, tmp_path: Path) -> SimpleNamespace:
    with Db(head_db) as db:
        f = db.fleet("team")
        fid = f.fleet.fleet_id
        a = db.member(fid, "alice").member_id
        b = db.member(fid, "bob").member_id
    (tmp_path / "repo").mkdir()
    repo = init_repo(tmp_path / "repo")
    for name in ("alice", "bob"):
        git(repo, "checkout", "-q", "-b", name, "main")
        (repo / "shared.txt").write_text(f"line 0\n{name}\n")
        git(repo, "commit", "-qam", name)
    git(repo, "checkout", "-q", "main")
    return SimpleNamespace(db=head_db, f=fid, d=f.director.member_id, a=a, b=b, repo=repo)


def cli_json(*args: str) -> Any:
    code, out, err = run_cli(*args, "--json")
    assert code == 0, (code, out, err)
    return json.loads(out)


def done_on_branch(t: SimpleNamespace, member: int, branch: str) -> int:
    """A task of ``member``'s, done with ``branch`` of the repository recorded."""
    head = git(t.repo, "rev-parse", branch).strip()
    with connect(t.db) as conn:
        change = broker.create_task(conn, fleet_id=t.f, title=f"{branch}'s line", body="",
                                    creator_id=t.d, assignee_id=member)  # fmt: skip
        task_id = change.task.task_id
        work = GitWork(str(t.repo), branch, "main", head)
        done = broker.finish_task(conn, task_id=task_id, member_id=member, result="ok", git=work)
    assert (done.task.git_branch, done.task.git_head) == (branch, head)
    return task_id


def test_merge_then_conflict_sends_the_task_back(team: SimpleNamespace) -> None:
    t = team
    ta, tb = done_on_branch(t, t.a, "alice"), done_on_branch(t, t.b, "bob")
    assert run_cli("task", "gate", "--fleet-id", str(t.f), "test -f shared.txt")[0] == 0

    merged = cli_json("task", "merge", str(ta))
    assert merged["task"]["state"] == "merged"
    assert merged["task"]["merge_commit"] == git(t.repo, "rev-parse", "main").strip()
    assert "passed (exit 0)" in merged["merge"]["gate"]
    assert (t.repo / "shared.txt").read_text() == "line 0\nalice\n"
    # A merged task counts as done for a task after it.
    later = cli_json("task", "create", "--fleet-id", str(t.f), "--title", "after",
                     "--after", str(ta))["task"]  # fmt: skip
    assert later["state"] == "ready"

    before = git(t.repo, "rev-parse", "main")
    code, out, err = run_cli("task", "merge", str(tb))
    assert (code, out) == (1, ""), err
    # (no tmux here: a warning says the messages wait in the inboxes)
    assert err.splitlines()[-1] == (
        f"Error: task {tb} not merged: merging it into main conflicts in shared.txt; nothing "
        f"moved, the task is back in progress with member {t.b}"
    )
    assert git(t.repo, "rev-parse", "main") == before
    assert git(t.repo, "status", "--porcelain") == ""
    shown = cli_json("task", "show", str(tb))
    assert shown["task"]["state"] == "in_progress"
    sent = [m for m in shown["thread"] if "was not merged" in m["text"]]
    assert [(m["from_member_id"], m["to_member_id"]) for m in sent] == [(t.d, t.b)]
    assert "Conflicting files: shared.txt" in sent[0]["text"]
    notices = [m["text"] for m in shown["thread"] if m["to_member_id"] == t.d]
    assert notices[-1] == (
        f"[cafleet] task {tb} not merged into main: conflict in shared.txt; sent back to "
        f"member {t.b}"
    )


def test_refusals_write_nothing(team: SimpleNamespace) -> None:
    t = team
    tb = done_on_branch(t, t.b, "bob")
    with connect(t.db) as conn:
        # Another `done` recorded a new HEAD meanwhile: the stale merge's outcome is refused.
        with pytest.raises(TaskRefused):
            broker.send_back_task(conn, task_id=tb, head="0" * 40, to_assignee="x",
                                  to_director="y")  # fmt: skip
        with pytest.raises(TaskRefused):
            broker.mark_merged(conn, task_id=tb, head="0" * 40, merge_commit="1" * 40)
        assert broker.get_task(conn, tb).state == "done"
        assert broker.merge_gate(conn, t.f) is None
        broker.set_merge_gate(conn, t.f, "make check")
        assert broker.merge_gate(conn, t.f) == "make check"
        broker.set_merge_gate(conn, t.f, None)
        assert broker.merge_gate(conn, t.f) is None
    code, _, err = run_cli("task", "merge", str(tb), "--into", "nope")
    assert (code, err) == (1, f"Error: nope is not a local branch in {t.repo}; pass --into "
                              "BRANCH to name the target\n")  # fmt: skip
    assert cli_json("task", "show", str(tb))["task"]["state"] == "done"


def test_merge_all_done_goes_on_after_a_task_it_cannot_merge(team: SimpleNamespace) -> None:
    t = team
    with connect(t.db) as conn:
        plain = broker.create_task(conn, fleet_id=t.f, title="no branch", body="",
                                   creator_id=t.d, assignee_id=t.a).task.task_id  # fmt: skip
        broker.finish_task(conn, task_id=plain, member_id=t.a, result="ok")
    ta = done_on_branch(t, t.a, "alice")
    code, out, err = run_cli("task", "merge", "--all-done", "--fleet-id", str(t.f))
    assert code == 1, (out, err)
    assert out.startswith(f"Task {ta} merged into main as ")
    assert err.splitlines() == [f"Error: task {plain} has no branch: it is done and no worktree "
                                "was recorded by task done (its assignee had no worktree)"]  # fmt: skip
    assert cli_json("task", "show", str(plain))["task"]["state"] == "done"


def test_a_second_merge_waits_for_the_first(team: SimpleNamespace) -> None:
    """The repository's merge lock is held (as by another `task merge`): a merge with room to
    wait queues and goes through once it is released; one without is refused, nothing moved."""
    import fcntl
    import os
    import subprocess
    import sys

    from tests.cli_helpers import cli_env
    from tests.harness.util import retry_until

    t = team
    ta = done_on_branch(t, t.a, "alice")
    lock_dir = t.repo / ".git" / "cafleet-merge"
    lock_dir.mkdir()
    fd = os.open(lock_dir / "lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.write(fd, b"1 99\n")
    try:
        code, _, err = run_cli("task", "merge", str(ta), "--wait", "0")
        assert code == 1 and "task 99 (pid 1) is being merged" in err, err
        assert "position 2 in the queue" in err
        waiting = subprocess.Popen(
            [sys.executable, "-m", "cafleet", "task", "merge", str(ta), "--wait", "60"],
            env=cli_env(None), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        queue = lock_dir / "queue"
        retry_until(lambda: (queue.is_dir() and any(queue.iterdir())) or None, timeout=30,
                    message="the second merge never queued")  # fmt: skip
        assert cli_json("task", "show", str(ta))["task"]["state"] == "done"
    finally:
        os.close(fd)  # releases the lock
    out, err = waiting.communicate(timeout=60)
    assert waiting.returncode == 0, err
    assert out.startswith(f"Task {ta} merged into main as ")
    assert list(queue.iterdir()) == []  # its ticket is gone
