"""4. `message wait` wake-up latency: from another process's commit to the waiter's output."""

from __future__ import annotations

import select
import subprocess
import time
from pathlib import Path
from typing import Any

from benchmarks.common import base_env, cafleet_argv, connect, make_fleet, percentile, setup_db

SETTLE = 0.8  # let the waiter finish start-up and its first cycle before the send commits


def run(tmp: Path, trials: int) -> dict[str, Any]:
    from cafleet.broker import ack_message, send_message
    from cafleet.db.runtime import close_connection

    db_path = tmp / "wait" / "cafleet.db"
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
            time.sleep(SETTLE)
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
