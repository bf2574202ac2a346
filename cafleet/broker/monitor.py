"""The monitor loop's runtime row (docs/runtime.md §5.2, docs/storage.md §7.7).

No row means no loop ever ran for the fleet. A claim always writes a non-NULL wake interval; a
stored NULL interval is never turned into 0. Only `delete_fleet` removes a row.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from cafleet.broker._common import stamp
from cafleet.broker.errors import FleetDeleted, FleetNotFound
from cafleet.db import tx
from cafleet.db.catalog import monitor as q
from cafleet.db.runtime import Connection
from cafleet.db.timefmt import parse_ts, utcnow
from cafleet.procs import pid_alive, stale_after
from cafleet.records import HostLoop, MonitorRuntime, host_loop_from_row, monitor_runtime_from_row

IsLive = Callable[[MonitorRuntime, datetime], bool]


def is_live(
    row: MonitorRuntime | HostLoop, now: datetime | None = None, *, remote: bool = False
) -> bool:
    """docs/runtime.md §5.2: pid and heartbeat set, the heartbeat at most max(3 x tick, 15) s old,
    and `os.kill(pid, 0)` succeeds or raises PermissionError. ``remote``: the loop runs on another
    host, whose pids this one cannot ask, so the heartbeat alone decides (§10.5)."""
    if row.pid is None or row.last_tick_at is None:
        return False
    tick = parse_ts(row.last_tick_at)
    if tick is None:
        return False
    moment = now if now is not None else utcnow()
    if (moment - tick).total_seconds() > stale_after(row.tick_seconds):
        return False
    if remote:
        return True
    return pid_alive(row.pid)


def claim_monitor(
    conn: Connection,
    *,
    fleet_id: int,
    pid: int,
    tick_seconds: int | None,
    wake_interval_seconds: int,
    is_live: IsLive = is_live,
    now: datetime | None = None,
) -> bool:
    """Claim the fleet's loop slot. No row: insert. Live row: refuse (False). Stale row: take
    it over, keeping `last_wake_at`, clearing `wake_requested_at`, the tick only when given."""
    if wake_interval_seconds is None:
        raise ValueError("a claim always writes a non-NULL wake interval")
    with tx.write(conn):
        moment = now if now is not None else utcnow()
        ts = stamp(moment)
        fleet = conn.execute(q.FLEET_STATE, {"fleet_id": fleet_id}).first()
        if fleet is None:
            raise FleetNotFound(fleet_id)
        if fleet[0] is not None:
            raise FleetDeleted(fleet_id)
        current = conn.execute(q.RUNTIME, {"fleet_id": fleet_id}).mappings().first()
        params = {
            "fleet_id": fleet_id,
            "pid": pid,
            "now": ts,
            "tick": tick_seconds,
            "interval": wake_interval_seconds,
        }
        if current is None:
            conn.execute(
                q.INSERT_DEFAULT_TICK if tick_seconds is None else q.INSERT_WITH_TICK, params
            )
            return True
        if is_live(monitor_runtime_from_row(current), moment):
            return False
        conn.execute(q.TAKE_OVER, params)
        return True


def heartbeat(conn: Connection, *, fleet_id: int, pid: int, now: datetime | None = None) -> bool:
    """Set `last_tick_at` where the pid matches; False means this loop was displaced."""
    result, _ = tx.write_one(conn, q.HEARTBEAT, {"fleet_id": fleet_id, "pid": pid}, now)
    return result.rowcount == 1


def clear_monitor(conn: Connection, *, fleet_id: int, pid: int) -> bool:
    """Release `pid`, `started_at` and `last_tick_at` where the pid matches."""
    result, _ = tx.write_one(conn, q.CLEAR, {"fleet_id": fleet_id, "pid": pid})
    return result.rowcount == 1


def record_monitor_wake(
    conn: Connection,
    *,
    fleet_id: int,
    pid: int,
    seen_request: str | None,
    now: datetime | None = None,
) -> bool:
    """Where the pid matches, set `last_wake_at`; clear `wake_requested_at` only if it still
    equals `seen_request`, so a request made during the wake stays pending."""
    params = {"seen": seen_request, "fleet_id": fleet_id, "pid": pid}
    result, _ = tx.write_one(conn, q.RECORD_WAKE, params, now)
    return result.rowcount == 1


def request_monitor_wake(
    conn: Connection, *, fleet_id: int, now: datetime | None = None
) -> str | None:
    """Set `wake_requested_at` if it is NULL; return the stored request time, or None when no
    row exists."""
    result, _ = tx.write_one(conn, q.REQUEST_WAKE, {"fleet_id": fleet_id}, now)
    stored = result.scalar()
    return None if stored is None else str(stored)


def set_wake_interval(conn: Connection, *, fleet_id: int, seconds: int | None) -> bool:
    """Ownership-free; False when no row exists. None stores NULL (unset)."""
    result, _ = tx.write_one(conn, q.SET_INTERVAL, {"seconds": seconds, "fleet_id": fleet_id})
    return result.rowcount == 1


def live_fleet_runtimes(conn: Connection) -> list[MonitorRuntime]:
    """The runtime rows of every live (not soft-deleted) fleet, by fleet id: one read."""
    with tx.read(conn):
        rows = conn.execute(q.LIVE_FLEET_RUNTIMES).mappings().all()
    return [monitor_runtime_from_row(row) for row in rows]


def get_monitor_runtime(conn: Connection, fleet_id: int) -> MonitorRuntime | None:
    """The fleet's runtime row, or None when no loop ever ran for it."""
    with tx.read(conn):
        row = conn.execute(q.RUNTIME, {"fleet_id": fleet_id}).mappings().first()
    return None if row is None else monitor_runtime_from_row(row)


# --- host delivery loops (docs/runtime.md §10.4) ------------------------------------------------


def host_loop_live(row: HostLoop | None, here: str, now: datetime | None = None) -> bool:
    """A host loop is live by `is_live`'s rule; seen from another host (``here``), which cannot
    signal it, by its heartbeat alone."""
    return row is not None and is_live(row, now, remote=row.host_id != here)


def claim_host_loop(
    conn: Connection, *, host_id: str, pid: int, tick_seconds: int, now: datetime | None = None
) -> HostLoop | None:
    """Claim the host's loop slot: no row, insert; a live row, refuse (None); a stale one, take
    it over. Returns the row claimed."""
    with tx.write(conn):
        moment = now if now is not None else utcnow()
        params = {"host": host_id, "pid": pid, "now": stamp(moment), "tick": tick_seconds}
        current = conn.execute(q.HOST_LOOP, {"host": host_id}).mappings().first()
        if current is None:
            conn.execute(q.INSERT_HOST_LOOP, params)
        elif host_loop_live(host_loop_from_row(current), host_id, moment):
            return None
        else:
            conn.execute(q.TAKE_OVER_HOST_LOOP, params)
        return host_loop_from_row(conn.execute(q.HOST_LOOP, {"host": host_id}).mappings().one())


def host_heartbeat(
    conn: Connection, *, host_id: str, pid: int, now: datetime | None = None
) -> bool:
    """Set `last_tick_at` where the pid matches; False means this loop was displaced."""
    result, _ = tx.write_one(conn, q.HOST_HEARTBEAT, {"host": host_id, "pid": pid}, now)
    return result.rowcount == 1


def clear_host_loop(conn: Connection, *, host_id: str, pid: int) -> bool:
    """Release `pid`, `started_at` and `last_tick_at` where the pid matches."""
    result, _ = tx.write_one(conn, q.CLEAR_HOST_LOOP, {"host": host_id, "pid": pid})
    return result.rowcount == 1


def get_host_loop(conn: Connection, host_id: str) -> HostLoop | None:
    """The host's loop row, or None when no loop ever ran there."""
    with tx.read(conn):
        row = conn.execute(q.HOST_LOOP, {"host": host_id}).mappings().first()
    return None if row is None else host_loop_from_row(row)


def host_loops(conn: Connection) -> list[HostLoop]:
    """Every host loop row, by host id."""
    with tx.read(conn):
        rows = conn.execute(q.HOST_LOOPS).mappings().all()
    return [host_loop_from_row(row) for row in rows]


def host_serves(conn: Connection, host_id: str) -> bool:
    """Whether an active member of a live fleet has its pane on ``host_id`` while the fleet's
    root Director is on another host (the host's loop has something to serve)."""
    with tx.read(conn):
        return bool(conn.execute(q.HOST_SERVES, {"host": host_id}).scalar())


def remote_monitor_runtimes(conn: Connection, host_id: str) -> list[MonitorRuntime]:
    """The runtime rows of live fleets whose active monitor member's pane is on ``host_id``
    while their root Director is on another host: that host's loop wakes those monitors."""
    with tx.read(conn):
        rows = conn.execute(q.REMOTE_MONITOR_RUNTIMES, {"host": host_id}).mappings().all()
    return [monitor_runtime_from_row(row) for row in rows]


__all__ = [
    "claim_host_loop",
    "claim_monitor",
    "clear_host_loop",
    "get_host_loop",
    "host_heartbeat",
    "host_loop_live",
    "host_loops",
    "host_serves",
    "clear_monitor",
    "get_monitor_runtime",
    "heartbeat",
    "is_live",
    "live_fleet_runtimes",
    "record_monitor_wake",
    "remote_monitor_runtimes",
    "request_monitor_wake",
    "set_wake_interval",
]
