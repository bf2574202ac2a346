"""4. `message wait` wake-up latency: from another process's commit to the waiter's output."""

from __future__ import annotations

import os
import select
import subprocess
import time
from pathlib import Path
from typing import Any

from benchmarks.common import base_env, cafleet_argv, connect, make_fleet, percentile, setup_db

SETTLE = 0.8  # let the waiter finish start-up and its first cycle before the send commits
IDLE_WINDOW = 0.3  # ...and, however long that takes on a loaded machine, idle in its loop:
IDLE_TICKS = 3  # at most this many clock ticks of CPU over the window


def _cpu_ticks(pid: int) -> int:
    with open(f"/proc/{pid}/stat", "rb") as fh:
        fields = fh.read().rsplit(b")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def _holds_db(pid: int, db_path: Path | str) -> bool:
    """The waiter has the database open: the file, or a connection to the PostgreSQL server."""
    from tests.pg_server import PgDb, connected_to

    if isinstance(db_path, PgDb):
        return connected_to(pid, db_path.port)
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == str(db_path):
                return True
        except OSError:
            continue
    return False


def _settle(proc: subprocess.Popen[bytes], db_path: Path | str, limit: float = 30.0) -> None:
    """SETTLE, then until the waiter has the database open and idles in its loop for two
    windows in a row (Linux; elsewhere SETTLE alone), so a slow start-up on a loaded machine
    is not counted as wake-up latency."""
    time.sleep(SETTLE)
    if not os.path.exists(f"/proc/{proc.pid}/stat"):
        return
    deadline = time.monotonic() + limit
    idle = 0
    while time.monotonic() < deadline and proc.poll() is None and idle < 2:
        before = _cpu_ticks(proc.pid)
        time.sleep(IDLE_WINDOW)
        if proc.poll() is not None:
            return
        quiet = _cpu_ticks(proc.pid) - before <= IDLE_TICKS
        idle = idle + 1 if quiet and _holds_db(proc.pid, db_path) else 0


def run(tmp: Path, trials: int, db: Path | str | None = None) -> dict[str, Any]:
    """On a new database file under `tmp`, or on `db` (a PostgreSQL one, `postgres.py`)."""
    from cafleet.broker import ack_message, send_message
    from cafleet.db.runtime import close_connection

    db_path = db if db is not None else tmp / "wait" / "cafleet.db"
    setup_db(db_path)
    conn = connect(db_path)
    prefix, how = cafleet_argv()
    env = base_env(db_path)
    latencies: list[float] = []
    try:
        fleet = make_fleet(conn, 1)
        waiter = fleet.member_ids[0]
        for _ in range(trials):
            proc = subprocess.Popen(
                [*prefix, "message", "wait", str(waiter), "--timeout", "30", "--json"],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
            _settle(proc, db_path)
            message = send_message(
                conn, from_member_id=fleet.director_id, to_member_id=waiter, text="wake"
            )
            committed = time.perf_counter()
            assert proc.stdout is not None
            ready, _, _ = select.select([proc.stdout], [], [], 10)
            arrived = time.perf_counter()
            proc.wait(10)
            if not ready:
                raise RuntimeError("message wait did not answer within 10 s")
            latencies.append(arrived - committed)
            ack_message(conn, message_id=message.message_id)
    finally:
        close_connection(conn)
    return {
        "trials": trials,
        "invocation": how,
        "p50_ms": percentile(latencies, 50) * 1000,
        "p99_ms": percentile(latencies, 99) * 1000,
        "max_ms": max(latencies) * 1000,
    }


def render(r: dict[str, Any]) -> list[str]:
    return [
        f"## 4. message wait wake-up latency ({r['trials']} trials)",
        f"  p50 {r['p50_ms']:.1f} ms  p99 {r['p99_ms']:.1f} ms  max {r['max_ms']:.1f} ms",
    ]
