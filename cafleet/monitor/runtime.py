"""Liveness of a monitor_runtime row (docs/runtime.md §5.2)."""

from __future__ import annotations

import os
from datetime import datetime
from typing import Any

from cafleet.db.timefmt import parse_ts
from cafleet.procs import MIN_STALE_SECONDS, pid_alive, stale_after


def is_held(db_path: str, fleet_id: int) -> bool:
    """`cafleet monitor stop` left its hold: automatic restarts leave the loop stopped."""
    from cafleet.config import monitor_hold_path

    return os.path.exists(monitor_hold_path(db_path, fleet_id))


def is_live(row: Any, now: datetime, *, remote: bool = False) -> bool:
    """True when ``pid`` and ``last_tick_at`` are set, the heartbeat is at most
    ``max(3 * tick_seconds, 15)`` seconds old, and the pid exists. ``remote``: the loop runs on
    another host (its root Director's), whose pids this one cannot ask, so the heartbeat alone
    decides (docs/runtime.md §10.5).

    The heartbeat is the authority; the signal check only corroborates it. ``row`` is a
    MonitorRuntime record (or anything with ``pid``, ``last_tick_at``, ``tick_seconds``);
    None is not live.
    """
    if row is None:
        return False
    pid = getattr(row, "pid", None)
    last_tick_at = getattr(row, "last_tick_at", None)
    if pid is None or last_tick_at is None:
        return False
    last = parse_ts(last_tick_at) if isinstance(last_tick_at, str) else last_tick_at
    if last is None:
        return False
    age = (now - last).total_seconds()
    if age > stale_after(getattr(row, "tick_seconds", None)):
        return False
    return remote or pid_alive(int(pid))


__all__ = ["MIN_STALE_SECONDS", "is_held", "is_live", "stale_after"]
