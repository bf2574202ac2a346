"""`cafleet monitor FLEET_ID` (the loop form, docs/cli.md §2.21) and `cafleet monitor scan FLEET_ID`
(docs/cli.md §2.22)."""

from __future__ import annotations

import click

from cafleet.assets.guard import require_assets
from cafleet.cli import signal_stop_is_clean
from cafleet.cli.app import monitor_group, monitor_loop_command
from cafleet.cli.context import fail, invocation
from cafleet.cli.guard import recheck_schema
from cafleet.cli.params import id_argument, json_option
from cafleet.config import MAX_SETTING
from cafleet.monitor.scan import capture_entries, entry_dict, render_text, scan_members
from cafleet.mux import MultiplexerError, tmux_backend
from cafleet.output import out, out_json
from cafleet.text import sanitize_single_line
from cafleet.workflows import monitor

FLEET_ID_HELP = "Fleet ID."


@monitor_loop_command(
    help=(
        "Run the fleet's monitor loop in the foreground: heartbeat, deliver pending "
        "notifications and wake the monitor member (normally started detached by "
        "'cafleet fleet create')."
    )
)
@id_argument("fleet_id", FLEET_ID_HELP)
@click.option(
    "--tick",
    type=click.IntRange(1, 3600),
    default=None,
    help="Seconds between ticks, 1-3600 (default: the fleet's stored tick, else 5).",
)
@click.option(
    "--interval",
    type=click.IntRange(0, MAX_SETTING),
    default=None,
    help=(
        "Seconds between scheduled wakes of the monitor member; 0 disables them (default: the "
        "stored interval, else CAFLEET_MONITOR_WAKE_INTERVAL, else 600)."
    ),
)
@click.pass_context
def monitor_loop(ctx: click.Context, fleet_id: int, tick: int | None, interval: int | None) -> None:

    inv = invocation()
    inv.heal_on_close = False  # this is the loop
    settings = inv.settings
    conn = inv.connection()

    require_assets(conn, fleet_id=fleet_id)
    from cafleet.monitor.loop import FleetScope
    from cafleet.monitor.supervisor import LoopStartError, run

    # A signal is the loop's normal way to stop (docs/cli.md §1.4): its exit code stands.
    signal_stop_is_clean()
    try:
        scope = FleetScope(conn, fleet_id, settings=settings, tick=tick, interval=interval)
        code = run(scope, recheck_schema=recheck_schema)
    except LoopStartError as exc:
        fail(str(exc))
    if code:
        ctx.exit(code)


@monitor_group.command(
    "scan",
    short_help="Capture every pane of a fleet once.",
    help="Capture every pane of a fleet once: the Director first, then the members by id.",
)
@id_argument("fleet_id", FLEET_ID_HELP)
@click.option(
    "--lines",
    type=click.IntRange(1, 100000),
    default=20,
    show_default=True,
    help="How many lines to capture per pane (1-100000).",
)
@click.option("--ansi", is_flag=True, help="Keep ANSI escape sequences.")
@json_option
def monitor_scan(fleet_id: int, lines: int, ansi: bool, as_json: bool) -> None:
    inv = invocation()
    conn = inv.connection()

    members = scan_members(conn, fleet_id)  # FleetNotFound / FleetDeleted

    backend = tmux_backend()
    try:
        backend.ensure_available()
    except MultiplexerError as exc:
        fail(str(exc))
    entries = capture_entries(members, lines=lines, ansi=ansi, backends={"tmux": backend})
    if as_json:
        out_json([entry_dict(e) for e in entries])
    else:
        out(render_text(entries, sanitize_single_line))


@monitor_group.command(
    "start",
    short_help="Start a fleet's monitor loop in the background.",
    help=(
        "Start the fleet's monitor loop in the background (its output goes to the fleet's "
        "loop log), from any pane of the fleet's tmux server; lifts 'monitor stop'."
    ),
)
@id_argument("fleet_id", FLEET_ID_HELP)
@json_option
def monitor_start(fleet_id: int, as_json: bool) -> None:
    conn = invocation().connection()

    result = monitor.start(conn, fleet_id)
    if as_json:
        out_json(
            {
                "fleet_id": fleet_id,
                "pid": result.pid,
                "started": result.started,
                "log_path": result.log_path,
            }
        )
    elif result.started:
        out(f"monitor loop for fleet {fleet_id}: pid {result.pid} (log: {result.log_path})")
    else:
        out(f"monitor loop for fleet {fleet_id}: pid {result.pid} (already running)")


@monitor_group.command(
    "stop",
    short_help="Stop a fleet's monitor loop and keep it stopped.",
    help=(
        "Stop the fleet's monitor loop and keep it stopped: no command restarts it until "
        "'cafleet monitor start'."
    ),
)
@id_argument("fleet_id", FLEET_ID_HELP)
@json_option
def monitor_stop(fleet_id: int, as_json: bool) -> None:
    conn = invocation().connection()

    result = monitor.stop(conn, fleet_id)
    if as_json:
        out_json({"fleet_id": fleet_id, "pid": result.pid, "stopped": result.stopped})
        return
    held = f"it stays stopped until 'cafleet monitor start {fleet_id}'"
    if result.stopped:
        out(f"monitor loop for fleet {fleet_id} stopped (pid {result.pid}); {held}")
    else:
        out(f"monitor loop for fleet {fleet_id} was not running; {held}")
