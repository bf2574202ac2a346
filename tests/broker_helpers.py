"""Shared checks for the broker tests: plain-SQL access, row counts, fixed moments and the
concurrency worker (the fleets, members and messages come from `tests.factories`)."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cafleet import broker
from tests.storage_helpers import APP_TABLES


def raw_connect(path: Path | str) -> sqlite3.Connection:
    """A plain sqlite3 connection for direct SQL (autocommit, foreign keys on); for a PostgreSQL
    test database (`tests.pg_server.PgDb`) a psycopg connection shaped like it."""
    from tests.pg_server import PgDb, PgRaw

    if isinstance(path, PgDb):
        return PgRaw(path)  # type: ignore[return-value]
    db = sqlite3.connect(str(path), isolation_level=None, timeout=10)
    db.execute("PRAGMA foreign_keys = ON")
    return db


def table_counts(path: Path | str) -> dict[str, int]:
    db = raw_connect(path)
    try:
        return {t: db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in APP_TABLES}  # type: ignore[index]
    finally:
        db.close()


def ts(seconds: float = 0.0) -> datetime:
    """A fixed UTC moment, offset by `seconds`."""
    return datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC) + timedelta(seconds=seconds)


# --- a worker process for the concurrency tests ---------------------------------------------------

WORKER_CODE = "from tests.broker_helpers import worker_main; worker_main()"


def worker_main() -> None:
    """`python -c WORKER_CODE <db path> <from> <to> <count> <ack 0|1> <pin 0|1>`.

    Connects and validates like a command, prints `ready`, waits for a line on stdin, then runs
    `count` send_message calls (each followed by ack_message when asked) through the repository
    and prints one JSON line: the ids it got and every error it saw.
    """
    import json
    import os
    import sys
    import time

    from cafleet.cli.guard import open_validated_connection

    path, sender, recipient, count, ack, pin = sys.argv[1:7]
    if pin == "1":
        cpus = sorted(os.sched_getaffinity(0))[:2]
        os.sched_setaffinity(0, set(cpus))
    conn = open_validated_connection(path)
    print("ready", flush=True)
    sys.stdin.readline()
    ids: list[int] = []
    errors: list[str] = []
    started = time.monotonic()
    for i in range(int(count)):
        try:
            msg = broker.send_message(
                conn, from_member_id=int(sender), to_member_id=int(recipient), text=f"{i}"
            )
            ids.append(msg.message_id)
            if ack == "1":
                broker.ack_message(conn, message_id=msg.message_id)
        except Exception as exc:  # every error is a failure the parent reports
            errors.append(f"{type(exc).__name__}: {exc}")
    print(
        json.dumps({"ids": ids, "errors": errors, "seconds": time.monotonic() - started}),
        flush=True,
    )
