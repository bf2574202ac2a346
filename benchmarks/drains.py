"""8. Drains at scale (docs/runtime.md §4.3, §4.4): N members whose panes are gone, one pending notification each.

In-process, without tmux: one `drain_fleet` with a live set holding only the Director's pane
(every message is undeliverable, so nothing is typed), one monitor `run_tick` over the same
state (a stand-in backend answers `list_panes`; wakes are off), and the wake line built for
that roster. Whole-process, against a private tmux server (own socket, `-f /dev/null`):
`message broadcast` to N members whose panes are gone, and `monitor scan` of that fleet.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import base_env, cafleet_argv, connect, run_process, setup_db

DIRECTOR_PANE = "%0"


class _Backend:
    """What a tick needs from the multiplexer when nothing is typed: the live set."""

    name = "tmux"

    def __init__(self, live: frozenset[str]) -> None:
        self.live = live

    def list_panes(self) -> frozenset[str]:
        return self.live

    def pane_status(self, pane_id: str) -> Any:
        # As if every missing pane had come back: the tick's loss check still visits every
        # member, but records nothing (a loss is recorded once; this is the steady state).
        from cafleet.mux import PaneStatus

        return PaneStatus(pane_id=pane_id, mode=None, dead=False)


def _fill(
    conn: Any, members: int, *, session: str, window: str, director_pane: str
) -> dict[str, Any]:
    """A fleet with `members` placed members on panes that do not exist, in one transaction
    (register_member would commit twice per member), then one broadcast from the Director."""
    from benchmarks.common import FakePane
    from cafleet.broker import broadcast_message, create_fleet
    from cafleet.db import tx
    from cafleet.db.timefmt import now_ts

    boot = create_fleet(
        conn,
        name="drains",
        backend="tmux",
        coding_agent="claude",
        director_pane=FakePane(session, window, director_pane),
        spawn_monitor=lambda f, d, m: FakePane(session, window, "%999999"),
    )
    fleet_id = boot.fleet.fleet_id
    ts = now_ts()
    with tx.write(conn):
        first = conn.exec_driver_sql("SELECT COALESCE(MAX(member_id), 0) + 1 FROM members").scalar()
        conn.exec_driver_sql(
            "INSERT INTO members (fleet_id, name, description, status, registered_at, "
            "member_card_json) VALUES (?, ?, 'drain benchmark', 'active', ?, '{}')",
            [(fleet_id, f"worker-{i}", ts) for i in range(members)],
        )
        conn.exec_driver_sql(
            "INSERT INTO member_placements (member_id, mux_session, mux_window_id, mux_pane_id, "
            "backend, coding_agent, created_at) VALUES (?, ?, ?, ?, 'tmux', 'claude', ?)",
            [(first + i, session, window, f"%{500000 + i}", ts) for i in range(members)],
        )
    broadcast_message(conn, from_member_id=boot.director.member_id, text="undeliverable")
    return {
        "fleet_id": fleet_id,
        "director_id": boot.director.member_id,
        "monitor_id": boot.monitor.member_id,
    }


_TRANSACTION_STATEMENTS = frozenset(
    ("BEGIN", "BEGIN IMMEDIATE", "COMMIT", "ROLLBACK", "SELECT version_num FROM alembic_version")
)


class _CountingDriver:
    """Stands in for the runtime connection's `sqlite3` connection, counting the repository's
    statements (not the transaction's own BEGIN, COMMIT and ledger re-check)."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.count = 0

    def execute(self, sql: str, parameters: Any = ()) -> Any:
        if sql not in _TRANSACTION_STATEMENTS:
            self.count += 1
        return self.real.execute(sql, parameters)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


def _count_queries(conn: Any) -> _CountingDriver:
    counter = _CountingDriver(conn.driver)
    conn.driver = counter
    return counter


def _pending(conn: Any, fleet_id: int) -> int:
    from cafleet.db import tx

    with tx.read(conn):
        return int(
            conn.exec_driver_sql(
                "SELECT count(*) FROM messages AS x JOIN members AS m ON m.member_id = "
                "x.owner_member_id WHERE m.fleet_id = ? AND x.notified_at IS NULL AND "
                "x.status_state = 'input_required' AND x.type = 'unicast'",
                (fleet_id,),
            ).scalar()
        )


def _in_process(tmp: Path, members: int) -> dict[str, Any]:
    from cafleet.broker import claim_monitor
    from cafleet.db.runtime import close_connection
    from cafleet.delivery.drains import drain_fleet
    from cafleet.monitor.state import LoopState
    from cafleet.monitor.tick import build_line, run_tick

    db_path = tmp / f"drains-{members}" / "cafleet.db"
    setup_db(db_path)
    os.environ["CAFLEET_DATABASE_URL"] = f"sqlite:///{db_path}"
    conn = connect(db_path)
    try:
        fleet = _fill(conn, members, session="bench", window="@0", director_pane=DIRECTOR_PANE)
        fleet_id = fleet["fleet_id"]
        pending = _pending(conn, fleet_id)
        live = frozenset({DIRECTOR_PANE})

        counter = _count_queries(conn)
        start = time.perf_counter()
        report = drain_fleet(
            conn, fleet_id, attempted=set(), blocked=set(), lock_timeout=1.0, live_panes=live
        )
        drain_s = time.perf_counter() - start
        drain_queries = counter.count
        if report.notified or report.failures:
            raise RuntimeError("the drain benchmark typed or failed something")

        if not claim_monitor(
            conn, fleet_id=fleet_id, pid=os.getpid(), tick_seconds=5, wake_interval_seconds=0
        ):
            raise RuntimeError("could not claim the monitor slot")
        logged: list[str] = []
        state = LoopState(
            conn=conn,
            fleet_id=fleet_id,
            pid=os.getpid(),
            tick_seconds=5,
            pane_lock_timeout=5,
            env_wake_interval=None,
            backend=_Backend(live),
            log=logged.append,
            stop_requested=lambda: False,
        )
        counter.count = 0
        start = time.perf_counter()
        run_tick(state)
        tick_s = time.perf_counter() - start
        tick_queries = counter.count

        start = time.perf_counter()
        line, count = build_line(conn, fleet_id)
        line_s = time.perf_counter() - start
        conn.driver = counter.real
        return {
            "members": members,
            "pending": pending,
            "drain_s": drain_s,
            "drain_queries": drain_queries,
            "tick_s": tick_s,
            "tick_queries": tick_queries,
            "wake_line_s": line_s,
            "wake_line_bytes": len(line.encode("utf-8")),
            "wake_roster": count,
        }
    finally:
        close_connection(conn)


def _tmux(sock: str, *args: str) -> str:
    return subprocess.run(
        ["tmux", "-S", sock, *args], check=True, capture_output=True, text=True, timeout=10
    ).stdout.strip()


def _whole_process(tmp: Path, members: int) -> dict[str, Any]:
    """broadcast and monitor scan to `members` dead panes, against a private tmux server."""
    from cafleet.broker import claim_monitor
    from cafleet.db.runtime import close_connection

    sockdir = tempfile.mkdtemp(prefix="cfd", dir="/tmp")
    sock = f"{sockdir}/s"
    db_path = tmp / f"dead-panes-{members}" / "cafleet.db"
    setup_db(db_path)
    try:
        _tmux(sock, "-f", "/dev/null", "new-session", "-d", "-s", "bench", "cat >/dev/null")
        window = _tmux(sock, "display-message", "-p", "-t", "bench", "#{window_id}")
        director = _tmux(sock, "display-message", "-p", "-t", "bench", "#{pane_id}")
        server_pid = _tmux(sock, "display-message", "-p", "#{pid}")
        conn = connect(db_path)
        try:
            fleet = _fill(conn, members, session="bench", window=window, director_pane=director)
            # A live loop row (this process, a long tick) keeps broadcast from starting a loop.
            claim_monitor(
                conn,
                fleet_id=fleet["fleet_id"],
                pid=os.getpid(),
                tick_seconds=3600,
                wake_interval_seconds=0,
            )
        finally:
            close_connection(conn)
        env = base_env(db_path)
        env["TMUX"] = f"{sock},{server_pid},0"
        env["TMUX_PANE"] = director
        prefix, how = cafleet_argv()
        broadcast = run_process(
            [*prefix, "message", "broadcast", "--from-member-id", str(fleet["director_id"]),
             "dead panes", "--json"],
            env,
        )  # fmt: skip
        scan = run_process([*prefix, "monitor", "scan", str(fleet["fleet_id"]), "--json"], env)
        return {
            "members": members,
            "invocation": how,
            "broadcast_s": broadcast.seconds,
            "broadcast_rc": broadcast.returncode,
            "scan_s": scan.seconds,
            "scan_rc": scan.returncode,
        }
    finally:
        subprocess.run(["tmux", "-S", sock, "kill-server"], capture_output=True, timeout=10)
        shutil.rmtree(sockdir, ignore_errors=True)


def run(tmp: Path, sizes: list[int], tmux_sizes: list[int]) -> dict[str, Any]:
    saved = os.environ.get("CAFLEET_DATABASE_URL")
    try:
        result: dict[str, Any] = {"in_process": [_in_process(tmp, n) for n in sizes]}
    finally:
        if saved is None:
            os.environ.pop("CAFLEET_DATABASE_URL", None)
        else:
            os.environ["CAFLEET_DATABASE_URL"] = saved
    if shutil.which("tmux") is None:
        result["whole_process"] = {"skipped": "tmux not installed"}
    else:
        result["whole_process"] = [_whole_process(tmp, n) for n in tmux_sizes]
    return result


def render(r: dict[str, Any]) -> list[str]:
    lines = ["## 9. drains with every pane gone (one pending notification per member)"]
    for row in r["in_process"]:
        lines.append(
            f"  {row['members']} members, {row['pending']} pending: drain_fleet "
            f"{row['drain_s'] * 1000:.0f} ms ({row['drain_queries']} queries), run_tick "
            f"{row['tick_s'] * 1000:.0f} ms ({row['tick_queries']} queries), wake line "
            f"{row['wake_line_bytes']} bytes in {row['wake_line_s'] * 1000:.0f} ms"
        )
    whole = r["whole_process"]
    if isinstance(whole, dict):
        lines.append(f"  whole process: skipped ({whole['skipped']})")
    else:
        for row in whole:
            lines.append(
                f"  {row['members']} dead panes, whole process: message broadcast "
                f"{row['broadcast_s'] * 1000:.0f} ms (exit {row['broadcast_rc']}), monitor scan "
                f"{row['scan_s'] * 1000:.0f} ms (exit {row['scan_rc']})"
            )
    return lines
