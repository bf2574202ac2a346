"""7. What SQLAlchemy's statement execution costs on the send path.

The same unicast INSERT (a SQLAlchemy `text()` construct) inside the same `tx.write` (writer
lock, BEGIN IMMEDIATE, ledger re-check, COMMIT), three ways, interleaved in rounds on one
database:

- `core_execute`: `Connection.execute(text(...))`, how `send_message` ran it before;
- `exec_driver_sql`: the statement string built once, run through `Connection.exec_driver_sql`;
- `repository`: `cafleet.broker.send_message` as it is now, which runs the statement on the
  DBAPI cursor through `cafleet.db.engine.driver_execute`.

Only `repository` is product code; the other two exist here to measure the difference.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from benchmarks.common import connect, make_fleet, setup_db

VARIANTS = ("core_execute", "exec_driver_sql", "repository")


def run(tmp: Path, count: int, rounds: int) -> dict[str, Any]:
    from cafleet.broker import send_message
    from cafleet.broker._common import stamp
    from cafleet.broker.messages import _SEND
    from cafleet.db import tx
    from cafleet.db.engine import close_connection

    db_path = tmp / "send_paths" / "cafleet.db"
    setup_db(db_path)
    conn = connect(db_path)
    named = _SEND.text
    names = re.findall(r":(\w+)", named)
    qmark = re.sub(r":(\w+)", "?", named)
    try:
        fleet = make_fleet(conn, 1)
        sender, recipient = fleet.director_id, fleet.member_ids[0]

        def repository() -> None:
            send_message(conn, from_member_id=sender, to_member_id=recipient, text="hello")

        def core_execute() -> None:
            with tx.write(conn):
                ts = stamp(None)
                params = {"now": ts, "text": "hello", "from_id": sender, "to_id": recipient}
                conn.execute(_SEND, params).scalar()

        def exec_driver_sql() -> None:
            with tx.write(conn):
                ts = stamp(None)
                values = {"now": ts, "text": "hello", "from_id": sender, "to_id": recipient}
                conn.exec_driver_sql(qmark, tuple(values[n] for n in names)).scalar()

        calls = {
            "core_execute": core_execute,
            "exec_driver_sql": exec_driver_sql,
            "repository": repository,
        }
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
        close_connection(conn)
    # Every variant really inserted its rows: count x rounds x variants.
    return {"count": count, "rounds": rounds, "sends_per_s": rates, "rows": rows}


def render(results: dict[str, Any]) -> list[str]:
    lines = [
        f"## 7. send path: SQLAlchemy execution vs the driver ({results['count']} sends x "
        f"{results['rounds']} rounds each, same tx.write; per-round rates)"
    ]
    for variant, rates in results["sends_per_s"].items():
        shown = ", ".join(f"{r:.0f}" for r in rates)
        lines.append(f"  {variant:<16} {min(rates):7.0f}-{max(rates):.0f}/s  ({shown})")
    return lines
