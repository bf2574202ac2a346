"""`cafleet monitor FLEET_ID` (the loop form, cli.md §2.21) and `cafleet monitor scan FLEET_ID`
(cli.md §2.22)."""

from __future__ import annotations

import click

from cafleet.cli.app import monitor_group, monitor_loop_command
from cafleet.cli.context import fail, invocation
from cafleet.cli.params import MAX_ID, id_argument, json_option
from cafleet.output import out, out_json
from cafleet.text import sanitize_single_line

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
    type=click.IntRange(0, MAX_ID),
    default=None,
    help=(
        "Seconds between scheduled wakes of the monitor member; 0 disables them (default: the "
        "stored interval, else CAFLEET_MONITOR_WAKE_INTERVAL, else 600)."
    ),
)
@click.pass_context
def monitor_loop(ctx: click.Context, fleet_id: int, tick: int | None, interval: int | None) -> None:
    from cafleet.cli import signal_stop_is_clean

    inv = invocation()
    settings = inv.settings
    conn = inv.connection()
    from cafleet.cli.guard import recheck_schema
    from cafleet.monitor.loop import LoopStartError, run_loop

    # A signal is the loop's normal way to stop (cli.md §1.4): its exit code stands.
    signal_stop_is_clean()
    try:
        code = run_loop(
            conn, settings, fleet_id, tick=tick, interval=interval, recheck_schema=recheck_schema
        )
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
    from cafleet.monitor.scan import capture_entries, entry_dict, render_text, scan_members

    members = scan_members(conn, fleet_id)  # FleetNotFound / FleetDeleted
    from cafleet.mux import MultiplexerError, tmux_backend

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
