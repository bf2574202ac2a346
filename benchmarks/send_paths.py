"""7. What the repository adds to a send, beside the same statement on a bare `sqlite3`.

The catalog's compiled unicast INSERT (`cafleet.db.catalog.sqlite.messages.SEND`), interleaved
in rounds on one database:

- `raw_sqlite3`: a plain `sqlite3` connection with cafleet's PRAGMAs runs BEGIN IMMEDIATE, the
  statement and COMMIT (no writer lock, no ledger re-check, no timestamp formatting);
- `repository`: `cafleet.broker.send_message` (writer lock, BEGIN IMMEDIATE, ledger re-check,
  the statement, COMMIT, the returned record).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from benchmarks.common import connect, make_fleet, setup_db

VARIANTS = ("raw_sqlite3", "repository")


def run(tmp: Path, count: int, rounds: int) -> dict[str, Any]:
    from cafleet.broker import send_message
    from cafleet.broker._common import stamp
    from cafleet.db import tx
    from cafleet.db.catalog.sqlite.messages import SEND
    from cafleet.db.runtime import close_connection, connect_driver

    db_path = tmp / "send_paths" / "cafleet.db"
    setup_db(db_path)
    conn = connect(db_path)
    bare = connect_driver(str(db_path), "rw")
    sql, names = SEND
    try:
        fleet = make_fleet(conn, 1)
        sender, recipient = fleet.director_id, fleet.member_ids[0]

        def repository() -> None:
            send_message(conn, from_member_id=sender, to_member_id=recipient, text="hello")

        def raw_sqlite3() -> None:
            values = {
                "now": stamp(None), "text": "hello", "from_id": sender, "to_id": recipient,
                "token": None,
            }  # fmt: skip
            bare.execute("BEGIN IMMEDIATE")
            bare.execute(sql, [values[n] for n in names]).fetchall()
            bare.execute("COMMIT")

        calls = {"raw_sqlite3": raw_sqlite3, "repository": repository}
        rates: dict[str, list[float]] = {v: [] for v in VARIANTS}
        for _ in range(rounds):
            for variant in VARIANTS:
                call = calls[variant]
                start = time.perf_counter()
                for _ in range(count):
                    call()
                rates[variant].append(count / (time.perf_counter() - start))
        with tx.read(conn):
            rows = conn.exec_driver_sql("SELECT count(*) FROM messages").scalar()
    finally:
        bare.close()
        close_connection(conn)
    # Every variant really inserted its rows: count x rounds x variants.
    return {"count": count, "rounds": rounds, "sends_per_s": rates, "rows": rows}


def render(results: dict[str, Any]) -> list[str]:
    lines = [
        f"## 7. send path: the repository vs the same statement on bare sqlite3 "
        f"({results['count']} sends x {results['rounds']} rounds each; per-round rates)"
    ]
    for variant, rates in results["sends_per_s"].items():
        shown = ", ".join(f"{r:.0f}" for r in rates)
        lines.append(f"  {variant:<16} {min(rates):7.0f}-{max(rates):.0f}/s  ({shown})")
    return lines
