"""A fleet's monitor runtime row (docs/storage.md §2.5)."""

from typing import NamedTuple

from cafleet.records import Row


class MonitorRuntime(NamedTuple):
    fleet_id: int
    pid: int | None
    started_at: str | None
    last_tick_at: str | None
    tick_seconds: int
    last_wake_at: str | None
    wake_interval_seconds: int | None  # None = unset (env/default apply); never turned into 0
    wake_requested_at: str | None


def monitor_runtime_from_row(row: Row) -> MonitorRuntime:
    return MonitorRuntime(
        fleet_id=row["fleet_id"],
        pid=row["pid"],
        started_at=row["started_at"],
        last_tick_at=row["last_tick_at"],
        tick_seconds=row["tick_seconds"],
        last_wake_at=row["last_wake_at"],
        wake_interval_seconds=row["wake_interval_seconds"],
        wake_requested_at=row["wake_requested_at"],
    )


class HostLoop(NamedTuple):
    """A host's delivery loop slot (`host_loops`, docs/storage.md §2.11)."""

    host_id: str
    pid: int | None
    started_at: str | None
    last_tick_at: str | None
    tick_seconds: int


def host_loop_from_row(row: Row) -> HostLoop:
    return HostLoop(
        host_id=row["host_id"],
        pid=row["pid"],
        started_at=row["started_at"],
        last_tick_at=row["last_tick_at"],
        tick_seconds=row["tick_seconds"],
    )
