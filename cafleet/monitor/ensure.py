"""ensure_monitor_loop (docs/runtime.md §5.3): start the fleet's loop detached unless one is live."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
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


def _live_pid(conn: Connection, fleet_id: int) -> int | None:
    from cafleet import broker
    from cafleet.monitor.runtime import is_live

    row = broker.get_monitor_runtime(conn, fleet_id=fleet_id)
    if row is not None and is_live(row, utcnow()):
        return int(row.pid)  # type: ignore[arg-type]
    return None


def ensure_monitor_loop(
    conn: Connection,
    fleet_id: int,
    *,
    keep_waiting: Callable[[], bool] | None = None,
    timeout: float = READY_TIMEOUT,
) -> int:
    """Return the pid of the fleet's live loop, starting one when none is live.

    The child is ``python -m cafleet monitor <fleet_id>`` with the inherited environment, run
    from the database directory in its own session, its stdout and stderr appended to
    ``<db dir>/monitor-<fleet_id>.log``. Readiness is the runtime row turning live (whoever's
    pid it holds), polled every 0.1 s for up to ``timeout`` seconds. ``keep_waiting`` is
    consulted before the spawn and between checks; False raises :class:`StartAbandoned`.
    """
    _reap()
    pid = _live_pid(conn, fleet_id)
    if pid is not None:
        return pid
    if keep_waiting is not None and not keep_waiting():
        raise StartAbandoned()

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
        raise MonitorStartError(fleet_id, log_path, f"it could not be spawned: {exc}") from exc
    _children.append(child)

    deadline = time.monotonic() + timeout
    while True:
        pid = _live_pid(conn, fleet_id)
        if pid is not None:
            return pid
        status = child.poll()
        if status is not None:
            # One last look: a racing starter may have won while this child refused.
            pid = _live_pid(conn, fleet_id)
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
