"""`cafleet fleet create` (cli.md §2.3): bootstrap a fleet around the calling pane.

One write transaction inserts the fleet, the root Director (the calling pane) and the monitor
member, spawns the monitor pane while it is still open, inserts the monitor placement and
commits; then the fleet's monitor loop is started and must become live within 5 s. Failures
undo exactly as the compensation table says.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import click

from cafleet.cli.app import fleet_group
from cafleet.cli.assets_guard import require_assets
from cafleet.cli.context import invocation
from cafleet.cli.params import json_option, name_option
from cafleet.cli.spawn_common import (
    AGENT_CHOICE,
    Cleanup,
    error_text,
    fail_with_cleanup,
    outcome_unknown,
    spawn_env,
    spawn_plan,
    unconfirmed_detail,
    validate_agent_options,
)
from cafleet.output import member_dict, out, out_json

if TYPE_CHECKING:
    from sqlalchemy import Connection

MONITOR_DISPLAY_NAME = "monitor"


@fleet_group.command(
    "create",
    short_help="Create a fleet around this tmux pane and start its monitor.",
    help=(
        "Create a fleet from this tmux pane: register the pane as the fleet's root Director, "
        "spawn the monitor member next to it and start the fleet's monitor loop."
    ),
)
@name_option("Fleet name.")
@click.option(
    "--coding-agent",
    type=AGENT_CHOICE,
    required=True,
    help="The coding agent the calling (Director) pane runs; the monitor runs it too.",
)
@click.option(
    "--monitor-file",
    metavar="PATH",
    default=None,
    help="Spawn-prompt template for the monitor ('-' reads stdin); default: the bundled prompt.",
)
@click.option("--monitor-model", default=None, help="Model for the monitor (agent default).")
@click.option(
    "--monitor-effort", default=None, help="Reasoning effort for the monitor (agent default)."
)
@json_option
def fleet_create(
    name: str,
    coding_agent: str,
    monitor_file: str | None,
    monitor_model: str | None,
    monitor_effort: str | None,
    as_json: bool,
) -> None:
    from cafleet import signals

    # 1. Settings and guard.
    inv = invocation()
    conn = inv.connection()
    require_assets(conn, agents=[coding_agent])  # the Director and the monitor run it

    # 2. Model, effort, the prompt template, agent availability.
    agent = validate_agent_options(
        coding_agent,
        model=monitor_model,
        effort=monitor_effort,
        model_flag="--monitor-model",
        effort_flag="--monitor-effort",
    )
    if monitor_file is not None:
        from cafleet.cli.params import read_body_file

        template = read_body_file(monitor_file, "--monitor-file")
    else:
        from cafleet.agents.prompt import load_default_monitor_prompt

        template = load_default_monitor_prompt()
    plan = spawn_plan(agent, template, monitor_model, monitor_effort)

    # 3. tmux and the calling pane.
    from cafleet.mux import MultiplexerError, PaneContext, tmux_backend

    backend = tmux_backend()
    try:
        backend.ensure_available()
        here = backend.discover_context()
    except MultiplexerError as exc:
        raise click.ClickException(
            f"cafleet fleet create must be run inside a tmux pane: {exc}"
        ) from exc

    # Safe point: nothing has been written yet.
    signals.check()

    # 4. The bootstrap transaction, spawn included.
    from cafleet.agents.prompt import render_template
    from cafleet.broker.errors import BootstrapAborted
    from cafleet.broker.fleets import create_fleet

    db_dir = inv.db_dir
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
            pane_id = backend.split_window(
                window_id=here.window_id, argv=argv, cwd=os.getcwd(), env=spawn_env(coding_agent)
            )
        except BaseException as exc:
            spawn_error.append(exc)
            raise
        return PaneContext(session=here.session, window_id=here.window_id, pane_id=pane_id)

    try:
        boot = create_fleet(
            conn,
            name=name,
            backend="tmux",
            coding_agent=coding_agent,
            director_pane=here,
            spawn_monitor=spawn_monitor,
        )
    except BootstrapAborted as exc:
        _after_spawn_failure(inv, conn, backend, exc)
        raise AssertionError("unreachable") from exc
    except Exception as exc:
        if spawn_error and exc is spawn_error[0]:
            cleanup = Cleanup()
            if isinstance(exc, MultiplexerError) and outcome_unknown(exc):
                cleanup.add(f"pane cleanup unconfirmed: {unconfirmed_detail(here.window_id)}")
            if isinstance(exc, MultiplexerError):
                fail_with_cleanup(str(exc), cleanup)
            fail_with_cleanup(f"fleet creation failed: {error_text(exc)}", cleanup)
        raise click.ClickException(f"fleet creation failed: {error_text(exc)}") from exc

    fleet_id = boot.fleet.fleet_id
    monitor_pane = boot.monitor.placement.mux_pane_id if boot.monitor.placement else None

    # 5. The loop; a signal before it is live compensates like a loop that did not start.
    from cafleet.monitor.ensure import MonitorStartError, StartAbandoned, ensure_monitor_loop

    try:
        signals.check()
        pid = ensure_monitor_loop(conn, fleet_id, keep_waiting=signals.keep_waiting)
    except (MonitorStartError, StartAbandoned, signals.Interrupted) as exc:
        cleanup = Cleanup()
        _compensate_loop(inv, conn, backend, fleet_id, monitor_pane, cleanup)
        primary = str(exc) if isinstance(exc, MonitorStartError) else None
        fail_with_cleanup(primary, cleanup)
        raise AssertionError("unreachable") from exc

    # 6. Print (a signal received from here on still prints; main maps the exit code).
    if as_json:
        out_json(
            {
                "fleet_id": fleet_id,
                "name": boot.fleet.name,
                "created_at": boot.fleet.created_at,
                "director": member_dict(boot.director),
                "monitor": member_dict(boot.monitor),
                "monitor_loop": {"pid": pid},
            }
        )
    else:
        out(f"{fleet_id} director={boot.director.member_id} monitor={boot.monitor.member_id}")
        out(f"monitor loop: pid {pid}")


def _after_spawn_failure(inv: Any, conn: Connection, backend: Any, exc: Any) -> None:
    """A step after the spawn failed: roll back and close the connection, then kill the pane."""
    pane = exc.spawned_pane
    pane_id = getattr(pane, "pane_id", str(pane))
    cleanup = Cleanup()
    if exc.rollback_error is not None:
        cleanup.add(f"cleanup failed for the fleet transaction: {error_text(exc.rollback_error)}")
    # Close the invocation's connection (SQLite discards anything uncommitted), then kill.
    cleanup.step("the fleet transaction", inv.close)
    cleanup.step(f"pane {pane_id}", lambda: backend.kill_pane(pane_id, ignore_missing=True))
    fail_with_cleanup(
        f"fleet creation failed after spawning pane {pane_id}: {error_text(exc.cause)}", cleanup
    )


def _compensate_loop(
    inv: Any,
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
        lambda: soft_delete_fleet(conn, inv.db_dir, fleet_id, inv.settings.pane_lock_timeout),
    )


class _LockBusy(Exception):
    pass


def soft_delete_fleet(conn: Connection, db_dir: str, fleet_id: int, timeout: int) -> int:
    """`fleet delete`'s locking and soft delete, without its output (used for compensation).

    Takes each concrete placement's pane lock once in ascending lock-file order (waiting at
    most ``timeout`` each), then calls `delete_fleet`. Raises on a busy lock.
    """
    from cafleet.broker.errors import PlacementsChanged
    from cafleet.broker.fleets import delete_fleet, fleet_placements
    from cafleet.cli.context import lock_busy_message
    from cafleet.mux import PaneKey
    from cafleet.mux.locks import PaneLockTimeout, acquire_pane_locks

    owners: dict[PaneKey, int] = {}
    for placement in fleet_placements(conn, fleet_id):
        if placement.pane_key is not None:
            owners.setdefault(PaneKey(*placement.pane_key), placement.member_id)
    try:
        held = acquire_pane_locks(
            db_dir, owners, timeout=timeout, purpose=f"fleet delete {fleet_id}"
        )
    except PaneLockTimeout as exc:
        member_id = owners.get(exc.key) if exc.key is not None else None
        raise _LockBusy(lock_busy_message(member_id or 0)) from exc
    with held:
        try:
            return delete_fleet(
                conn,
                fleet_id=fleet_id,
                locked_panes={(k.backend, k.session, k.pane_id) for k in held.keys},
                try_lock=lambda key: held.try_add(PaneKey(*key)),
            )
        except PlacementsChanged as exc:
            raise _LockBusy(lock_busy_message(exc.member_id)) from exc
