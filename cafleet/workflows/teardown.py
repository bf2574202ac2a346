"""`fleet delete` (docs/cli.md §2.6): kill the fleet's monitor and member panes under the pane locks,
then deregister everyone, then stop the fleet's loop; afterwards no process of the fleet runs.

Under every concrete placement's pane lock (ascending lock-file order, as before): re-read the
roster, find each pane's processes (/proc), kill each pane that is neither the root Director's
nor named by an active member of another fleet, make sure those processes ended, then the one
soft-delete transaction. A kill that fails stops the delete before it writes anything (panes
already killed stay killed; a repeat finishes the job). ``keep_panes`` kills nothing (the
wave-1 behaviour): the loop then stops on its own at its next tick.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import time
from collections.abc import Callable, Container, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from cafleet.workflows.errors import WorkflowError
from cafleet.workflows.spawning import MSG_KILL_FAILED, lock_busy_message

if TYPE_CHECKING:
    from cafleet.config import Settings
    from cafleet.db.runtime import Connection
    from cafleet.procs import Proc
    from cafleet.records import Member, PaneKey, Placement, WorktreeSpec
    from cafleet.workflows.worktrees import Retired

PaneStatus = Literal[
    "killed", "already_gone", "kept", "director", "shared", "pending", "no_placement", "elsewhere"
]
LOOP_STOP_TIMEOUT = 10.0  # SIGTERM, then this long for the loop to finish its keystroke and exit


@dataclass(frozen=True, slots=True)
class PaneReport:
    member_id: int
    name: str
    pane_id: str | None
    status: PaneStatus
    shared_with: int | None  # "shared": the other fleet's member that names the pane


@dataclass(frozen=True, slots=True)
class Deleted:
    fleet_id: int
    deregistered_count: int
    panes: tuple[PaneReport, ...]  # one per member deregistered by this call, by member id
    loop_stopped: int | None  # the pid of the loop this call stopped
    worktrees: tuple[Retired, ...] = ()  # the deregistered members' worktrees (docs/worktrees.md)


def msg_cannot_kill(fleet_id: int, detail: str) -> str:
    return (
        f"cannot kill the panes of fleet {fleet_id}: {detail}; run the command inside the "
        "fleet's tmux server, or pass --keep-panes to leave the panes running"
    )


@contextlib.contextmanager
def _fleet_pane_locks(
    db_dir: str, fleet_id: int, placements: list[Placement], timeout: int
) -> Iterator[tuple[set[PaneKey], Callable[[PaneKey], bool]]]:
    """Take each concrete placement's pane lock once, in ascending lock-file order, waiting at
    most `timeout` seconds each (docs/runtime.md §3.3). Yields the locked keys and the one-try
    callback for a placement that gained its pane meanwhile. Everything is released on exit.
    A busy lock fails with docs/cli.md §1.11's message naming that member.
    """
    from cafleet import signals
    from cafleet.mux.locks import PaneLockAbandoned, PaneLockTimeout, acquire_pane_locks

    owners: dict[PaneKey, int] = {}
    for placement in placements:
        if placement.pane_key is not None:
            owners.setdefault(placement.pane_key, placement.member_id)
    try:
        held = acquire_pane_locks(
            db_dir,
            owners,
            timeout=timeout,
            purpose=f"fleet delete {fleet_id}",
            keep_waiting=signals.keep_waiting,
        )
    except PaneLockAbandoned:
        signals.check()
        raise
    except PaneLockTimeout as exc:
        raise WorkflowError(lock_busy_message(owners[exc.key])) from exc
    with held:
        yield set(held.keys), held.try_add


# --- the plan ------------------------------------------------------------------------------------


@dataclass
class _Plan:
    rows: list[PaneReport]
    kill: dict[PaneKey, list[int]]  # pane key -> the rows (indexes) whose status it decides


def _plan(
    members: Sequence[Member],
    director_key: PaneKey | None,
    shared: dict[PaneKey, int],
    *,
    keep_panes: bool,
) -> _Plan:
    from cafleet.hosts import current_host, is_local

    rows: list[PaneReport] = []
    kill: dict[PaneKey, list[int]] = {}
    here = current_host()
    director = next((m for m in members if m.kind == "director"), None)
    director_host = None
    if director is not None and director.placement is not None:
        director_host = director.placement.host_id
    for member in members:
        placement = member.placement
        key = placement.pane_key if placement is not None else None
        pane_id = placement.mux_pane_id if placement is not None else None
        other: int | None = None
        status: PaneStatus
        if placement is None:
            status = "no_placement"
        elif key is None:
            status = "pending"
        elif member.kind == "director" or key == director_key:
            status = "director"
        elif not is_local(placement.host_id, director_host, here):
            # Another host's pane (docs/runtime.md §10.2): never killed from here.
            status = "elsewhere"
        elif key in shared:
            status, other = "shared", shared[key]
        elif keep_panes:
            status = "kept"
        else:
            status = "killed"  # decided by the kill below
            kill.setdefault(key, []).append(len(rows))
        rows.append(PaneReport(member.member_id, member.name, pane_id, status, other))
    return _Plan(rows, kill)


# --- killing -------------------------------------------------------------------------------------


def _backend(fleet_id: int, name: str) -> Any:
    from cafleet.mux import MultiplexerError, usable_backend

    try:
        return usable_backend(name)
    except MultiplexerError as exc:
        raise WorkflowError(msg_cannot_kill(fleet_id, str(exc))) from exc


def _kill_panes(
    backends: dict[str, Any],
    keys: Sequence[PaneKey],
    placements: Mapping[PaneKey, Placement] | None = None,
) -> dict[PaneKey, bool]:
    """Kill each pane (True: killed, False: already gone), then make sure every process that
    ran in them has ended, found beforehand (`reaping.pane_leftovers`; a pane already gone is
    searched when ``placements`` shows it was made on the running server). A failing kill
    ends the processes of the panes killed so far and raises `kill-pane failed for pane …`."""
    from cafleet.mux import MultiplexerError
    from cafleet.procs import end_processes
    from cafleet.workflows.reaping import made_on_this_server, pane_leftovers

    known = placements or {}
    procs: set[Proc] = set()
    outcome: dict[PaneKey, bool] = {}
    try:
        for name in sorted({k[0] for k in keys}):
            backend = backends[name]
            mine = {k[2]: known.get(k) for k in keys if k[0] == name}

            def searchable(pane: str, backend: Any = backend, mine: Any = mine) -> bool:
                placement = mine.get(pane)
                return placement is not None and made_on_this_server(backend, placement)

            try:
                procs |= pane_leftovers(backend, list(mine), searchable)
            except MultiplexerError as exc:
                first = next(k for k in keys if k[0] == name)
                raise WorkflowError(MSG_KILL_FAILED.format(pane_id=first[2], detail=exc)) from exc
        for key in keys:
            try:
                outcome[key] = bool(backends[key[0]].kill_pane(key[2], ignore_missing=True))
            except MultiplexerError as exc:
                raise WorkflowError(MSG_KILL_FAILED.format(pane_id=key[2], detail=exc)) from exc
    finally:
        end_processes(procs)
    return outcome


def _not_ours(
    fleet_id: int,
    backends: dict[str, Any],
    members: Sequence[Member],
    keys: Container[PaneKey],
) -> set[PaneKey]:
    """The pane is ours (docs/runtime.md §1.8), checked for every pane before any is killed: a pane
    of another tmux server refuses the whole delete (`msg_cannot_kill`, nothing killed or
    written); a pane id this server reused for a pane in another session or window means the
    member's own pane is gone, so it is left alone and reported `already_gone`."""
    from cafleet.mux import MSG_NOT_OURS, owner_of, owner_problem, same_server

    reused: set[PaneKey] = set()
    for member in members:
        placement = member.placement
        if placement is None or placement.pane_key is None or placement.pane_key not in keys:
            continue
        key = placement.pane_key
        backend = backends[key[0]]
        problem = owner_problem(backend, key[2], owner_of(placement))
        if problem is None:
            continue
        if problem == MSG_NOT_OURS.format(pane_id=key[2]) and same_server(
            getattr(backend, "socket_path", None), placement.mux_socket
        ):
            reused.add(key)
            continue
        raise WorkflowError(msg_cannot_kill(fleet_id, problem))
    return reused


# --- the loop ------------------------------------------------------------------------------------


def _is_loop_of(argv: Sequence[str], fleet_id: int) -> bool:
    """`… cafleet monitor <fleet_id> …` (`python -m cafleet` or the console script)."""
    for i, arg in enumerate(argv):
        if arg == "monitor" and any(os.path.basename(a) == "cafleet" for a in argv[:i]):
            return str(fleet_id) in argv[i + 1 :]
    return False


def stop_fleet_loop(fleet_id: int, pid: int | None, *, timeout: float = LOOP_STOP_TIMEOUT) -> bool:
    """SIGTERM the fleet's loop process ``pid`` (when it is one) and wait until it exited;
    SIGKILL after ``timeout``. True when a loop was stopped."""
    from cafleet.procs import alive, cmdline, identify

    if pid is None:
        return False
    proc = identify(pid)
    if proc is None or not _is_loop_of(cmdline(pid), fleet_id):
        return False
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 2.0)):
        if not alive(proc):
            return True
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while alive(proc) and time.monotonic() < deadline:
            time.sleep(0.05)
    return not alive(proc)


# --- delete --------------------------------------------------------------------------------------


def delete(
    conn: Connection,
    settings: Settings,
    fleet_id: int,
    *,
    keep_panes: bool = False,
    discard_worktree: bool = False,
) -> Deleted:
    """Tear a fleet down (docs/cli.md §2.6); see the module docstring for the order. Last, each
    deregistered member's worktree is retired (docs/worktrees.md): removed when clean, or with
    ``discard_worktree``; kept while its pane still runs. A fleet already deleted is refused
    (`fleet <id> is deleted`), not reported as a delete of nobody."""
    from cafleet.broker import fleet_worktrees, get_fleet
    from cafleet.broker.errors import FleetDeleted

    if get_fleet(conn, fleet_id).deleted_at is not None:
        raise FleetDeleted(fleet_id)
    trees = fleet_worktrees(conn, fleet_id)  # the active members' (none once deleted)
    broken = [] if keep_panes else _half_made(conn, settings, fleet_id)
    deleted = _delete(conn, settings, fleet_id, keep_panes=keep_panes)
    if broken:
        deleted = _kill_orphans(deleted, broken)
    if not trees:
        return deleted
    return dataclasses.replace(
        deleted, worktrees=_retire(deleted.panes, trees, keep_panes, discard_worktree)
    )


def _half_made(conn: Connection, settings: Settings, fleet_id: int) -> list[Member]:
    """The live fleet's members left half-made by an interrupted `member create`: the pane that
    create may have spawned is recorded nowhere, so `_delete` cannot kill it."""
    from cafleet import broker
    from cafleet.workflows.halfmade import half_made

    if broker.get_fleet(conn, fleet_id).deleted_at is not None:
        return []
    members = [e.member for e in broker.member_roster(conn, fleet_id=fleet_id)]
    return [left.member for left in half_made(conn, settings.db_dir, members)]


def _kill_orphans(deleted: Deleted, members: Sequence[Member]) -> Deleted:
    """Kill each half-made member's spawned pane, found by its environment, and report it
    `killed` instead of `pending`."""
    from cafleet.workflows.halfmade import kill_orphan

    killed: dict[int, str] = {}
    for member in members:
        assert member.placement is not None
        with contextlib.suppress(WorkflowError):  # a kill that fails leaves it `pending`
            pane = kill_orphan(member.placement)
            if pane is not None:
                killed[member.member_id] = pane
    rows = tuple(
        dataclasses.replace(r, pane_id=killed[r.member_id], status="killed")
        if r.member_id in killed and r.status == "pending"
        else r
        for r in deleted.panes
    )
    return dataclasses.replace(deleted, panes=rows)


def _retire(
    rows: Sequence[PaneReport],
    trees: dict[int, WorktreeSpec],
    keep_panes: bool,
    discard: bool,
) -> tuple[Retired, ...]:
    from cafleet.workflows.worktrees import retire

    done: list[Retired] = []
    for row in rows:
        spec = trees.get(row.member_id)
        if spec is None:
            continue
        running = None
        if row.status == "kept" or (keep_panes and row.pane_id is not None):
            running = "its pane was kept (--keep-panes)"
        elif row.status == "shared":
            running = f"its pane still runs (shared with member {row.shared_with})"
        done.append(retire(row.member_id, spec, discard=discard, running=running))
    return tuple(done)


def _delete(
    conn: Connection, settings: Settings, fleet_id: int, *, keep_panes: bool = False
) -> Deleted:
    from cafleet import broker, signals
    from cafleet.broker.errors import PlacementsChanged

    fleet = broker.get_fleet(conn, fleet_id)  # unknown: `fleet '<id>' not found.`
    live = fleet.deleted_at is None
    placements = broker.fleet_placements(conn, fleet_id)
    director_key = next(
        (p.pane_key for p in placements if p.member_id == fleet.director_member_id), None
    )
    backends: dict[str, Any] = {}
    if live and not keep_panes:
        # Fail before any lock or write when the panes cannot be killed.
        for name in sorted({p.backend for p in placements if p.pane_key != director_key}):
            backends[name] = _backend(fleet_id, name)
    runtime = broker.get_monitor_runtime(conn, fleet_id) if live else None

    with _fleet_pane_locks(settings.db_dir, fleet_id, placements, settings.pane_lock_timeout) as (
        locked,
        try_lock,
    ):
        signals.check()
        rows: list[PaneReport] = []
        late: list[tuple[int, PaneKey]] = []
        if live:
            # Re-read under the locks: a member may have gained a pane while we waited.
            members = [e.member for e in broker.member_roster(conn, fleet_id=fleet_id)]
            for member in members:
                key = member.placement.pane_key if member.placement is not None else None
                if key is not None and key not in locked:
                    if not try_lock(key):
                        raise WorkflowError(lock_busy_message(member.member_id))
                    locked.add(key)
            plan = _plan(
                members,
                director_key,
                broker.panes_shared_outside(conn, fleet_id),
                keep_panes=keep_panes,
            )
            if plan.kill:
                for name in sorted({k[0] for k in plan.kill}):
                    if name not in backends:
                        backends[name] = _backend(fleet_id, name)
                reused = _not_ours(fleet_id, backends, members, plan.kill)
                killed = _kill_panes(
                    backends,
                    sorted(set(plan.kill) - reused, key=lambda k: plan.kill[k][0]),
                    {
                        m.placement.pane_key: m.placement
                        for m in members
                        if m.placement is not None and m.placement.pane_key is not None
                    },
                )
                killed.update(dict.fromkeys(reused, False))
                for key, indexes in plan.kill.items():
                    for i in indexes:
                        if not killed[key]:
                            row = plan.rows[i]
                            plan.rows[i] = PaneReport(
                                row.member_id, row.name, row.pane_id, "already_gone", None
                            )
            rows = plan.rows
        try:
            count = broker.delete_fleet(
                conn, fleet_id=fleet_id, locked_panes=locked, try_lock=try_lock, locked_late=late
            )
        except PlacementsChanged as exc:
            raise WorkflowError(lock_busy_message(exc.member_id)) from exc
        if late and not keep_panes:
            # Panes born between the re-read and the transaction (a `member create` patching
            # its pane): their members are deregistered now; kill them too.
            with contextlib.suppress(WorkflowError):
                gone = _kill_panes(backends, [k for _, k in late if k[0] in backends])
                by_member = dict(late)
                rows = [
                    PaneReport(
                        r.member_id,
                        r.name,
                        by_member[r.member_id][2],
                        "killed" if gone.get(by_member[r.member_id]) else "already_gone",
                        None,
                    )
                    if r.member_id in by_member and r.status == "pending"
                    else r
                    for r in rows
                ]

    stopped = None
    if live and not keep_panes and runtime is not None and stop_fleet_loop(fleet_id, runtime.pid):
        stopped = runtime.pid
    return Deleted(fleet_id, count, tuple(rows), stopped)


__all__ = ["Deleted", "PaneReport", "delete", "msg_cannot_kill", "stop_fleet_loop"]
