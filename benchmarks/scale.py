"""5. poll and member list on a database with many messages (10 members, owners evenly spread,
90% ACKed, 1% never notified): query time in-process and whole-process time."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.common import (
    base_env,
    cafleet_argv,
    connect,
    make_fleet,
    median,
    run_process,
    setup_db,
)

if TYPE_CHECKING:
    from benchmarks.common import BenchFleet
    from cafleet.db.runtime import Connection


def _fill(conn: Connection, fleet: BenchFleet, total: int) -> None:
    """Plain SQL in one write transaction; timestamps increase with the id."""
    from cafleet.db import tx
    from cafleet.db.timefmt import format_ts

    base = datetime(2026, 1, 1, tzinfo=UTC)
    owners = [fleet.director_id, fleet.monitor_id, *fleet.member_ids][:10]
    rows = []
    for i in range(total):
        owner = owners[i % len(owners)]
        sender = owners[(i + 1) % len(owners)]
        ts = format_ts(base + timedelta(milliseconds=i))
        # Owners cycle with i % 10; state with i // 10, so every owner gets the same mix.
        acked = (i // 10) % 10 != 0  # 90% ACKed
        never_notified = not acked and (i // 100) % 10 == 0  # 1% of all, un-ACKed
        rows.append(
            {
                "owner": owner,
                "sender": sender,
                "ts": ts,
                "state": "completed" if acked else "input_required",
                "text": f"history {i}",
                "notified": None if never_notified else ts,
            }
        )
    with tx.write(conn):
        conn.exec_driver_sql(
            "INSERT INTO messages (owner_member_id, from_member_id, to_member_id, type, "
            "created_at, status_state, status_timestamp, origin_message_id, text, notified_at) "
            "VALUES (?, ?, ?, 'unicast', ?, ?, ?, NULL, ?, ?)",
            [
                (
                    r["owner"],
                    r["sender"],
                    r["owner"],
                    r["ts"],
                    r["state"],
                    r["ts"],
                    r["text"],
                    r["notified"],
                )
                for r in rows
            ],
        )


def run(tmp: Path, total: int, runs: int) -> dict[str, Any]:
    from cafleet.broker import member_roster, poll_inbox
    from cafleet.db.runtime import close_connection

    db_path = tmp / "scale" / "cafleet.db"
    setup_db(db_path)
    conn = connect(db_path)
    try:
        fleet = make_fleet(conn, 8, placed=True)
        _fill(conn, fleet, total)
        member = fleet.member_ids[0]
        poll_times, roster_times, sql_times = [], [], []
        pending = 0
        from cafleet.db import tx
        from cafleet.db.catalog.messages import POLL

        for _ in range(max(runs, 5)):
            t0 = time.perf_counter()
            with tx.read(conn):  # the poll statement alone: SQL and row fetch, no records
                conn.execute(POLL, {"member_id": member}).all()
            sql_times.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            pending = len(poll_inbox(conn, member))
            poll_times.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            member_roster(conn, fleet_id=fleet.fleet_id)
            roster_times.append(time.perf_counter() - t0)
    finally:
        close_connection(conn)
    prefix, how = cafleet_argv()
    env = base_env(db_path)
    whole = {}
    for label, args in {
        "message poll": ["message", "poll", str(member), "--json"],
        "member list": ["member", "list", str(fleet.fleet_id)],
    }.items():
        times = [run_process(prefix + args, env).seconds for _ in range(runs + 1)][1:]
        whole[label] = median(times)
    return {
        "messages": total,
        "poll_rows": pending,
        "poll_sql_ms": median(sql_times) * 1000,
        "poll_query_ms": median(poll_times) * 1000,
        "roster_query_ms": median(roster_times) * 1000,
        "poll_process_ms": whole["message poll"] * 1000,
        "member_list_process_ms": whole["member list"] * 1000,
        "invocation": how,
    }


def render(r: dict[str, Any]) -> list[str]:
    return [
        f"## 5. scale: {r['messages']} messages, 10 members, 90% ACKed",
        f"  poll statement {r['poll_sql_ms']:.2f} ms; poll_inbox with records "
        f"{r['poll_query_ms']:.2f} ms ({r['poll_rows']} rows returned); "
        f"member_roster query {r['roster_query_ms']:.2f} ms",
        f"  whole process: message poll {r['poll_process_ms']:.1f} ms; "
        f"member list {r['member_list_process_ms']:.1f} ms",
    ]
