"""19. PostgreSQL beside SQLite, in one run (docs/storage.md §10, docs/performance.md §19).

The section starts its own private server (`tests/pg_server.py`: Debian's `initdb` + `pg_ctl`
in a temp directory, loopback TCP, scram password authentication) with fsync and full-page
writes on, as a production server runs, and measures each figure on both dialects, interleaved
where drift in machine load could favour one side:

- ``sends``: in-process `send_message` per second, in rounds (also on a second server without
  fsync, the tests' settings, to show what the disk costs apart); each round first measures its
  store's floor on a second cafleet database (SQLite: raw sqlite3 `BEGIN IMMEDIATE; INSERT;
  COMMIT` with synchronous=FULL; PostgreSQL: raw psycopg, one autocommit `INSERT` per message,
  one round trip and one WAL flush), then cafleet's sends;
- ``pairs``: N writer processes x M send+ACK pairs (`concurrency.run`);
- ``wait``: `message wait` wake-up, from another process's commit to the waiter's output
  (`wait_latency.run`);
- ``short commands``: whole-process wall time of short commands on both dialects beside the
  floors `import click, sqlite3, json` and `import click, psycopg, json`, every (dialect,
  command) once per round, round 0 discarded; bytecode cached (PYTHONDONTWRITEBYTECODE unset,
  the warm-up round writes any missing __pycache__).

Skipped (with the reason recorded) when the server binaries are not installed.
"""

from __future__ import annotations

import os
import sqlite3
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks import concurrency, wait_latency
from benchmarks.common import (
    base_env,
    cafleet_argv,
    connect,
    make_fleet,
    median,
    run_process,
    setup_db,
)
from cafleet.db.timefmt import format_ts

DIALECTS = ("sqlite", "postgresql")
ROUNDS = 10
FLOORS = {
    "sqlite": [sys.executable, "-c", "import click, sqlite3, json"],
    "postgresql": [sys.executable, "-c", "import click, psycopg, json"],
}
_RAW_INSERT = (
    "INSERT INTO messages (owner_member_id, from_member_id, to_member_id, type, created_at, "
    "status_state, status_timestamp, origin_message_id, text, notified_at) "
    "VALUES ({p}, {p}, {p}, 'unicast', {p}, 'input_required', {p}, NULL, {p}, NULL)"
)


def _empty(server: Any, dialect: str) -> Path | str | None:
    """For the sections that set up their own database: None (a new file under their `tmp`)
    on SQLite, a new, empty database on the server."""
    if dialect == "sqlite":
        return None
    from tests.pg_server import PgDb

    return PgDb(server, server.new_database())


def _database(server: Any, tmp: Path, dialect: str, name: str) -> Path | str:
    """A new, set-up database of `dialect` (a file under `tmp`, or one on the server)."""
    if dialect == "sqlite":
        path = tmp / "postgres-cmp" / name.replace(" ", "_") / "cafleet.db"
        setup_db(path)
        return path
    from tests.pg_server import PgDb

    db = PgDb(server, server.new_database())
    setup_db(db)
    return db


class _Floor:
    """One message insert per commit through the bare driver, on its own cafleet database."""

    def __init__(self, dialect: str, db: Path | str) -> None:
        from cafleet.db.runtime import close_connection

        conn = connect(db)
        try:
            self.member = make_fleet(conn, 1).member_ids[0]
        finally:
            close_connection(conn)
        self.dialect = dialect
        self.raw: Any
        if dialect == "sqlite":
            self.raw = sqlite3.connect(str(db), isolation_level=None)
            self.raw.execute("PRAGMA synchronous = FULL")
        else:
            import psycopg

            from tests.pg_server import PgDb

            assert isinstance(db, PgDb)
            self.raw = psycopg.connect(db.url, autocommit=True)

    def block(self, count: int) -> float:
        m = self.member
        start = time.perf_counter()
        for i in range(count):
            ts = format_ts(datetime.now(UTC))
            if self.dialect == "sqlite":
                self.raw.execute("BEGIN IMMEDIATE")
                self.raw.execute(_RAW_INSERT.format(p="?"), (m, 1, m, ts, ts, f"m{i}"))
                self.raw.execute("COMMIT")
            else:
                self.raw.execute(_RAW_INSERT.format(p="%s"), (m, 1, m, ts, ts, f"m{i}"))
        return count / (time.perf_counter() - start)

    def close(self) -> None:
        self.raw.close()


def _sends(servers: dict[str, Any], tmp: Path, count: int) -> dict[str, Any]:
    """`servers`: a label per measured store, with its server (None for SQLite)."""
    from cafleet.broker import send_message
    from cafleet.db.runtime import close_connection

    per_round = max(count // ROUNDS, 1)
    rounds: dict[str, list[dict[str, float]]] = {label: [] for label in servers}
    conns: dict[str, Any] = {}
    floors: dict[str, _Floor] = {}
    fleets = {}
    try:
        for label, server in servers.items():
            dialect = "sqlite" if server is None else "postgresql"
            floors[label] = _Floor(dialect, _database(server, tmp, dialect, f"floor-{label}"))
            db = _database(server, tmp, dialect, f"sends-{label}")
            conns[label] = connect(db)
            fleets[label] = make_fleet(conns[label], 1)
        for _ in range(ROUNDS):
            for dialect in servers:
                floor = floors[dialect].block(per_round)
                conn, fleet = conns[dialect], fleets[dialect]
                start = time.perf_counter()
                for i in range(per_round):
                    send_message(
                        conn,
                        from_member_id=fleet.director_id,
                        to_member_id=fleet.member_ids[0],
                        text=f"m{i}",
                    )
                sends = per_round / (time.perf_counter() - start)
                rounds[dialect].append({"floor": floor, "sends": sends})
    finally:
        for conn in conns.values():
            close_connection(conn)
        for f in floors.values():
            f.close()
    return {
        "count": per_round * ROUNDS,
        "rounds": ROUNDS,
        **{
            dialect: {
                "sends_per_s": median([r["sends"] for r in rows]),
                "floor_per_s": median([r["floor"] for r in rows]),
                "sends_vs_floor": median([r["sends"] / r["floor"] for r in rows]),
            }
            for dialect, rows in rounds.items()
        },
    }


def _short_ctx(db: Path | str) -> dict[str, Any]:
    from cafleet.broker import send_message
    from cafleet.db.runtime import close_connection

    conn = connect(db)
    try:
        fleet = make_fleet(conn, 2)
        sender, owner, paneless = fleet.director_id, fleet.member_ids[0], fleet.member_ids[1]
        for i in range(10):
            send_message(conn, from_member_id=sender, to_member_id=owner, text=f"pending {i}")
        acks = [
            send_message(conn, from_member_id=owner, to_member_id=paneless, text="ack me")
            for _ in range(ROUNDS * 4)
        ]
    finally:
        close_connection(conn)
    return {
        "fleet_id": fleet.fleet_id,
        "sender": sender,
        "owner": owner,
        "paneless": paneless,
        "acks": iter(m.message_id for m in acks),
    }


def _commands(ctx: dict[str, Any]) -> dict[str, list[str]]:
    return {
        "fleet list": ["fleet", "list"],
        "member list": ["member", "list", str(ctx["fleet_id"])],
        "message poll (10 pending)": ["message", "poll", str(ctx["owner"])],
        "message send (no pane)": [
            "message",
            "send",
            "--from-member-id",
            str(ctx["sender"]),
            "--to-member-id",
            str(ctx["paneless"]),
            "hello",
        ],  # fmt: skip
        "message ack": ["message", "ack", "{ack}"],
        "message wait --timeout 0": ["message", "wait", str(ctx["owner"]), "--timeout", "0"],
    }


def _short_commands(server: Any, tmp: Path, runs: int) -> dict[str, Any]:
    prefix, how = cafleet_argv()
    ctxs, envs = {}, {}
    for dialect in DIALECTS:
        db = _database(server, tmp, dialect, "short")
        ctxs[dialect] = _short_ctx(db)
        env = base_env(db)
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # bytecode cached (module docstring)
        envs[dialect] = env
    labels = ["floor", *_commands(ctxs["sqlite"])]
    times: dict[str, dict[str, list[float]]] = {
        d: {label: [] for label in labels} for d in DIALECTS
    }
    for round_no in range(runs + 1):
        for label in labels:
            for dialect in DIALECTS:
                ctx = ctxs[dialect]
                if label == "floor":
                    argv = FLOORS[dialect]
                else:
                    argv = prefix + [
                        str(next(ctx["acks"])) if a == "{ack}" else a for a in _commands(ctx)[label]
                    ]
                result = run_process(argv, envs[dialect])
                if result.returncode != 0:
                    raise RuntimeError(f"{dialect} {label} exited {result.returncode}: {argv}")
                if round_no:
                    times[dialect][label].append(result.seconds)
    table: dict[str, Any] = {}
    for label in labels:
        lite, pg = median(times["sqlite"][label]), median(times["postgresql"][label])
        lite_min, pg_min = min(times["sqlite"][label]), min(times["postgresql"][label])
        table[label] = {
            "sqlite_ms": lite * 1000,
            "postgresql_ms": pg * 1000,
            "postgresql_x_sqlite": pg / lite,
            "sqlite_min_ms": lite_min * 1000,
            "postgresql_min_ms": pg_min * 1000,
            "postgresql_x_sqlite_min": pg_min / lite_min,
            "sqlite_x_floor": lite / median(times["sqlite"]["floor"]),
            "postgresql_x_floor": pg / median(times["postgresql"]["floor"]),
        }
    return {
        "invocation": how,
        "runs": runs,
        "bytecode": "cached: PYTHONDONTWRITEBYTECODE unset, a discarded warm-up round first",
        "commands": table,
    }


def run(
    tmp: Path, sends: int, processes: int, per_process: int, trials: int, runs: int
) -> dict[str, Any]:
    from tests.pg_server import start_server

    server = start_server(durable=True)
    if server is None:
        return {"skipped": "PostgreSQL server binaries not installed (/usr/lib/postgresql/*/bin)"}
    saved = os.environ.get("CAFLEET_DATABASE_URL")
    try:
        result: dict[str, Any] = {
            "server": "private, loopback TCP, scram; fsync=on, full_page_writes=on",
            "load_before": os.getloadavg(),
        }
        # the same on a server without fsync (the tests' settings): what the disk costs apart
        fast = start_server(durable=False)
        assert fast is not None
        try:
            result["sends"] = _sends(
                {"sqlite": None, "postgresql": server, "postgresql, fsync=off": fast}, tmp, sends
            )
        finally:
            fast.stop()
        result["pairs"] = {
            dialect: concurrency.run(
                tmp / f"pairs-{dialect}",
                processes,
                per_process,
                _empty(server, dialect),
            )
            for dialect in DIALECTS
        }
        result["wait"] = {
            dialect: wait_latency.run(tmp / f"wait-{dialect}", trials, _empty(server, dialect))
            for dialect in DIALECTS
        }
        result["short_commands"] = _short_commands(server, tmp, runs)
        result["load_after"] = os.getloadavg()
        return result
    finally:
        if saved is None:
            os.environ.pop("CAFLEET_DATABASE_URL", None)
        else:
            os.environ["CAFLEET_DATABASE_URL"] = saved
        server.stop()


def render(r: dict[str, Any]) -> list[str]:
    if "skipped" in r:
        return ["## 19. PostgreSQL beside SQLite", f"  skipped: {r['skipped']}"]
    s, p, w, c = r["sends"], r["pairs"], r["wait"], r["short_commands"]
    load = " ".join(f"{x:.2f}" for x in r["load_before"])
    lines = [
        f"## 19. PostgreSQL beside SQLite ({r['server']}; load before {load})",
        f"  sends in-process ({s['count']} in {s['rounds']} rounds, per-round medians):",
    ]
    for label in ("sqlite", "postgresql", "postgresql, fsync=off"):
        d = s[label]
        lines.append(
            f"    {label:<22} {d['sends_per_s']:7.0f}/s; floor {d['floor_per_s']:7.0f}/s; "
            f"{d['sends_vs_floor']:.0%} of it"
        )
    lines.append("  writer processes x send+ack pairs:")
    for dialect in DIALECTS:
        d = p[dialect]
        lines.append(
            f"    {dialect:<10} {d['processes']} x {d['per_process']}: {d['seconds']:.1f} s, "
            f"{d['pairs_per_s']:.0f} pairs/s; errors {d['errors']}; lost {d['lost']}"
        )
    lines.append("  message wait wake-up (commit -> waiter's output):")
    for dialect in DIALECTS:
        d = w[dialect]
        lines.append(
            f"    {dialect:<10} p50 {d['p50_ms']:.1f} ms  p99 {d['p99_ms']:.1f} ms  "
            f"max {d['max_ms']:.1f} ms ({d['trials']} trials)"
        )
    lines.append(
        f"  short commands ({c['invocation']}, median of {c['runs']} interleaved rounds; "
        f"{c['bytecode']}):"
    )
    lines.append(
        f"    {'command':<26} {'SQLite ms':>9} {'PG ms':>8} {'PG/SQLite':>9} "
        f"{'SQLite/floor':>12} {'PG/floor':>9} {'min: SQLite':>11} {'PG':>7} {'PG/SQLite':>9}"
    )
    for label, row in c["commands"].items():
        lines.append(
            f"    {label:<26} {row['sqlite_ms']:9.1f} {row['postgresql_ms']:8.1f} "
            f"{row['postgresql_x_sqlite']:9.2f} {row['sqlite_x_floor']:12.2f} "
            f"{row['postgresql_x_floor']:9.2f} {row['sqlite_min_ms']:11.1f} "
            f"{row['postgresql_min_ms']:7.1f} {row['postgresql_x_sqlite_min']:9.2f}"
        )
    return lines
