"""Recovering lost panes (docs/cli.md §2.23, §2.24; docs/runtime.md §5.11).

`respawn`: a member (the monitor included) whose pane is gone gets a new pane running the same
agent with its original spawn prompt (`member_spawns`; the bundled prompt for a monitor without
one), placed like a new member; it keeps its member id, inbox and history. Under the old pane's
lock: re-read, spawn, then the new pane's lock and one guarded placement update; a failure after
the spawn kills the new pane and leaves the placement as it was.

`adopt`: a fleet whose root Director's pane is gone is taken over by the pane that runs
`cafleet fleet adopt`: the Director's placement moves to it under both panes' locks, then the
fleet's loop is started (it stops when the Director's pane goes).

Both hold the member's lock (`cafleet.db.memberlock`) from the check to the recorded move, so
whatever runs at once a member gets one new pane: a second command waits, then finds the
first one's pane running (docs/runtime.md §5.11).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

from cafleet import broker, signals
from cafleet.agents.prompt import render_template
from cafleet.agents.registry import agent_names
from cafleet.assets.guard import require_assets
from cafleet.broker import clear_session_id
from cafleet.broker.errors import PaneDirectsFleet, RootDirectorInactive
from cafleet.db.timefmt import utcnow
from cafleet.errors import error_text
from cafleet.hosts import current_host
from cafleet.monitor.ensure import ensure_monitor_loop
from cafleet.monitor.runtime import is_live
from cafleet.mux import (
    MSG_NOT_OURS,
    MultiplexerError,
    PaneGone,
    PaneKey,
    get_backend,
    owner_of,
    same_server,
    tmux_backend,
)
from cafleet.mux.locks import PaneLockAbandoned, PaneLockTimeout, acquire_pane_locks
from cafleet.records import PaneKey as Key
from cafleet.records import Placement
from cafleet.workflows import placing
from cafleet.workflows.errors import WorkflowError
from cafleet.workflows.hosts import start_on_demand
from cafleet.workflows.locking import wait_for_lock
from cafleet.workflows.members import finish_pending, recorded_spawn
from cafleet.workflows.panes import (
    active_member,
    backend_for,
    concrete_placement,
    predates_server,
    refuse_elsewhere,
)
from cafleet.workflows.sessions import resume_record
from cafleet.workflows.spawning import (
    Cleanup,
    fail_with_cleanup,
    lock_busy_message,
    member_marker,
    spawn_member_pane,
    spawn_plan,
    validate_agent_options,
)
from cafleet.workflows.worktrees import require_present

if TYPE_CHECKING:
    from cafleet.config import Settings
    from cafleet.db.runtime import Connection
    from cafleet.records import Member, Placement
    from cafleet.workflows.placing import WindowMode

MONITOR_DISPLAY_NAME = "monitor"


@dataclass(frozen=True, slots=True)
class Respawned:
    member: Member  # with its new placement
    previous_pane_id: str | None  # None: a half-made member's create was finished
    pane_id: str
    resumed_session: str | None = None  # the agent session continued (`--resume`)
    # Re-created on a host other than its root Director's (docs/runtime.md §10.3): this host's
    # id and its delivery loop (pid, or why it is not running).
    host_id: str | None = None
    host_loop_pid: int | None = None
    host_loop_problem: str | None = None


class PaneStillRunning(WorkflowError):
    """The member's pane runs (perhaps just re-created by another command): ``pane_id``."""

    def __init__(self, member_id: int, pane_id: str) -> None:
        super().__init__(
            f"member {member_id}'s pane {pane_id} is still running; 'cafleet member respawn' "
            f"re-creates a lost pane (to replace a running one: cafleet member delete {member_id})"
        )
        self.member_id = member_id
        self.pane_id = pane_id


@contextlib.contextmanager
def member_held(conn: Connection, settings: Settings, member_id: int) -> Iterator[None]:
    """The member's lock (`cafleet.db.memberlock`) for the body, waited for up to the pane-lock
    timeout; still taken then, §1.11's lock message."""
    from cafleet.db.memberlock import MemberLockTimeout, member_lock

    lock = member_lock(conn, settings.db_dir, member_id, timeout=settings.pane_lock_timeout)
    try:
        lock.__enter__()
    except MemberLockTimeout:
        raise WorkflowError(lock_busy_message(member_id)) from None
    with contextlib.ExitStack() as stack:
        stack.push(lock)
        yield


@dataclass(frozen=True, slots=True)
class Adopted:
    fleet_id: int
    director: Member  # with its new placement
    previous_pane_id: str | None
    loop_pid: int | None
    loop_warning: str | None  # the loop could not be started (docs/cli.md §1.11's warning text)


def _lock(settings: Settings, key: Any, member_id: int, purpose: str) -> Any:
    """One pane lock, waiting up to the pane-lock timeout (a timeout is the lock message)."""

    return wait_for_lock(settings, key, purpose, lambda _exc: lock_busy_message(member_id))


def _live_fleet(conn: Connection, fleet_id: int) -> Any:

    fleet = broker.get_fleet(conn, fleet_id)
    if fleet.deleted_at is not None:
        raise broker.FleetDeleted(fleet_id)
    return fleet


# --- respawn -------------------------------------------------------------------------------------


def _worktree_cwd(conn: Connection, member_id: int) -> str | None:
    """The member starts again in its worktree (docs/worktrees.md); None: it has none. A
    worktree that is gone is refused before anything is spawned."""

    spec = broker.get_spawn(conn, member_id)
    if spec is None or spec.worktree is None:
        return None

    return require_present(member_id, spec.worktree)


def _old_pane_state(backend: Any, member_id: int, placement: Placement) -> str:
    """`gone`, `dead` (its agent exited; the pane stays until killed) or a refusal.

    The pane is ours (docs/runtime.md §1.8): a placement made on another tmux server is refused
    (its pane may well run there); a pane id this server reused for a pane in another session
    or window, or a pane of a later server or another process with its id, means the member's
    pane is gone, and the other pane is never touched."""
    from cafleet.mux import (
        MSG_NOT_OURS,
        MultiplexerError,
        replaced,
        same_server,
    )

    pane_id = placement.mux_pane_id
    assert pane_id is not None
    not_ours = MSG_NOT_OURS.format(pane_id=pane_id)
    if not same_server(getattr(backend, "socket_path", None), placement.mux_socket):
        if server_gone(placement.mux_socket):
            return "gone"  # its server is gone (a reboot): so is every pane it had
        raise WorkflowError(not_ours)
    try:
        status = backend.pane_status(pane_id)
    except PaneGone:
        return "gone"
    except MultiplexerError as exc:
        raise WorkflowError(str(exc)) from exc
    owner = owner_of(placement)
    where = (status.session, status.window_id)
    if None not in where and where != (owner.session, owner.window_id):
        return "gone"
    if replaced(owner, status.server, status.pane_pid):
        return "gone"
    if status.dead:
        return "dead"
    raise PaneStillRunning(member_id, pane_id)


def server_gone(socket: str | None) -> bool:
    """Whether the tmux server of ``socket`` is gone: its socket file does not exist, or
    nothing listens on it (a server that was killed or a machine that rebooted)."""
    import socket as sockets

    if socket is None:
        return False
    if not os.path.exists(socket):
        return True
    probe = sockets.socket(sockets.AF_UNIX, sockets.SOCK_STREAM)
    try:
        probe.settimeout(2.0)
        probe.connect(socket)
    except ConnectionRefusedError:
        return True
    except OSError:
        return False
    finally:
        probe.close()
    return False


def respawn(
    conn: Connection,
    settings: Settings,
    member_id: int,
    *,
    window: WindowMode = "auto",
    resume: bool = False,
) -> Respawned:
    """Re-create a lost member pane with the member's agent and original prompt; with
    ``resume``, the agent continues the member's own session instead (docs/runtime.md §9.7),
    in the directory that session ran in. Without it the member starts afresh, and the
    session id learned for it is forgotten (its new session is learned). Under the member's
    lock from the first read to the recorded move."""
    active_member(conn, member_id)  # unknown or deregistered: refused before any lock
    with member_held(conn, settings, member_id):
        return respawn_locked(conn, settings, member_id, window=window, resume=resume)


def respawn_locked(
    conn: Connection,
    settings: Settings,
    member_id: int,
    *,
    window: WindowMode = "auto",
    resume: bool = False,
) -> Respawned:
    """`respawn` for a caller that holds the member's lock (`member_held`)."""

    member = active_member(conn, member_id)  # unknown or deregistered: `MemberNotFound`
    fleet = _live_fleet(conn, member.fleet_id)
    if member.kind == "director":
        raise WorkflowError(
            f"member {member_id} is the root Director of fleet {fleet.fleet_id}; run "
            f"'cafleet fleet adopt {fleet.fleet_id}' in the pane that takes its place"
        )
    if member.placement is not None and member.placement.mux_pane_id is None:
        record = None
        if resume:
            record = resume_record(conn, settings, member)  # refused here: nothing spawned
        made = finish_pending(conn, settings, member, window=window, resumed=record)
        return Respawned(made.member, None, made.pane_id, made.resumed_session, *made.host_loop)
    placement = concrete_placement(member, "nothing to respawn")

    refuse_elsewhere(conn, member)  # its old pane's id names another pane here
    old_pane = placement.mux_pane_id
    assert old_pane is not None
    director = broker.get_member(conn, fleet.director_member_id)
    director_placement = director.placement
    if director_placement is None or director_placement.mux_pane_id is None:
        raise WorkflowError(
            f"the root Director of fleet {fleet.fleet_id} has no pane to split from"
        )

    template, model, effort, permissions = recorded_spawn(conn, member)
    cwd = _worktree_cwd(conn, member_id)
    agent_name = placement.coding_agent

    require_assets(conn, agents=[agent_name])
    agent = validate_agent_options(
        agent_name, model=model, effort=effort, model_flag="--model", effort_flag="--effort"
    )
    plan = spawn_plan(agent, template, model, effort, permissions)
    resumed = None
    if resume:
        resumed = resume_record(conn, settings, member)  # refused here: nothing spawned

    here = current_host()
    away = director_placement.host_id not in (None, here)
    if away:
        # Its root Director is on another host (docs/runtime.md §10.3): the new pane goes next
        # to the pane this command runs in, on this host's tmux server, like `member create`.

        backend: Any = tmux_backend()
        anchor = placing.local_anchor(
            backend, director_placement, here, f"cafleet member respawn {member_id}"
        )
    else:
        backend = backend_for(placement.backend)

        if not same_server(
            getattr(backend, "socket_path", None), director_placement.mux_socket
        ) or predates_server(backend, director_placement):
            # Splitting "@<window>" here would split a window of this server (or of a later
            # server on its socket, docs/runtime.md §1.8), not the Director's.
            raise WorkflowError(MSG_NOT_OURS.format(pane_id=director_placement.mux_pane_id))
        anchor = director_placement
    if broker.pane_shared_with(conn, placement) is not None or predates_server(backend, placement):
        # A new server reused the id for another member's (or the Director's) pane, or the
        # pane was made on an earlier server on this socket: the member's own pane is gone,
        # and the pane that has its id now is never touched.
        state = "gone"
    else:
        state = _old_pane_state(backend, member_id, placement)
    overflow = placing.fleet_windows(
        placing.on_host_of(
            broker.placed_members(conn, fleet.fleet_id), director_placement.host_id, anchor
        ),
        anchor,
        exclude=member_id,
    )
    signals.check()

    old_key = PaneKey(placement.backend, placement.mux_session, old_pane)
    with _lock(settings, old_key, member_id, f"respawn member {member_id}"):
        fresh = active_member(conn, member_id)
        if fresh.placement is None or (fresh.placement.pane_key, fresh.placement.created_at) != (
            placement.pane_key,
            placement.created_at,
        ):
            raise WorkflowError(lock_busy_message(member_id))
        _reap(backend, placement, settings, dead=state == "dead")
        rendered = render_template(
            plan.template,
            fleet_id=fleet.fleet_id,
            member_id=member_id,
            director_member_id=director.member_id,
            coding_agent=agent_name,
        )
        monitor = member.kind == "monitor"
        display_name = MONITOR_DISPLAY_NAME if monitor else member.name
        if resumed is not None:
            argv = plan.resume_argv(
                resumed.session_id,
                display_name=display_name,
                monitor=monitor,
                db_dir=settings.db_dir,
                member_id=member_id,
            )
        else:
            argv = plan.argv(
                rendered,
                display_name=display_name,
                monitor=monitor,
                db_dir=settings.db_dir,
                member_id=member_id,
            )
        new_placement = _spawn_and_rebind(
            conn,
            settings,
            backend,
            member=member,
            director_placement=anchor,
            overflow=overflow,
            window=window,
            window_name=placing.window_name(fleet.fleet_id, fleet.name),
            argv=argv,
            expected=(placement.backend, placement.mux_session, old_pane),
            made_at=placement.created_at,
            coding_agent=agent_name,
            cwd=cwd if resumed is None else resumed.cwd,
            extra_env={} if monitor else plan.agent.hook_env(member_id),
        )
    if resumed is None:
        clear_session_id(conn, member_id)
    pane_id = new_placement.mux_pane_id
    assert pane_id is not None
    done = Respawned(
        member._replace(placement=new_placement),
        old_pane,
        pane_id,
        None if resumed is None else resumed.session_id,
    )
    if away:
        # This host's delivery loop types its lines, started on demand (docs/runtime.md §10.4).

        pid, problem = start_on_demand(conn, here)
        done = dataclasses.replace(done, host_id=here, host_loop_pid=pid, host_loop_problem=problem)
    return done


def _spawn_and_rebind(
    conn: Connection,
    settings: Settings,
    backend: Any,
    *,
    member: Member,
    director_placement: Placement,
    overflow: list[str],
    window: WindowMode,
    window_name: str,
    argv: list[str],
    expected: tuple[str, str, str],
    made_at: str,
    coding_agent: str,
    cwd: str | None = None,
    extra_env: dict[str, str] | None = None,
) -> Placement:
    """Spawn the new pane, then move the placement to it under the new pane's lock; a failure
    after the spawn kills the new pane (docs/cli.md §1.11's cleanup lines)."""

    member_id = member.member_id
    spawned = spawn_member_pane(
        backend,
        settings,
        director_placement=director_placement,
        overflow=overflow,
        window=window,
        window_name=window_name,
        argv=argv,
        coding_agent=coding_agent,
        cwd=cwd,
        member_id=member_id,
        extra_env=extra_env,
    )

    def kill_new(primary: str | None) -> NoReturn:
        cleanup = Cleanup()
        cleanup.step(
            f"pane {spawned.pane_id}",
            lambda: backend.kill_pane(spawned.pane_id, ignore_missing=True),
        )
        fail_with_cleanup(primary, cleanup)

    if signals.stop_requested():
        kill_new(None)

    new_key = PaneKey(expected[0], spawned.session, spawned.pane_id)
    try:
        if new_key == PaneKey(*expected):
            # A new server handed the new pane the old one's id: its lock is already held.
            new_lock: Any = contextlib.nullcontext()
        else:
            new_lock = _lock(settings, new_key, member_id, f"respawn member {member_id}")
    except PaneLockAbandoned:
        kill_new(None)
    except WorkflowError:
        kill_new(f"placement update failed: pane {spawned.pane_id} is receiving another keystroke")
    with new_lock:
        try:
            return broker.rebind_placement(
                conn,
                member_id=member_id,
                expected=expected,
                pane=spawned,
                coding_agent=coding_agent,
                mux_socket=getattr(backend, "socket_path", None),
                made_at=made_at,
            )
        except broker.PlacementsChanged:
            kill_new(lock_busy_message(member_id))
        except Exception as exc:
            kill_new(f"placement update failed: {error_text(exc)}")
    raise AssertionError("unreachable")


def _reap(backend: Any, placement: Placement, settings: Settings, *, dead: bool) -> None:
    """Before the member's agent is started again: kill its ``dead`` pane, end what its old
    pane left running (`reaping.left_running`: a child that ignored SIGHUP, a daemon) and any
    agent spawned for it but never recorded (`_end_strays`)."""
    from cafleet.procs import end_processes
    from cafleet.workflows.reaping import left_running

    assert placement.mux_pane_id is not None
    left = left_running(backend, placement, dead=dead)  # before the kill: then no tree
    try:
        if dead:
            backend.kill_pane(placement.mux_pane_id, ignore_missing=True)
        _end_strays(backend, member_marker(settings, placement.member_id), placement.mux_pane_pid)
    except MultiplexerError as exc:
        raise WorkflowError(str(exc)) from exc
    finally:
        # A gone pane's leftovers get no SIGHUP: no grace before SIGTERM.
        end_processes(left, grace=2.0 if dead else 0.0)


def _end_strays(backend: Any, marker: str, recorded: int | None) -> None:
    """Kill every pane of this server whose agent was spawned for the member (``marker``,
    `spawning.member_marker`) but is not the process its placement records (``recorded``),
    and end what runs in it: a command killed between its spawn and the recorded move left
    it, and the caller, holding the member's lock, is about to spawn the member's one agent
    (docs/runtime.md §5.11)."""
    from cafleet.procs import Proc, end_processes, pane_processes, panes_with_env

    socket = getattr(backend, "socket_path", None)
    if not socket:
        return
    pids = backend.pane_pids()
    strays = [pane for pane in panes_with_env(pids, marker) if pids[pane] != recorded]
    if not strays:
        return
    found: set[Proc] = set()
    for procs in pane_processes(socket, {pane: pids[pane] for pane in strays}).values():
        found |= procs
    try:
        for pane in strays:
            backend.kill_pane(pane, ignore_missing=True)
    finally:
        end_processes(found)


# --- adopt ---------------------------------------------------------------------------------------


def _refuse_member_pane(conn: Connection, here: Any, backend: Any) -> None:
    """The adopting pane must not be any active member's pane (it would never be typed into);
    a placement made on an earlier server on this socket is not (its pane is gone)."""

    # Only the pane counts here; any agent's name fills the placement.
    probe = Placement(0, "tmux", here.session, here.window_id, here.pane_id, agent_names()[0], "")
    other = broker.pane_shared_with(conn, probe)
    if other is not None:
        placement = broker.get_member(conn, other).placement
        if placement is not None and predates_server(backend, placement):
            other = None
    if other is not None:
        raise WorkflowError(
            f"pane {here.pane_id} is member {other}'s pane; run 'cafleet fleet adopt' in a "
            "pane of its own"
        )


def _director_pane_is_open(backend: Any, placement: Placement, live: frozenset[str]) -> bool:
    """Whether the Director's own pane still runs (docs/runtime.md §1.8: the pane must be ours): on
    the server the placement was made on, in its session and window. A pane id reused for a pane
    elsewhere does not count; a placement of another server is asked on that server's socket
    (a server that no longer answers has no pane open)."""

    from cafleet.mux import MultiplexerError, replaced, same_server

    pane_id = placement.mux_pane_id
    assert pane_id is not None
    socket = placement.mux_socket
    there = backend
    if not same_server(backend.socket_path, socket):
        there = get_backend("tmux", env={**os.environ, "TMUX": f"{socket},0,0"})
    elif pane_id not in live:
        return False
    try:
        status = there.pane_status(pane_id)
    except MultiplexerError:
        return False
    owner = owner_of(placement)
    if replaced(owner, status.server, status.pane_pid):
        return False  # a later server's pane with its id: the Director's is gone
    where = (status.session, status.window_id)
    return None in where or where == (owner.session, owner.window_id)


def adopt(
    conn: Connection, settings: Settings, fleet_id: int, *, coding_agent: str | None = None
) -> Adopted:
    """Make the calling pane the root Director's pane of a fleet whose Director pane is gone."""
    taken = take_over(conn, settings, fleet_id, coding_agent=coding_agent)
    assert taken is not None  # never None without `if_needed`
    director, moved, old_pane = taken
    pid, warning = _start_loop(conn, fleet_id)
    return Adopted(fleet_id, director._replace(placement=moved), old_pane, pid, warning)


def take_over(
    conn: Connection,
    settings: Settings,
    fleet_id: int,
    *,
    coding_agent: str | None = None,
    if_needed: bool = False,
) -> tuple[Member, Placement, str | None] | None:
    """`adopt` without starting the loop: (Director, its new placement, its old pane id), under
    the Director's member lock (a second command waits, then finds the pane taken). With
    ``if_needed``, None when the calling pane already is the Director's on this server
    (`fleet restore`) instead of that refusal."""

    fleet = _live_fleet(conn, fleet_id)
    with member_held(conn, settings, fleet.director_member_id):
        return _take_over(conn, settings, fleet_id, coding_agent=coding_agent, if_needed=if_needed)


def _take_over(
    conn: Connection,
    settings: Settings,
    fleet_id: int,
    *,
    coding_agent: str | None,
    if_needed: bool,
) -> tuple[Member, Placement, str | None] | None:

    fleet = _live_fleet(conn, fleet_id)
    director = broker.get_member(conn, fleet.director_member_id)
    if not director.is_active:
        raise RootDirectorInactive(fleet_id, director.member_id)
    placement = director.placement
    if placement is None:
        raise WorkflowError(
            f"fleet {fleet_id}'s root Director (member {director.member_id}) has no placement"
        )

    backend = tmux_backend()
    try:
        backend.ensure_available()
        here = backend.discover_context()
        live = backend.list_panes()
    except MultiplexerError as exc:
        raise WorkflowError(f"cafleet fleet adopt must be run inside a tmux pane: {exc}") from exc

    new_key = Key("tmux", here.session, here.pane_id)

    me = current_host()
    away = placement.host_id not in (None, me)
    # The Director's pane was made on an earlier server on this socket (a reboot): whatever
    # pane has its id now is not it.
    stale = not away and placement.pane_key is not None and predates_server(backend, placement)
    if placement.pane_key == new_key and not stale and not away:
        if if_needed:
            return None
        raise WorkflowError(
            f"pane {here.pane_id} already is the root Director's pane of fleet {fleet_id}"
        )
    taken = broker.fleet_directed_from(conn, new_key)
    if taken is not None and not (stale and taken.fleet_id == fleet_id):
        raise PaneDirectsFleet(here.pane_id, taken.fleet_id, taken.name)
    _refuse_member_pane(conn, here, backend)
    old_pane = placement.mux_pane_id
    if away:
        # Its pane is on another host, whose tmux this one never asks (docs/runtime.md §10.2):
        # the fleet loop there runs exactly while that pane is open, so its heartbeat decides.
        _refuse_open_elsewhere(conn, fleet_id, placement)
    elif (
        old_pane is not None
        and not stale
        and _director_pane_is_open(backend, placement, frozenset(live))
    ):
        raise WorkflowError(
            f"fleet {fleet_id}'s root Director pane {old_pane} is still open; "
            "'cafleet fleet adopt' replaces a Director pane that is gone"
        )
    signals.check()

    keys = [PaneKey(*new_key)]
    if placement.pane_key is not None and placement.pane_key != new_key:
        keys.append(PaneKey(*placement.pane_key))
    try:
        held = acquire_pane_locks(
            settings.db_dir,
            keys,
            timeout=settings.pane_lock_timeout,
            purpose=f"adopt fleet {fleet_id}",
            keep_waiting=signals.keep_waiting,
        )
    except PaneLockAbandoned:
        signals.check()
        raise
    except PaneLockTimeout:
        raise WorkflowError(lock_busy_message(director.member_id)) from None
    with held:
        try:
            moved = broker.rebind_placement(
                conn,
                member_id=director.member_id,
                expected=(placement.backend, placement.mux_session, old_pane),
                pane=here,
                coding_agent=coding_agent or placement.coding_agent,
                mux_socket=backend.socket_path,
                made_at=placement.created_at,
                spawned=False,  # the user's pane: its server alone (docs/runtime.md §1.8)
            )
        except broker.PlacementsChanged as exc:
            raise WorkflowError(lock_busy_message(director.member_id)) from exc
    return director, moved, old_pane


def _refuse_open_elsewhere(conn: Connection, fleet_id: int, placement: Placement) -> None:
    """Adopting a fleet whose root Director is on another host (docs/runtime.md §10.3): refused
    while the fleet loop there is live by its heartbeat (it stops when the Director's pane
    goes), since that pane may still be open."""

    row = broker.get_monitor_runtime(conn, fleet_id)
    if row is not None and is_live(row, utcnow(), remote=True):
        raise WorkflowError(
            f"fleet {fleet_id}'s root Director pane {placement.mux_pane_id or '-'} is on host "
            f"{placement.host_id}, whose monitor loop for the fleet is live (pid {row.pid}): "
            "that pane is open there; 'cafleet fleet adopt' replaces a Director pane that is gone"
        )


def _start_loop(conn: Connection, fleet_id: int) -> tuple[int | None, str | None]:
    """The fleet's loop (it stopped when the Director's pane went); a failure only warns."""
    from cafleet.monitor.supervisor import LoopNotStarted, StartAbandoned

    if signals.stop_requested():
        return None, None
    try:
        return ensure_monitor_loop(conn, fleet_id, keep_waiting=signals.keep_waiting), None
    except StartAbandoned:
        return None, None
    except LoopNotStarted as exc:
        return None, (
            f"monitor loop for fleet {fleet_id} is not running and could not be started: "
            f"{exc.detail}; see {exc.log_path}"
        )


__all__ = [
    "Adopted",
    "PaneStillRunning",
    "Respawned",
    "adopt",
    "member_held",
    "respawn",
    "respawn_locked",
    "server_gone",
    "start_loop",
    "take_over",
]

start_loop = _start_loop
