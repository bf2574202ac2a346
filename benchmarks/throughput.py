"""2. In-process throughput of sends and acks through the repository functions."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

from benchmarks.common import connect, make_fleet, percentile, setup_db


def raw_commit_floor(directory: Path, count: int) -> float:
    """Raw sqlite3 WAL commits/s with synchronous=FULL in the same directory: the disk's floor."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "raw.db"
    raw = sqlite3.connect(path, isolation_level=None)
    try:
        raw.execute("PRAGMA journal_mode = WAL")
        raw.execute("PRAGMA synchronous = FULL")
        raw.execute("CREATE TABLE t (a INTEGER PRIMARY KEY, b TEXT)")
        start = time.perf_counter()
        for i in range(count):
            raw.execute("BEGIN IMMEDIATE")
            raw.execute("INSERT INTO t (b) VALUES (?)", (f"m{i}",))
            raw.execute("COMMIT")
        return count / (time.perf_counter() - start)
    finally:
        raw.close()


def run(tmp: Path, count: int) -> dict[str, Any]:
    from cafleet.broker import ack_message, send_message
    from cafleet.db.engine import close_connection

    db_path = tmp / "throughput" / "cafleet.db"
    setup_db(db_path)
    conn = connect(db_path)
    try:
        fleet = make_fleet(conn, 1)
        sender, recipient = fleet.director_id, fleet.member_ids[0]
        send_lat: list[float] = []
        ids: list[int] = []
        start = time.perf_counter()
        for i in range(count):
            t0 = time.perf_counter()
            ids.append(
                send_message(
                    conn, from_member_id=sender, to_member_id=recipient, text=f"m{i}"
                ).message_id
            )
            send_lat.append(time.perf_counter() - t0)
        send_total = time.perf_counter() - start
        ack_lat: list[float] = []
        start = time.perf_counter()
        for message_id in ids:
            t0 = time.perf_counter()
            ack_message(conn, message_id=message_id)
            ack_lat.append(time.perf_counter() - t0)
        ack_total = time.perf_counter() - start
    finally:
        close_connection(conn)
    floor = raw_commit_floor(tmp / "throughput-raw", count)
    return {
        "count": count,
        "raw_sqlite_commits_per_s": floor,
        "sends_vs_raw": (count / send_total) / floor,
        "synchronous": "FULL",
        "journal_mode": "wal",
        "sends_per_s": count / send_total,
        "send_p50_ms": percentile(send_lat, 50) * 1000,
        "send_p99_ms": percentile(send_lat, 99) * 1000,
        "acks_per_s": count / ack_total,
        "ack_p50_ms": percentile(ack_lat, 50) * 1000,
        "ack_p99_ms": percentile(ack_lat, 99) * 1000,
    }


def render(r: dict[str, Any]) -> list[str]:
    return [
        f"## 2. in-process throughput ({r['count']} each, WAL, synchronous=FULL)",
        f"  send: {r['sends_per_s']:8.0f}/s  p50 {r['send_p50_ms']:.3f} ms  p99 {r['send_p99_ms']:.3f} ms",
        f"  raw sqlite3 floor (BEGIN IMMEDIATE; INSERT; COMMIT), same disk, same run: "
        f"{r['raw_sqlite_commits_per_s']:.0f} commits/s; sends reach {r['sends_vs_raw']:.0%} of it",
        f"  ack:  {r['acks_per_s']:8.0f}/s  p50 {r['ack_p50_ms']:.3f} ms  p99 {r['ack_p99_ms']:.3f} ms",
    ]
