"""ensure_monitor_loop (docs/runtime.md §5.3): start the fleet's loop detached unless one is live."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from cafleet.db.timefmt import utcnow
from cafleet.errors import CafleetError
from cafleet.monitor.detached import reap, spawn_detached

if TYPE_CHECKING:
    from cafleet.db.runtime import Connection

READY_TIMEOUT = 5.0
READY_POLL = 0.1


class MonitorStartError(CafleetError):
    """The loop did not become live. str() is fleet create's error; ``detail`` is docs/cli.md §1.11's."""

    def __init__(self, fleet_id: int, log_path: str, detail: str) -> None:
        self.fleet_id = fleet_id
        self.log_path = log_path
        self.detail = detail
        super().__init__(f"monitor loop for fleet {fleet_id} did not start; see {log_path}")


class StartAbandoned(CafleetError):
    """``keep_waiting`` returned False (a signal) before the loop became live."""


def log_path_for(conn: Connection, fleet_id: int) -> str:
    from cafleet.config import monitor_log_path

    return monitor_log_path(conn.info["cafleet.path"], fleet_id)


def live_pid(conn: Connection, fleet_id: int) -> int | None:
    """The pid of the fleet's live loop, or None."""
    from cafleet import broker
    from cafleet.monitor.runtime import is_live

    row = broker.get_monitor_runtime(conn, fleet_id=fleet_id)
    if row is not None and is_live(row, utcnow()):
        return int(row.pid)  # type: ignore[arg-type]
    return None


def loop_env(
    conn: Connection, fleet_id: int, env: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment the fleet's loop runs with: this process's, with ``TMUX`` naming the
    server the root Director's placement records when this process is on another server or on
    none (`mux.server_env`), so a loop started from a plain shell still reaches the fleet."""
    from cafleet import broker
    from cafleet.mux import server_env

    env = os.environ if env is None else env
    placement = broker.director_placement(conn, fleet_id)
    reached = server_env(None if placement is None else placement.mux_socket, env)
    return dict(env) if reached is None else reached


def start_detached(
    conn: Connection, fleet_id: int, env: Mapping[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Spawn ``python -m cafleet monitor <fleet_id>`` detached (docs/runtime.md §5.3 step 2), its
    stdout and stderr appended to the fleet's log, with `loop_env` (unless ``env`` is given);
    raises `MonitorStartError` when it cannot be spawned. Does not wait for it."""
    reap()
    if env is None:
        env = loop_env(conn, fleet_id)
    from cafleet.config import db_dir_of

    db_dir = db_dir_of(conn.info["cafleet.path"])  # PostgreSQL: its local directory
    log_path = log_path_for(conn, fleet_id)
    argv = [sys.executable, "-m", "cafleet", "monitor", str(fleet_id)]
    try:
        return spawn_detached(argv, log_path=log_path, cwd=db_dir, env=env)
    except OSError as exc:
        from cafleet import status

        detail = f"it could not be spawned: {status.os_error_text(exc)}"
        raise MonitorStartError(fleet_id, log_path, detail) from exc


def ensure_monitor_loop(
    conn: Connection,
    fleet_id: int,
    *,
    keep_waiting: Callable[[], bool] | None = None,
    timeout: float = READY_TIMEOUT,
) -> int:
    """Return the pid of the fleet's live loop, starting one when none is live.

    The child is `start_detached`'s: ``python -m cafleet monitor <fleet_id>`` with the
    inherited environment, run from the database directory in its own session, its stdout and
    stderr appended to ``<db path>.monitor-<fleet_id>.log`` (`config.monitor_log_path`).
    Readiness is the runtime row turning live (whoever's pid it holds), polled every 0.1 s for
    up to ``timeout`` seconds. ``keep_waiting`` is consulted before the spawn and between
    checks; False raises :class:`StartAbandoned`.
    """
    reap()
    pid = live_pid(conn, fleet_id)
    if pid is not None:
        return pid
    if keep_waiting is not None and not keep_waiting():
        raise StartAbandoned()

    log_path = log_path_for(conn, fleet_id)
    child = start_detached(conn, fleet_id)
    deadline = time.monotonic() + timeout
    while True:
        pid = live_pid(conn, fleet_id)
        if pid is not None:
            return pid
        status = child.poll()
        if status is not None:
            # One last look: a racing starter may have won while this child refused.
            pid = live_pid(conn, fleet_id)
            if pid is not None:
                return pid
            raise MonitorStartError(fleet_id, log_path, f"it exited with status {status}")
        if time.monotonic() >= deadline:
            raise MonitorStartError(
                fleet_id, log_path, f"it did not become live within {timeout:g} s"
            )
        if keep_waiting is not None and not keep_waiting():
            raise StartAbandoned()
        time.sleep(READY_POLL)


# --- restarting dead loops (every command heals: docs/cli.md §1.11) ---------------------------


def needs_restart(conn: Connection, fleet_id: int, row: object = None) -> bool:
    """The fleet's loop is not live, `cafleet monitor stop` does not hold it, and a
    notification is pending (held lines are pending too: nothing stamped them): send and
    broadcast's restart rule, which waits for the loop to be live."""
    from cafleet import broker
    from cafleet.monitor.runtime import is_held, is_live

    if row is None:
        row = broker.get_monitor_runtime(conn, fleet_id=fleet_id)
    if row is not None and is_live(row, utcnow()):
        return False
    if is_held(conn.info["cafleet.path"], fleet_id):
        return False
    if not directed_from_here(conn, fleet_id):
        return False  # its loop runs on the Director's host; this one cannot start it
    return broker.next_pending_notification(conn, fleet_id=fleet_id) is not None


def directed_from_here(conn: Connection, fleet_id: int, placement: Any = None) -> bool:
    """The fleet's root Director is on this host, or its host is not recorded (a one-host
    fleet): only then may this process start or heal the fleet's loop (docs/runtime.md §10.2)."""
    from cafleet import broker
    from cafleet.hosts import current_host

    if placement is None:
        placement = broker.director_placement(conn, fleet_id)
    return placement is None or placement.host_id in (None, current_host())


def heal_dead_loops(conn: Connection, env: Mapping[str, str] | None = None) -> list[int]:
    """Run after any command that opened the database: restart, in the background, the loop of
    every live fleet whose loop ran before and is dead now (its pid gone, or stopped but not held
    by `monitor stop`), whether or not notifications wait (the loop also brings the scheduled
    wakes), when the fleet's tmux server answers and has the root Director's pane. The server is
    the one the Director's placement records (`loop_env`), so this works from any shell.
    Returns the fleet ids whose loop it started; never raises for a fleet it could not help
    (`fleet show`, `member list` and `doctor` name the fix for those).

    The cost when every loop is live is one indexed read (the live fleets' runtime rows) and
    one `kill(pid, 0)` per loop; a dead loop adds a read of its Director's placement and one
    `list-panes` of its server (one per server).
    """
    env = os.environ if env is None else env
    from cafleet import broker
    from cafleet.monitor.runtime import is_live
    from cafleet.procs import pid_alive

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
    from cafleet.monitor.runtime import is_held

    db_path = conn.info["cafleet.path"]
    candidates = [r.fleet_id for r in dead if not is_held(db_path, r.fleet_id)]
    if not candidates:
        return []
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
            start_detached(conn, fleet_id, env=reached)
        except MonitorStartError:
            continue
        started.append(fleet_id)
    return started
