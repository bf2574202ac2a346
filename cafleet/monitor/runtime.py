"""Facts about a fleet's loop every command may ask cheaply (docs/runtime.md §5.2): whether its
`monitor_runtime` row is live, whether `monitor stop` holds it, whether this host may start it,
and the environment it runs with."""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from cafleet import broker
from cafleet.config import monitor_hold_path
from cafleet.hosts import current_host
from cafleet.procs import MIN_STALE_SECONDS, stale_after

if TYPE_CHECKING:
    from cafleet.db.runtime import Connection


def is_held(db_path: str, fleet_id: int) -> bool:
    """`cafleet monitor stop` left its hold: automatic restarts leave the loop stopped."""
    return os.path.exists(monitor_hold_path(db_path, fleet_id))


def is_live(row: Any, now: datetime, *, remote: bool = False) -> bool:
    """`broker.is_live` (docs/runtime.md §5.2) for any row with ``pid``, ``last_tick_at`` and
    ``tick_seconds`` (a MonitorRuntime record); None is not live. ``remote``: the loop runs on
    another host, whose pids this one cannot ask, so the heartbeat alone decides (§10.5)."""
    return row is not None and broker.is_live(row, now, remote=remote)


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
