"""The member workflows that touch panes (docs/cli.md §2.7, §2.10, §2.12, §2.13): create, delete,
prompt, ping (the capture is `cafleet.workflows.panes.capture_member`).

`cafleet member create|delete|prompt|ping` and the WebUI both run these. libtmux is never
imported here; the tmux backend only runs tmux through its timed runner, and `delete` of a
pending or placementless member never builds a backend at all.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, NoReturn

from cafleet import broker, signals
from cafleet.agents.permissions import DEFAULT_PROFILE, LEGACY_PROFILE, PROFILES
from cafleet.agents.prompt import (
    load_default_member_prompt,
    load_default_monitor_prompt,
    render_template,
)
from cafleet.assets.guard import require_assets
from cafleet.broker.errors import (
    CannotDeregisterRootDirector,
    FleetDeleted,
    MemberDeregistered,
    MonitorSlotTaken,
    NoActiveMonitor,
    PlacementVanished,
    RootDirectorInactive,
)
from cafleet.delivery.keys import Target, type_into_pane
from cafleet.delivery.policy import SCROLLBACK_LINES
from cafleet.errors import error_text
from cafleet.hosts import current_host
from cafleet.mux import (
    MSG_NOT_OURS,
    MultiplexerError,
    owner_of,
    same_server,
    tmux_backend,
)
from cafleet.mux.locks import PaneLockAbandoned, PaneLockTimeout, acquire_pane_lock
from cafleet.records import PaneKey, PlacementSpec, SpawnSpec
from cafleet.text import id_tag, line_id
from cafleet.workflows import halfmade, placing, worktrees
from cafleet.workflows.errors import WorkflowError
from cafleet.workflows.halfmade import kill_orphan, refuse
from cafleet.workflows.hosts import start_on_demand
from cafleet.workflows.leftovers import left_behind
from cafleet.workflows.locking import wait_for_lock
from cafleet.workflows.panes import (
    active_member,
    backend_for,
    concrete_placement,
    elsewhere,
    refuse_elsewhere,
)
from cafleet.workflows.reaping import kill_pane_and_leftovers
from cafleet.workflows.spawning import (
    MSG_KILL_FAILED,
    Cleanup,
    fail_with_cleanup,
    lock_busy_message,
    spawn_member_pane,
    spawn_plan,
    validate_agent_options,
)
from cafleet.workflows.worktrees import resume, retire, undo

if TYPE_CHECKING:
    from cafleet.config import Settings
    from cafleet.db.runtime import Connection
    from cafleet.delivery.keys import TypeOutcome
    from cafleet.mux import PaneContext
    from cafleet.mux.tmux import TmuxBackend
    from cafleet.records import Fleet, Member, PaneKey, Placement, WorktreeSpec
    from cafleet.sessions import SessionRecord
    from cafleet.workflows.placing import WindowMode
    from cafleet.workflows.spawning import SpawnPlan
    from cafleet.workflows.worktrees import Plan as WorktreePlan
    from cafleet.workflows.worktrees import Request as WorktreeRequest
    from cafleet.workflows.worktrees import Retired

PING_LINE = (
    "[cafleet] ping: run cafleet message poll {member_id}, act on and ack what you find, then "
    "resume your work if something was still running."
)

PaneStatus = Literal[
    "killed", "already_gone", "shared", "pending", "no_placement", "elsewhere", "deregistered"
]


@dataclass(frozen=True, slots=True)
class Created:
    member: Member  # with its concrete placement
    coding_agent: str
    pane_id: str
    worktree: WorktreeSpec | None = None  # `--worktree` (docs/worktrees.md)
    permissions: str | None = None  # the member's profile (None: the monitor's fixed rules)
    # A member on another host than its root Director (docs/runtime.md §10.3): this host's id
    # and its delivery loop's pid, or why that loop did not start (a warning).
    host_id: str | None = None
    host_loop_pid: int | None = None
    host_loop_problem: str | None = None
    finished: bool = False  # a half-made member's interrupted create was finished
    resumed_session: str | None = None  # the agent session its new pane continues

    @property
    def host_loop(self) -> tuple[str | None, int | None, str | None]:
        return self.host_id, self.host_loop_pid, self.host_loop_problem


@dataclass(frozen=True, slots=True)
class Deleted:
    member_id: int
    pane_id: str | None  # None: the member had no pane (pending, no placement, deregistered)
    pane_status: PaneStatus
    shared_with: int | None  # "shared": the active member whose placement names the pane
    worktree: Retired | None = None  # what became of the member's worktree (docs/worktrees.md)


@dataclass(frozen=True, slots=True)
class Prompted:
    member: Member
    pane_id: str
    text: str


@dataclass(frozen=True, slots=True)
class Pinged:
    member: Member
    pane_id: str | None
    skipped: bool
    reason: Literal["pending_placement", "busy", "held"] | None
    state: str | None = None  # the pane state the gate saw (docs/runtime.md §4.9)


# --- shared lookups ------------------------------------------------------------------------------


def _placed(member: Member) -> Placement:
    """The member's placement row, or the not-spawned-via-create error (a pending one is
    fine: ping skips it)."""
    placement = member.placement
    if placement is None:
        raise WorkflowError(
            f"member {member.member_id} has no placement row; it was not spawned via "
            "'cafleet member create'"
        )
    return placement


def _refuse_director(conn: Connection, member: Member) -> None:
    """docs/cli.md §1.11: never type into the root Director's pane (nor a pane it shares)."""
    refusal = f"cafleet never types into the root Director's pane (member {member.member_id})"
    if member.kind == "director":
        raise WorkflowError(refusal)
    key = member.placement.pane_key if member.placement is not None else None
    if key is None:
        return
    director = broker.director_placement(conn, member.fleet_id)
    if director is not None and key == director.pane_key:
        raise WorkflowError(refusal)


def _pane_key(placement: Placement) -> PaneKey:
    key = placement.pane_key
    assert key is not None
    return key


def _lock_pane(settings: Settings, placement: Placement, member_id: int, purpose: str) -> Any:
    """The placement's pane lock, waited for up to the pane-lock timeout; a timeout is
    `lock_busy_message` (exit 1)."""
    signals.check()
    return wait_for_lock(
        settings, _pane_key(placement), purpose, lambda _exc: lock_busy_message(member_id)
    )


def _default_template(role: Literal["monitor"] | None) -> str:
    return load_default_monitor_prompt() if role == "monitor" else load_default_member_prompt()


# --- create --------------------------------------------------------------------------------------


def create(
    conn: Connection,
    settings: Settings,
    *,
    fleet_id: int,
    name: str,
    description: str,
    coding_agent: str | None,
    model: str | None,
    effort: str | None,
    role: Literal["monitor"] | None,
    prompt: Callable[[], str] | None,
    window: WindowMode = "auto",
    worktree: WorktreeRequest | None = None,
    permissions: str | None = None,
) -> Created:
    """Register a member with a pending placement, spawn its agent next to the root Director,
    patch the pane id under the new pane's lock (docs/cli.md §2.7). ``prompt`` reads the spawn-prompt
    template when its turn comes (after the fleet, monitor-slot, assets and agent-option checks);
    None is the bundled default: the member prompt, or the monitor prompt for ``role="monitor"``.
    ``window`` picks the pane's window (`cafleet.workflows.placing`). ``worktree`` asks for a git
    worktree (None: the fleet's default; docs/worktrees.md): planned with the checks, made after
    the registration, the pane started in it. ``permissions`` is the member's profile
    (docs/permissions.md); None: the fleet's default, else `workspace`.

    All of it runs under the creation lock of (fleet, name) (`cafleet.workflows.halfmade`): a
    member of that name left half-made by an interrupted create is finished instead, as it was
    recorded. Failures after the registration undo it (and kill the pane) and raise
    `CompensatedError`.
    """
    with halfmade.creating(settings, fleet_id, name):
        left = halfmade.of_name(conn, fleet_id, name)
        if left is not None:
            return finish(conn, settings, left.member, window=window)
        return _create(
            conn,
            settings,
            fleet_id=fleet_id,
            name=name,
            description=description,
            coding_agent=coding_agent,
            model=model,
            effort=effort,
            role=role,
            prompt=prompt,
            window=window,
            worktree=worktree,
            permissions=permissions,
        )


@dataclass(frozen=True, slots=True)
class _Spawn:
    """What steps 7b to 10 of `create` need, whether the registration is new or half-made."""

    fleet: Fleet
    director: Member
    backend: TmuxBackend
    director_placement: Placement
    overflow: list[str]
    plan: SpawnPlan
    coding_agent: str
    role: Literal["monitor"] | None
    profile: str | None
    away: bool


def _create(
    conn: Connection,
    settings: Settings,
    *,
    fleet_id: int,
    name: str,
    description: str,
    coding_agent: str | None,
    model: str | None,
    effort: str | None,
    role: Literal["monitor"] | None,
    prompt: Callable[[], str] | None,
    window: WindowMode,
    worktree: WorktreeRequest | None,
    permissions: str | None,
) -> Created:
    fleet, director = _live_fleet_and_director(conn, fleet_id)  # 2.
    _check_monitor_slot(conn, fleet_id, role)  # 3.
    coding_agent = _resolve_agent(conn, director, coding_agent)  # 4.
    # 5. Model, effort, prompt, availability.
    agent = validate_agent_options(
        coding_agent, model=model, effort=effort, model_flag="--model", effort_flag="--effort"
    )
    template = prompt() if prompt is not None else _default_template(role)
    profile: str | None = None
    if role != "monitor":
        profile = permissions or broker.member_defaults(conn, fleet_id).get("permissions")
        if profile not in PROFILES:  # no default, or one this cafleet does not know
            profile = DEFAULT_PROFILE
    plan = spawn_plan(agent, template, model, effort, profile or "workspace")
    where = _where(conn, fleet, director)  # 6.
    # 6b. The worktree: every check now, nothing made yet (docs/worktrees.md).
    tree = worktrees.plan_for_member(conn, fleet_id, name, role, worktree)

    # Safe point: nothing written yet.
    signals.check()

    backend, director_placement, overflow, away = where
    member = _register(  # 7.
        conn,
        fleet_id=fleet_id,
        name=name,
        description=description,
        role=role,
        director_placement=director_placement,
        coding_agent=coding_agent,
        socket_path=backend.socket_path,
        # None: the bundled prompt, so a respawn gets this cafleet's current one.
        spawn_prompt=template if prompt is not None else None,
        model=model,
        effort=effort,
        worktree=None if tree is None else tree.spec,
        permissions=profile,
    )
    job = _Spawn(fleet, director, *where[:3], plan, coding_agent, role, profile, away)

    def make() -> WorktreePlan:  # 7b. Make the worktree; from now on the undo removes it again.
        assert tree is not None
        worktrees.make(tree)
        return tree

    return _start(conn, settings, member, job, window, None if tree is None else make)


def finish(
    conn: Connection,
    settings: Settings,
    member: Member,
    *,
    window: WindowMode = "auto",
    resumed: SessionRecord | None = None,
) -> Created:
    """Finish the create of a half-made member (`cafleet.workflows.halfmade`; the caller holds
    its creation lock): from step 7b on, with what its registration recorded. Its worktree is
    made again if it is gone; the pane the interrupted create already spawned, if any, becomes
    its pane instead of a second agent; else, with ``resumed`` (`member respawn --resume`), the
    agent continues that session in its directory. A failure undoes it as a failed create
    would."""

    fleet, director = _live_fleet_and_director(conn, member.fleet_id)
    placement = member.placement
    assert placement is not None and placement.mux_pane_id is None
    template, model, effort, profile = recorded_spawn(conn, member)
    coding_agent = placement.coding_agent
    require_assets(conn, agents=[coding_agent])
    agent = validate_agent_options(
        coding_agent, model=model, effort=effort, model_flag="--model", effort_flag="--effort"
    )
    plan = spawn_plan(agent, template, model, effort, profile)
    where = _where(conn, fleet, director)
    role: Literal["monitor"] | None = "monitor" if member.kind == "monitor" else None
    spawn = broker.get_spawn(conn, member.member_id)
    spec = None if spawn is None else spawn.worktree
    job = _Spawn(fleet, director, *where[:3], plan, coding_agent, role, profile, where[3])

    def make() -> WorktreePlan:
        assert spec is not None
        return resume(spec)

    created = _start(
        conn,
        settings,
        member,
        job,
        window,
        None if spec is None else make,
        adopt=True,
        resumed=resumed,
    )
    return dataclasses.replace(created, finished=True)


def finish_pending(
    conn: Connection,
    settings: Settings,
    member: Member,
    *,
    window: WindowMode = "auto",
    resumed: SessionRecord | None = None,
) -> Created:
    """`member respawn` of a member whose placement is pending: `finish` its create when that
    was interrupted (continuing ``resumed`` with `--resume`); one still running is waited for
    (up to the pane-lock timeout) and then refused, the member having its pane."""

    refuse_elsewhere(conn, member)  # its create runs, or was interrupted, on another host
    with halfmade.claimed(conn, settings, member, wait=True) as left:
        if left is None:
            fresh = active_member(conn, member.member_id)
            pane = fresh.placement.mux_pane_id if fresh.placement is not None else None
            raise WorkflowError(
                f"member {member.member_id}'s 'cafleet member create' finished meanwhile "
                f"(pane {pane or '-'}); nothing to respawn"
            )
        return finish(conn, settings, left.member, window=window, resumed=resumed)


def recorded_spawn(conn: Connection, member: Member) -> tuple[str, str | None, str | None, str]:
    """(template, model, effort, permission profile) the member was spawned with; a member
    recorded before profiles existed keeps what it ran with then (`readonly`)."""
    spec = broker.get_spawn(conn, member.member_id)
    if spec is None and member.kind != "monitor":
        raise WorkflowError(
            f"member {member.member_id} has no recorded spawn prompt (it was created before "
            "cafleet kept them); delete it and create a new member"
        )
    template = spec.prompt if spec is not None else None
    if template is None:  # spawned with the bundled prompt of its kind
        template = _default_template("monitor" if member.kind == "monitor" else None)
    profile = spec.permissions if spec is not None and spec.permissions else LEGACY_PROFILE
    return template, spec.model if spec else None, spec.effort if spec else None, profile


def _where(
    conn: Connection, fleet: Fleet, director: Member
) -> tuple[TmuxBackend, Placement, list[str], bool]:
    """Step 6: tmux, the pane to split from, the fleet's overflow windows there, and whether it
    is on another host than the Director's."""
    backend, director_placement = _split_source(fleet.fleet_id, director)
    # Away from the Director's host: the pane goes next to this command's own pane.
    assert director.placement is not None  # `_split_source` checked it
    away = director_placement.host_id != director.placement.host_id
    overflow = placing.fleet_windows(
        placing.on_host_of(
            broker.placed_members(conn, fleet.fleet_id),
            director.placement.host_id,
            director_placement,
        ),
        director_placement,
    )
    return backend, director_placement, overflow, away


def _start(
    conn: Connection,
    settings: Settings,
    member: Member,
    job: _Spawn,
    window: WindowMode,
    make: Callable[[], WorktreePlan] | None,
    *,
    adopt: bool = False,
    resumed: SessionRecord | None = None,
) -> Created:
    """Steps 7b to 10 for a registered member with a pending placement: its worktree
    (``make``), the agent's pane (with ``adopt``, the one an interrupted create already spawned
    for this placement, when there is one; with ``resumed``, an agent continuing that session
    in its directory), the patch. A failure deregisters it and undoes the worktree."""

    pending = member.placement
    assert pending is not None
    undo = _Undo(conn, member.member_id, job.backend)
    tree: WorktreePlan | None = None
    if make is not None:
        try:
            tree = make()
        except WorkflowError as exc:
            cleanup = Cleanup()
            undo.deregister(cleanup)
            fail_with_cleanup(str(exc), cleanup)
        undo.tree = tree

    # Safe point after the commit (and the worktree), before the spawn: deregister.
    if signals.stop_requested():
        cleanup = Cleanup()
        undo.deregister(cleanup)
        fail_with_cleanup(None, cleanup)

    spawned = halfmade.orphan_pane(job.backend, pending) if adopt else None
    adopted = spawned is not None
    if spawned is None:
        # 8. Render and spawn.
        rendered = render_template(
            job.plan.template,
            fleet_id=member.fleet_id,
            member_id=member.member_id,
            director_member_id=job.director.member_id,
            coding_agent=job.coding_agent,
        )
        monitor = job.role == "monitor"
        if resumed is None:
            argv = job.plan.argv(
                rendered,
                display_name=member.name,
                monitor=monitor,
                db_dir=settings.db_dir,
                member_id=member.member_id,
            )
        else:
            argv = job.plan.resume_argv(
                resumed.session_id,
                display_name=member.name,
                monitor=monitor,
                db_dir=settings.db_dir,
                member_id=member.member_id,
            )

        spawned = spawn_member_pane(
            job.backend,
            settings,
            director_placement=job.director_placement,
            overflow=job.overflow,
            window=window,
            window_name=placing.window_name(member.fleet_id, job.fleet.name),
            argv=argv,
            coding_agent=job.coding_agent,
            on_failure=undo.deregister,
            cwd=(
                resumed.cwd
                if resumed is not None
                else None
                if tree is None
                else worktrees.cwd_of(tree.spec)
            ),
            # Names the pane as this placement's, should this command die before the patch.
            member_id=member.member_id,
            extra_env={
                halfmade.PLACEMENT_VARIABLE: halfmade.placement_token(pending),
                **({} if monitor else job.plan.agent.hook_env(member.member_id)),
            },
        )
    undo.pane_id = spawned.pane_id

    # Safe point after the spawn, before the patch.
    if signals.stop_requested():
        undo.kill_and_deregister(None)

    placement = _patch_pane(conn, settings, undo, job.director_placement, spawned)  # 9.
    member = member._replace(placement=placement)
    created = Created(
        member=member,
        coding_agent=job.coding_agent,
        pane_id=spawned.pane_id,
        worktree=None if tree is None else tree.spec,
        permissions=job.profile,
        resumed_session=None if resumed is None or adopted else resumed.session_id,
    )
    if job.away:
        # 10. Placed on this host, away from the Director's: this host's delivery loop types
        # its lines, started on demand (docs/runtime.md §10.4).
        created = _with_host_loop(conn, created, job.director_placement.host_id)
    return created


def _with_host_loop(conn: Connection, created: Created, host_id: str | None) -> Created:
    assert host_id is not None
    pid, problem = start_on_demand(conn, host_id)
    return dataclasses.replace(
        created, host_id=host_id, host_loop_pid=pid, host_loop_problem=problem
    )


def _live_fleet_and_director(conn: Connection, fleet_id: int) -> tuple[Fleet, Member]:
    """Step 2: the fleet, not deleted, and its active root Director."""
    fleet = broker.get_fleet(conn, fleet_id)
    if fleet.deleted_at is not None:
        raise FleetDeleted(fleet_id)
    director = (
        broker.get_member(conn, fleet.director_member_id) if fleet.director_member_id else None
    )
    if director is None or not director.is_active:
        raise RootDirectorInactive(fleet_id, fleet.director_member_id)
    return fleet, director


def _check_monitor_slot(conn: Connection, fleet_id: int, role: str | None) -> None:
    """Step 3: a monitor needs a free slot, a member an active monitor (re-checked at
    registration)."""
    monitor = broker.get_active_monitor(conn, fleet_id=fleet_id)
    if role == "monitor" and monitor is not None:
        raise MonitorSlotTaken(fleet_id, monitor.member_id)
    if role is None and monitor is None:
        raise NoActiveMonitor(fleet_id)


def _resolve_agent(conn: Connection, director: Member, coding_agent: str | None) -> str:
    """Step 4: the coding agent (default: the Director's), whose assets must be installed."""
    if coding_agent is None:
        if director.placement is None:
            raise WorkflowError(
                "cannot resolve the member's coding agent: the root Director (member "
                f"{director.member_id}) has no placement; re-run with --coding-agent"
            )
        coding_agent = director.placement.coding_agent
    require_assets(conn, agents=[coding_agent])
    return coding_agent


def _split_source(fleet_id: int, director: Member) -> tuple[TmuxBackend, Placement]:
    """Step 6: tmux, and the root Director's concrete pane on this server to split from."""
    backend = tmux_backend()
    director_placement = director.placement
    here = current_host()
    away = director_placement is not None and director_placement.host_id not in (None, here)
    if not away:
        try:
            backend.ensure_available()
        except MultiplexerError as exc:
            raise WorkflowError(str(exc)) from exc
    if director_placement is None or director_placement.mux_pane_id is None:
        raise WorkflowError(f"the root Director of fleet {fleet_id} has no pane to split from")
    if away:
        # The Director is on another host (docs/runtime.md §10.3): the member's pane goes next
        # to the pane this command runs in, on this host's tmux server (a plain shell is
        # refused naming the host and what to do).
        return backend, placing.local_anchor(
            backend, director_placement, here, "cafleet member create"
        )
    from cafleet.workflows.panes import predates_server

    if not same_server(backend.socket_path, director_placement.mux_socket) or predates_server(
        backend, director_placement
    ):
        # Splitting "@<window>" here would split a window of this server (or of a later server
        # on its socket, docs/runtime.md §1.8), not the Director's.
        raise WorkflowError(MSG_NOT_OURS.format(pane_id=director_placement.mux_pane_id))
    return backend, director_placement


def _register(
    conn: Connection,
    *,
    fleet_id: int,
    name: str,
    description: str,
    role: Literal["monitor"] | None,
    director_placement: Placement,
    coding_agent: str,
    socket_path: str | None,
    spawn_prompt: str | None,
    model: str | None,
    effort: str | None,
    worktree: WorktreeSpec | None,
    permissions: str | None = None,
) -> Member:
    """Step 7: register the member with a pending placement in the Director's window."""
    try:
        return broker.register_member(
            conn,
            fleet_id=fleet_id,
            name=name,
            description=description,
            role="monitor" if role == "monitor" else "member",
            placement=PlacementSpec(
                mux_session=director_placement.mux_session,
                mux_window_id=director_placement.mux_window_id,
                coding_agent=coding_agent,
                backend="tmux",
                mux_socket=socket_path,
            ),
            require_monitor=True,
            spawn=SpawnSpec(
                prompt=spawn_prompt,
                model=model,
                effort=effort,
                worktree=worktree,
                permissions=permissions,
            ),
        )
    except (MonitorSlotTaken, NoActiveMonitor) as exc:
        raise WorkflowError(str(exc)) from exc
    except Exception as exc:
        raise WorkflowError(f"register failed: {error_text(exc)}") from exc


class _Undo:
    """What a failure after the registration undoes: the member row, the worktree once made
    (`worktrees.undo`: only while nothing but cafleet's copies is in it), the pane once spawned."""

    def __init__(self, conn: Connection, member_id: int, backend: TmuxBackend) -> None:
        self.conn = conn
        self.member_id = member_id
        self.backend = backend
        self.pane_id: str | None = None
        self.tree: WorktreePlan | None = None

    def deregister(self, cleanup: Cleanup, *, only_if_active: bool = False) -> None:
        def action() -> None:
            if only_if_active:
                current = broker.get_member(self.conn, self.member_id)
                if not current.is_active:
                    return
            broker.deregister_member(self.conn, member_id=self.member_id)

        cleanup.step(f"member {self.member_id}", action)
        if self.tree is not None:
            for line in undo(self.tree):
                cleanup.add(line)

    def kill_and_deregister(self, primary: str | None, *, only_if_active: bool = False) -> NoReturn:
        pane_id = self.pane_id
        assert pane_id is not None
        cleanup = Cleanup()
        cleanup.step(
            f"pane {pane_id}", lambda: self.backend.kill_pane(pane_id, ignore_missing=True)
        )
        self.deregister(cleanup, only_if_active=only_if_active)
        fail_with_cleanup(primary, cleanup)


def _patch_pane(
    conn: Connection,
    settings: Settings,
    undo: _Undo,
    director_placement: Placement,
    spawned: PaneContext,
) -> Placement:
    """Step 9: write the new pane's id under its lock; any failure kills it and deregisters."""
    member_id, pane_id = undo.member_id, spawned.pane_id
    key = PaneKey("tmux", director_placement.mux_session, pane_id)
    try:
        lock = acquire_pane_lock(
            settings.db_dir,
            key,
            timeout=settings.pane_lock_timeout,
            purpose=f"placement patch member {member_id}",
            keep_waiting=signals.keep_waiting,
        )
    except PaneLockAbandoned:
        undo.kill_and_deregister(None)
    except PaneLockTimeout:
        undo.kill_and_deregister(
            f"placement update failed: pane {pane_id} is receiving another keystroke"
        )
    try:
        placement = broker.set_placement_pane(
            conn,
            member_id=member_id,
            pane_id=pane_id,
            window_id=spawned.window_id,
            spawned=spawned,
        )
    except PlacementVanished as exc:
        lock.release()
        undo.kill_and_deregister(str(exc), only_if_active=True)
    except Exception as exc:
        lock.release()
        undo.kill_and_deregister(f"placement update failed: {error_text(exc)}")
    lock.release()
    return placement


# --- delete --------------------------------------------------------------------------------------


def delete(
    conn: Connection, settings: Settings, member_id: int, *, discard_worktree: bool = False
) -> Deleted:
    """Deregister a member and kill its pane unless another active member shares it
    (docs/cli.md §2.10); the root Director cannot be deleted. Then its worktree, if it has one,
    is removed when clean, or always with ``discard_worktree`` (docs/worktrees.md). A member left
    half-made by an interrupted create loses the pane that create spawned too; a deregistered
    member whose worktree is still there (an interrupted delete, or one kept) gets it retired
    again."""
    member = broker.get_member(conn, member_id)
    if not member.is_active:
        return _retire_again(conn, member, discard_worktree)
    with halfmade.claimed(conn, settings, member, wait=False) as left:
        deleted = _delete(conn, settings, member_id, half_made=left is not None)
    spawn = broker.get_spawn(conn, member_id)
    if spawn is None or spawn.worktree is None:
        return deleted
    running = None
    if deleted.pane_status == "shared":
        running = f"its pane still runs (shared with member {deleted.shared_with})"
    retired = retire(member_id, spawn.worktree, discard=discard_worktree, running=running)
    return dataclasses.replace(deleted, worktree=retired)


def _retire_again(conn: Connection, member: Member, discard: bool) -> Deleted:
    """`member delete` of a deregistered member: its worktree, when it is left behind, is
    retired as the delete would have; else `member <id> is deregistered`."""
    mine = [r for r in left_behind(conn, member.fleet_id) if r.member_id == member.member_id]
    if not mine:
        raise MemberDeregistered(member.member_id)
    retired = retire(member.member_id, mine[0].spec, discard=discard)
    return Deleted(member.member_id, None, "deregistered", None, retired)


def _delete(
    conn: Connection, settings: Settings, member_id: int, *, half_made: bool = False
) -> Deleted:
    """The deregistration and the pane kill of `delete`; ``half_made``: the pane the
    interrupted create of this pending member spawned is killed first."""
    member = active_member(conn, member_id)
    if member.kind == "director":
        raise CannotDeregisterRootDirector(member_id)

    placement = member.placement
    if placement is None or placement.mux_pane_id is None:
        signals.check()
        orphan = None
        if half_made and placement is not None:
            orphan = kill_orphan(placement)
        broker.deregister_member(conn, member_id=member_id)
        if orphan is not None:
            return Deleted(member_id, orphan, "killed", None)
        status: PaneStatus = "no_placement" if placement is None else "pending"
        return Deleted(member_id, None, status, None)

    pane_id = placement.mux_pane_id
    if elsewhere(conn, member) is not None:
        # Another host's pane (docs/runtime.md §10.2): deregistered, never killed from here.
        signals.check()
        broker.deregister_member(conn, member_id=member_id)
        return Deleted(member_id, pane_id, "elsewhere", None)
    backend = backend_for(placement.backend, placement.mux_socket)
    lock = _lock_pane(settings, placement, member_id, f"member delete {member_id}")
    with lock:
        # Re-read under the lock: the member may have changed while we waited.
        member = active_member(conn, member_id)
        placement = member.placement
        if placement is None or placement.mux_pane_id != pane_id:
            raise WorkflowError(lock_busy_message(member_id))
        shared = broker.pane_shared_with(conn, placement)
        other: int | None = None
        if shared is not None:
            status, other = "shared", shared
        else:
            from cafleet.mux import owner_of, owner_problem, pane_replaced

            owner = owner_of(placement)
            not_ours = owner_problem(backend, pane_id, owner)
            if not_ours is not None and pane_replaced(backend, pane_id, owner):
                # A later server's pane, or another process, with its id (docs/runtime.md §1.8):
                # the member's own pane is gone; that one is never killed.
                status = "already_gone"
            elif not_ours is not None:
                raise WorkflowError(not_ours)  # another server's pane, or a reused id: untouched
            else:
                try:  # and everything its agent started (docs/runtime.md §1.10)
                    killed = kill_pane_and_leftovers(backend, pane_id, placement)
                except MultiplexerError as exc:
                    raise WorkflowError(
                        MSG_KILL_FAILED.format(pane_id=pane_id, detail=str(exc))
                    ) from exc
                status = "killed" if killed else "already_gone"
        broker.deregister_member(conn, member_id=member_id)
    return Deleted(member_id, pane_id, status, other)


# --- prompt and ping -----------------------------------------------------------------------------


def _type_line(
    settings: Settings,
    placement: Placement,
    member_id: int,
    backend: Any,
    line: str,
    *,
    wait: bool,
    frame: str | None = None,
) -> TypeOutcome:
    """The one typing path (cafleet.delivery.keys) for prompt (``wait``: up to the pane-lock
    timeout, busy is `lock_busy_message`, a held line is refused) and ping (one try, busy and
    held are returned). A failure reads `typing into pane <pane_id> failed: <detail>`, a line
    the agent was not seen taking `typed into pane <pane_id> but not verified: <detail>`, a
    pane that is not the placement's `pane <pane_id> belongs to another tmux server or was
    reused`; each is exit 1."""
    verb = "prompt" if wait else "ping"
    if wait:
        signals.check()
    outcome = type_into_pane(
        _pane_key(placement),
        line,
        backend=lambda: backend,
        db_dir=settings.db_dir,
        purpose=f"{verb} member {member_id}",
        lock_timeout=settings.pane_lock_timeout if wait else None,
        target=Target(
            agent=placement.coding_agent,
            hold_timeout=settings.delivery_hold_timeout,
            owner=owner_of(placement),
            spawned=True,  # prompt and ping refuse the Director: the pane is a spawned member's
            frame=frame,
            scrollback=0 if frame is None else SCROLLBACK_LINES,
        ),
        keep_waiting=signals.keep_waiting,
    )
    if outcome.kind == "abandoned":
        signals.check()
        raise PaneLockAbandoned(outcome.pane_id, _pane_key(placement))
    if outcome.kind == "busy" and wait:
        raise WorkflowError(lock_busy_message(member_id))
    if outcome.kind == "held" and wait:
        raise WorkflowError(
            f"member {member_id}'s pane {outcome.pane_id} is {outcome.detail}; nothing was "
            "typed (retry when it is ready)"
        )
    if outcome.kind in ("failed", "not_ours", "unverified"):
        raise WorkflowError(str(outcome.reason))
    return outcome


def prompt(conn: Connection, settings: Settings, member_id: int, text: str) -> Prompted:
    """Type one line into the member's pane as a user turn (docs/cli.md §2.12)."""
    require_assets(conn, member_id=member_id)
    member = active_member(conn, member_id)
    refuse(conn, member)  # its create was interrupted: say so, and how to finish it
    placement = concrete_placement(member, "nothing to prompt")
    _refuse_director(conn, member)
    refuse_elsewhere(conn, member)
    pane_id = placement.mux_pane_id
    assert pane_id is not None
    backend = backend_for(placement.backend, placement.mux_socket)
    _type_line(settings, placement, member_id, backend, text, wait=True)
    return Prompted(member, pane_id, text)


def ping(conn: Connection, settings: Settings, member_id: int) -> Pinged:
    """Type the fixed ping line into the member's pane, or skip a pending, busy or held pane
    (docs/cli.md §2.13); the result carries the pane state the gate saw."""
    require_assets(conn, member_id=member_id)
    member = active_member(conn, member_id)
    placement = _placed(member)
    _refuse_director(conn, member)
    if placement.mux_pane_id is None:
        refuse(conn, member)  # its create was interrupted: say so, and how to finish it
        return Pinged(member, None, True, "pending_placement")
    refuse_elsewhere(conn, member)
    pane_id = placement.mux_pane_id
    backend = backend_for(placement.backend, placement.mux_socket)
    # Each ping ends with its own id, so the screen check knows this ping from an older one.
    tag = id_tag("ping", line_id())
    line = f"{PING_LINE.format(member_id=member_id)} {tag}"
    outcome = _type_line(settings, placement, member_id, backend, line, wait=False, frame=tag)
    if outcome.kind == "busy":
        return Pinged(member, pane_id, True, "busy")
    if outcome.kind == "held":
        return Pinged(member, pane_id, True, "held", outcome.state)
    return Pinged(member, pane_id, False, None, outcome.state)


__all__ = [
    "PING_LINE",
    "Created",
    "Deleted",
    "Pinged",
    "Prompted",
    "create",
    "delete",
    "ping",
    "prompt",
]
