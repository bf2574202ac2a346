"""`cafleet monitor host run | start | stop | status` (docs/cli.md §2.29): this host's delivery loop."""

from __future__ import annotations

import click

from cafleet import signals
from cafleet.cli import signal_stop_is_clean
from cafleet.cli.app import monitor_host_group
from cafleet.cli.context import fail, invocation
from cafleet.cli.guard import recheck_schema
from cafleet.cli.params import json_option
from cafleet.hosts import current_host
from cafleet.monitor.hostloop import (
    HostScope,
    ensure_host_loop,
)
from cafleet.output import out, out_json
from cafleet.workflows.hosts import host_loop_views


def _here() -> str:

    return current_host()  # HostIdError: `Error: …`, exit 1


@monitor_host_group.command(
    "run",
    short_help="Run this host's delivery loop in the foreground.",
    help=(
        "Run this host's delivery loop in the foreground: heartbeat, and type the pending "
        "lines for panes on this host whose fleet's root Director is on another host "
        "(normally started detached by 'cafleet monitor host start' or on demand)."
    ),
)
@click.option(
    "--tick",
    type=click.IntRange(1, 3600),
    default=None,
    help="Seconds between heartbeats and unprompted passes, 1-3600 (default 5).",
)
@click.pass_context
def host_run(ctx: click.Context, tick: int | None) -> None:

    inv = invocation()
    inv.heal_on_close = False  # this is the loop
    host = _here()
    conn = inv.connection()
    from cafleet.monitor.supervisor import LoopStartError, run

    signal_stop_is_clean()
    try:
        scope = HostScope(conn, host, settings=inv.settings, tick=tick)
        code = run(scope, recheck_schema=recheck_schema)
    except LoopStartError as exc:
        fail(str(exc))
    if code:
        ctx.exit(code)


@monitor_host_group.command(
    "start",
    short_help="Start this host's delivery loop in the background.",
    help=(
        "Start this host's delivery loop in the background (its output goes to the host "
        "loop's log); lifts 'monitor host stop'."
    ),
)
@json_option
def host_start(as_json: bool) -> None:
    host = _here()
    conn = invocation().connection()
    from cafleet.monitor.supervisor import LoopNotStarted, lift_hold

    scope = HostScope(conn, host)
    lift_hold(scope)
    log_path = scope.log_path
    try:
        pid, started = ensure_host_loop(conn, host, keep_waiting=signals.keep_waiting)
    except LoopNotStarted as exc:
        fail(f"{exc} ({exc.detail})")
    if as_json:
        out_json({"host_id": host, "pid": pid, "started": started, "log_path": log_path})
    elif started:
        out(f"delivery loop for host {host}: pid {pid} (log: {log_path})")
    else:
        out(f"delivery loop for host {host}: pid {pid} (already running)")


@monitor_host_group.command(
    "stop",
    short_help="Stop this host's delivery loop and keep it stopped.",
    help=(
        "Stop this host's delivery loop and keep it stopped: no command restarts it until "
        "'cafleet monitor host start'."
    ),
)
@json_option
def host_stop(as_json: bool) -> None:
    host = _here()
    conn = invocation().connection()
    from cafleet.monitor.supervisor import LoopNotStopped, stop

    try:
        pid = stop(HostScope(conn, host))
    except LoopNotStopped as exc:
        fail(str(exc))
    if as_json:
        out_json({"host_id": host, "pid": pid, "stopped": pid is not None})
        return
    held = "it stays stopped until 'cafleet monitor host start'"
    if pid is not None:
        out(f"delivery loop for host {host} stopped (pid {pid}); {held}")
    else:
        out(f"delivery loop for host {host} was not running; {held}")


@monitor_host_group.command(
    "status",
    short_help="Show every host's delivery loop.",
    help=(
        "Show this host's id and every host's delivery loop as the database records it: live "
        "(its heartbeat is fresh) or not."
    ),
)
@json_option
def host_status(as_json: bool) -> None:
    host = _here()
    conn = invocation().connection()

    views = host_loop_views(conn, host)
    if as_json:
        out_json({"host_id": host, "loops": [v.as_dict() for v in views]})
        return
    out(f"this host: {host}")
    if not views:
        out("no host delivery loop has run")
    for view in views:
        out(view.line)
