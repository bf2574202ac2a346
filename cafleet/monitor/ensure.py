"""ensure_monitor_loop (docs/runtime.md §5.3): start the fleet's loop detached unless one is live."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from cafleet.db.timefmt import utcnow
from cafleet.errors import CafleetError

if TYPE_CHECKING:
    from cafleet.db.runtime import Connection

READY_TIMEOUT = 5.0
READY_POLL = 0.1

# Long-lived callers keep their children here and poll() them, so an exited loop never stays a
# zombie (docs/runtime.md §5.3).
_children: list[subprocess.Popen[bytes]] = []


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


def _reap() -> None:
    for child in list(_children):
        if child.poll() is not None:
            _children.remove(child)


def live_pid(conn: Connection, fleet_id: int) -> int | None:
    """The pid of the fleet's live loop, or None."""
    from cafleet import broker
    from cafleet.monitor.runtime import is_live

    row = broker.get_monitor_runtime(conn, fleet_id=fleet_id)
    if row is not None and is_live(row, utcnow()):
        return int(row.pid)  # type: ignore[arg-type]
    return None


def start_detached(conn: Connection, fleet_id: int) -> subprocess.Popen[bytes]:
    """Spawn ``python -m cafleet monitor <fleet_id>`` detached (docs/runtime.md §5.3 step 2), its
    stdout and stderr appended to the fleet's log; raises `MonitorStartError` when it cannot
    be spawned. Does not wait for it."""
    _reap()
    db_path = conn.info["cafleet.path"]
    db_dir = os.path.dirname(db_path)
    log_path = log_path_for(conn, fleet_id)
    argv = [sys.executable, "-m", "cafleet", "monitor", str(fleet_id)]
    try:
        with open(log_path, "ab") as log:
            child = subprocess.Popen(
                argv,
                cwd=db_dir,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
                close_fds=True,
            )
    except OSError as exc:
        from cafleet import status

        detail = f"it could not be spawned: {status.os_error_text(exc)}"
        raise MonitorStartError(fleet_id, log_path, detail) from exc
    _children.append(child)
    return child


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
    _reap()
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


# --- restarting dead loops (docs/cli.md §1.11: every command heals) ----------------------------------


def needs_restart(conn: Connection, fleet_id: int, row: object = None) -> bool:
    """The fleet's loop is not live, `cafleet monitor stop` does not hold it, and a
    notification is pending (held lines are pending too: nothing stamped them)."""
    from cafleet import broker
    from cafleet.monitor.runtime import is_held, is_live

    if row is None:
        row = broker.get_monitor_runtime(conn, fleet_id=fleet_id)
    if row is not None and is_live(row, utcnow()):
        return False
    if is_held(conn.info["cafleet.path"], fleet_id):
        return False
    return broker.next_pending_notification(conn, fleet_id=fleet_id) is not None


def heal_dead_loops(conn: Connection, env: Mapping[str, str] | None = None) -> list[int]:
    """Run after any command that opened the database: restart, in the background, the loop of
    every live fleet whose loop ran before and is dead now (stale, or stopped but not held by
    `monitor stop`) while notifications wait, when this process can reach the fleet's tmux
    server (its root Director's pane is on the server ``TMUX`` names). Returns the fleet ids
    whose loop it started; never raises for a fleet it could not help.

    The cost when every loop is live is one indexed read (the live fleets' runtime rows) and
    one `kill(pid, 0)` per loop; tmux is asked only when a loop is dead with work waiting.
    """
    env = os.environ if env is None else env
    if not env.get("TMUX"):
        return []  # no tmux server to reach: a loop started here could not type anything
    from cafleet import broker
    from cafleet.monitor.runtime import is_live

    now = utcnow()
    dead = [r for r in broker.live_fleet_runtimes(conn) if not is_live(r, now)]
    if not dead:
        return []
    candidates = [r.fleet_id for r in dead if needs_restart(conn, r.fleet_id, r)]
    if not candidates:
        return []
    from cafleet.mux import MultiplexerError, usable_backend

    try:
        backend = usable_backend(env=env)
        live = backend.list_panes()
    except MultiplexerError:
        return []
    started: list[int] = []
    for fleet_id in candidates:
        pane = _director_pane(conn, fleet_id)
        if pane is None or pane not in live:
            continue  # another server's fleet, or its Director is gone: the loop would refuse
        try:
            start_detached(conn, fleet_id)
        except MonitorStartError:
            continue
        started.append(fleet_id)
    return started


def _director_pane(conn: Connection, fleet_id: int) -> str | None:
    from cafleet.monitor.tick import director_pane_id

    return director_pane_id(conn, fleet_id)
