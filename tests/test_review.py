"""Review and merge (docs/cli.md §2.37) with real git repositories and fake-agent members in
their own worktrees: `task done` records the branch and HEAD, `task diff` and `member diff`
show the change, `task merge` merges in a temporary worktree through the gate and brings the
result into the Director's checkout as `git merge --ff-only` would (its own uncommitted and
untracked work kept byte-for-byte); a conflict or failing gate sends the task back to its
member and moves nothing; bad input is refused with nothing moved."""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.fleet_helpers import FleetIds, create_fleet, ok, runtime_row, stop_loop
from tests.git_helpers import git
from tests.harness.fixtures import TmuxHarness
from tests.harness.util import retry_until
from tests.test_worktrees import create, make_repo, sh

pytestmark = pytest.mark.tmux


@pytest.fixture
def repo(tmux_db: TmuxHarness) -> Path:
    return make_repo(tmux_db.project_dir)


@pytest.fixture
def fleet(tmux_db: TmuxHarness, repo: Path) -> FleetIds:
    ids = create_fleet(tmux_db)
    stop_loop(tmux_db, ids.fleet_id)
    return ids


def cli_json(h: TmuxHarness, *args: str) -> Any:
    return json.loads(ok(h.cli(*args, "--json")).stdout)


def new_task(h: TmuxHarness, f: int, member: int, title: str) -> int:
    task = cli_json(h, "task", "create", "--fleet-id", str(f), "--title", title, "--assign",
                    str(member))["task"]  # fmt: skip
    ok(h.cli("task", "claim", str(task["task_id"]), "--member-id", str(member)))
    return int(task["task_id"])


def done(h: TmuxHarness, task: int, member: int) -> dict[str, Any]:
    return cli_json(h, "task", "done", str(task), "--member-id", str(member),
                    "--result", "did it")["task"]  # type: ignore[no-any-return]  # fmt: skip


def inbox(h: TmuxHarness, member: int) -> list[str]:
    return [m["text"] for m in cli_json(h, "message", "poll", str(member))]


def ack_all(h: TmuxHarness, member: int) -> None:
    for m in cli_json(h, "message", "poll", str(member)):
        ok(h.cli("message", "ack", str(m["message_id"])))


def snapshot(repo: Path) -> dict[str, Any]:
    """The refs, the worktrees and every file of the Director's checkout (bytes)."""
    files = {
        str(p.relative_to(repo)): p.read_bytes()
        for p in sorted(repo.rglob("*"))
        if p.is_file() and ".git" not in p.parts and ".cafleet" not in p.parts
    }
    return {
        "refs": git(repo, "for-each-ref", "--format=%(refname) %(objectname)"),
        "worktrees": git(repo, "worktree", "list", "--porcelain"),
        "status": git(repo, "status", "--porcelain"),
        "files": files,
    }


def test_done_records_the_branch_diff_shows_it_merge_brings_it_home(
    tmux_db: TmuxHarness, repo: Path, fleet: FleetIds
) -> None:
    h, f = tmux_db, fleet.fleet_id
    a, a_pane, a_path, a_branch, _ = create(h, f, "alice", "--worktree")
    t = new_task(h, f, a, "add a.txt")
    sh(a_pane, "printf 'new\\n' > a.txt && echo 'alice' >> shared.txt && git add -A && "
               "git commit -qm alice")  # fmt: skip
    head = git(a_path, "rev-parse", "HEAD").strip()
    task = done(h, t, a)
    assert (task["state"], task["git_branch"], task["git_base"], task["git_head"]) == (
        "done", a_branch, "main", head,
    )  # fmt: skip
    assert task["git_repo"] == str(repo) and task["merge_commit"] is None

    # task diff: base...head, as files (JSON), a stat, the patch.
    shown = cli_json(h, "task", "diff", str(t))
    assert [(x["path"], x["added"], x["deleted"]) for x in shown["files"]] == [
        ("a.txt", 1, 0), ("shared.txt", 1, 0),
    ]  # fmt: skip
    assert shown["head"] == head and shown["merge_base"] == git(repo, "rev-parse", "main").strip()
    assert "+alice" in ok(h.cli("task", "diff", str(t))).stdout
    assert "2 files changed" in ok(h.cli("task", "diff", str(t), "--stat")).stdout
    # member diff: the worktree now, uncommitted changes included.
    sh(a_pane, "echo 'more' >> shared.txt")
    files = cli_json(h, "member", "diff", str(a))["files"]
    assert [(x["path"], x["added"]) for x in files] == [("a.txt", 1), ("shared.txt", 2)]

    # The Director's own work: a staged and an unstaged change to other tracked files, and an
    # untracked file. None of it touches what the merge changes.
    (repo / "sub" / "x").write_text("director's edit\n")
    (repo / "other.txt").write_text("staged\n")
    git(repo, "add", "other.txt")
    (repo / "notes.md").write_text("untracked\n")
    mine = {p: (repo / p).read_bytes() for p in ("sub/x", "other.txt", "notes.md")}
    old_main = git(repo, "rev-parse", "main").strip()

    merged = cli_json(h, "task", "merge", str(t), "--gate", "test -f a.txt && echo gate ok")
    main = git(repo, "rev-parse", "main").strip()
    assert merged["merge"]["merge_commit"] == main == merged["task"]["merge_commit"]
    assert merged["task"]["state"] == "merged"
    assert merged["merge"]["updated_checkout"] == str(repo)
    assert "passed (exit 0)" in merged["merge"]["gate"]
    assert git(repo, "log", "-1", "--format=%P", main).split() == [old_main, head]
    assert (repo / "a.txt").read_text() == "new\n"
    assert (repo / "shared.txt").read_text() == "line 0\nalice\n"
    assert {p: (repo / p).read_bytes() for p in mine} == mine
    assert sorted(git(repo, "status", "--porcelain").splitlines()) == [
        " M sub/x", "?? notes.md", "A  other.txt",
    ]  # fmt: skip
    # The temporary worktree is gone; the gate's output is kept.
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 2
    log = Path(merged["merge"]["gate"].rsplit("full output: ", 1)[1])
    assert log.read_text() == "gate ok\n"
    # The diff of a merged task is still what it changed.
    assert [x["path"] for x in cli_json(h, "task", "diff", str(t))["files"]] == [
        "a.txt", "shared.txt",
    ]  # fmt: skip


def test_merge_into_a_branch_no_checkout_holds_moves_only_that_ref(
    tmux_db: TmuxHarness, repo: Path, fleet: FleetIds
) -> None:
    """`--into` a branch checked out nowhere: the merge commit goes there by `git update-ref`
    (old tip as the expected value); main and the Director's checkout stay as they were."""
    h, f = tmux_db, fleet.fleet_id
    git(repo, "branch", "release", "main")
    a, a_pane, a_path, _a_branch, _ = create(h, f, "alice", "--worktree")
    t = new_task(h, f, a, "add r.txt")
    sh(a_pane, "printf 'r\\n' > r.txt && git add -A && git commit -qm release-work")
    head = git(a_path, "rev-parse", "HEAD").strip()
    done(h, t, a)
    old_release = git(repo, "rev-parse", "release").strip()
    before = snapshot(repo)
    merged = cli_json(h, "task", "merge", str(t), "--into", "release")
    release = git(repo, "rev-parse", "release").strip()
    assert merged["task"]["state"] == "merged" and merged["task"]["merge_commit"] == release
    assert git(repo, "log", "-1", "--format=%P", release).split() == [old_release, head]
    assert git(repo, "show", f"{release}:r.txt") == "r\n"
    after = snapshot(repo)
    moved = {
        line.split()[0]
        for line in set(after["refs"].splitlines()) ^ set(before["refs"].splitlines())
    }
    assert moved == {"refs/heads/release"}
    assert {k: after[k] for k in ("worktrees", "status", "files")} == {
        k: before[k] for k in ("worktrees", "status", "files")
    }
    assert not (repo / "r.txt").exists()


def test_a_conflict_goes_back_to_the_member_which_fixes_it(
    tmux_db: TmuxHarness, repo: Path, fleet: FleetIds
) -> None:
    h, f = tmux_db, fleet.fleet_id
    a, a_pane, _, _, _ = create(h, f, "alice", "--worktree")
    b, b_pane, b_path, _, _ = create(h, f, "bob", "--worktree")
    ta, tb = new_task(h, f, a, "alice's line"), new_task(h, f, b, "bob's line")
    sh(a_pane, "echo alice >> shared.txt && git commit -qam alice")
    sh(b_pane, "echo bob >> shared.txt && git commit -qam bob")
    done(h, ta, a)
    done(h, tb, b)
    ack_all(h, fleet.director_id)
    ack_all(h, b)
    ok(h.cli("task", "merge", str(ta)))
    before = snapshot(repo)

    failed = h.cli("task", "merge", str(tb))
    assert failed.returncode == 1, failed
    assert failed.stderr == (
        f"Error: task {tb} not merged: merging it into main conflicts in shared.txt; nothing "
        f"moved, the task is back in progress with member {b}\n"
    )
    assert snapshot(repo) == before
    assert cli_json(h, "task", "show", str(tb))["task"]["state"] == "in_progress"
    (told,) = inbox(h, b)
    assert "conflicts in shared.txt" in told and "Conflicting files: shared.txt" in told
    assert "git merge main" in told and f"cafleet task done {tb} --member-id {b}" in told
    director = [m for m in inbox(h, fleet.director_id) if f"task {tb} not merged" in m]
    assert director == [
        f"[cafleet] task {tb} not merged into main: conflict in shared.txt; sent back to member {b}"
    ]

    # The member does what the message says; the task is then merged.
    sh(b_pane, "git merge -q main; printf 'line 0\\nalice\\nbob\\n' > shared.txt && "
               "git commit -qam 'merge main'")  # fmt: skip
    done(h, tb, b)
    merged = cli_json(h, "task", "merge", str(tb))
    assert merged["task"]["state"] == "merged"
    assert (repo / "shared.txt").read_text() == "line 0\nalice\nbob\n"
    assert git(repo, "rev-parse", "main").strip() == merged["task"]["merge_commit"]
    assert git(b_path, "merge-base", "--is-ancestor", "HEAD", "main") == ""


def test_a_failing_gate_and_a_hanging_one_move_nothing(
    tmux_db: TmuxHarness, repo: Path, fleet: FleetIds, tmp_path: Path
) -> None:
    h, f = tmux_db, fleet.fleet_id
    a, a_pane, _, _, _ = create(h, f, "alice", "--worktree")
    t = new_task(h, f, a, "add a.txt")
    sh(a_pane, "echo new > a.txt && git add a.txt && git commit -qm a")
    done(h, t, a)
    before = snapshot(repo)
    ack_all(h, a)

    # The fleet's configured gate is the default.
    gate = ok(h.cli("task", "gate", "--fleet-id", str(f), "echo one; echo two; exit 3")).stdout
    assert gate == f"fleet {f} gate: echo one; echo two; exit 3\n"
    failed = h.cli("task", "merge", str(t))
    assert failed.returncode == 1, failed
    first, *rest = failed.stderr.splitlines()
    assert first.startswith(
        f"Error: task {t} not merged: gate `echo one; echo two; exit 3` failed (exit 3); "
        "full output: "
    )
    assert rest == ["one", "two"]
    assert snapshot(repo) == before
    (told,) = inbox(h, a)
    assert "failed (exit 3)" in told and "The gate's last lines:\none\ntwo" in told
    done(h, t, a)

    # A gate that hangs is killed as a process group at --gate-timeout and reported.
    pids = tmp_path / "pids"
    hang = f"echo $$ > {pids}; sleep 300 & echo $! >> {pids}; wait"
    failed = h.cli("task", "merge", str(t), "--gate", hang, "--gate-timeout", "1")
    assert failed.returncode == 1, failed
    assert "timed out after 1 s and was killed" in failed.stderr.splitlines()[0]
    assert snapshot(repo) == before
    for pid in pids.read_text().split():
        retry_until(lambda p=pid: not os.path.exists(f"/proc/{p}") or None, timeout=10,
                    message=f"gate process {pid} still alive")  # fmt: skip
    assert cli_json(h, "task", "show", str(t))["task"]["state"] == "in_progress"


def test_bad_input_is_refused_with_nothing_moved(
    tmux_db: TmuxHarness, repo: Path, fleet: FleetIds
) -> None:
    h, f = tmux_db, fleet.fleet_id
    a, a_pane, _, _, _ = create(h, f, "alice", "--worktree")
    plain = ok(h.cli("member", "create", "--fleet-id", str(f), "--name", "plain",
                     "--description", "no worktree", "--no-worktree", "hi")).stdout  # fmt: skip
    p = int(plain.split()[0])
    t = new_task(h, f, a, "edit shared")
    sh(a_pane, "echo alice >> shared.txt && git commit -qam alice")
    done(h, t, a)
    tp = new_task(h, f, p, "no branch")
    done(h, tp, p)

    def refused(args: tuple[str, ...], text: str, code: int = 1) -> None:
        before = snapshot(repo)
        result = h.cli(*args)
        assert (result.returncode, result.stdout) == (code, ""), result
        last = result.stderr.splitlines()[-1]
        assert last.startswith("Error: ") and text in last, result.stderr
        assert code == 2 or result.stderr.count("\n") == 1, result.stderr
        assert snapshot(repo) == before

    refused(("task", "merge", "999"), "task 999")
    refused(("task", "diff", "999"), "task 999")
    refused(("task", "merge", str(tp)), f"Error: task {tp} has no branch")
    refused(("task", "diff", str(tp)), f"Error: task {tp} has no branch")
    refused(("member", "diff", str(p)), f"Error: member {p} has no worktree")
    refused(("task", "merge", str(t), "--into", "nope"), "nope is not a local branch")
    refused(("task", "merge", "--all-done"), "--all-done needs --fleet-id", code=2)
    refused(("task", "merge"), "pass either TASK_ID or --all-done", code=2)
    # A dirty target: the Director's uncommitted change touches the file the merge changes.
    (repo / "shared.txt").write_text("line 0\ndirector\n")
    refused(("task", "merge", str(t)), "local changes to files the merge changes (shared.txt)")
    assert (repo / "shared.txt").read_text() == "line 0\ndirector\n"
    assert cli_json(h, "task", "show", str(t))["task"]["state"] == "done"
    # Another merge holds the repository's lock: this one queues, then is refused.
    lock_dir = repo / ".git" / "cafleet-merge"
    lock_dir.mkdir(exist_ok=True)
    fd = os.open(lock_dir / "lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()} 77\n".encode())
        refused(("task", "merge", str(t), "--wait", "0.3"),
                "task 77 (pid " )  # fmt: skip
        result = h.cli("task", "merge", str(t), "--wait", "0")
        assert "position 2 in the queue" in result.stderr
    finally:
        os.close(fd)
    assert cli_json(h, "task", "show", str(t))["task"]["state"] == "done"


def test_merge_all_done_merges_in_order(tmux_db: TmuxHarness, repo: Path, fleet: FleetIds) -> None:
    h, f = tmux_db, fleet.fleet_id
    a, a_pane, _, _, _ = create(h, f, "alice", "--worktree")
    b, b_pane, _, _, _ = create(h, f, "bob", "--worktree")
    ta, tb = new_task(h, f, a, "a"), new_task(h, f, b, "b")
    sh(b_pane, "echo b > b.txt && git add b.txt && git commit -qm b")
    sh(a_pane, "echo a > a.txt && git add a.txt && git commit -qm a && echo x > scratch.txt")
    done(h, tb, b)
    # Uncommitted work is not part of the recorded HEAD: `task done` says so, and goes on.
    finished = h.cli("task", "done", str(ta), "--member-id", str(a), "--result", "did it")
    assert finished.returncode == 0, finished
    assert "has uncommitted changes; the task records its HEAD" in finished.stderr
    result = cli_json(h, "task", "merge", "--all-done", "--fleet-id", str(f))
    assert [m["task_id"] for m in result["merged"]] == [tb, ta]
    assert result["not_merged"] == []
    assert git(repo, "log", "--format=%s", "-2", "main").splitlines() == [
        f"Merge task {ta}: a (cafleet/{f}-alice)",
        f"Merge task {tb}: b (cafleet/{f}-bob)",
    ]
    assert (repo / "a.txt").exists() and (repo / "b.txt").exists()


def test_a_collision_is_reported_once_within_a_tick_and_listed(
    tmux_db: TmuxHarness, repo: Path
) -> None:
    """Two members change shared.txt (one committed, one not): the running loop tells the
    Director once, naming both and the path; `fleet show` lists it until it is gone."""
    h = tmux_db
    ids = create_fleet(h)
    f = ids.fleet_id
    a, a_pane, _, _, _ = create(h, f, "alice", "--worktree")
    b, b_pane, _, _, _ = create(h, f, "bob", "--worktree")
    sh(a_pane, "echo alice >> shared.txt && git commit -qam alice && echo x > only-a.txt")
    sh(b_pane, "echo bob >> shared.txt")
    want = f"[cafleet] collision: members {a} and {b} both change shared.txt in their worktrees."

    def reports() -> list[str]:
        return [t for t in inbox(h, ids.director_id) if t.startswith("[cafleet] collision")]

    (report,) = retry_until(lambda: reports() or None, timeout=30, message="no collision report")
    assert report.startswith(want)
    shown = cli_json(h, "fleet", "show", str(f))["problems"]
    assert [p["line"] for p in shown if p["kind"] == "collision"] == [
        f"members {a} and {b} both change shared.txt in their worktrees; run 'cafleet member "
        f"diff {a}' and 'cafleet member diff {b}', then merge one first"
    ]
    # Two more ticks: still one report.
    row = runtime_row(h, f)
    assert row is not None
    seen = {row["last_tick_at"]}

    def ticked() -> bool | None:
        r = runtime_row(h, f)
        if r is not None:
            seen.add(r["last_tick_at"])
        return len(seen) >= 3 or None

    retry_until(ticked, timeout=30, message="the loop did not tick")
    assert reports() == [report]
    # Gone once bob drops his change; fleet show no longer lists it.
    sh(b_pane, "git checkout -q -- shared.txt")
    shown = cli_json(h, "fleet", "show", str(f))["problems"]
    assert [p for p in shown if p["kind"] == "collision"] == []
