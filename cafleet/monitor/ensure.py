"""The fleet's loop started and healed (docs/runtime.md §5.3, docs/cli.md §1.11), by the
supervisor (`cafleet.monitor.supervisor`) over the fleet's scope (`cafleet.monitor.loop`)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from cafleet import broker
from cafleet.db.timefmt import utcnow
from cafleet.monitor.runtime import directed_from_here, is_held, is_live
from cafleet.procs import pid_alive

if TYPE_CHECKING:
    from cafleet.db.runtime import Connection


# Every command heals (`heal_dead_loops`): the supervisor and the loop's modules are imported
# only when a loop is to start or be waited for.


def live_pid(conn: Connection, fleet_id: int) -> int | None:
    """The pid of the fleet's live loop, or None."""
    from cafleet.monitor.loop import FleetScope

    return FleetScope(conn, fleet_id).live_pid()


def ensure_monitor_loop(
    conn: Connection,
    fleet_id: int,
    *,
    keep_waiting: Callable[[], bool] | None = None,
    timeout: float = 5.0,
) -> int:
    """The pid of the fleet's live loop, starting one detached when none is live
    (`supervisor.ensure`: ``python -m cafleet monitor <fleet_id>`` run from the database
    directory with `runtime.loop_env`, its output appended to the fleet's log). Raises
    `supervisor.LoopNotStarted` or `supervisor.StartAbandoned`."""
    from cafleet.monitor import supervisor
    from cafleet.monitor.loop import FleetScope

    pid, _started = supervisor.ensure(
        FleetScope(conn, fleet_id), keep_waiting=keep_waiting, timeout=timeout
    )
    return pid


# --- restarting dead loops (every command heals: docs/cli.md §1.11) ---------------------------


def needs_restart(conn: Connection, fleet_id: int, row: object = None) -> bool:
    """The fleet's loop is not live, `cafleet monitor stop` does not hold it, and a
    notification is pending (held lines are pending too: nothing stamped them): send and
    broadcast's restart rule, which waits for the loop to be live."""
    if row is None:
        row = broker.get_monitor_runtime(conn, fleet_id=fleet_id)
    if row is not None and is_live(row, utcnow()):
        return False
    if is_held(conn.info["cafleet.path"], fleet_id):
        return False
    if not directed_from_here(conn, fleet_id):
        return False  # its loop runs on the Director's host; this one cannot start it
    return broker.next_pending_notification(conn, fleet_id=fleet_id) is not None


def heal_dead_loops(conn: Connection, env: Mapping[str, str] | None = None) -> list[int]:
    """Run after any command that opened the database: restart, in the background, the loop of
    every live fleet whose loop ran before and is dead now (its pid gone, or stopped but not held
    by `monitor stop`), whether or not notifications wait (the loop also brings the scheduled
    wakes), when the fleet's tmux server answers and has the root Director's pane. The server is
    the one the Director's placement records (`runtime.loop_env`), so this works from any shell.
    Returns the fleet ids whose loop it started; never raises for a fleet it could not help
    (`fleet show`, `member list` and `doctor` name the fix for those).

    The cost when every loop is live is one indexed read (the live fleets' runtime rows) and
    one `kill(pid, 0)` per loop; a dead loop adds a read of its Director's placement and one
    `list-panes` of its server (one per server).
    """
    env = os.environ if env is None else env
    now = utcnow()
    # Dead: released (stopped), or its pid is gone (killed). A loop whose pid still runs but
    # stopped beating is left to `monitor start` (fleet show names it): on a loaded machine a
    # late heartbeat must not make every command start a loop that takes the slot over.
    dead = [
        r
        for r in broker.live_fleet_runtimes(conn)
        if not is_live(r, now) and (r.pid is None or not pid_alive(int(r.pid)))
    ]
    if not dead:
        return []
    db_path = conn.info["cafleet.path"]
    candidates = [r.fleet_id for r in dead if not is_held(db_path, r.fleet_id)]
    if not candidates:
        return []
    from cafleet.monitor import supervisor
    from cafleet.monitor.loop import FleetScope
    from cafleet.mux import MultiplexerError, get_backend, holds, server_env

    listed: dict[str | None, frozenset[str] | None] = {}  # socket -> its live panes
    started: list[int] = []
    for fleet_id in candidates:
        placement = broker.director_placement(conn, fleet_id)
        if placement is None or placement.mux_pane_id is None:
            continue
        if not directed_from_here(conn, fleet_id, placement):
            continue  # another host's fleet: its loop is healed there
        reached = server_env(placement.mux_socket, env)
        if reached is None:
            continue  # no socket recorded and no TMUX: no server to ask
        backend: Any = get_backend("tmux", env=reached)
        socket = backend.socket_path
        if socket not in listed:
            try:
                backend.ensure_available()
                listed[socket] = backend.list_panes()
            except MultiplexerError:
                listed[socket] = None
        live = listed[socket]
        if live is None or not holds(live, placement):
            continue  # the server is gone, or the Director's pane: the loop would refuse
        try:
            supervisor.start_detached(FleetScope(conn, fleet_id), env=reached)
        except supervisor.LoopNotStarted:
            continue
        started.append(fleet_id)
    return started


__all__ = [
    "directed_from_here",
    "ensure_monitor_loop",
    "heal_dead_loops",
    "live_pid",
    "needs_restart",
]
