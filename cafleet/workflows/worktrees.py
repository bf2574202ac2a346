"""A git worktree per member (docs/worktrees.md): plan one (every check, nothing written), make
it, undo a fresh one, report its state, and retire it when its member goes.

`plan` refuses bad input before anything is written: no git repository, an invalid or existing
branch, a base that names no commit, uncommitted changes in the checkout the worktree would be
based on, a worktree path in use. `make` then adds `/.cafleet/` to the repository's exclude
file, runs `git worktree add -b <branch> <path> <base commit>` and copies the untracked files
`CAFLEET_WORKTREE_COPY` names. `retire` removes a worktree only when git shows no change in it
and its HEAD is on some branch, unless the user passed `--discard-worktree`; it never deletes a
branch. All git calls are in `cafleet.git`.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from cafleet.workflows.errors import WorkflowError
from cafleet.workflows.spawning import usage

if TYPE_CHECKING:
    from cafleet.db.runtime import Connection
    from cafleet.git import State
    from cafleet.records import WorktreeSpec

COPY_VARIABLE = "CAFLEET_WORKTREE_COPY"
DEFAULT_COPY = ".env*"
NO_COPY = "-"  # the value that copies nothing (the empty string counts as unset: docs/cli.md §1.6)
WORKTREES_DIR = os.path.join(".cafleet", "worktrees")
EXCLUDE_LINE = "/.cafleet/"
BRANCH_PREFIX = "cafleet/"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True, slots=True)
class Request:
    """`--worktree`/`--no-worktree` (``wanted``; None: the fleet's default) with `--branch` and
    `--base` (None: the defaults)."""

    wanted: bool | None = None
    branch: str | None = None
    base: str | None = None


@dataclass(frozen=True, slots=True)
class Plan:
    top: str  # the checkout the spawn directory is in
    path: str  # the new worktree
    branch: str
    base: str  # as shown and stored: the base branch's name, or the commit
    commit: str  # the commit the branch starts at
    subdir: str  # the spawn directory inside the checkout ('' or ending in '/')
    exclude_path: str
    copies: tuple[str, ...] = field(default=())  # untracked files to copy, relative to top

    @property
    def spec(self) -> WorktreeSpec:
        from cafleet.records import WorktreeSpec

        return WorktreeSpec(self.path, self.branch, self.base, self.subdir)


def _git_error(exc: Exception) -> WorkflowError:
    return WorkflowError(str(exc))


def slug(text: str) -> str:
    """``text`` as one safe path and branch-name component."""
    out = _UNSAFE.sub("-", text).strip("-.")
    out = re.sub(r"\.{2,}", ".", out)
    if out.endswith(".lock"):
        out = out[: -len(".lock")]
    return out or "member"


def default_branch(fleet_id: int, member_name: str) -> str:
    return f"{BRANCH_PREFIX}{fleet_id}-{slug(member_name)}"


def directory_name(branch: str) -> str:
    """The worktree's directory under `.cafleet/worktrees/`: the branch without the `cafleet/`
    prefix, '/' and other unsafe characters turned into '-'."""
    name = branch[len(BRANCH_PREFIX) :] if branch.startswith(BRANCH_PREFIX) else branch
    return slug(name)


def copy_patterns(env: dict[str, str] | None = None) -> list[str]:
    value = (env if env is not None else os.environ).get(COPY_VARIABLE) or DEFAULT_COPY
    return [] if value.strip() == NO_COPY else value.split()


def _copies(top: str, patterns: list[str]) -> tuple[str, ...]:
    """Files (and symlinks) under ``top`` matching ``patterns`` that git does not track, outside
    `.git` and `.cafleet`."""
    from cafleet import git

    root = Path(top)
    found: set[str] = set()
    for pattern in patterns:
        if pattern.startswith("/") or ".." in Path(pattern).parts:
            continue  # only paths inside the checkout
        for match in root.glob(pattern):
            rel = match.relative_to(root)
            if rel.parts and rel.parts[0] in (".git", ".cafleet"):
                continue
            if match.is_symlink() or match.is_file():
                found.add(rel.as_posix())
    if not found:
        return ()
    return tuple(sorted(found - git.tracked(top, sorted(found))))


def require_repository(directory: str) -> None:
    """`fleet create --worktree`: the directory must be in a git working tree."""
    from cafleet import git

    try:
        found = git.checkout_of(directory)
    except git.GitError as exc:
        raise _git_error(exc) from None
    if found is None:
        raise WorkflowError(_not_a_repository(directory))


def _not_a_repository(directory: str) -> str:
    return f"--worktree needs a git repository: {directory} is not inside a git working tree"


def plan(fleet_id: int, member_name: str, request: Request, directory: str | None = None) -> Plan:
    """Check everything `make` needs; raise `WorkflowError` (exit 1) or a usage error (exit 2,
    an invalid `--branch`) and write nothing."""
    from cafleet import git
    from cafleet.text import sanitize_single_line

    directory = directory or os.getcwd()
    try:
        checkout = git.checkout_of(directory)
        if checkout is None:
            raise WorkflowError(_not_a_repository(directory))
        top = checkout.top
        head = git.resolve_commit(top, "HEAD")
        if request.base is None:
            if head is None:
                raise WorkflowError(
                    f"the repository at {top} has no commit yet; commit once, or pass --base REF"
                )
            commit, base = head, git.head_branch(top) or head
        else:
            found = git.resolve_commit(top, request.base)
            if found is None:
                shown = sanitize_single_line(request.base)
                raise WorkflowError(f"--base '{shown}' names no commit in {top}")
            # A relative base (`HEAD~1`) is fixed to its commit now: read again later, from the
            # member's worktree, it would name another commit (and miscount what is ahead).
            commit, base = found, git.stable_name(top, request.base) or found
        if commit == head:
            changed = git.changed_paths(top, untracked="no")
            if changed:
                raise WorkflowError(
                    f"the base {base} is checked out in {top} with uncommitted changes "
                    f"({len(changed)} {'file' if len(changed) == 1 else 'files'}, e.g. "
                    f"{changed[0]}) that the member's worktree would not contain; commit or "
                    "stash them first"
                )
        branch = default_branch(fleet_id, member_name) if request.branch is None else request.branch
        if not git.branch_name_ok(top, branch):
            if request.branch is not None:
                usage(f"--branch '{sanitize_single_line(branch)}' is not a valid branch name")
            raise WorkflowError(f"cannot make a branch name from '{member_name}'; pass --branch")
        if git.branch_exists(top, branch):
            raise WorkflowError(
                f"branch {branch} already exists in {top}; pass --branch with a new name"
            )
        path = os.path.join(top, WORKTREES_DIR, directory_name(branch))
        if os.path.lexists(path) or path in git.worktree_paths(top):
            raise WorkflowError(
                f"the worktree path {path} is in use; remove it, or pass --branch with another name"
            )
        copies = _copies(top, copy_patterns())
    except git.GitError as exc:
        raise _git_error(exc) from None
    return Plan(top, path, branch, base, commit, checkout.prefix, checkout.exclude_path, copies)


def plan_for_member(
    conn: Connection, fleet_id: int, name: str, role: str | None, request: Request | None
) -> Plan | None:
    """`member create`'s worktree plan, or None for none: the request's choice, else the
    fleet's default (`fleet create --worktree`), which a monitor does not take."""
    wanted = request.wanted if request is not None else None
    if wanted is None:
        from cafleet.broker import member_defaults

        wanted = role is None and member_defaults(conn, fleet_id).get("worktree") is True
    if not wanted:
        return None
    return plan(fleet_id, name, request or Request())


def _exclude(exclude_path: str) -> None:
    """Keep `.cafleet/` out of `git status` of the checkout (`info/exclude` is the repository's
    own, untracked ignore file)."""
    try:
        with open(exclude_path, encoding="utf-8") as f:
            content = f.read()
    except FileNotFoundError:
        content = ""
    if EXCLUDE_LINE in (line.strip() for line in content.splitlines()):
        return
    os.makedirs(os.path.dirname(exclude_path), exist_ok=True)
    with open(exclude_path, "a", encoding="utf-8") as f:
        f.write(("\n" if content and not content.endswith("\n") else "") + EXCLUDE_LINE + "\n")


def _copy(top: str, path: str, rel: str) -> None:
    source, target = os.path.join(top, rel), os.path.join(path, rel)
    if os.path.lexists(target):
        return  # the base has its own file there
    os.makedirs(os.path.dirname(target), exist_ok=True)
    if os.path.islink(source):
        os.symlink(os.readlink(source), target)
    else:
        shutil.copy2(source, target)


def make(p: Plan) -> None:
    """Create the worktree on its new branch and copy the untracked files. A failure after the
    worktree was added undoes it (`undo`) and raises `WorkflowError` with the undo's lines."""
    from cafleet import git

    try:
        _exclude(p.exclude_path)
        git.add_worktree(p.top, p.path, p.branch, p.commit)
    except (OSError, git.GitError) as exc:
        raise WorkflowError(f"git worktree add failed: {exc}") from None
    try:
        for rel in p.copies:
            _copy(p.top, p.path, rel)
    except OSError as exc:
        lines = undo(p)
        raise WorkflowError(
            "; ".join([f"copying {COPY_VARIABLE} files into {p.path} failed: {exc}", *lines])
        ) from None


def undo(p: Plan) -> list[str]:
    """Remove a worktree `make` just created, and its branch, when nothing but the files `make`
    copied is in it and the branch is still at its base commit (compensation of a failed
    `member create`). Returns a line for whatever is left behind."""
    from cafleet import git

    kept = f"worktree {p.path} (branch {p.branch}) kept"
    try:
        if os.path.isdir(p.path):
            changed = git.changed_paths(p.path, untracked="all")
            state = git.states([(p.path, p.commit)])[0]
            if set(changed) - set(p.copies) or state.head != p.commit:
                return [f"{kept}: it already holds changes"]
            git.remove_worktree(p.top, p.path, force=bool(changed))
        git.drop_new_branch(p.top, p.branch, p.commit)
    except git.GitError as exc:
        return [f"{kept}: {exc}"]
    return []


def top_of(spec: WorktreeSpec) -> str:
    """The checkout the worktree was added from (`<top>/.cafleet/worktrees/<dir>`)."""
    return os.path.dirname(os.path.dirname(os.path.dirname(spec.path)))


def resume(spec: WorktreeSpec) -> Plan:
    """The worktree an interrupted `member create` recorded, made again where it is gone (on
    its branch when that exists, else a new branch from the base), the `CAFLEET_WORKTREE_COPY`
    files copied where missing: the plan `undo` takes, at the commit it holds now."""
    from cafleet import git

    top = top_of(spec)
    try:
        checkout = git.checkout_of(top)
        if checkout is None:
            raise WorkflowError(_not_a_repository(top))
        copies = _copies(top, copy_patterns())
        there = os.path.isdir(spec.path)
        tip = git.resolve_commit(
            spec.path if there else top, "HEAD" if there else f"refs/heads/{spec.branch}"
        )
        commit = tip or git.resolve_commit(top, spec.base)
        if commit is None:
            raise WorkflowError(f"--base '{spec.base}' names no commit in {top}")
        p = Plan(top, spec.path, spec.branch, spec.base, commit, spec.subdir,
                 checkout.exclude_path, copies)  # fmt: skip
        if there:
            for rel in p.copies:
                _copy(p.top, p.path, rel)
        elif tip is None:
            make(p)
        else:
            _exclude(p.exclude_path)
            git.add_worktree_on(top, spec.path, spec.branch)
            for rel in p.copies:
                _copy(p.top, p.path, rel)
    except (OSError, git.GitError) as exc:
        raise WorkflowError(f"git worktree add failed: {exc}") from None
    return p


def cwd_of(spec: WorktreeSpec) -> str:
    """Where the member starts: the spawn directory's place in its worktree (the worktree's top
    when that directory no longer exists there)."""
    inside = os.path.normpath(os.path.join(spec.path, spec.subdir)) if spec.subdir else spec.path
    return inside if os.path.isdir(inside) else spec.path


def require_present(member_id: int, spec: WorktreeSpec) -> str:
    """The member's start directory for a respawn; a missing worktree is refused."""
    if not os.path.isdir(spec.path):
        raise WorkflowError(
            f"member {member_id}'s worktree {spec.path} (branch {spec.branch}) is gone; "
            f"delete the member and create a new one (cafleet member delete {member_id})"
        )
    return cwd_of(spec)


# --- state ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Report:
    """A worktree with its state now (`member list`, `member show`, the WebUI)."""

    spec: WorktreeSpec
    state: State

    def as_dict(self) -> dict[str, Any]:
        s = self.state
        return {
            "path": self.spec.path,
            "branch": self.spec.branch,
            "base": self.spec.base,
            "exists": s.exists,
            "head_branch": s.branch,
            "dirty": s.dirty,
            "ahead": s.ahead,
            "error": s.error,
        }

    def text(self) -> str:
        """`<branch> (<state>)`: `clean`, `dirty`, `<n> ahead` of the base, `gone`, `?`."""
        return f"{self.spec.branch} ({self.state_text()})"

    def state_text(self) -> str:
        s, spec = self.state, self.spec
        if not s.exists:
            return "worktree gone"
        if s.error is not None or s.dirty is None:
            return "?"
        parts = ["dirty" if s.dirty else "clean"]
        if s.ahead:
            parts.append(f"{s.ahead} ahead")
        elif s.ahead is None:
            parts.append("ahead ?")
        if s.branch != spec.branch:
            parts.append(f"on {s.branch}" if s.branch else "detached")
        return ", ".join(parts)


def reports(specs: dict[int, WorktreeSpec]) -> dict[int, Report]:
    """Each member's worktree state, the git calls of all of them at once."""
    from cafleet import git

    ids = list(specs)
    found = git.states([(specs[i].path, specs[i].base) for i in ids])
    return {i: Report(specs[i], st) for i, st in zip(ids, found, strict=True)}


# --- retire --------------------------------------------------------------------------------------

RetireStatus = Literal["removed", "kept", "missing"]
REMOVE_COMMAND = "cafleet worktree remove"


@dataclass(frozen=True, slots=True)
class Retired:
    member_id: int
    spec: WorktreeSpec
    status: RetireStatus
    reason: str | None = None  # "kept": why
    branch_deleted: bool = False  # it had no commit beyond its base
    branch_kept: str | None = None  # why the branch stays (None: not asked, or deleted)
    discard_helps: bool = False  # "kept": `--discard` would remove it (its changes are lost)

    def as_dict(self) -> dict[str, Any]:
        return {
            "member_id": self.member_id,
            "path": self.spec.path,
            "branch": self.spec.branch,
            "status": self.status,
            "reason": self.reason,
            "branch_deleted": self.branch_deleted,
            "next": self.next_step,
        }

    @property
    def next_step(self) -> str | None:
        """The command that removes a kept worktree later (docs/worktrees.md §3)."""
        return None if self.status != "kept" else f"{REMOVE_COMMAND} {self.spec.path}"

    def _branch_text(self) -> str:
        spec = self.spec
        if self.branch_deleted:
            return f"its branch {spec.branch} deleted: no commits beyond {spec.base}"
        if self.branch_kept is not None:
            return f"branch {spec.branch} kept: {self.branch_kept}"
        return f"branch {spec.branch} kept"

    def text(self) -> str:
        spec = self.spec
        if self.status == "removed":
            return f"removed {spec.path} ({self._branch_text()})"
        if self.status == "missing":
            return f"{spec.path} was already gone ({self._branch_text()})"
        discard = " (add --discard to drop its changes)" if self.discard_helps else ""
        return (
            f"kept {spec.path} (branch {spec.branch}): {self.reason}; remove it later with "
            f"'{self.next_step}'{discard}"
        )


def _repo(spec: WorktreeSpec) -> str:
    """A directory inside the checkout the worktree was added from, to run git in."""
    repo = os.path.dirname(spec.path)  # `<top>/.cafleet/worktrees`
    return repo if os.path.isdir(repo) else top_of(spec)


def drop_branch(spec: WorktreeSpec) -> tuple[bool, str | None]:
    """Delete the worktree's branch when it has no commit beyond its base and another ref holds
    its commit (nothing is lost), unless a worktree has it checked out. (deleted, why kept)."""
    from cafleet import git

    repo = _repo(spec)
    ref = f"refs/heads/{spec.branch}"
    try:
        tip = git.resolve_commit(repo, ref)
        if tip is None:
            return False, "it is gone"
        base = git.resolve_commit(repo, spec.base)
        if base is None:
            return False, f"its base {spec.base} no longer names a commit"
        beyond = git.commits_beyond(repo, base, tip)
        if beyond:
            return False, f"{beyond} {'commit' if beyond == 1 else 'commits'} beyond {spec.base}"
        holder = git.checked_out(repo).get(ref)
        if holder is not None:
            return False, f"checked out in {holder}"
        if not git.held_elsewhere(repo, tip, ref):
            return False, "no other branch holds its commit"
        git.drop_new_branch(repo, spec.branch, tip)
    except git.GitError as exc:
        return False, str(exc)
    return True, None


def retire(
    member_id: int, spec: WorktreeSpec, *, discard: bool, running: str | None = None
) -> Retired:
    """Remove the member's worktree when it is clean and its HEAD is on some branch, or always
    with ``discard``, then its branch when it has no commit beyond its base (`drop_branch`).
    ``running``: why an agent may still run in it (its pane was not killed); it is then kept
    whatever ``discard`` says. A worktree already gone gets its branch dropped the same way (a
    `member delete` interrupted between the two)."""
    from cafleet import git

    if not os.path.isdir(spec.path):
        dropped, why = drop_branch(spec)
        return Retired(member_id, spec, "missing", None, dropped, why)
    if running is not None:
        return Retired(member_id, spec, "kept", running)
    try:
        if not discard:
            state = git.states([(spec.path, spec.base)])[0]
            if state.error is not None:
                return Retired(member_id, spec, "kept", f"git cannot read it: {state.error}")
            if state.dirty:
                return Retired(
                    member_id, spec, "kept", "it has uncommitted changes", discard_helps=True
                )
            if state.head is not None and not git.on_some_branch(spec.path, state.head):
                return Retired(
                    member_id, spec, "kept", "its HEAD commit is on no branch", discard_helps=True
                )
        git.remove_worktree(_repo(spec), spec.path, force=discard)
    except git.GitError as exc:
        return Retired(member_id, spec, "kept", str(exc))
    dropped, why = drop_branch(spec)
    return Retired(member_id, spec, "removed", None, dropped, why)


__all__ = [
    "COPY_VARIABLE",
    "DEFAULT_COPY",
    "Plan",
    "Report",
    "Request",
    "Retired",
    "copy_patterns",
    "cwd_of",
    "drop_branch",
    "default_branch",
    "make",
    "plan",
    "plan_for_member",
    "require_repository",
    "reports",
    "require_present",
    "resume",
    "retire",
    "top_of",
    "undo",
]
