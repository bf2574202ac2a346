"""2. In-process throughput of sends and acks through the repository functions.

The disk decides most of this figure (synchronous=FULL syncs the WAL on every commit) and its
speed drifts while anything else runs, so the raw-sqlite3 floor is measured in the same run,
interleaved with cafleet's sends in rounds, and each round's ratio is reported.
"""

from __future__ import annotations

import sqlite3
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.common import connect, make_fleet, median, percentile, setup_db
from cafleet.db.timefmt import format_ts

ROUNDS = 10


def _raw_connection(directory: Path) -> tuple[sqlite3.Connection, int]:
    """Raw sqlite3 on a second cafleet database (same schema and indexes, WAL,
    synchronous=FULL): the floor for one message insert per commit on this disk."""
    path = directory / "raw.db"
    setup_db(path)
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute("PRAGMA synchronous = FULL")
    conn = connect(path)
    try:
        member = make_fleet(conn, 1).member_ids[0]
    finally:
        from cafleet.db.runtime import close_connection

        close_connection(conn)
    return raw, member


_RAW_INSERT = (
    "INSERT INTO messages (owner_member_id, from_member_id, to_member_id, type, created_at, "
    "status_state, status_timestamp, origin_message_id, text, notified_at) "
    "VALUES (?, ?, ?, 'unicast', ?, 'input_required', ?, NULL, ?, NULL)"
)


def _raw_block(raw: sqlite3.Connection, member: int, count: int) -> float:
    start = time.perf_counter()
    for i in range(count):
        ts = format_ts(datetime.now(UTC))
        raw.execute("BEGIN IMMEDIATE")
        raw.execute(_RAW_INSERT, (member, 1, member, ts, ts, f"m{i}"))
        raw.execute("COMMIT")
    return count / (time.perf_counter() - start)


def run(tmp: Path, count: int) -> dict[str, Any]:
    from cafleet.broker import ack_message, send_message
    from cafleet.db.runtime import close_connection

    db_path = tmp / "throughput" / "cafleet.db"
    setup_db(db_path)
    conn = connect(db_path)
    raw, raw_member = _raw_connection(tmp / "throughput-raw")
    per_round = max(count // ROUNDS, 1)
    send_lat: list[float] = []
    ack_lat: list[float] = []
    rounds: list[dict[str, float]] = []
    try:
        fleet = make_fleet(conn, 1)
        sender, recipient = fleet.director_id, fleet.member_ids[0]
        for _ in range(ROUNDS):
            floor = _raw_block(raw, raw_member, per_round)
            ids: list[int] = []
            start = time.perf_counter()
            for i in range(per_round):
                t0 = time.perf_counter()
                message = send_message(
                    conn, from_member_id=sender, to_member_id=recipient, text=f"m{i}"
                )
                send_lat.append(time.perf_counter() - t0)
                ids.append(message.message_id)
            sends = per_round / (time.perf_counter() - start)
            start = time.perf_counter()
            for message_id in ids:
                t0 = time.perf_counter()
                ack_message(conn, message_id=message_id)
                ack_lat.append(time.perf_counter() - t0)
            acks = per_round / (time.perf_counter() - start)
            rounds.append({"raw": floor, "sends": sends, "acks": acks})
    finally:
        close_connection(conn)
        raw.close()
    return {
        "count": per_round * ROUNDS,
        "rounds": ROUNDS,
        "synchronous": "FULL",
        "journal_mode": "wal",
        "raw_sqlite_commits_per_s": median([r["raw"] for r in rounds]),
        "sends_per_s": median([r["sends"] for r in rounds]),
        "acks_per_s": median([r["acks"] for r in rounds]),
        "sends_vs_raw": median([r["sends"] / r["raw"] for r in rounds]),
        "send_p50_ms": percentile(send_lat, 50) * 1000,
        "send_p99_ms": percentile(send_lat, 99) * 1000,
        "ack_p50_ms": percentile(ack_lat, 50) * 1000,
        "ack_p99_ms": percentile(ack_lat, 99) * 1000,
    }


def render(r: dict[str, Any]) -> list[str]:
    return [
        f"## 2. in-process throughput ({r['count']} each in {r['rounds']} rounds, WAL, "
        "synchronous=FULL; per-round medians)",
        f"  send: {r['sends_per_s']:8.0f}/s  p50 {r['send_p50_ms']:.3f} ms  "
        f"p99 {r['send_p99_ms']:.3f} ms",
        f"  ack:  {r['acks_per_s']:8.0f}/s  p50 {r['ack_p50_ms']:.3f} ms  "
        f"p99 {r['ack_p99_ms']:.3f} ms",
        f"  raw sqlite3 floor (BEGIN IMMEDIATE; INSERT into cafleet's messages table; COMMIT), "
        "interleaved, same disk: "
        f"{r['raw_sqlite_commits_per_s']:.0f} commits/s; sends reach {r['sends_vs_raw']:.0%} of it",
    ]
