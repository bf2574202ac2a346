"""Liveness of a monitor_runtime row (docs/runtime.md §5.2)."""

from __future__ import annotations

import os
from datetime import datetime
from typing import Any

from cafleet.db.timefmt import parse_ts

MIN_STALE_SECONDS = 15


def pid_alive(pid: int) -> bool:
    """os.kill(pid, 0) succeeds or raises PermissionError, and the process is not a zombie
    (an exited loop whose parent never reaped it, e.g. under a container init that does not
    reap, still answers kill(0))."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except PermissionError:
        return True
    except (ProcessLookupError, OverflowError, OSError):
        return False
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return False  # no /proc to ask (not Linux), or it just went: kill(0) said it exists
    # `pid (comm) S ...`: the state follows the last ')' (comm may hold spaces and parens)
    state = stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3]
    return state in (b"Z", b"X")


def is_live(row: Any, now: datetime) -> bool:
    """True when ``pid`` and ``last_tick_at`` are set, the heartbeat is at most
    ``max(3 * tick_seconds, 15)`` seconds old, and the pid exists.

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
    tick = getattr(row, "tick_seconds", None) or 5
    age = (now - last).total_seconds()
    if age > max(3 * tick, MIN_STALE_SECONDS):
        return False
    return pid_alive(int(pid))
