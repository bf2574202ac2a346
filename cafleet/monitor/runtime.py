"""Facts about a fleet's loop every command may ask cheaply (docs/runtime.md §5.2): whether its
`monitor_runtime` row is live, whether `monitor stop` holds it, whether this host may start it,
and the environment it runs with."""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from cafleet import broker
from cafleet.db.timefmt import parse_ts
from cafleet.hosts import current_host
from cafleet.procs import MIN_STALE_SECONDS, pid_alive, stale_after

if TYPE_CHECKING:
    from cafleet.db.runtime import Connection


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


def loop_env(
    conn: Connection, fleet_id: int, env: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment the fleet's loop runs with: this process's, with ``TMUX`` naming the
    server the root Director's placement records when this process is on another server or on
    none (`mux.server_env`), so a loop started from a plain shell still reaches the fleet."""
    from cafleet.mux import server_env

    env = os.environ if env is None else env
    placement = broker.director_placement(conn, fleet_id)
    reached = server_env(None if placement is None else placement.mux_socket, env)
    return dict(env) if reached is None else reached


def directed_from_here(conn: Connection, fleet_id: int, placement: Any = None) -> bool:
    """The fleet's root Director is on this host, or its host is not recorded (a one-host
    fleet): only then may this process start or heal the fleet's loop (docs/runtime.md §10.2)."""
    if placement is None:
        placement = broker.director_placement(conn, fleet_id)
    return placement is None or placement.host_id in (None, current_host())


__all__ = [
    "MIN_STALE_SECONDS",
    "directed_from_here",
    "is_held",
    "is_live",
    "loop_env",
    "stale_after",
]
