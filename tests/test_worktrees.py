"""A git worktree per member (docs/worktrees.md), with real git repositories and real fake-agent
panes on the private tmux server: each member works on its own branch in its own worktree,
list/show report its state, delete keeps one that holds work, respawn starts in it again, and
bad input is refused with nothing created."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from tests.fleet_helpers import FleetIds, create_fleet, ok, stop_loop, table_dump
from tests.git_helpers import git, init_repo
from tests.harness.fixtures import TmuxHarness
from tests.harness.util import fake_run, start_record

pytestmark = pytest.mark.tmux

CREATED = re.compile(
    r"(\d+) (.+) agent=(\w+) pane=(%\d+)\nworktree: (.+) \(branch (.+) from (.+)\)\n"
)


def make_repo(path: Path) -> Path:
    """A repository with one commit on `main`: shared.txt and sub/x tracked, .env untracked."""
    init_repo(path, {"shared.txt": "line 0\n", "sub/x": "x\n", ".gitignore": ".env*\n"})
    (path / ".env").write_text("SECRET=1\n")
    (path / ".env.local").write_text("LOCAL=1\n")
    return path


@pytest.fixture
def repo(tmux_db: TmuxHarness) -> Path:
    return make_repo(tmux_db.project_dir)


@pytest.fixture
def fleet(tmux_db: TmuxHarness, repo: Path) -> FleetIds:
    ids = create_fleet(tmux_db)
    stop_loop(tmux_db, ids.fleet_id)
    return ids


def create(h: TmuxHarness, fleet_id: int, name: str, *extra: str, cwd: Path | None = None) -> Any:
    """`member create` with a worktree; returns (member id, pane, path, branch, base)."""
    result = ok(
        h.cli(
            "member", "create", "--fleet-id", str(fleet_id), "--name", name,
            "--description", f"{name} member", *extra, "hello {member_id}", cwd=cwd,
        )
    )  # fmt: skip
    m = CREATED.fullmatch(result.stdout)
    assert m, result.stdout
    return int(m.group(1)), m.group(4), m.group(5), m.group(6), m.group(7)


def sh(pane: str, script: str) -> dict[str, Any]:
    """The fake agent in ``pane`` runs ``script`` in its own working directory."""
    rec = fake_run(pane, ["sh", "-c", script])
    assert rec["rc"] == 0, rec
    return rec


def everything(h: TmuxHarness, repo: Path) -> dict[str, Any]:
    """The database, the panes, the branches and the worktrees: what a refusal must not change."""
    return {
        **table_dump(h),
        "member_spawns": h.sqlite("SELECT * FROM member_spawns ORDER BY 1"),
        "panes": h.live_panes(),
        "branches": git(repo, "branch", "--list", "--format=%(refname)"),
        "worktrees": git(repo, "worktree", "list", "--porcelain"),
        "cafleet_dir": sorted(p.name for p in (repo / ".cafleet" / "worktrees").glob("*"))
        if (repo / ".cafleet").exists()
        else None,
    }


def roster(h: TmuxHarness, fleet_id: int) -> dict[int, dict[str, Any]]:
    rows = json.loads(ok(h.cli("member", "list", str(fleet_id), "--json")).stdout)
    return {row["member_id"]: row for row in rows}


# --- create, edit, list --------------------------------------------------------------------------


def test_two_members_edit_the_same_file_in_their_own_worktrees(
    tmux_db: TmuxHarness, repo: Path, fleet: FleetIds
) -> None:
    h, f = tmux_db, fleet.fleet_id
    a, a_pane, a_path, a_branch, a_base = create(h, f, "alice", "--worktree")
    b, b_pane, b_path, b_branch, b_base = create(h, f, "bob", "--worktree")
    assert (a_branch, b_branch) == (f"cafleet/{f}-alice", f"cafleet/{f}-bob")
    assert (a_base, b_base) == ("main", "main")
    assert a_path == str(repo / ".cafleet" / "worktrees" / f"{f}-alice")
    assert b_path == str(repo / ".cafleet" / "worktrees" / f"{f}-bob")
    # Each agent runs in its own worktree, on its own branch started at main.
    assert start_record(a_pane)["cwd"] == a_path and start_record(b_pane)["cwd"] == b_path
    main_sha = git(repo, "rev-parse", "main").strip()
    for path, branch in ((a_path, a_branch), (b_path, b_branch)):
        assert git(path, "symbolic-ref", "--short", "HEAD").strip() == branch
        assert git(path, "rev-parse", "HEAD").strip() == main_sha
        # The untracked .env files came along; nothing else untracked did.
        assert Path(path, ".env").read_text() == "SECRET=1\n"
        assert Path(path, ".env.local").read_text() == "LOCAL=1\n"
    # The Director's checkout stays clean: .cafleet/ is excluded through info/exclude.
    assert "/.cafleet/" in (repo / ".git" / "info" / "exclude").read_text().splitlines()
    assert git(repo, "status", "--porcelain") == ""

    # Both edit the same file; alice commits. Neither touches the other or the Director.
    sh(a_pane, "echo 'alice was here' >> shared.txt && git commit -qam alice")
    sh(b_pane, "echo 'bob was here' >> shared.txt")
    assert Path(a_path, "shared.txt").read_text() == "line 0\nalice was here\n"
    assert Path(b_path, "shared.txt").read_text() == "line 0\nbob was here\n"
    assert (repo / "shared.txt").read_text() == "line 0\n"
    assert git(repo, "log", "--format=%s", f"main..{a_branch}").split() == ["alice"]

    # member list: the branch, and whether each has changes or commits not on the base.
    rows = roster(h, f)
    assert rows[a]["worktree"] == {
        "path": a_path, "branch": a_branch, "base": "main", "exists": True,
        "head_branch": a_branch, "dirty": False, "ahead": 1, "error": None,
    }  # fmt: skip
    assert (rows[b]["worktree"]["dirty"], rows[b]["worktree"]["ahead"]) == (True, 0)
    assert "worktree" not in rows[fleet.director_id] and "worktree" not in rows[fleet.monitor_id]
    text = ok(h.cli("member", "list", str(f))).stdout.splitlines()
    assert text[1].split()[-1] == "worktree"
    by_id = {line.split()[0]: line for line in text[3:-1]}
    assert by_id[str(a)].endswith(f"{a_branch} (clean, 1 ahead)")
    assert by_id[str(b)].endswith(f"{b_branch} (dirty)")
    assert by_id[str(fleet.monitor_id)].endswith(" -")
    shown = ok(h.cli("member", "show", str(b))).stdout
    assert f"worktree:        {b_path} {b_branch} (dirty) base=main\n" in shown
    assert (
        json.loads(ok(h.cli("member", "show", str(a), "--json")).stdout)["worktree"]["ahead"] == 1
    )


def test_branch_base_subdirectory_and_the_copy_setting(
    tmux_db: TmuxHarness, repo: Path, fleet: FleetIds
) -> None:
    h, f = tmux_db, fleet.fleet_id
    git(repo, "checkout", "-qb", "topic")
    (repo / "topic.txt").write_text("t\n")
    git(repo, "add", "topic.txt")
    git(repo, "commit", "-qm", "topic")
    topic_sha = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "checkout", "-q", "main")
    # --branch and --base; run from a subdirectory: the member starts in the same place.
    m, pane, path, branch, base = create(
        h, f, "carol", "--branch", "feature/x", "--base", "topic", cwd=repo / "sub"
    )
    assert (branch, base) == ("feature/x", "topic")
    assert path == str(repo / ".cafleet" / "worktrees" / "feature-x")
    assert start_record(pane)["cwd"] == os.path.join(path, "sub")
    assert git(path, "rev-parse", "HEAD").strip() == topic_sha
    spawn = h.sqlite("SELECT worktree_json FROM member_spawns WHERE member_id = ?", m)[0][0]
    assert json.loads(spawn) == {
        "path": path,
        "branch": "feature/x",
        "base": "topic",
        "subdir": "sub/",
    }
    # A detached HEAD is recorded as its commit; CAFLEET_WORKTREE_COPY picks what is copied.
    git(repo, "checkout", "-q", "--detach", "main")
    main_sha = git(repo, "rev-parse", "HEAD").strip()
    result = ok(
        h.cli(
            "member", "create", "--fleet-id", str(f), "--name", "dave", "--description", "d",
            "--worktree", "--json", env={"CAFLEET_WORKTREE_COPY": ".env.local"},
        )
    )  # fmt: skip
    data = json.loads(result.stdout)
    d_path = data["worktree"]["path"]
    assert data["worktree"] == {"path": d_path, "branch": f"cafleet/{f}-dave", "base": main_sha}
    assert Path(d_path, ".env.local").exists() and not Path(d_path, ".env").exists()
    result = ok(
        h.cli(
            "member", "create", "--fleet-id", str(f), "--name", "erin", "--description", "e",
            "--worktree", "--json", env={"CAFLEET_WORKTREE_COPY": "-"},
        )
    )  # fmt: skip
    e_path = json.loads(result.stdout)["worktree"]["path"]
    assert not Path(e_path, ".env.local").exists() and not Path(e_path, ".env").exists()
    # Without --worktree nothing changes: the member runs in the Director's directory.
    plain = ok(
        h.cli("member", "create", "--fleet-id", str(f), "--name", "plain", "--description", "p")
    )
    assert "worktree" not in plain.stdout
    plain_pane = plain.stdout.split("pane=")[1].strip()
    assert start_record(plain_pane)["cwd"] == str(repo)


# --- delete --------------------------------------------------------------------------------------


def test_delete_keeps_a_worktree_that_holds_work(
    tmux_db: TmuxHarness, repo: Path, fleet: FleetIds
) -> None:
    h, f = tmux_db, fleet.fleet_id
    dirty, dirty_pane, dirty_path, dirty_branch, _ = create(h, f, "dirty", "--worktree")
    clean, clean_pane, clean_path, clean_branch, _ = create(h, f, "clean", "--worktree")
    gone, gone_pane, gone_path, gone_branch, _ = create(h, f, "discard", "--worktree")
    loose, loose_pane, loose_path, _, _ = create(h, f, "loose", "--worktree")
    sh(dirty_pane, "echo work >> shared.txt")
    sh(clean_pane, "echo done >> shared.txt && git commit -qam done")
    sh(gone_pane, "echo scratch > new-file.txt")
    # A commit that only a detached HEAD holds would be lost with the worktree.
    sh(loose_pane, "git checkout -q --detach && echo l >> shared.txt && git commit -qam loose")

    r = ok(h.cli("member", "delete", str(dirty)))
    assert (
        f"  worktree:  kept {dirty_path} (branch {dirty_branch}): it has uncommitted changes; "
        f"remove it later with 'cafleet worktree remove {dirty_path}' (add --discard to drop its "
        "changes)\n" in r.stdout
    )
    assert Path(dirty_path, "shared.txt").read_text() == "line 0\nwork\n"
    assert dirty_pane not in h.live_panes()

    r = ok(h.cli("member", "delete", str(clean), "--json"))
    assert json.loads(r.stdout)["worktree"] == {
        "member_id": clean, "path": clean_path, "branch": clean_branch, "status": "removed",
        "reason": None, "branch_deleted": False, "next": None,
    }  # fmt: skip
    assert not Path(clean_path).exists()
    assert git(repo, "log", "-1", "--format=%s", clean_branch).strip() == "done"  # branch kept

    r = ok(h.cli("member", "delete", str(loose)))
    assert f"kept {loose_path} " in r.stdout and "its HEAD commit is on no branch" in r.stdout
    assert Path(loose_path).is_dir()

    r = ok(h.cli("member", "delete", str(gone), "--discard-worktree"))
    # Its branch had nothing beyond its base: it goes with the worktree.
    assert (
        f"  worktree:  removed {gone_path} (its branch {gone_branch} deleted: no commits beyond "
        "main)\n" in r.stdout
    )
    assert not Path(gone_path).exists()
    branches = git(repo, "branch", "--list", "--format=%(refname:short)").split()
    assert {dirty_branch, clean_branch} <= set(branches) and gone_branch not in branches


def test_fleet_default_and_fleet_delete(tmux_db: TmuxHarness, repo: Path) -> None:
    h = tmux_db
    ids = create_fleet(h, "--worktree")
    f = ids.fleet_id
    stop_loop(h, f)
    assert json.loads(h.sqlite("SELECT member_defaults_json FROM fleets")[0][0]) == {
        "worktree": True
    }
    # The monitor spawned by fleet create has no worktree; members get one by default.
    assert h.sqlite(
        "SELECT worktree_json FROM member_spawns WHERE member_id = ?", ids.monitor_id
    ) == [(None,)]
    keep, keep_pane, keep_path, keep_branch, _ = create(h, f, "keep")
    drop, drop_pane, drop_path, _, _ = create(h, f, "drop")
    plain = ok(
        h.cli(
            "member", "create", "--fleet-id", str(f), "--name", "plain", "--description", "p",
            "--no-worktree",
        )
    )  # fmt: skip
    assert "worktree" not in plain.stdout
    sh(keep_pane, "echo mine > untracked.txt")
    r = ok(h.cli("fleet", "delete", str(f)))
    assert (
        f"Worktree of member {keep}: kept {keep_path} (branch {keep_branch}): it has "
        f"uncommitted changes; remove it later with 'cafleet worktree remove {keep_path}' (add "
        "--discard to drop its changes).\n" in r.stdout
    )
    assert f"Worktree of member {drop}: removed {drop_path} " in r.stdout
    assert Path(keep_path, "untracked.txt").read_text() == "mine\n"
    assert not Path(drop_path).exists()
    assert keep_pane not in h.live_panes() and drop_pane not in h.live_panes()
    # --keep-panes keeps the agents running, so --discard-worktree cannot go with it.
    r = h.cli("fleet", "delete", str(f), "--keep-panes", "--discard-worktree")
    assert r.returncode == 2 and "--discard-worktree cannot go with --keep-panes" in r.stderr


def test_fleet_create_worktree_needs_a_repository(tmux_db: TmuxHarness, tmp_path: Path) -> None:
    h = tmux_db
    elsewhere = tmp_path / "not-a-repo"
    elsewhere.mkdir()
    before = table_dump(h)
    r = h.cli(
        "fleet", "create", "--name", "x", "--coding-agent", "claude", "--worktree", cwd=elsewhere
    )
    assert (r.returncode, r.stdout) == (1, "")
    assert r.stderr == (
        f"Error: --worktree needs a git repository: {elsewhere} is not inside a git working tree\n"
    )
    assert table_dump(h) == before


# --- respawn -------------------------------------------------------------------------------------


def test_respawn_starts_the_member_in_its_worktree_again(
    tmux_db: TmuxHarness, repo: Path, fleet: FleetIds
) -> None:
    h, f = tmux_db, fleet.fleet_id
    m, pane, path, _, _ = create(h, f, "alice", "--worktree", cwd=repo / "sub")
    h.tmux("kill-pane", "-t", pane)
    result = ok(h.cli("member", "respawn", str(m)))  # from the top, not from sub/
    new_pane = re.search(r"in pane (%\d+)", result.stdout).group(1)  # type: ignore[union-attr]
    assert start_record(new_pane)["cwd"] == os.path.join(path, "sub")
    # A worktree that is gone is refused before anything is spawned.
    h.tmux("kill-pane", "-t", new_pane)
    git(repo, "worktree", "remove", path)
    before, panes = everything(h, repo), h.live_panes()
    r = h.cli("member", "respawn", str(m))
    assert (r.returncode, r.stdout) == (1, "")
    assert r.stderr == (
        f"Error: member {m}'s worktree {path} (branch cafleet/{f}-alice) is gone; delete the "
        f"member and create a new one (cafleet member delete {m})\n"
    )
    assert everything(h, repo) == before and h.live_panes() == panes


# --- bad input -----------------------------------------------------------------------------------


def test_bad_input_is_refused_with_nothing_created(
    tmux_db: TmuxHarness, repo: Path, fleet: FleetIds, tmp_path: Path
) -> None:
    h, f = tmux_db, fleet.fleet_id
    git(repo, "branch", "taken")
    (repo / ".cafleet" / "worktrees" / "busy").mkdir(parents=True)
    elsewhere = tmp_path / "plain-dir"
    elsewhere.mkdir()
    base = ["member", "create", "--fleet-id", str(f), "--description", "d"]
    cases: list[tuple[list[str], Path | None, int, str]] = [
        (["--name", "a", "--worktree"], elsewhere, 1,
         f"--worktree needs a git repository: {elsewhere} is not inside a git working tree"),
        (["--name", "a", "--branch", "taken"], None, 1,
         f"branch taken already exists in {repo}; pass --branch with a new name"),
        (["--name", "a", "--branch", "busy"], None, 1,
         f"the worktree path {repo}/.cafleet/worktrees/busy is in use; remove it, or pass "
         "--branch with another name"),
        (["--name", "a", "--worktree", "--base", "nowhere"], None, 1,
         f"--base 'nowhere' names no commit in {repo}"),
        (["--name", "a", "--branch", "bad..name"], None, 2,
         "--branch 'bad..name' is not a valid branch name"),
    ]  # fmt: skip
    before = everything(h, repo)
    for args, cwd, code, message in cases:
        r = h.cli(*base, *args, cwd=cwd)
        assert (r.returncode, r.stdout) == (code, ""), args
        # exit 2 prints the usage lines first, as every usage error does (docs/cli.md §1.4)
        lines = r.stderr.splitlines()
        assert lines[-1] == f"Error: {message}" and (code == 2 or len(lines) == 1), args
        assert everything(h, repo) == before, args
    # A dirty base: the Director's uncommitted change would be missing from the worktree.
    (repo / "shared.txt").write_text("changed\n")
    before = everything(h, repo)
    r = h.cli(*base, "--name", "a", "--worktree")
    assert (r.returncode, r.stdout) == (1, "")
    assert r.stderr == (
        f"Error: the base main is checked out in {repo} with uncommitted changes (1 file, e.g. "
        "shared.txt) that the member's worktree would not contain; commit or stash them first\n"
    )
    assert everything(h, repo) == before
    # --no-worktree with --branch is a usage error, found while parsing.
    r = h.cli(*base, "--name", "a", "--no-worktree", "--branch", "x")
    assert r.returncode == 2 and "--branch needs a worktree" in r.stderr
    assert everything(h, repo) == before


def test_a_failed_spawn_undoes_the_worktree_and_its_branch(
    tmux_db: TmuxHarness, repo: Path, fleet: FleetIds
) -> None:
    h, f = tmux_db, fleet.fleet_id
    branches = git(repo, "branch", "--list", "--format=%(refname)")
    panes = h.live_panes()
    h.set_faults([{"command": "split-window", "action": "fail", "stderr": "no space for new pane"}])
    r = h.cli(
        "member", "create", "--fleet-id", str(f), "--name", "m", "--description", "d", "--worktree"
    )
    h.clear_faults()
    assert (r.returncode, r.stdout) == (1, "")
    assert r.stderr == "Error: tmux split-window failed: no space for new pane\n"
    # The member is deregistered; the worktree and the branch it made are gone again.
    assert h.sqlite("SELECT status FROM members WHERE name = 'm'") == [("deregistered",)]
    assert not (repo / ".cafleet" / "worktrees" / f"{f}-m").exists()
    assert git(repo, "branch", "--list", "--format=%(refname)") == branches
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert h.live_panes() == panes
