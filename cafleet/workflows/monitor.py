"""The monitor controls of the WebUI (docs/runtime.md §7.3): status, the stored wake interval, and
"wake now" (a request the live loop answers on its next tick, docs/runtime.md §5.5)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cafleet.workflows.errors import LoopNotLive, NoMonitorRuntime

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


def _live(runtime: MonitorRuntime | None) -> bool:
    from cafleet.db.timefmt import utcnow
    from cafleet.monitor.runtime import is_live

    return runtime is not None and is_live(runtime, utcnow())


def monitor_status(conn: Connection, fleet_id: int) -> MonitorStatus:
    """The runtime row as shown, and the wake roster with its pending counts."""
    from cafleet import broker

    runtime = broker.get_monitor_runtime(conn, fleet_id)
    live = _live(runtime)
    if runtime is not None and not live:
        runtime = dataclasses.replace(runtime, pid=None, started_at=None, last_tick_at=None)
    return MonitorStatus(
        live=live, runtime=runtime, roster=broker.wake_roster(conn, fleet_id=fleet_id)
    )


def set_wake_interval(conn: Connection, fleet_id: int, seconds: int) -> None:
    """Store the fleet's wake interval (0 = no scheduled wakes); the live loop reads it on its
    next tick. `NoMonitorRuntime` when no row exists."""
    from cafleet import broker

    if not broker.set_wake_interval(conn, fleet_id=fleet_id, seconds=seconds):
        raise NoMonitorRuntime(fleet_id)


def wake_now(conn: Connection, fleet_id: int) -> str:
    """Ask the live loop for a forced wake; returns the stored request time (an earlier pending
    request is kept). `LoopNotLive` when the loop is not live."""
    from cafleet import broker

    if not _live(broker.get_monitor_runtime(conn, fleet_id)):
        raise LoopNotLive(fleet_id)
    requested = broker.request_monitor_wake(conn, fleet_id=fleet_id)
    if requested is None:  # the row vanished in between (fleet delete)
        raise LoopNotLive(fleet_id)
    return requested


__all__ = ["MonitorStatus", "monitor_status", "set_wake_interval", "wake_now"]
