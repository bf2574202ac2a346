"""Review and merge (docs/cli.md §2.37): a done task's branch, its diff, and `task merge`.

`task merge` never touches the Director's checkout to merge: it adds a detached worktree of its
own under the repository's git common directory (`cafleet-merge/`), merges the task's recorded
HEAD into the target's tip there (`git merge --no-ff`: the member's commits stay as they are),
runs the gate in it, and only when both pass moves the target: through `git merge --ff-only`
in the checkout that has the target checked out (git keeps every other local change, and
cafleet first refuses when a local change touches a path the merge changes), else through
`git update-ref` with the old tip as the expected value. A conflict or a failing gate sends the
task back to its assignee (`in_progress`, a message naming the files or the gate's last lines)
and moves nothing. Merges of one repository run one at a time (a `flock` in the common
directory); a second waits up to `--wait` seconds, then is refused with its queue position.
All git calls are in `cafleet.git`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cafleet import broker, git, signals
from cafleet.records.tasks import GitWork
from cafleet.workflows import messaging
from cafleet.workflows.errors import WorkflowError

if TYPE_CHECKING:
    from cafleet.config import Settings
    from cafleet.db.runtime import Connection
    from cafleet.records.tasks import Task

Warn = Callable[[str], None]

GATE_TIMEOUT = 600.0  # seconds, `--gate-timeout`'s default
QUEUE_WAIT = 60.0  # seconds a second merge of one repository waits, `--wait`'s default
TAIL_LINES = 20  # the gate's last lines kept in the task's message and the error
TAIL_CHARS = 4000
KILL_GRACE = 5.0  # seconds between SIGTERM and SIGKILL of a timed-out gate's process group
MERGE_DIR = "cafleet-merge"  # under the git common directory: the lock, the queue, gate logs


# --- `task done` ----------------------------------------------------------------------------------


def git_work(conn: Connection, member_id: int, warn: Warn) -> GitWork | None:
    """The member's worktree branch and HEAD for `task done` (None: it has no worktree, or git
    cannot say, which is warned about and never stops the `done`)."""
    spawn = broker.get_spawn(conn, member_id)
    spec = spawn.worktree if spawn is not None else None
    if spec is None:
        return None
    repo = os.path.dirname(os.path.dirname(os.path.dirname(spec.path)))  # worktrees.top_of
    try:
        if os.path.isdir(spec.path):
            state = git.states([(spec.path, spec.base)])[0]
            if state.error is not None or state.head is None:
                warn(f"warning: git cannot read member {member_id}'s worktree {spec.path}")
                return None
            if state.dirty:
                warn(
                    f"warning: member {member_id}'s worktree {spec.path} has uncommitted changes; "
                    f"the task records its HEAD {state.head[:12]} without them (commit them, "
                    "then run task done again)"
                )
            return GitWork(repo, state.branch or spec.branch, spec.base, state.head)
        head = git.resolve_commit(repo, f"refs/heads/{spec.branch}")
    except git.GitError as exc:
        warn(f"warning: the task records no branch: {exc}")
        return None
    return None if head is None else GitWork(repo, spec.branch, spec.base, head)


# --- diffs ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DiffView:
    """`task diff` / `member diff`: what ``head`` changed since its merge base with ``base``
    (``head`` None: the member's working tree, uncommitted tracked changes included)."""

    repo: str
    branch: str
    base: str
    merge_base: str
    head: str | None
    files: list[tuple[str, int | None, int | None]]
    text: str
    task_id: int | None = None
    member_id: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "member_id": self.member_id,
            "repo": self.repo,
            "branch": self.branch,
            "base": self.base,
            "merge_base": self.merge_base,
            "head": self.head,
            "files": [{"path": p, "added": a, "deleted": d} for p, a, d in self.files],
            "diff": self.text,
        }


def _no_branch(task: Task) -> WorkflowError:
    return WorkflowError(
        f"task {task.task_id} has no branch: it is {task.state} and no worktree was recorded "
        "by task done (its assignee had no worktree)"
    )


def task_diff(conn: Connection, task_id: int, *, stat: bool) -> DiffView:
    """`git diff <base>...<head>` of the branch `task done` recorded."""
    task = broker.get_task(conn, task_id)
    if task.git_head is None or task.git_repo is None or task.git_base is None:
        raise _no_branch(task)
    repo, base, head = task.git_repo, task.git_base, task.git_head
    _require_dir(repo)
    try:
        if git.resolve_commit(repo, head) is None:
            raise WorkflowError(f"task {task_id}'s head {head[:12]} is no longer in {repo}")
        start = task.merge_commit and git.resolve_commit(repo, f"{task.merge_commit}^1")
        mb = start or git.merge_base(repo, base, head)
        if mb is None:
            raise WorkflowError(f"task {task_id}'s base {base} names no commit in {repo}")
        files = git.numstat(repo, mb, head)
        text = git.diff_text(repo, mb, head, stat=stat)
    except git.GitError as exc:
        raise WorkflowError(str(exc)) from None
    branch = task.git_branch or "-"
    return DiffView(repo, branch, base, mb, head, files, text, task_id=task_id)


def member_diff(conn: Connection, member_id: int, *, stat: bool) -> DiffView:
    """The member's worktree against its base: committed and uncommitted changes to tracked
    files (`git diff <merge base>` in the worktree)."""
    broker.get_member(conn, member_id)
    spawn = broker.get_spawn(conn, member_id)
    spec = spawn.worktree if spawn is not None else None
    if spec is None:
        raise WorkflowError(f"member {member_id} has no worktree (see docs/worktrees.md)")
    _require_dir(spec.path)
    try:
        mb = git.merge_base(spec.path, spec.base, "HEAD")
        if mb is None:
            raise WorkflowError(f"member {member_id}'s base {spec.base} names no commit")
        files = git.numstat(spec.path, mb, None)
        text = git.diff_text(spec.path, mb, None, stat=stat)
    except git.GitError as exc:
        raise WorkflowError(str(exc)) from None
    return DiffView(spec.path, spec.branch, spec.base, mb, None, files, text, member_id=member_id)


def _require_dir(path: str) -> None:
    if not os.path.isdir(path):
        raise WorkflowError(f"the repository {path} is gone")


# --- the gate -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GateRun:
    command: str
    outcome: str  # "passed", "failed", "timed out"
    exit_code: int | None
    tail: str
    log_path: str
    seconds: float

    def text(self) -> str:
        if self.outcome == "timed out":
            how = f"timed out after {self.seconds:g} s and was killed"
        else:
            how = f"{self.outcome} (exit {self.exit_code})"
        return f"gate `{self.command}` {how}; full output: {self.log_path}"


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def run_gate(command: str, cwd: str, *, timeout: float, log_path: str) -> GateRun:
    """``command`` through `sh -c` in ``cwd``, in a process group of its own, its output (both
    streams) into ``log_path``; killed as a group (TERM, then KILL) at ``timeout`` or on a stop
    signal. What is left of the group once it exits is killed too."""
    import subprocess

    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    started = time.monotonic()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            ["/bin/sh", "-c", command],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        outcome = "failed"
        try:
            while True:
                try:
                    code: int | None = proc.wait(timeout=0.2)
                    break
                except subprocess.TimeoutExpired:
                    if time.monotonic() - started >= timeout or signals.stop_requested():
                        outcome = "timed out"
                        with contextlib.suppress(ProcessLookupError, PermissionError):
                            os.killpg(proc.pid, signal.SIGTERM)
                        try:
                            proc.wait(timeout=KILL_GRACE)
                        except subprocess.TimeoutExpired:
                            _kill_group(proc.pid)
                            proc.wait()
                        code = None
                        break
        finally:
            _kill_group(proc.pid)
    if outcome != "timed out":
        outcome = "passed" if code == 0 else "failed"
    seconds = timeout if outcome == "timed out" else round(time.monotonic() - started, 1)
    return GateRun(command, outcome, code, _tail(log_path), log_path, seconds)


def _tail(path: str) -> str:
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        f.seek(max(0, size - 64 * 1024))
        data = f.read().decode("utf-8", "replace")
    lines = data.splitlines()[-TAIL_LINES:]
    return "\n".join(lines)[-TAIL_CHARS:]


# --- one merge at a time per repository ---------------------------------------------------------


def _live(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def merge_lock(merge_dir: str, task_id: int, wait: float) -> Iterator[None]:
    """Hold the repository's merge lock (`<common dir>/cafleet-merge/lock`, `flock`). A second
    merge queues (a ticket in `queue/`) and waits up to ``wait`` seconds; then it is refused with
    its position (the running merge is 1)."""
    import fcntl

    lock_path = os.path.join(merge_dir, "lock")
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    ticket: str | None = None
    try:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                pass
            if ticket is None:
                queue = os.path.join(merge_dir, "queue")
                os.makedirs(queue, exist_ok=True)
                ticket = os.path.join(queue, f"{time.time_ns():020d}-{os.getpid()}-{task_id}")
                open(ticket, "w").close()
            if time.monotonic() >= deadline or signals.stop_requested():
                raise WorkflowError(_queued_text(lock_path, ticket, wait))
            time.sleep(0.1)
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()} {task_id}\n".encode())
        yield
    finally:
        if ticket is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(ticket)
        os.close(fd)


def _queued_text(lock_path: str, ticket: str, wait: float) -> str:
    with open(lock_path, encoding="utf-8", errors="replace") as f:
        holder = f.read().split()
    running = f"task {holder[1]} (pid {holder[0]})" if len(holder) == 2 else "another merge"
    mine = os.path.basename(ticket)
    ahead = 0
    for name in os.listdir(os.path.dirname(ticket)):
        parts = name.split("-")
        if name < mine and len(parts) == 3 and parts[1].isdigit() and _live(int(parts[1])):
            ahead += 1
    return (
        f"{running} is being merged in this repository; this merge was position {ahead + 2} in "
        f"the queue and waited {wait:g} s; nothing moved (run it again, or pass --wait SECONDS)"
    )


# --- the merge ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Merged:
    task: Task
    target: str
    merge_commit: str
    updated_checkout: str | None  # the checkout whose files moved with the target
    gate: GateRun | None
    already: bool = False  # the head was already in the target: nothing merged

    def as_dict(self) -> dict[str, Any]:
        return {
            "task_id": self.task.task_id,
            "target": self.target,
            "merge_commit": self.merge_commit,
            "updated_checkout": self.updated_checkout,
            "already_merged": self.already,
            "gate": None if self.gate is None else self.gate.text(),
        }


@dataclass
class _Attempt:
    task: Task
    repo: str
    target: str
    head: str
    gate: str | None
    merge_dir: str
    log_path: str = ""
    gate_run: GateRun | None = field(default=None)


def merge(
    conn: Connection,
    settings: Settings,
    *,
    task_id: int,
    gate: str | None = None,
    into: str | None = None,
    gate_timeout: float = GATE_TIMEOUT,
    wait: float = QUEUE_WAIT,
    warn: Warn,
) -> Merged:
    """`task merge T`: see the module's text. Every refusal before the merge moves nothing and
    changes no task; a conflict or failing gate raises `WorkflowError` after sending the task
    back."""
    task = broker.get_task(conn, task_id)
    if task.state != "done":
        raise WorkflowError(f"task {task_id} is {task.state}; only a done task can be merged")
    if task.git_head is None or task.git_repo is None or task.git_base is None:
        raise _no_branch(task)
    repo, head = task.git_repo, task.git_head
    _require_dir(repo)
    target = into if into is not None else task.git_base
    if gate is None:
        gate = broker.merge_gate(conn, task.fleet_id)
    gate = gate if gate and gate.strip() else None
    try:
        if not git.branch_exists(repo, target):
            raise WorkflowError(
                f"{target} is not a local branch in {repo}; pass --into BRANCH to name the target"
            )
        if git.resolve_commit(repo, head) is None:
            raise WorkflowError(f"task {task_id}'s head {head[:12]} is no longer in {repo}")
        merge_dir = os.path.join(git.common_dir(repo), MERGE_DIR)
        os.makedirs(merge_dir, exist_ok=True)
        attempt = _Attempt(task, repo, target, head, gate, merge_dir)
        with merge_lock(merge_dir, task_id, wait):
            return _merge_locked(conn, settings, attempt, gate_timeout, warn)
    except git.GitError as exc:
        raise WorkflowError(str(exc)) from None


def _merge_locked(
    conn: Connection, settings: Settings, a: _Attempt, gate_timeout: float, warn: Warn
) -> Merged:
    ref = f"refs/heads/{a.target}"
    old = git.resolve_commit(a.repo, ref)
    if old is None:
        raise WorkflowError(f"{a.target} is not a local branch in {a.repo}")
    holder = git.checked_out(a.repo).get(ref)
    if git.is_ancestor(a.repo, a.head, old):
        task = broker.mark_merged(conn, task_id=a.task.task_id, head=a.head, merge_commit=old)
        return Merged(task, a.target, old, None, None, already=True)
    mb = git.merge_base(a.repo, old, a.head) or old
    if holder is not None:
        _refuse_local_overlap(holder, a.target, git.changed_between(a.repo, mb, a.head))
    import shutil
    import tempfile

    parent = os.path.join(a.merge_dir, "worktrees")
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f"task-{a.task.task_id}-", dir=parent)
    os.rmdir(tmp)  # `git worktree add` makes it
    try:
        git.add_detached(a.repo, tmp, old)
        title = a.task.title.splitlines()[0] if a.task.title else ""
        message = f"Merge task {a.task.task_id}: {title} ({a.task.git_branch or a.head[:12]})"
        conflicts = git.merge_commit(tmp, a.head, message)
        if conflicts is not None:
            _send_back(conn, settings, a, conflicts=conflicts, warn=warn)
        new = git.resolve_commit(tmp, "HEAD")
        assert new is not None
        if a.gate is not None:
            a.log_path = os.path.join(a.merge_dir, f"task-{a.task.task_id}-gate.log")
            a.gate_run = run_gate(a.gate, tmp, timeout=gate_timeout, log_path=a.log_path)
            if a.gate_run.outcome != "passed":
                _send_back(conn, settings, a, conflicts=None, warn=warn)
    finally:
        with contextlib.suppress(git.GitError):
            git.remove_worktree(a.repo, tmp, force=True)
        shutil.rmtree(tmp, ignore_errors=True)
    if git.resolve_commit(a.repo, ref) != old:
        raise WorkflowError(
            f"{a.target} moved while task {a.task.task_id} was merged; run it again"
        )
    if holder is not None:
        if git.resolve_commit(holder, "HEAD") != old:
            raise WorkflowError(f"{holder} no longer has {a.target} at {old[:12]}; nothing moved")
        _refuse_local_overlap(holder, a.target, git.changed_between(a.repo, old, new))
        git.fast_forward(holder, new)
    else:
        git.update_ref(a.repo, ref, new, old)
    task = broker.mark_merged(conn, task_id=a.task.task_id, head=a.head, merge_commit=new)
    return Merged(task, a.target, new, holder, a.gate_run)


def _refuse_local_overlap(checkout: str, target: str, merged_paths: list[str]) -> None:
    local = set(git.changed_paths(checkout, untracked="all"))
    both = sorted(local & set(merged_paths))
    if both:
        shown = ", ".join(both[:5]) + (f" and {len(both) - 5} more" if len(both) > 5 else "")
        raise WorkflowError(
            f"{target} is checked out in {checkout} with local changes to files the merge "
            f"changes ({shown}); commit or move them, then merge again; nothing moved"
        )


def _send_back(
    conn: Connection,
    settings: Settings,
    a: _Attempt,
    *,
    conflicts: list[str] | None,
    warn: Warn,
) -> None:
    """The task goes back to its assignee with what failed and what to do; raises
    `WorkflowError` (exit 1) with the same reason."""
    t = a.task
    member = t.assignee_member_id
    where = "in your worktree"
    if conflicts is not None:
        shown = ", ".join(conflicts)
        reason = f"merging it into {a.target} conflicts in {shown}"
        detail = f"Conflicting files: {shown}"
        line = f"conflict in {shown}"
    else:
        run = a.gate_run
        assert run is not None
        reason = run.text()
        detail = f"The gate's last lines:\n{run.tail}" if run.tail else "The gate printed nothing."
        line = f"gate {run.outcome}"
    to_assignee = (
        f"[cafleet] task {t.task_id} ({t.title}) was not merged: {reason}.\n{detail}\n"
        f"Fix it {where}: git merge {a.target}, resolve and commit, check it, then "
        f'cafleet task done {t.task_id} --member-id {member} --result "<what you did>"'
    )
    to_director = (
        f"[cafleet] task {t.task_id} not merged into {a.target}: {line}; "
        f"sent back to member {member}"
    )
    change = broker.send_back_task(
        conn, task_id=t.task_id, head=a.head, to_assignee=to_assignee, to_director=to_director
    )
    _delivered(conn, settings, change, warn)
    tail = f"\n{a.gate_run.tail}" if conflicts is None and a.gate_run and a.gate_run.tail else ""
    raise WorkflowError(
        f"task {t.task_id} not merged: {reason}; nothing moved, the task is back in progress "
        f"with member {member}{tail}"
    )


def merge_all_done(
    conn: Connection,
    settings: Settings,
    *,
    fleet_id: int,
    gate: str | None = None,
    into: str | None = None,
    gate_timeout: float = GATE_TIMEOUT,
    wait: float = QUEUE_WAIT,
    warn: Warn,
) -> tuple[list[Merged], list[str]]:
    """`task merge --all-done`: every done task with a branch, oldest `done` first; a failure
    is reported and the next is merged. (merged, one line per task not merged)."""
    board = broker.task_board(conn, fleet_id, state="done", member_id=None)
    merged: list[Merged] = []
    failed: list[str] = []
    for task in sorted(board, key=lambda t: (t.finished_at or "", t.task_id)):
        if signals.stop_requested():
            break
        if task.git_head is None:
            failed.append(str(_no_branch(task)))
            continue
        try:
            merged.append(
                merge(conn, settings, task_id=task.task_id, gate=gate, into=into,
                      gate_timeout=gate_timeout, wait=wait, warn=warn)
            )  # fmt: skip
        except WorkflowError as exc:
            failed.append(str(exc).splitlines()[0])
    return merged, failed


def merging_now(repo: str) -> str | None:
    """The task id whose merge holds the repository's lock now (None: none)."""
    import fcntl

    try:
        lock_path = os.path.join(git.common_dir(repo), MERGE_DIR, "lock")
        fd = os.open(lock_path, os.O_RDONLY)
    except (OSError, git.GitError):
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        with open(lock_path, encoding="utf-8", errors="replace") as f:
            holder = f.read().split()
        return holder[1] if len(holder) == 2 else "?"
    finally:
        os.close(fd)
    return None


def queue(conn: Connection, fleet_id: int) -> list[dict[str, Any]]:
    """The WebUI's merge queue: the fleet's done tasks with a branch, in `--all-done` order,
    each marked when its merge runs now."""
    board = broker.task_board(conn, fleet_id, state="done", member_id=None)
    waiting = sorted(
        (t for t in board if t.git_head is not None), key=lambda t: (t.finished_at or "", t.task_id)
    )
    running = {r: merging_now(r) for r in {t.git_repo for t in waiting if t.git_repo}}
    return [
        {
            "task_id": t.task_id,
            "title": t.title,
            "assignee_member_id": t.assignee_member_id,
            "git_branch": t.git_branch,
            "merging": t.git_repo is not None and running.get(t.git_repo) == str(t.task_id),
        }
        for t in waiting
    ]


def reject(conn: Connection, settings: Settings, *, task_id: int, text: str, warn: Warn) -> Task:
    """The reviewer sends a done task back to its assignee with ``text``."""
    task = broker.get_task(conn, task_id)
    member = task.assignee_member_id
    to_assignee = (
        f"[cafleet] task {task_id} ({task.title}) was sent back by the reviewer:\n{text}\n"
        f'Then: cafleet task done {task_id} --member-id {member} --result "<what you did>"'
    )
    to_director = f"[cafleet] task {task_id} rejected; sent back to member {member}"
    change = broker.send_back_task(
        conn, task_id=task_id, head=None, to_assignee=to_assignee, to_director=to_director
    )
    return _delivered(conn, settings, change, warn)


def _delivered(conn: Connection, settings: Settings, change: Any, warn: Warn) -> Task:
    """The messages the change stored, drained as `workflows.tasks` does after a change."""
    own = {recipient: message_id for recipient, message_id in change.sent}
    if own and not signals.stop_requested():
        _, tmux_usable = messaging._drain_recipients(conn, settings, own, warn)
        if tmux_usable and not signals.stop_requested():
            messaging._restart_loop_if_needed(conn, [change.task.fleet_id], warn)
    return change.task  # type: ignore[no-any-return]


__all__ = [
    "DiffView",
    "GateRun",
    "Merged",
    "git_work",
    "member_diff",
    "merge",
    "merge_all_done",
    "merge_lock",
    "merging_now",
    "queue",
    "reject",
    "run_gate",
    "task_diff",
]
