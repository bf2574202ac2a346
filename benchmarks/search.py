"""Search over N messages (100,000 by default) on SQLite and PostgreSQL (docs/performance.md §22).

The messages are written straight into `messages` in one transaction per dialect (the index is
kept by the triggers on SQLite and by the GIN indexes on PostgreSQL, as for any send); each text
is 5-40 words drawn from a 5,000-word vocabulary with a Zipf-like skew plus a few common work
words, so the queries span selectivities: a word in no message, in ~0.1 %, ~1 %, ~10 % and ~35 %
of them, and two-word queries. Each query runs `runs` times in-process through the workflow
(`cafleet.workflows.search.search`: the words, both statements, the merge, the snippets); the
figure is the median over every run of every query, beside each query's own median.
"""

from __future__ import annotations

import random
import sqlite3
import time
from pathlib import Path
from typing import Any

from benchmarks.common import connect, make_fleet, median, setup_db

VOCABULARY = 5000
COMMON = ("build", "test", "parser", "deploy", "review")  # each in ~7-10 % of the texts
QUERIES = (
    "zzznothing",  # no message
    "w4000",  # rare
    "w400",
    "w40",
    "w4",  # common
    "parser",
    "build test",
    "w40 parser",
    "w4 w5",
)


def texts(count: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    weights = [1.0 / (rank + 1) ** 0.8 for rank in range(VOCABULARY)]
    words = [f"w{i}" for i in range(VOCABULARY)]
    out = []
    for _ in range(count):
        n = rng.randint(5, 40)
        picked = rng.choices(words, weights, k=n)
        for i in range(n):
            if rng.random() < 0.05:
                picked[i] = rng.choice(COMMON)
        out.append(" ".join(picked))
    return out


def _fill(db: Path | str, member_id: int, bodies: list[str]) -> float:
    """Insert the messages in one transaction; returns the seconds it took."""
    from cafleet.db.timefmt import utcnow

    now = utcnow()
    rows = [(member_id, member_id, member_id, now, now, body) for body in bodies]
    sql = (
        "INSERT INTO messages (owner_member_id, from_member_id, to_member_id, type, created_at, "
        "status_state, status_timestamp, origin_message_id, text, notified_at) "
        "VALUES ({p}, {p}, {p}, 'unicast', {p}, 'completed', {p}, NULL, {p}, NULL)"
    )
    t0 = time.perf_counter()
    if isinstance(db, Path):
        with sqlite3.connect(db) as raw:
            raw.executemany(sql.format(p="?"), rows)
        raw.close()
    else:
        import psycopg

        from benchmarks.common import database_url

        with psycopg.connect(database_url(db)) as pg, pg.cursor() as cur:
            cur.executemany(sql.format(p="%s"), rows)
            cur.execute("ANALYZE messages")
    return time.perf_counter() - t0


def _measure(db: Path | str, count: int, runs: int) -> dict[str, Any]:
    from cafleet.workflows.search import search

    conn = connect(db)
    fleet = make_fleet(conn, 2, name="search")
    fill_s = _fill(db, fleet.member_ids[0], texts(count))
    conn = connect(db)  # a fresh connection, as a command has
    per_query: dict[str, Any] = {}
    every: list[float] = []
    for query in QUERIES:
        times = []
        for _ in range(runs + 1):  # the first run warms the caches and is dropped
            t0 = time.perf_counter()
            hits = search(conn, query=query, fleet_id=None, limit=20)
            times.append(time.perf_counter() - t0)
        every.extend(times[1:])
        per_query[query] = {"hits": len(hits), "median_ms": median(times[1:]) * 1000}
    return {
        "messages": count,
        "fill_s": fill_s,
        "median_ms": median(every) * 1000,
        "max_ms": max(every) * 1000,
        "queries": per_query,
    }


def run(tmp: Path, count: int, runs: int, postgres: bool = True) -> dict[str, Any]:
    import os

    db = tmp / "search-sqlite" / "cafleet.db"
    setup_db(db)
    result: dict[str, Any] = {"load_before": os.getloadavg(), "sqlite": _measure(db, count, runs)}
    if postgres:
        from tests.pg_server import PgDb, start_server

        server = start_server(durable=True)
        if server is None:
            result["postgresql"] = {"skipped": "PostgreSQL server binaries not installed"}
        else:
            saved = os.environ.get("CAFLEET_DATABASE_URL")
            try:
                pg = PgDb(server, server.new_database())
                setup_db(pg)
                result["postgresql"] = _measure(pg, count, runs)
            finally:
                if saved is None:
                    os.environ.pop("CAFLEET_DATABASE_URL", None)
                else:
                    os.environ["CAFLEET_DATABASE_URL"] = saved
                server.stop()
    result["load_after"] = os.getloadavg()
    return result


def render(r: dict[str, Any]) -> list[str]:
    lines = ["search (in-process, 20 hits, median over every run of every query):"]
    for dialect in ("sqlite", "postgresql"):
        got = r.get(dialect)
        if got is None:
            continue
        if "skipped" in got:
            lines.append(f"  {dialect}: skipped ({got['skipped']})")
            continue
        queries = ", ".join(
            f"{q!r} {v['hits']} hits {v['median_ms']:.1f} ms" for q, v in got["queries"].items()
        )
        lines.append(
            f"  {dialect}: {got['messages']:,} messages, median {got['median_ms']:.1f} ms, "
            f"max {got['max_ms']:.1f} ms (filled in {got['fill_s']:.1f} s); {queries}"
        )
    return lines
