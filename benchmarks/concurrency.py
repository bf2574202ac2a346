"""3. Many writer processes sending and ACKing on one file: total time, errors, lost rows."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.common import base_env, connect, make_fleet, setup_db

WORKER = r"""
import json, sys
from cafleet.broker import ack_message, send_message
from cafleet.cli.guard import open_validated_connection
path, sender, recipient, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
conn = open_validated_connection(path)
errors = []
done = 0
sys.stdout.write("ready\n"); sys.stdout.flush()
sys.stdin.readline()  # start together
for i in range(count):
    try:
        m = send_message(conn, from_member_id=sender, to_member_id=recipient, text=f"w{i}")
        ack_message(conn, message_id=m.message_id)
        done += 1
    except Exception as e:  # counted, not hidden
        errors.append(f"{type(e).__name__}: {e}")
print(json.dumps({"done": done, "errors": errors}))
"""


def run(
    tmp: Path, processes: int, per_process: int, db: Path | str | None = None
) -> dict[str, Any]:
    """On a new database file under `tmp`, or on `db` (a PostgreSQL one, `postgres.py`)."""
    from cafleet.db import tx
    from cafleet.db.runtime import close_connection, is_postgres_connection

    db_path = db if db is not None else tmp / "concurrency" / "cafleet.db"
    setup_db(db_path)
    conn = connect(db_path)
    fleet = make_fleet(conn, processes)
    close_connection(conn)
    env = base_env(db_path)
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                WORKER,
                str(db_path),
                str(fleet.director_id),
                str(fleet.member_ids[i]),
                str(per_process),
            ],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(processes)
    ]
    for p in procs:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    start = time.perf_counter()
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    reports = [json.loads(p.communicate()[0].strip().splitlines()[-1]) for p in procs]
    elapsed = time.perf_counter() - start
    errors = [e for r in reports for e in r["errors"]]
    conn = connect(db_path)
    try:
        with tx.read(conn):
            rows = conn.exec_driver_sql(
                "SELECT count(*), sum(CASE WHEN status_state = 'completed' THEN 1 ELSE 0 END) "
                "FROM messages"
            ).one()
            integrity = (
                None  # PostgreSQL has no file to check
                if is_postgres_connection(conn)
                else conn.exec_driver_sql("PRAGMA integrity_check").scalar()
            )
    finally:
        close_connection(conn)
    expected = processes * per_process
    return {
        "processes": processes,
        "per_process": per_process,
        "seconds": elapsed,
        "pairs_per_s": expected / elapsed,
        "errors": len(errors),
        "error_samples": errors[:3],
        "rows": rows[0],
        "acked": rows[1],
        "lost": expected - rows[0],
        "integrity_check": integrity,
    }


def render(r: dict[str, Any]) -> list[str]:
    return [
        f"## 3. {r['processes']} writer processes x {r['per_process']} send+ack",
        f"  total {r['seconds']:.2f} s ({r['pairs_per_s']:.0f} pairs/s); errors {r['errors']}; "
        f"lost {r['lost']}; rows {r['rows']} (acked {r['acked']})"
        + ("" if r["integrity_check"] is None else f"; integrity {r['integrity_check']}"),
    ]
