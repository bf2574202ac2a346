"""The monitor controls: status, the stored wake interval and "wake now" (a request the live loop
answers on its next tick, docs/runtime.md §5.5) for the WebUI (docs/runtime.md §7.3); `cafleet monitor
start F` / `monitor stop F` (docs/cli.md §2.25): start a fleet's loop in the background from any pane of
the fleet's tmux server, or stop it and hold it stopped until the next `monitor start`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from cafleet import broker, signals
from cafleet.broker.errors import FleetDeleted
from cafleet.db.timefmt import utcnow
from cafleet.monitor.detached import STOP_TIMEOUT
from cafleet.monitor.runtime import is_live
from cafleet.mux import usable_backend
from cafleet.workflows.errors import LoopNotLive, NoMonitorRuntime, WorkflowError

if TYPE_CHECKING:
    from cafleet.db.runtime import Connection
    from cafleet.records import MonitorRuntime, WakeRoster


@dataclass(frozen=True, slots=True)
class MonitorStatus:
    live: bool
    # None: no loop ever ran for the fleet. When the loop is not live, the process fields
    # (pid, started_at, last_tick_at) are None and the stored intervals are kept (seed 002).
    runtime: MonitorRuntime | None
    roster: WakeRoster


def _live(conn: Connection, fleet_id: int, runtime: MonitorRuntime | None) -> bool:
    """Live by its heartbeat and pid; a loop on another host (the fleet's root Director's) by its
    heartbeat alone, as this host cannot ask its pid (docs/runtime.md §10.5)."""
    from cafleet.monitor.runtime import directed_from_here

    if runtime is None:
        return False
    return is_live(runtime, utcnow(), remote=not directed_from_here(conn, fleet_id))


def monitor_status(conn: Connection, fleet_id: int) -> MonitorStatus:
    """The runtime row as shown, and the wake roster with its pending counts."""

    runtime = broker.get_monitor_runtime(conn, fleet_id)
    live = _live(conn, fleet_id, runtime)
    if runtime is not None and not live:
        runtime = runtime._replace(pid=None, started_at=None, last_tick_at=None)
    return MonitorStatus(
        live=live, runtime=runtime, roster=broker.wake_roster(conn, fleet_id=fleet_id)
    )


def set_wake_interval(conn: Connection, fleet_id: int, seconds: int) -> None:
    """Store the fleet's wake interval (0 = no scheduled wakes); the live loop reads it on its
    next tick. `NoMonitorRuntime` when no row exists."""

    if not broker.set_wake_interval(conn, fleet_id=fleet_id, seconds=seconds):
        raise NoMonitorRuntime(fleet_id)


def wake_now(conn: Connection, fleet_id: int) -> str:
    """Ask the live loop for a forced wake; returns the stored request time (an earlier pending
    request is kept). `LoopNotLive` when the loop is not live."""

    if not _live(conn, fleet_id, broker.get_monitor_runtime(conn, fleet_id)):
        raise LoopNotLive(fleet_id)
    requested = broker.request_monitor_wake(conn, fleet_id=fleet_id)
    if requested is None:  # the row vanished in between (fleet delete)
        raise LoopNotLive(fleet_id)
    return requested


# --- monitor start / stop (docs/cli.md §2.25) ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class StartResult:
    fleet_id: int
    pid: int
    started: bool  # False: a loop was already live
    log_path: str


@dataclass(frozen=True, slots=True)
class StopResult:
    fleet_id: int
    pid: int | None  # the loop that was stopped, None when none was running
    stopped: bool


def _live_fleet(conn: Connection, fleet_id: int) -> None:

    if broker.get_fleet(conn, fleet_id=fleet_id).deleted_at is not None:  # FleetNotFound
        raise FleetDeleted(fleet_id)


def start(conn: Connection, fleet_id: int) -> StartResult:
    """Lift `monitor stop`'s hold and make sure the loop runs: the live one's pid, or a new
    detached loop once it is live (up to 5 s), on the fleet's tmux server (the socket its
    Director's placement records, so any shell will do). Refused when the Director's pane is
    not on that server: the loop could not run."""
    from cafleet.monitor import supervisor
    from cafleet.monitor.loop import FleetScope
    from cafleet.monitor.runtime import directed_from_here, loop_env
    from cafleet.mux import holds

    _live_fleet(conn, fleet_id)
    director = broker.director_placement(conn, fleet_id)
    if not directed_from_here(conn, fleet_id, director):
        assert director is not None
        raise WorkflowError(
            f"fleet {fleet_id}'s root Director is on host {director.host_id}, not this host; "
            f"run 'cafleet monitor start {fleet_id}' there"
        )
    # The fleet's server, from any shell: the socket the Director's placement records.
    backend = usable_backend(env=loop_env(conn, fleet_id))  # MultiplexerError: no server, ...
    placement = broker.director_placement(conn, fleet_id)
    pane = None if placement is None else placement.mux_pane_id
    if placement is None or pane is None or not holds(backend.list_panes(), placement):
        if placement is not None and placement.mux_socket is not None and pane is not None:
            # Asked on the server the placement records: the pane is gone, not elsewhere.
            raise WorkflowError(
                f"fleet {fleet_id}'s root Director pane {pane} is gone, so its monitor loop "
                f"cannot run; run 'cafleet fleet adopt {fleet_id}' in the pane that takes its place"
            )
        raise WorkflowError(
            f"fleet {fleet_id}'s root Director pane {pane or '-'} is not on this tmux server; "
            f"run 'cafleet monitor start {fleet_id}' in a pane of the fleet's tmux server"
        )
    scope = FleetScope(conn, fleet_id)
    supervisor.lift_hold(scope)
    try:
        pid, started = supervisor.ensure(scope, keep_waiting=signals.keep_waiting)
    except supervisor.LoopNotStarted as exc:
        raise WorkflowError(f"{exc} ({exc.detail})") from exc
    return StartResult(fleet_id, pid, started, scope.log_path)


def stop(conn: Connection, fleet_id: int, *, timeout: float | None = None) -> StopResult:
    """Hold the loop stopped (`config.monitor_hold_path`), then SIGTERM the running one and
    wait until it released its slot. A soft-deleted fleet's loop is stopped too."""
    from cafleet.monitor import supervisor
    from cafleet.monitor.loop import FleetScope

    broker.get_fleet(conn, fleet_id=fleet_id)  # FleetNotFound
    wait = STOP_TIMEOUT if timeout is None else timeout
    try:
        pid = supervisor.stop(FleetScope(conn, fleet_id), timeout=wait)
    except supervisor.LoopNotStopped as exc:
        raise WorkflowError(str(exc)) from exc
    return StopResult(fleet_id, pid, pid is not None)


__all__ = [
    "MonitorStatus",
    "StartResult",
    "StopResult",
    "monitor_status",
    "set_wake_interval",
    "start",
    "stop",
    "wake_now",
]
