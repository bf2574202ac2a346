"""The git commands behind member worktrees (docs/worktrees.md), run with `subprocess`.

Every call here either only reads, or adds a worktree and its new branch, or removes a worktree
through `git worktree remove`, which itself refuses a worktree with changes unless ``force`` is
passed (only `--discard-worktree` and `--discard` pass it). Nothing here rewrites history, resets,
checks out over changes or deletes a branch that holds commits: `drop_new_branch` deletes a
branch only while it still points at the commit its caller checked, which is its base or held by
another ref (a failed `member create`; a retired worktree's branch with nothing beyond its base).

Standard library only: `member list` imports it only when a member has a worktree.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from cafleet.errors import CafleetError

if TYPE_CHECKING:  # `subprocess` is imported where git runs: importing this module stays cheap
    import subprocess

GIT_TIMEOUT = 30.0  # seconds, for every call but the checkout of a new worktree
ADD_TIMEOUT = 600.0  # `git worktree add` checks out every file: minutes for a very large tree
# Variables that would point git at another repository than the directory it runs in.
_REDIRECTS = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_COMMON_DIR",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_NAMESPACE",
    "GIT_PREFIX",
)


class GitError(CafleetError):
    """A git command failed or git is missing; str() names the command and git's message."""


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _REDIRECTS}
    # C messages; never prompt; `git status` must not take index.lock (the member's agent may
    # be running git in that worktree at the same moment).
    env.update(LC_ALL="C", GIT_TERMINAL_PROMPT="0", GIT_OPTIONAL_LOCKS="0")
    return env


def run(
    args: Sequence[str], cwd: str, *, check: bool = True, timeout: float = GIT_TIMEOUT
) -> subprocess.CompletedProcess[str]:
    """`git <args>` in ``cwd``; with ``check`` a non-zero exit raises `GitError`."""
    import subprocess

    try:
        proc = subprocess.run(
            ["git", *args],
            cwd=cwd,
            env=_env(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="surrogateescape",
            timeout=timeout,
        )
    except FileNotFoundError as exc:
        raise GitError(f"git is not installed or not on PATH ({exc.strerror})") from None
    except subprocess.TimeoutExpired:
        raise GitError(f"git {args[0]} timed out after {timeout:g} s in {cwd}") from None
    if check and proc.returncode != 0:
        raise GitError(f"git {args[0]} failed in {cwd}: {_detail(proc)}")
    return proc


def _detail(proc: subprocess.CompletedProcess[str]) -> str:
    lines = [ln.strip() for ln in (proc.stderr or proc.stdout or "").splitlines() if ln.strip()]
    return lines[-1] if lines else f"exit status {proc.returncode}"


# --- the repository ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Checkout:
    """The checkout a directory is in: its top-level directory, the directory's path inside it
    (``prefix``, '' at the top, else ending in '/'), and the exclude file git reads for it."""

    top: str
    prefix: str
    exclude_path: str


def checkout_of(directory: str) -> Checkout | None:
    """The checkout containing ``directory``, or None when it is in no git working tree."""
    proc = run(
        ["rev-parse", "--show-toplevel", "--show-prefix", "--git-path", "info/exclude"],
        directory,
        check=False,
    )
    lines = proc.stdout.splitlines()
    if proc.returncode != 0 or len(lines) != 3 or not lines[0]:
        return None
    top, prefix, exclude = lines
    return Checkout(top, prefix, os.path.normpath(os.path.join(directory, exclude)))


def head_branch(top: str) -> str | None:
    """The branch checked out in ``top`` (short name), or None for a detached HEAD."""
    proc = run(["symbolic-ref", "--quiet", "--short", "HEAD"], top, check=False)
    name = proc.stdout.strip()
    return name if proc.returncode == 0 and name else None


def resolve_commit(top: str, ref: str) -> str | None:
    """The commit ``ref`` names, or None (no such ref, or an unborn HEAD)."""
    proc = run(
        ["rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}"],
        top,
        check=False,
    )
    sha = proc.stdout.strip()
    return sha if proc.returncode == 0 and sha else None


def stable_name(top: str, ref: str) -> str | None:
    """The name to keep for ``ref`` as a base: a branch's short name (`HEAD` and `@` give the
    branch checked out), a tag's or remote branch's name as given (else `tags/…`, `remotes/…`);
    None for anything else (`HEAD~1`, a commit id, `@{-1}`), which reads differently later or
    from another worktree, so the caller keeps the commit instead."""
    proc = run(
        ["rev-parse", "--symbolic-full-name", "--verify", "--quiet", "--end-of-options", ref],
        top,
        check=False,
    )
    full = proc.stdout.strip()
    if proc.returncode != 0 or not full.startswith(("refs/heads/", "refs/tags/", "refs/remotes/")):
        return None
    short = full.split("/", 2)[2]
    return short if full.startswith("refs/heads/") or short == ref else full[len("refs/") :]


def branch_name_ok(top: str, name: str) -> bool:
    """Whether ``name`` is a valid new branch name (`git check-ref-format --branch`)."""
    if not name or name.startswith("-") or name.startswith("@"):
        return False
    proc = run(["check-ref-format", "--branch", name], top, check=False)
    return proc.returncode == 0 and proc.stdout.strip() == name


def branch_exists(top: str, name: str) -> bool:
    proc = run(["show-ref", "--verify", "--quiet", f"refs/heads/{name}"], top, check=False)
    return proc.returncode == 0


def changed_paths(top: str, *, untracked: Literal["no", "normal", "all"]) -> list[str]:
    """Paths `git status` reports in ``top``: tracked changes (staged or not), plus untracked
    files that are not ignored unless ``untracked`` is "no" ("all": each file, not its
    directory)."""
    proc = run(["status", "--porcelain", "-z", f"--untracked-files={untracked}"], top)
    return [entry[3:] for entry in proc.stdout.split("\0") if len(entry) > 3]


def worktree_paths(top: str) -> set[str]:
    """Every path `git worktree list` knows for the repository (missing directories included)."""
    proc = run(["worktree", "list", "--porcelain", "-z"], top)
    return {f[len("worktree ") :] for f in proc.stdout.split("\0") if f.startswith("worktree ")}


def tracked(top: str, paths: Iterable[str]) -> set[str]:
    """Which of ``paths`` (relative to ``top``) git tracks."""
    paths = list(paths)
    if not paths:
        return set()
    proc = run(["ls-files", "-z", "--", *paths], top)
    return {p for p in proc.stdout.split("\0") if p}


# --- adding and removing ---------------------------------------------------------------------


def add_worktree(top: str, path: str, branch: str, commit: str) -> None:
    """`git worktree add -b <branch> <path> <commit>`: a new branch at ``commit``, checked out
    in a new worktree at ``path``."""
    run(["worktree", "add", "--quiet", "-b", branch, "--", path, commit], top, timeout=ADD_TIMEOUT)


def add_worktree_on(top: str, path: str, branch: str) -> None:
    """`git worktree add <path> <branch>`: an existing branch checked out in a new worktree."""
    run(["worktree", "add", "--quiet", "--", path, branch], top, timeout=ADD_TIMEOUT)


def remove_worktree(top: str, path: str, *, force: bool) -> None:
    """`git worktree remove <path>`; git refuses a worktree with changes or untracked files
    unless ``force`` (then `--force --force`: also a locked one)."""
    run(["worktree", "remove", *(["--force", "--force"] if force else []), "--", path], top)


def drop_new_branch(top: str, branch: str, commit: str) -> None:
    """Delete ``branch`` only while it still points at ``commit`` (one the caller knows another
    ref holds): `git update-ref -d` compares before it deletes."""
    run(["update-ref", "-d", f"refs/heads/{branch}", commit], top)


def checked_out(top: str) -> dict[str, str]:
    """branch (full ref name) -> the worktree that has it checked out, for every worktree of
    the repository."""
    proc = run(["worktree", "list", "--porcelain", "-z"], top)
    found: dict[str, str] = {}
    path = ""
    for field in proc.stdout.split("\0"):
        if field.startswith("worktree "):
            path = field[len("worktree ") :]
        elif field.startswith("branch "):
            found[field[len("branch ") :]] = path
    return found


def commits_beyond(top: str, base: str, tip: str) -> int:
    """How many commits ``tip`` has that ``base`` has not (`rev-list --count base..tip`)."""
    return int(run(["rev-list", "--count", f"{base}..{tip}", "--"], top).stdout.strip() or 0)


def held_elsewhere(top: str, commit: str, ref: str) -> bool:
    """Whether a branch, tag or remote-tracking branch other than ``ref`` contains ``commit``."""
    proc = run(
        ["for-each-ref", "--contains", commit, "--format=%(refname)",
         "refs/heads/", "refs/tags/", "refs/remotes/"],
        top,
    )  # fmt: skip
    return any(line.strip() not in ("", ref) for line in proc.stdout.splitlines())


# --- a worktree's state --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class State:
    """What `member list` shows of a worktree: ``exists`` False when its directory is gone;
    ``branch`` the branch checked out there now (None: detached); ``dirty`` uncommitted changes
    or untracked files; ``ahead`` commits on HEAD not on the base (None: unknown); ``head`` the
    HEAD commit; ``error`` why git could not say."""

    exists: bool
    branch: str | None = None
    dirty: bool | None = None
    ahead: int | None = None
    head: str | None = None
    error: str | None = None


def _status_args() -> list[str]:
    return ["status", "--porcelain=v2", "--branch", "-z", "--untracked-files=normal"]


def _parse_status(out: str) -> tuple[str | None, str | None, bool]:
    branch: str | None = None
    head: str | None = None
    dirty = False
    for entry in out.split("\0"):
        if entry.startswith("# branch.head "):
            name = entry[len("# branch.head ") :]
            branch = None if name == "(detached)" else name
        elif entry.startswith("# branch.oid "):
            oid = entry[len("# branch.oid ") :]
            head = None if oid == "(initial)" else oid
        elif entry and not entry.startswith("#"):
            dirty = True
    return branch, head, dirty


def states(worktrees: Sequence[tuple[str, str]]) -> list[State]:
    """The `State` of each ``(path, base)``. The git calls of all worktrees run at once (two per
    worktree: `status`, then `rev-list --count <base>..HEAD`), so `member list` waits about as
    long as for one."""
    import subprocess

    env = _env()

    def start(args: list[str], cwd: str) -> subprocess.Popen[str] | None:
        try:
            return subprocess.Popen(
                ["git", *args],
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                encoding="utf-8",
                errors="surrogateescape",
            )
        except OSError:
            return None

    def finish(proc: subprocess.Popen[str] | None) -> tuple[int, str, str]:
        if proc is None:
            return -1, "", "git could not be started"
        try:
            out, err = proc.communicate(timeout=GIT_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            return -1, "", f"timed out after {GIT_TIMEOUT:g} s"
        return proc.returncode, out, err

    exists = [os.path.isdir(path) for path, _ in worktrees]
    status_procs = [
        start(_status_args(), path) if ok else None
        for (path, _), ok in zip(worktrees, exists, strict=True)
    ]
    count_procs = [
        start(["rev-list", "--count", f"{base}..HEAD", "--"], path) if ok else None
        for (path, base), ok in zip(worktrees, exists, strict=True)
    ]
    result: list[State] = []
    for ok, sp, cp in zip(exists, status_procs, count_procs, strict=True):
        if not ok:
            result.append(State(exists=False))
            continue
        rc, out, err = finish(sp)
        crc, cout, _ = finish(cp)
        if rc != 0:
            lines = [ln for ln in err.splitlines() if ln.strip()]
            result.append(State(exists=True, error=lines[-1] if lines else f"exit status {rc}"))
            continue
        branch, head, dirty = _parse_status(out)
        ahead = int(cout.strip()) if crc == 0 and cout.strip().isdigit() else None
        result.append(State(True, branch, dirty, ahead, head))
    return result


def on_some_branch(top: str, commit: str) -> bool:
    """Whether some local branch contains ``commit``."""
    proc = run(
        ["for-each-ref", "--count=1", "--contains", commit, "--format=%(refname)", "refs/heads/"],
        top,
    )
    return bool(proc.stdout.strip())


# --- review and merge (docs/cli.md §2.37) --------------------------------------------------------


def common_dir(top: str) -> str:
    """The repository's git common directory (shared by all its worktrees), absolute."""
    proc = run(["rev-parse", "--path-format=absolute", "--git-common-dir"], top)
    return proc.stdout.strip()


def merge_base(top: str, a: str, b: str) -> str | None:
    proc = run(["merge-base", "--end-of-options", a, b], top, check=False)
    sha = proc.stdout.strip()
    return sha if proc.returncode == 0 and sha else None


def is_ancestor(top: str, ancestor: str, descendant: str) -> bool:
    proc = run(["merge-base", "--is-ancestor", ancestor, descendant], top, check=False)
    return proc.returncode == 0


def diff_text(top: str, base: str, head: str | None, *, stat: bool) -> str:
    """`git diff [--stat] <base> [<head>]`: ``head`` None compares with the working tree."""
    args = ["diff", "--no-color", "--no-ext-diff", *(["--stat"] if stat else [])]
    return run([*args, base, *([head] if head else []), "--"], top).stdout


def numstat(top: str, base: str, head: str | None) -> list[tuple[str, int | None, int | None]]:
    """Each changed path with its added and deleted line counts (None: a binary file)."""
    args = ["diff", "--no-color", "--no-ext-diff", "--numstat", "-z", "--no-renames", base]
    proc = run([*args, *([head] if head else []), "--"], top)
    rows = []
    for entry in proc.stdout.split("\0"):
        parts = entry.split("\t", 2)
        if len(parts) == 3:
            added, deleted, path = parts
            rows.append(
                (path, int(added) if added.isdigit() else None,
                 int(deleted) if deleted.isdigit() else None)
            )  # fmt: skip
    return rows


def changed_between(top: str, a: str, b: str) -> list[str]:
    """Paths that differ between commits ``a`` and ``b``."""
    proc = run(["diff", "--name-only", "-z", "--no-renames", a, b, "--"], top)
    return [p for p in proc.stdout.split("\0") if p]


def add_detached(top: str, path: str, commit: str) -> None:
    """`git worktree add --detach <path> <commit>` (a merge's own temporary worktree)."""
    run(["worktree", "add", "--quiet", "--detach", "--", path, commit], top, timeout=ADD_TIMEOUT)


def merge_commit(path: str, commit: str, message: str) -> list[str] | None:
    """`git merge --no-ff` of ``commit`` into the detached HEAD at ``path``: None when it merged
    and committed, else the conflicting paths (the merge is aborted)."""
    known = run(["config", "user.email"], path, check=False).returncode == 0
    who = [] if known else ["-c", "user.name=cafleet", "-c", "user.email=cafleet@localhost"]
    args = [*who, "merge"]
    proc = run([*args, "--no-ff", "--no-edit", "-m", message, commit], path, check=False)
    if proc.returncode == 0:
        return None
    unmerged = run(["diff", "--name-only", "-z", "--diff-filter=U"], path).stdout
    conflicts = sorted({p for p in unmerged.split("\0") if p})
    run(["merge", "--abort"], path, check=False)
    if not conflicts:
        raise GitError(f"git merge failed in {path}: {_detail(proc)}")
    return conflicts


def statuses(paths: Sequence[str]) -> list[str | None]:
    """`git status --porcelain=v2 --branch -z --untracked-files=all --no-renames` of each
    worktree (None: git failed there), all at once: a collision check's fingerprints."""
    import subprocess

    args = ["git", "status", "--porcelain=v2", "--branch", "-z", "--untracked-files=all",
            "--no-renames"]  # fmt: skip
    env = _env()
    procs: list[subprocess.Popen[str] | None] = []
    for path in paths:
        try:
            procs.append(
                subprocess.Popen(args, cwd=path, env=env, stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                 encoding="utf-8", errors="surrogateescape")
            )  # fmt: skip
        except OSError:
            procs.append(None)
    found: list[str | None] = []
    for proc in procs:
        if proc is None:
            found.append(None)
            continue
        try:
            out, _ = proc.communicate(timeout=GIT_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            found.append(None)
            continue
        found.append(out if proc.returncode == 0 else None)
    return found


def update_ref(top: str, ref: str, new: str, old: str) -> None:
    """Move ``ref`` to ``new`` only while it still points at ``old``."""
    run(["update-ref", ref, new, old], top)


def fast_forward(top: str, commit: str) -> None:
    """`git merge --ff-only <commit>` in the checkout ``top``: git itself refuses when a local
    change would be overwritten, and keeps every other uncommitted or untracked file."""
    run(["merge", "--ff-only", "--quiet", commit], top)


__all__ = [
    "Checkout",
    "GitError",
    "State",
    "add_worktree",
    "add_detached",
    "add_worktree_on",
    "branch_exists",
    "branch_name_ok",
    "changed_paths",
    "checked_out",
    "changed_between",
    "checkout_of",
    "commits_beyond",
    "common_dir",
    "diff_text",
    "fast_forward",
    "drop_new_branch",
    "head_branch",
    "held_elsewhere",
    "is_ancestor",
    "merge_base",
    "merge_commit",
    "numstat",
    "on_some_branch",
    "remove_worktree",
    "resolve_commit",
    "run",
    "states",
    "statuses",
    "tracked",
    "update_ref",
    "worktree_paths",
]
