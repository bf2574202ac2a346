"""`cafleet.workflows.worktrees` and `cafleet.git` on real git repositories in tmp_path, without
tmux (docs/worktrees.md): names, the copy rule, the exclude line, undo and retire."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from cafleet import git as g
from cafleet.records import WorktreeSpec
from cafleet.workflows import worktrees as w
from cafleet.workflows.errors import WorkflowError


def git(repo: Path | str, *args: str) -> str:
    proc = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=str(repo), capture_output=True, text=True, check=False, timeout=30,
    )  # fmt: skip
    assert proc.returncode == 0, (args, proc.stderr)
    return proc.stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "a.txt").write_text("a\n")
    (path / "tracked.env").write_text("tracked\n")
    (path / "conf").mkdir()
    (path / "conf" / "x").write_text("x\n")
    git(path, "add", ".")
    git(path, "commit", "-qm", "first")
    (path / ".env").write_text("E=1\n")
    (path / "conf" / "local.env").write_text("L=1\n")
    (path / ".git-secret").write_text("s\n")
    return path


@pytest.mark.parametrize(
    ("name", "branch", "directory"),
    [
        ("alice", "cafleet/4-alice", "4-alice"),
        ("Alice Smith", "cafleet/4-Alice-Smith", "4-Alice-Smith"),
        ("../../etc", "cafleet/4-etc", "4-etc"),
        ("a..b.lock", "cafleet/4-a.b", "4-a.b"),
        ("日本", "cafleet/4-member", "4-member"),
    ],
)
def test_default_branch_and_directory(name: str, branch: str, directory: str) -> None:
    assert w.default_branch(4, name) == branch
    assert w.directory_name(branch) == directory
    assert w.directory_name("feature/x y") == "feature-x-y"


def test_copy_rule(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(w.COPY_VARIABLE, raising=False)
    assert w.plan(1, "m", w.Request(), str(repo)).copies == (".env",)  # tracked.env is tracked
    monkeypatch.setenv(w.COPY_VARIABLE, "**/*.env ../* /etc/passwd .git*")
    # `**/*.env` finds the untracked ones only (a glob's `*` matches a leading dot); `..` and
    # absolute patterns are ignored; `.git*` matches the file .git-secret, nothing inside .git/.
    assert w.plan(1, "m", w.Request(), str(repo)).copies == (
        ".env",
        ".git-secret",
        "conf/local.env",
    )
    monkeypatch.setenv(w.COPY_VARIABLE, "-")
    assert w.plan(1, "m", w.Request(), str(repo)).copies == ()
    monkeypatch.setenv(w.COPY_VARIABLE, "")  # the empty string counts as unset
    assert w.plan(1, "m", w.Request(), str(repo)).copies == (".env",)


def test_make_excludes_once_and_undo_removes_a_fresh_worktree(repo: Path) -> None:
    exclude = repo / ".git" / "info" / "exclude"
    exclude.write_text("*.o")  # no final newline
    p = w.plan(2, "m", w.Request(), str(repo / "conf"))
    assert (p.branch, p.base, p.subdir) == ("cafleet/2-m", "main", "conf/")
    w.make(p)
    assert exclude.read_text() == "*.o\n/.cafleet/\n"
    assert Path(p.path, ".env").read_text() == "E=1\n"
    assert w.cwd_of(p.spec) == str(Path(p.path, "conf"))
    p2 = w.plan(2, "n", w.Request(), str(repo))
    w.make(p2)
    assert exclude.read_text() == "*.o\n/.cafleet/\n"  # once
    assert ".cafleet" not in git(repo, "status", "--porcelain", "--untracked-files=all")
    # undo: the copied (untracked, here not ignored) .env alone does not count as work
    assert w.undo(p) == []
    assert not Path(p.path).exists()
    assert "cafleet/2-m" not in git(repo, "branch", "--list")
    # ...but a change does: the worktree and its branch stay, and the line says so
    Path(p2.path, "a.txt").write_text("changed\n")
    assert w.undo(p2) == [f"worktree {p2.path} (branch cafleet/2-n) kept: it already holds changes"]
    assert Path(p2.path).is_dir() and "cafleet/2-n" in git(repo, "branch", "--list")


def test_retire(repo: Path) -> None:
    p = w.plan(3, "m", w.Request(), str(repo))
    w.make(p)
    spec = p.spec
    (Path(p.path) / ".env").unlink()  # the repository does not ignore it
    assert w.retire(9, spec, discard=False, running="its pane was kept (--keep-panes)").status == (
        "kept"
    )
    Path(p.path, "new.txt").write_text("n\n")
    kept = w.retire(9, spec, discard=False)
    assert (kept.status, kept.reason) == ("kept", "it has uncommitted changes")
    git(p.path, "add", "new.txt")
    git(p.path, "commit", "-qm", "n")
    git(p.path, "checkout", "-q", "--detach")
    Path(p.path, "a.txt").write_text("on detached\n")
    git(p.path, "commit", "-qam", "loose")
    kept = w.retire(9, spec, discard=False)
    assert (kept.status, kept.reason) == ("kept", "its HEAD commit is on no branch")
    report = w.reports({9: spec})[9]
    assert report.text() == f"{spec.branch} (clean, 2 ahead, detached)"
    git(p.path, "checkout", "-q", spec.branch)
    removed = w.retire(9, spec, discard=False)
    assert removed.status == "removed" and not Path(p.path).exists()
    assert git(repo, "log", "-1", "--format=%s", spec.branch).strip() == "n"  # branch kept
    assert w.retire(9, spec, discard=False).status == "missing"
    assert w.reports({9: spec})[9].text() == f"{spec.branch} (worktree gone)"


def test_discard_removes_a_dirty_worktree_and_its_branch_at_base(repo: Path) -> None:
    p = w.plan(3, "d", w.Request(), str(repo))
    w.make(p)
    Path(p.path, "a.txt").write_text("lost\n")
    retired = w.retire(1, p.spec, discard=True)
    assert (retired.status, retired.branch_deleted) == ("removed", True)
    assert retired.text() == (
        f"removed {p.path} (its branch {p.branch} deleted: no commits beyond main)"
    )
    assert not Path(p.path).exists() and not g.branch_exists(str(repo), p.branch)


def test_a_branch_goes_only_when_nothing_would_be_lost(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The branch is deleted with its worktree only with no commit beyond its base, another ref
    holding its commit, and no worktree having it checked out."""
    monkeypatch.setenv(w.COPY_VARIABLE, "-")  # clean worktrees
    kept = {}
    for name, base in (("ahead", "main"), ("merged", "main"), ("gone", "tmp"), ("out", "main")):
        if base == "tmp":
            git(repo, "branch", "tmp")
        p = w.plan(3, name, w.Request(base=base), str(repo))
        w.make(p)
        kept[name] = p
    git(kept["ahead"].path, "commit", "-q", "--allow-empty", "-m", "work")
    git(kept["merged"].path, "commit", "-q", "--allow-empty", "-m", "merged")
    git(repo, "merge", "-q", "--ff-only", kept["merged"].branch)  # main now holds it
    git(repo, "branch", "-D", "tmp")
    expected = {
        "ahead": (False, "1 commit beyond main"),
        "merged": (True, None),
        "gone": (False, "its base tmp no longer names a commit"),
    }
    for name, (deleted, why) in expected.items():
        retired = w.retire(1, kept[name].spec, discard=False)
        assert (retired.status, retired.branch_deleted, retired.branch_kept) == (
            "removed", deleted, why
        ), name  # fmt: skip
        assert g.branch_exists(str(repo), kept[name].branch) is not deleted
    # Checked out elsewhere (the Director's own checkout): kept.
    out = kept["out"]
    git(repo, "worktree", "remove", out.path)
    git(repo, "checkout", "-q", out.branch)
    assert w.drop_branch(out.spec) == (False, f"checked out in {repo}")
    assert w.retire(1, out.spec, discard=False).status == "missing"
    assert g.branch_exists(str(repo), out.branch)
    # A detached base commit that no other ref holds: kept (its commit would be lost).
    git(repo, "checkout", "-q", "--detach")
    git(repo, "commit", "-q", "--allow-empty", "-m", "loose")
    loose = w.plan(3, "loose", w.Request(), str(repo))
    w.make(loose)
    git(repo, "checkout", "-q", "main")
    assert w.retire(1, loose.spec, discard=False).branch_kept == "no other branch holds its commit"


def test_plan_refusals_write_nothing(repo: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q")
    with pytest.raises(WorkflowError, match="has no commit yet"):
        w.plan(1, "m", w.Request(), str(empty))
    with pytest.raises(WorkflowError, match="names no commit"):
        w.plan(1, "m", w.Request(base="-h"), str(repo))  # never read as an option
    # A base that is not the checked-out commit ignores the checkout's own changes.
    git(repo, "branch", "other")
    (repo / "a.txt").write_text("dirty\n")
    with pytest.raises(WorkflowError, match="uncommitted changes"):
        w.plan(1, "m", w.Request(), str(repo))
    git(repo, "commit", "-qam", "second")
    (repo / "a.txt").write_text("dirty again\n")
    assert w.plan(1, "m", w.Request(base="other"), str(repo)).base == "other"
    assert not (repo / ".cafleet").exists()
    assert "/.cafleet/" not in (repo / ".git" / "info" / "exclude").read_text()


def test_from_json_tolerates_what_it_did_not_write() -> None:
    spec = WorktreeSpec("/p", "b", "main", "sub/")
    assert WorktreeSpec.from_json(spec.to_json()) == spec
    assert WorktreeSpec.from_json('{"path": "/p", "branch": "b", "base": "m"}') == WorktreeSpec(
        "/p", "b", "m"
    )
    for bad in (
        None,
        "",
        "nope",
        "[]",
        '{"path": "/p"}',
        '{"path": 1, "branch": "b", "base": "m"}',
    ):
        assert WorktreeSpec.from_json(bad) is None
