"""Loops and their database's outages, and the tick over thousands of lost panes
(docs/runtime.md §5.4, §5.11; docs/performance.md). Run by hand, not in the suite:

    python -m benchmarks.loop_outage [--runs 5] [--lost 3000] [--only downtime|lost]

- ``downtime``: a private PostgreSQL server (`tests/pg_server.py`) and a private tmux server; a
  fleet loop (`cafleet monitor F`, tick 5 s) and a host loop (`cafleet monitor host run` as
  host-b, tick 5 s) run as processes. Each run restarts the server (`pg_ctl restart`) or crashes
  it (`pg_ctl stop -m immediate`, 3 s down, `pg_ctl start`) and measures, for each loop, the
  time from `pg_ctl` returning (the server accepts connections again) to the loop's next
  heartbeat (its `last_tick_at`, the loop's own clock), or that it exited.
- ``lost``: an SQLite fleet whose ``--lost`` members' panes do not exist (rows written
  directly) and a real tmux server with the Director's pane; the monitor loop's ticks run in
  this process on the loop's own schedule (tick 5 s) until every loss is recorded, timing each
  tick and every heartbeat written (`broker.heartbeat` wrapped). Works on older checkouts too
  (for a before/after).

Prints one JSON document.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.common import base_env, cafleet_argv, connect, median, setup_db

TICK = 5


def _tmux(sock: str, *args: str) -> str:
    return subprocess.run(
        ["tmux", "-S", sock, *args], check=True, capture_output=True, text=True, timeout=10
    ).stdout.strip()


@contextlib.contextmanager
def _tmux_server() -> Iterator[dict[str, str]]:
    """A private tmux server with one pane (the Director's): its session, window, pane and the
    TMUX value that reaches it."""
    sockdir = tempfile.mkdtemp(prefix="cfo", dir="/tmp")
    sock = f"{sockdir}/s"
    try:
        _tmux(sock, "-f", "/dev/null", "new-session", "-d", "-s", "bench", "cat >/dev/null")
        yield {
            "session": "bench",
            "window": _tmux(sock, "display-message", "-p", "-t", "bench", "#{window_id}"),
            "pane": _tmux(sock, "display-message", "-p", "-t", "bench", "#{pane_id}"),
            "TMUX": f"{sock},{_tmux(sock, 'display-message', '-p', '#{pid}')},0",
        }
    finally:
        subprocess.run(["tmux", "-S", sock, "kill-server"], capture_output=True, timeout=10)
        shutil.rmtree(sockdir, ignore_errors=True)


def _fleet(db: Any, tmux: dict[str, str], lost: int) -> dict[str, int]:
    """A fleet directed from the tmux server's pane (its monitor's pane fake), with ``lost``
    members placed in panes that do not exist, written in one transaction."""
    from benchmarks.common import FakePane
    from cafleet.broker import create_fleet
    from cafleet.db import tx
    from cafleet.db.runtime import close_connection
    from cafleet.db.timefmt import now_ts

    conn = connect(db)
    try:
        boot = create_fleet(
            conn,
            name="outage",
            backend="tmux",
            coding_agent="claude",
            director_pane=FakePane(tmux["session"], tmux["window"], tmux["pane"]),
            spawn_monitor=lambda f, d, m: FakePane(tmux["session"], tmux["window"], "%999999"),
        )
        fleet_id = boot.fleet.fleet_id
        if lost:
            ts = now_ts()
            with tx.write(conn):
                first = conn.exec_driver_sql(
                    "SELECT COALESCE(MAX(member_id), 0) + 1 FROM members"
                ).scalar()
                conn.exec_driver_sql(
                    "INSERT INTO members (fleet_id, name, description, status, registered_at, "
                    "member_card_json) VALUES (?, ?, 'lost pane', 'active', ?, '{}')",
                    [(fleet_id, f"worker-{i}", ts) for i in range(lost)],
                )
                conn.exec_driver_sql(
                    "INSERT INTO member_placements (member_id, mux_session, mux_window_id, "
                    "mux_pane_id, backend, coding_agent, created_at) "
                    "VALUES (?, ?, ?, ?, 'tmux', 'claude', ?)",
                    [
                        (first + i, tmux["session"], tmux["window"], f"%{500000 + i}", ts)
                        for i in range(lost)
                    ],
                )
        return {"fleet_id": fleet_id, "director_id": boot.director.member_id}
    finally:
        close_connection(conn)


# --- downtime across a PostgreSQL restart -----------------------------------------------------


def _beats(url: str, fleet_id: int) -> tuple[datetime | None, datetime | None]:
    """The fleet loop's and host-b's loop's heartbeats (None while unreadable)."""
    import psycopg

    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=2) as conn:
            fleet = conn.execute(
                "SELECT last_tick_at FROM monitor_runtime WHERE fleet_id = %s", (fleet_id,)
            ).fetchone()
            host = conn.execute(
                "SELECT last_tick_at FROM host_loops WHERE host_id = 'host-b'"
            ).fetchone()
    except psycopg.Error:
        return None, None

    def parse(row: Any) -> datetime | None:
        return datetime.fromisoformat(row[0]) if row and row[0] else None

    return parse(fleet), parse(host)


def downtime(runs: int) -> dict[str, Any]:
    from tests.pg_server import PgDb, start_server

    server = start_server()
    if server is None:
        return {"skipped": "PostgreSQL server binaries not installed"}
    procs: list[subprocess.Popen[bytes]] = []
    try:
        db = PgDb(server, server.new_database())
        setup_db(db)
        with _tmux_server() as tmux:
            ids = _fleet(db, tmux, 0)
            env = base_env(db)
            env["TMUX"], env["TMUX_PANE"] = tmux["TMUX"], tmux["pane"]
            prefix, _how = cafleet_argv()
            logs = Path(server.dir)
            for argv, host, name in (
                (["monitor", str(ids["fleet_id"]), "--interval", "0"], None, "fleet"),
                (["monitor", "host", "run"], "host-b", "host"),
            ):
                child_env = dict(env, **({"CAFLEET_HOST_ID": host} if host else {}))
                with open(logs / f"{name}.log", "wb") as log:
                    procs.append(
                        subprocess.Popen(
                            [*prefix, *argv],
                            env=child_env,
                            stdin=subprocess.DEVNULL,
                            stdout=log,
                            stderr=subprocess.STDOUT,
                        )
                    )
            deadline = time.monotonic() + 30
            while None in _beats(db.url, ids["fleet_id"]):
                if time.monotonic() > deadline:
                    raise RuntimeError("the loops did not start")
                time.sleep(0.1)
            rows: list[dict[str, Any]] = []
            for run in range(runs):
                for mode in ("restart", "crash"):
                    if mode == "restart":
                        server.restart()
                    else:
                        server.crash()
                        time.sleep(3)
                        server.start_again()
                    back = datetime.now(UTC)
                    row: dict[str, Any] = {"run": run, "mode": mode}
                    deadline = time.monotonic() + 60
                    while time.monotonic() < deadline and not {"fleet_s", "host_s"} <= set(row):
                        for key, beat, proc in zip(
                            ("fleet_s", "host_s"),
                            _beats(db.url, ids["fleet_id"]),
                            procs,
                            strict=True,
                        ):
                            if key in row:
                                continue
                            if beat is not None and beat > back:
                                row[key] = round((beat - back).total_seconds(), 3)
                            elif proc.poll() is not None:
                                row[key] = f"exited ({proc.returncode})"
                        time.sleep(0.02)
                    rows.append(row)
                    print(json.dumps(row), file=sys.stderr, flush=True)
                    if any(p.poll() is not None for p in procs):
                        break
                if any(p.poll() is not None for p in procs):
                    break
            summary = {}
            for key in ("fleet_s", "host_s"):
                for mode in ("restart", "crash"):
                    values = [
                        r[key] for r in rows if r["mode"] == mode and isinstance(r.get(key), float)
                    ]
                    summary[f"{key[:-2]} {mode}"] = {
                        "n": len(values),
                        "median_s": round(median(values), 3) if values else None,
                        "max_s": max(values) if values else None,
                    }
            return {"tick_s": TICK, "runs": rows, "summary": summary}
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=15)
        server.stop()


# --- the tick over thousands of lost panes --------------------------------------------------------


def lost_panes(lost: int) -> dict[str, Any]:
    from cafleet import broker
    from cafleet.db.runtime import close_connection
    from cafleet.monitor.state import LoopState
    from cafleet.monitor.tick import run_tick
    from cafleet.mux import get_backend

    tmp = Path(tempfile.mkdtemp(prefix="cfo-lost-"))
    try:
        db = tmp / "cafleet.db"
        setup_db(db)
        with _tmux_server() as tmux:
            ids = _fleet(db, tmux, lost)
            env = dict(os.environ, TMUX=tmux["TMUX"], TMUX_PANE=tmux["pane"])
            conn = connect(db)
            beats: list[float] = []
            real = broker.heartbeat

            def heartbeat(*args: Any, **kwargs: Any) -> Any:
                beats.append(time.monotonic())
                return real(*args, **kwargs)

            broker.heartbeat = heartbeat
            try:
                assert broker.claim_monitor(
                    conn,
                    fleet_id=ids["fleet_id"],
                    pid=os.getpid(),
                    tick_seconds=TICK,
                    wake_interval_seconds=0,
                )
                state = LoopState(
                    conn=conn, fleet_id=ids["fleet_id"], pid=os.getpid(), tick_seconds=TICK,
                    pane_lock_timeout=5, env_wake_interval=None,
                    backend=get_backend("tmux", env=env), log=lambda _line: None,
                    stop_requested=lambda: False,
                )  # fmt: skip
                ticks: list[float] = []
                start = time.monotonic()
                next_start = start
                while True:
                    time.sleep(max(0.0, next_start - time.monotonic()))
                    began = time.monotonic()
                    run_tick(state)
                    ticks.append(time.monotonic() - began)
                    next_start = max(began + TICK, time.monotonic())
                    marked = _count(conn, "member_placements WHERE lost_at IS NOT NULL")
                    if marked >= lost + 1:  # and the fleet's monitor, whose pane is fake too
                        break
                end = time.monotonic()
                reports = _count(conn, f"messages WHERE owner_member_id = {ids['director_id']}")
                broker.clear_monitor(conn, fleet_id=ids["fleet_id"], pid=os.getpid())
            finally:
                broker.heartbeat = real
                close_connection(conn)
        marks = [start, *beats, end]
        gaps = [b - a for a, b in zip(marks, marks[1:], strict=False)]
        return {
            "lost": lost,
            "tick_s": TICK,
            "first_tick_s": round(ticks[0], 3),
            "ticks": len(ticks),
            "tick_s_each": [round(t, 3) for t in ticks],
            "reports": reports,
            "heartbeats": len(beats),
            "max_heartbeat_gap_s": round(max(gaps), 3),
        }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _count(conn: Any, where: str) -> int:
    from cafleet.db import tx

    with tx.read(conn):
        return int(conn.exec_driver_sql(f"SELECT count(*) FROM {where}").scalar())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--lost", type=int, default=3000)
    parser.add_argument("--only", choices=("downtime", "lost"))
    args = parser.parse_args()
    result: dict[str, Any] = {}
    if args.only in (None, "lost"):
        result["lost_panes"] = lost_panes(args.lost)
    if args.only in (None, "downtime"):
        result["downtime"] = downtime(args.runs)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
