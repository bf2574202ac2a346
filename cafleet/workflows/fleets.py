"""The fleet workflows (docs/cli.md §2.3, §2.6): create a fleet around the calling pane, delete one.

`create`: one write transaction inserts the fleet, the root Director (the calling pane) and the
monitor member, spawns the monitor pane while it is still open, inserts the monitor placement and
commits; then the fleet's monitor loop is started and must become live within 5 s. Failures undo
exactly as the compensation table says and raise `CompensatedError`.

`delete` is `cafleet.workflows.teardown.delete` (kill the panes, deregister, stop the loop).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

from cafleet import broker, signals
from cafleet.agents.prompt import load_default_monitor_prompt, render_template
from cafleet.assets.guard import require_assets
from cafleet.broker.errors import BootstrapAborted, PaneDirectsFleet, PlacementsChanged
from cafleet.errors import error_text
from cafleet.monitor.ensure import ensure_monitor_loop
from cafleet.mux import MultiplexerError, tmux_backend
from cafleet.mux.locks import PaneLockTimeout, acquire_pane_locks
from cafleet.records import PaneKey, SpawnSpec
from cafleet.workflows import placing
from cafleet.workflows.errors import WorkflowError
from cafleet.workflows.spawning import (
    Cleanup,
    fail_with_cleanup,
    lock_busy_message,
    marked_env,
    outcome_unknown,
    spawn_plan,
    unconfirmed_detail,
    validate_agent_options,
)
from cafleet.workflows.teardown import Deleted, delete  # `fleet delete` lives there
from cafleet.workflows.worktrees import require_repository

__all__ = ["Created", "Deleted", "create", "delete", "soft_delete_fleet"]

if TYPE_CHECKING:
    from cafleet.config import Settings
    from cafleet.db.runtime import Connection
    from cafleet.mux import PaneContext
    from cafleet.mux.tmux import TmuxBackend
    from cafleet.records import FleetBootstrap, PaneKey, SpawnSpec
    from cafleet.workflows.spawning import SpawnPlan

MONITOR_DISPLAY_NAME = "monitor"


@dataclass(frozen=True, slots=True)
class Created:
    boot: FleetBootstrap  # the fleet, its root Director and its monitor member
    loop_pid: int  # the fleet's live monitor loop


# --- create --------------------------------------------------------------------------------------


def create(
    conn: Connection,
    settings: Settings,
    *,
    name: str,
    coding_agent: str,
    monitor_template: Callable[[], str] | None,
    monitor_model: str | None,
    monitor_effort: str | None,
    close: Callable[[], None],
    member_defaults: Mapping[str, object] | None = None,
) -> Created:
    """Bootstrap a fleet from the calling tmux pane and start its monitor loop (docs/cli.md §2.3).

    ``monitor_template`` reads the monitor's spawn-prompt template when its turn comes (after
    the agent-option checks); None is the bundled prompt. ``close`` closes ``conn`` (SQLite then
    discards the open bootstrap transaction) when a step after the spawn failed.
    ``member_defaults`` are stored for the fleet's new members (`--worktree`: docs/worktrees.md;
    `--permissions`: docs/permissions.md).
    """

    # 1. The guard: the Director and the monitor run the agent.
    require_assets(conn, agents=[coding_agent])
    if member_defaults and member_defaults.get("worktree"):
        require_repository(os.getcwd())

    # 2. Model, effort, the prompt template, agent availability.
    agent = validate_agent_options(
        coding_agent,
        model=monitor_model,
        effort=monitor_effort,
        model_flag="--monitor-model",
        effort_flag="--monitor-effort",
    )
    template = monitor_template() if monitor_template is not None else load_default_monitor_prompt()
    plan = spawn_plan(agent, template, monitor_model, monitor_effort)

    backend, here = _calling_pane(conn)  # 3.

    # Safe point: nothing has been written yet.
    signals.check()

    # 4. The bootstrap transaction, spawn included.

    boot = _bootstrap(
        conn,
        settings,
        backend,
        here,
        name=name,
        coding_agent=coding_agent,
        plan=plan,
        # None: the bundled prompt, so a respawn gets this cafleet's current one.
        monitor_spawn=SpawnSpec(
            prompt=None if monitor_template is None else template,
            model=monitor_model,
            effort=monitor_effort,
        ),
        close=close,
        member_defaults=member_defaults,
    )
    pid = _start_loop(conn, settings, backend, boot)  # 5.
    return Created(boot=boot, loop_pid=pid)


def _calling_pane(conn: Connection) -> tuple[TmuxBackend, PaneContext]:
    """Step 3: tmux and the calling pane, which must direct no live fleet yet (re-checked
    inside the bootstrap transaction)."""

    backend = tmux_backend()
    try:
        backend.ensure_available()
        here = backend.discover_context()
    except MultiplexerError as exc:
        raise WorkflowError(f"cafleet fleet create must be run inside a tmux pane: {exc}") from exc
    taken = broker.fleet_directed_from(conn, PaneKey("tmux", here.session, here.pane_id))
    if taken is not None:
        raise PaneDirectsFleet(here.pane_id, taken.fleet_id, taken.name)
    return backend, here


def _bootstrap(
    conn: Connection,
    settings: Settings,
    backend: TmuxBackend,
    here: PaneContext,
    *,
    name: str,
    coding_agent: str,
    plan: SpawnPlan,
    monitor_spawn: SpawnSpec,
    close: Callable[[], None],
    member_defaults: Mapping[str, object] | None,
) -> FleetBootstrap:
    """Step 4: one write transaction inserts the fleet, the root Director and the monitor,
    spawns the monitor's pane while it is open, and commits; a failure undoes what it did."""

    db_dir = settings.db_dir
    spawn_error: list[BaseException] = []

    def spawn_monitor(fleet_id: int, director_id: int, monitor_id: int) -> PaneContext:
        prompt = render_template(
            plan.template,
            fleet_id=fleet_id,
            member_id=monitor_id,
            director_member_id=director_id,
            coding_agent=coding_agent,
        )
        argv = plan.argv(prompt, display_name=MONITOR_DISPLAY_NAME, monitor=True, db_dir=db_dir)
        try:
            # The Director's window while the monitor's pane would stay usable, else a new
            # window named after the fleet (docs/runtime.md §1.11).
            target = placing.choose(
                backend,
                director_window=here.window_id,
                overflow=[],
                smallest=placing.minimum(settings),
            )
            return placing.spawn_at(
                backend,
                target,
                session=here.session,
                window_name=placing.window_name(fleet_id, name),
                argv=argv,
                cwd=os.getcwd(),
                env=marked_env(settings, coding_agent, monitor_id),
            )
        except BaseException as exc:
            spawn_error.append(exc)
            raise

    try:
        return broker.create_fleet(
            conn,
            name=name,
            backend="tmux",
            coding_agent=coding_agent,
            director_pane=here,
            spawn_monitor=spawn_monitor,
            monitor_spawn=monitor_spawn,
            mux_socket=backend.socket_path,
            member_defaults=member_defaults,
        )
    except BootstrapAborted as exc:
        _after_spawn_failure(close, backend, exc)
    except PaneDirectsFleet:
        raise  # lost a race with another `fleet create` in this pane; nothing was written
    except Exception as exc:
        if spawn_error and exc is spawn_error[0]:
            cleanup = Cleanup()
            if isinstance(exc, MultiplexerError) and outcome_unknown(exc):
                cleanup.add(f"pane cleanup unconfirmed: {unconfirmed_detail(here.window_id)}")
            if isinstance(exc, MultiplexerError):
                fail_with_cleanup(str(exc), cleanup)
            fail_with_cleanup(f"fleet creation failed: {error_text(exc)}", cleanup)
        raise WorkflowError(f"fleet creation failed: {error_text(exc)}") from exc


def _start_loop(
    conn: Connection, settings: Settings, backend: TmuxBackend, boot: FleetBootstrap
) -> int:
    """Step 5: the fleet's monitor loop, live; a signal before it is live compensates like a
    loop that did not start (the monitor pane killed, the fleet soft-deleted)."""
    from cafleet.monitor.supervisor import LoopNotStarted, StartAbandoned

    fleet_id = boot.fleet.fleet_id
    monitor_pane = boot.monitor.placement.mux_pane_id if boot.monitor.placement else None
    try:
        signals.check()
        return ensure_monitor_loop(conn, fleet_id, keep_waiting=signals.keep_waiting)
    except (LoopNotStarted, StartAbandoned, signals.Interrupted) as exc:
        cleanup = Cleanup()
        _compensate_loop(settings, conn, backend, fleet_id, monitor_pane, cleanup)
        primary = str(exc) if isinstance(exc, LoopNotStarted) else None
        fail_with_cleanup(primary, cleanup)


def _after_spawn_failure(close: Callable[[], None], backend: Any, exc: Any) -> NoReturn:
    """A step after the spawn failed: roll back and close the connection, then kill the pane."""
    pane = exc.spawned_pane
    pane_id = getattr(pane, "pane_id", str(pane))
    cleanup = Cleanup()
    if exc.rollback_error is not None:
        cleanup.add(f"cleanup failed for the fleet transaction: {error_text(exc.rollback_error)}")
    # Close the invocation's connection (SQLite discards anything uncommitted), then kill.
    cleanup.step("the fleet transaction", close)
    cleanup.step(f"pane {pane_id}", lambda: backend.kill_pane(pane_id, ignore_missing=True))
    fail_with_cleanup(
        f"fleet creation failed after spawning pane {pane_id}: {error_text(exc.cause)}", cleanup
    )


def _compensate_loop(
    settings: Settings,
    conn: Connection,
    backend: Any,
    fleet_id: int,
    monitor_pane: str | None,
    cleanup: Cleanup,
) -> None:
    """Kill the monitor pane, then soft-delete the fleet as `fleet delete` does."""
    if monitor_pane is not None:
        cleanup.step(
            f"pane {monitor_pane}", lambda: backend.kill_pane(monitor_pane, ignore_missing=True)
        )
    cleanup.step(
        f"fleet {fleet_id}",
        lambda: soft_delete_fleet(conn, settings.db_dir, fleet_id, settings.pane_lock_timeout),
    )


class _LockBusy(WorkflowError):
    pass


def soft_delete_fleet(conn: Connection, db_dir: str, fleet_id: int, timeout: int) -> int:
    """`fleet delete`'s locking and soft delete, without its output (used for compensation).

    Takes each concrete placement's pane lock once in ascending lock-file order (waiting at
    most ``timeout`` each), then calls `broker.delete_fleet`. Raises on a busy lock.
    """

    owners: dict[PaneKey, int] = {}
    for placement in broker.fleet_placements(conn, fleet_id):
        if placement.pane_key is not None:
            owners.setdefault(placement.pane_key, placement.member_id)
    try:
        held = acquire_pane_locks(
            db_dir, owners, timeout=timeout, purpose=f"fleet delete {fleet_id}"
        )
    except PaneLockTimeout as exc:
        member_id = owners.get(exc.key)
        raise _LockBusy(lock_busy_message(member_id or 0)) from exc
    with held:
        try:
            return broker.delete_fleet(
                conn,
                fleet_id=fleet_id,
                locked_panes=held.keys,
                try_lock=held.try_add,
            )
        except PlacementsChanged as exc:
            raise _LockBusy(lock_busy_message(exc.member_id)) from exc
