"""A loop outlives its database's outages (docs/runtime.md §5.4, §10.4): a PostgreSQL restart
or crash, and an SQLite write lock held past the busy timeout, never stop the fleet loop or a
host's delivery loop; the same processes deliver a line sent after the outage, with no other
command run."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cafleet.db.runtime import BUSY_TIMEOUT_MS
from tests.factories import connect
from tests.fleet_helpers import (
    Loop,
    create_fleet,
    create_member,
    log_lines,
    ok,
    pid_alive,
    start_loop,
    stop_loop,
)
from tests.harness.fixtures import TmuxHarness, private_tmux
from tests.harness.util import read_jsonl, record_bytes, retry_until

pytestmark = pytest.mark.tmux

UNAVAILABLE = r" database unavailable: .*; retrying until it answers$"
AVAILABLE = r" database available again after \d+\.\d s$"


def _typed(h: TmuxHarness, pane: str, message_id: int) -> int:
    """How many times harness ``h``'s fake agent in ``pane`` got message ``message_id``'s line."""
    from tests.harness import util

    path = h.fake_dir / f"{util.pane_stem(pane)}.jsonl"
    tag = f"[cafleet msg {message_id} from"
    return sum(
        1
        for r in read_jsonl(path)
        if r.get("kind") == "line" and tag in record_bytes(r).decode("utf-8", "replace")
    )


def _send(db: Any, sender: int, to: int, text: str) -> int:
    """A message stored in this process (no command runs: nothing types it, nothing heals)."""
    from cafleet.broker.messages import send_message

    with connect(db) as conn:
        return send_message(conn, from_member_id=sender, to_member_id=to, text=text).message_id


def _beat(h: TmuxHarness, sql: str, key: object) -> str | None:
    """A heartbeat column, or None while the database cannot be read."""
    try:
        rows = h.sqlite(sql, key)
    except Exception:
        return None
    return rows[0][0] if rows else None


def _fleet_beat(h: TmuxHarness, fleet_id: int) -> str | None:
    return _beat(h, "SELECT last_tick_at FROM monitor_runtime WHERE fleet_id = ?", fleet_id)


def _host_beat(h: TmuxHarness, host: str) -> str | None:
    return _beat(h, "SELECT last_tick_at FROM host_loops WHERE host_id = ?", host)


def _beats_after(h: TmuxHarness, fleet_id: int, host: str | None, since: tuple[Any, Any]) -> bool:
    fleet = _fleet_beat(h, fleet_id)
    if fleet is None or fleet <= since[0]:
        return False
    if host is None:
        return True
    beat = _host_beat(h, host)
    return beat is not None and beat > since[1]


def _host_loop(h: TmuxHarness, host: str, *args: str) -> Loop:
    """`cafleet monitor host run <args>` in the foreground as ``host``, its output in files."""
    out, err = h.dir / f"host-{host}.out", h.dir / f"host-{host}.err"
    with open(out, "w") as fo, open(err, "w") as fe:
        proc = h.popen_cli(
            "monitor", "host", "run", *args, env={"CAFLEET_HOST_ID": host}, stdout=fo, stderr=fe
        )
    loop = Loop(proc, out, err)
    loop.wait_line(rf"^host loop started \(host {host}, ", timeout=20)
    return loop


def _wait_count(loop: Loop, pattern: str, n: int, timeout: float = 30) -> None:
    retry_until(
        lambda: loop.count(pattern) >= n,
        timeout=timeout,
        message=lambda: f"fewer than {n} lines matching {pattern!r}: {loop.lines()[-6:]}",
    )


def _clean(loop: Loop) -> None:
    """The loop is still the process it was, and nothing in its log is a failure."""
    assert loop.proc.poll() is None, (loop.lines(), loop.stderr())
    failures = [x for x in loop.lines() if re.search(r"tick failed|loop failed|stopping$", x)]
    assert failures == [], loop.lines()


# --- PostgreSQL: a restart and a crash -----------------------------------------------------------


@pytest.fixture(scope="module")
def restartable_pg() -> Iterator[Any]:
    """A PostgreSQL server of this module's own: its tests restart and crash it."""
    from tests.pg_server import start_server

    server = start_server()
    if server is None:
        if os.environ.get("CAFLEET_REQUIRE_POSTGRES") == "1":
            pytest.fail("PostgreSQL server binaries not found (/usr/lib/postgresql/*/bin)")
        pytest.skip("PostgreSQL server binaries not installed")
    try:
        yield server
    finally:
        server.stop()


def _running(server: Any) -> None:
    """Start the server again if a failed test left it stopped."""
    with contextlib.suppress(Exception):
        server.start_again()


def test_both_loops_outlive_a_postgresql_restart_and_a_crash(
    restartable_pg: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Host A runs the Director, the fleet loop (tick 1) and member alpha; host B member bee
    and B's delivery loop, whose tick is an hour, so only a commit notification (LISTEN,
    taken again on its new connection) wakes it. After `pg_ctl restart`, and after `pg_ctl
    stop -m immediate` and a start, each loop beats again and types a line stored afterwards,
    as the same process, with no command run in between."""
    from tests.pg_server import PgDb

    server = restartable_pg
    db = PgDb(server, server.new_database())
    monkeypatch.setenv("CAFLEET_DATABASE_URL", db.url)
    path = os.environ.get("PATH", "")
    with contextlib.ExitStack() as stack:
        a = stack.enter_context(private_tmux(monkeypatch))
        stack.callback(lambda: monkeypatch.setenv("TMUX_TMPDIR", str(a.dir)))
        monkeypatch.setenv("PATH", path)  # B finds the real tmux, not A's shim
        b = stack.enter_context(private_tmux(monkeypatch))
        a.env["CAFLEET_HOST_ID"], b.env["CAFLEET_HOST_ID"] = "host-a", "host-b"
        stack.callback(_running, server)  # the harnesses' teardowns read the database
        ok(a.cli("setup"))
        ids = create_fleet(a)
        f = ids.fleet_id
        alpha, alpha_pane = create_member(a, f, "alpha")
        created = ok(b.cli("member", "create", "--fleet-id", str(f), "--name", "bee",
                           "--description", "d", "hello {member_id}")).stdout  # fmt: skip
        bee, bee_pane = int(created.split()[0]), created.splitlines()[0].rsplit("pane=", 1)[1]
        # Both loops in the foreground, so their logs are files here.
        ok(a.cli("monitor", "stop", str(f)))
        ok(b.cli("monitor", "host", "stop"))
        fleet_loop = start_loop(a, f, "--tick", "1", "--interval", "0")
        stack.callback(fleet_loop.stop)
        host_loop = _host_loop(b, "host-b", "--tick", "3600")
        stack.callback(host_loop.stop)

        for n, outage in enumerate(("restart", "crash"), start=1):
            since = (_fleet_beat(a, f), _host_beat(a, "host-b"))
            if outage == "restart":
                server.restart()
            else:
                server.crash()
                # Down for a while: both loops see it and keep retrying.
                for loop in (fleet_loop, host_loop):
                    _wait_count(loop, UNAVAILABLE, n)
                server.start_again()
            # Back: each loop says so after its first pass on its new connection (listening
            # again), and beats.
            for loop in (fleet_loop, host_loop):
                _wait_count(loop, AVAILABLE, n)
            retry_until(lambda since=since: _beats_after(a, f, "host-b", since), timeout=30)
            to_alpha = _send(db, ids.director_id, alpha, f"after the {outage}")
            to_bee = _send(db, alpha, bee, f"after the {outage}")
            retry_until(lambda m=to_alpha: _typed(a, alpha_pane, m) == 1, timeout=30)
            retry_until(lambda m=to_bee: _typed(b, bee_pane, m) == 1, timeout=30)
            # (logged once the drain returns)
            fleet_loop.wait_line(rf"tick -> notify msg {to_alpha} member {alpha}$")
            host_loop.wait_line(rf"host -> notify msg {to_bee} member {bee}$")
            for loop in (fleet_loop, host_loop):
                _clean(loop)
        for loop in (fleet_loop, host_loop):
            assert loop.count(UNAVAILABLE) == 2 and loop.count(AVAILABLE) == 2, loop.lines()


# --- SQLite: the write lock held past the busy timeout -------------------------------------------

HOLD = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("held", flush=True)
time.sleep(float(sys.argv[2]))
conn.execute("ROLLBACK")
"""


def test_both_loops_outlive_an_sqlite_write_lock_held_past_the_busy_timeout(
    tmux_db: TmuxHarness,
) -> None:
    """Another process holds SQLite's write lock for more than three busy timeouts (what
    stopped a loop: three failed ticks); the fleet loop and a host loop wait it out as the same
    processes, then the fleet loop types a line stored afterwards."""
    h = tmux_db
    ids = create_fleet(h)
    f = ids.fleet_id
    alpha, alpha_pane = create_member(h, f, "alpha")
    stop_loop(h, f)
    fleet_loop = start_loop(h, f, "--tick", "1", "--interval", "0")
    host_loop = _host_loop(h, "host-b", "--tick", "1")
    try:
        seconds = 3 * BUSY_TIMEOUT_MS / 1000 + 3
        holder = subprocess.Popen(
            [sys.executable, "-c", HOLD, str(h.db_path), str(seconds)],
            stdout=subprocess.PIPE,
            text=True,
        )
        h.track(holder)
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        for loop in (fleet_loop, host_loop):
            loop.wait_line(UNAVAILABLE, timeout=20)
        since = (_fleet_beat(h, f), _host_beat(h, "host-b"))
        assert holder.wait(timeout=seconds + 30) == 0
        retry_until(lambda: _beats_after(h, f, "host-b", since), timeout=30)
        message = _send(h.db_path, ids.director_id, alpha, "after the lock")
        retry_until(lambda: _typed(h, alpha_pane, message) == 1, timeout=30)
        for loop in (fleet_loop, host_loop):
            loop.wait_line(AVAILABLE, timeout=10)
            _clean(loop)
            assert loop.count(UNAVAILABLE) == 1, loop.lines()
        fleet_loop.wait_line(rf"tick -> notify msg {message} member {alpha}$")
    finally:
        for loop in (fleet_loop, host_loop):
            loop.stop()
    assert all(not pid_alive(loop.proc.pid) for loop in (fleet_loop, host_loop))
    assert log_lines(Path(fleet_loop.out))[-1].startswith("monitor loop stopped")
