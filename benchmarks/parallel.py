"""14. Parallel delivery (docs/runtime.md §4.10) and supervision at fleet size.

In a private tmux server, N members whose panes run the screen-mode fake Claude Code (a ready
screen: the gate lets the line through and the agent's policy applies), each in a window of its
own (so every screen is full size):

- ``broadcast``: whole-process `cafleet message broadcast` from the Director to the N members and
  the monitor, every line verified, with ``CAFLEET_DELIVERY_WORKERS`` = each of ``workers``;
- ``drain``: one in-process `drain_fleet` (what a monitor tick runs) over the N+1 panes with one
  pending line each, for each ``workers``;
- ``member list``: whole-process `cafleet member list F` of the N-member fleet (one capture per
  live pane, the classifier's) beside the `import click, sqlite3, json` floor, alternating runs.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def _fleet(h: Any, members: int) -> dict[str, Any]:
    """A fleet with ``members`` ready screen-mode fakes, each in its own window; a live-looking
    loop row (a sleeping process) keeps send and broadcast from starting a real loop."""
    from tests.factories import FakePane, add_member, connect, make_fleet
    from tests.harness import util

    def window_with_fake() -> tuple[str, str]:
        out = h.tmux(
            "new-window", "-d", "-P", "-F", "#{window_id} #{pane_id}", "-t", h.session_name,
            "-c", str(h.project_dir), "-e", "CAFLEET_FAKE_SCREEN=", "--",
            str(h.bin_dir / "claude"),
        )  # fmt: skip
        window, pane = out.split()
        return window, pane

    monitor_window, monitor_pane = window_with_fake()
    placed = [window_with_fake() for _ in range(members)]
    for _window, pane in [(monitor_window, monitor_pane), *placed]:
        util.start_record(pane, timeout=60)
    with connect(h.db_path) as conn:
        boot = make_fleet(
            conn,
            name="bench",
            director_pane=FakePane(h.session_name, h.window_id, h.director_pane),
            monitor_pane=FakePane(h.session_name, monitor_window, monitor_pane),
        )
        ids = []
        for n, (window, pane) in enumerate(placed):
            member = add_member(
                conn, boot.fleet.fleet_id, name=f"m{n}", pane_id=pane, coding_agent="claude",
                session=h.session_name, window_id=window,
            )  # fmt: skip
            ids.append(member.member_id)
    sleeper = subprocess.Popen(["sleep", "3600"])
    _sql(
        h.db_path,
        "INSERT INTO monitor_runtime (fleet_id, pid, started_at, last_tick_at, tick_seconds) "
        "VALUES (?, ?, '2999-01-01T00:00:00.000000+00:00', '2999-01-01T00:00:00.000000+00:00', 5)",
        boot.fleet.fleet_id,
        sleeper.pid,
    )
    panes = [monitor_pane] + [pane for _w, pane in placed]
    return {
        "fleet_id": boot.fleet.fleet_id,
        "director": boot.director.member_id,
        "members": ids,
        "panes": panes,
        "sleeper": sleeper,
    }


def _ready(h: Any, panes: list[str]) -> None:
    """Every pane's screen reads ready again (a delivered line leaves the fake working a moment)."""
    from cafleet.delivery.screens import classify
    from tests.harness import util

    for pane in panes:

        def ready(p: str = pane) -> bool:
            return classify("claude", h.tmux("capture-pane", "-p", "-t", p)) == "ready"

        util.retry_until(ready, timeout=60, interval=0.1)


def _sql(db_path: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    """One statement on its own connection, committed (the benchmark's set-up and checks)."""
    import sqlite3

    conn = sqlite3.connect(db_path)
    try:
        with conn:
            return list(conn.execute(sql, params))
    finally:
        conn.close()


def _product_env(h: Any) -> dict[str, str]:
    """The CLI environment with the real tmux first on PATH (the product's cost, not the test
    shim's: a Python process per tmux call) and this checkout first on PYTHONPATH (not whatever
    cafleet is installed)."""
    env = dict(h.env)
    env["PATH"] = os.path.dirname(h.real_tmux) + os.pathsep + env.get("PATH", os.defpath)
    # BENCH_CAFLEET_SOURCE: another checkout's whole-process figures (the "before" of a change).
    source = os.environ.get("BENCH_CAFLEET_SOURCE") or str(REPO)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (source, env.get("PYTHONPATH")) if p)
    return env


def _pending(h: Any, fleet_id: int) -> int:
    return int(
        _sql(
            h.db_path,
            "SELECT count(*) FROM messages m JOIN members r ON r.member_id = m.owner_member_id "
            "WHERE r.fleet_id = ? AND m.type = 'unicast' AND m.notified_at IS NULL "
            "AND m.status_state = 'input_required' AND r.member_id != (SELECT director_member_id FROM fleets "
            "WHERE fleet_id = ?)",
            fleet_id,
            fleet_id,
        )[0][0]
    )


def broadcast(h: Any, fleet: dict[str, Any], workers: list[int]) -> list[dict[str, Any]]:
    rows = []
    for count in workers:
        _ready(h, fleet["panes"])
        t0 = time.perf_counter()
        result = h.cli(
            "message", "broadcast", "--from-member-id", str(fleet["director"]), f"bench w{count}",
            env={**_product_env(h), "CAFLEET_DELIVERY_WORKERS": str(count)}, timeout=600,
        )  # fmt: skip
        wall = time.perf_counter() - t0
        rows.append(
            {
                "workers": count,
                "recipients": len(fleet["panes"]),
                "wall_s": wall,
                "rc": result.returncode,
                "stdout": result.stdout.strip(),
                "warnings": len(result.stderr.splitlines()),
                "still_pending": _pending(h, fleet["fleet_id"]),
            }
        )
    return rows


def drain(h: Any, fleet: dict[str, Any], workers: list[int]) -> list[dict[str, Any]]:
    from cafleet import broker
    from cafleet.delivery.drains import drain_fleet
    from tests.factories import connect

    rows = []
    for count in workers:
        _ready(h, fleet["panes"])
        with connect(h.db_path) as conn:
            monitor = broker.get_active_monitor(conn, fleet_id=fleet["fleet_id"])
            assert monitor is not None
            recipients = [monitor.member_id, *fleet["members"]]
            for member in recipients:
                broker.send_message(
                    conn, from_member_id=fleet["director"], to_member_id=member, text="tick"
                )
            t0 = time.perf_counter()
            report = drain_fleet(
                conn, fleet["fleet_id"], attempted=set(), blocked=set(), lock_timeout=5,
                live_panes=frozenset(fleet["panes"]), env=_product_env(h), workers=count,
            )  # fmt: skip
            wall = time.perf_counter() - t0
        rows.append(
            {
                "workers": count,
                "pending_lines": len(recipients),
                "wall_s": wall,
                "notified": len(report.notified),
                "failures": [f.reason for f in report.failures],
            }
        )
    return rows


def member_list(h: Any, fleet: dict[str, Any], runs: int) -> dict[str, Any]:
    env = dict(os.environ)
    env.update(_product_env(h))
    # Bytecode cached, as the target says: this machine sets PYTHONDONTWRITEBYTECODE=1, which
    # would leave a checkout's cafleet compiled afresh on every run (site-packages has its .pyc
    # files from installation either way); the warm-up round writes cafleet's.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    source = Path(os.environ.get("BENCH_CAFLEET_SOURCE") or str(REPO)) / "cafleet"
    argv = [sys.executable, "-m", "cafleet", "member", "list", str(fleet["fleet_id"])]
    floor = [sys.executable, "-c", "import click, sqlite3, json"]
    times: dict[str, list[float]] = {"member list": [], "floor": []}
    for _ in range(runs + 1):  # the first round warms the bytecode cache and is dropped
        for label, cmd in (("member list", argv), ("floor", floor)):
            t0 = time.perf_counter()
            proc = subprocess.run(cmd, env=env, capture_output=True, cwd=str(h.project_dir))
            times[label].append(time.perf_counter() - t0)
            assert proc.returncode == 0, proc.stderr
    out = {label: statistics.median(values[1:]) for label, values in times.items()}
    return {
        "members": len(fleet["members"]),
        "runs": runs,
        "bytecode": f"cached: {source} has {sum(1 for _ in source.rglob('*.pyc'))} .pyc files",
        "member_list_s": out["member list"],
        "floor_s": out["floor"],
        "x_floor": out["member list"] / out["floor"],
    }


def run(tmp: Path, members: int, workers: list[int], list_runs: int) -> dict[str, Any]:
    import shutil

    if shutil.which("tmux") is None:
        return {"skipped": "tmux not installed"}
    from benchmarks.delivery import _private_tmux

    with _private_tmux() as h:
        assert h.cli("setup").returncode == 0
        fleet = _fleet(h, members)
        try:
            load_start = os.getloadavg()  # the machine is shared: every figure says its load
            return {
                "members": members,
                "broadcast": broadcast(h, fleet, workers),
                "drain": drain(h, fleet, workers),
                "member_list": member_list(h, fleet, list_runs),
                "load_start": load_start,
                "load_end": os.getloadavg(),
            }
        finally:
            fleet["sleeper"].kill()
            fleet["sleeper"].wait()


def render(result: dict[str, Any]) -> list[str]:
    if "skipped" in result:
        return [f"## 17. parallel delivery: skipped ({result['skipped']})"]
    lines = [f"## 17. parallel delivery, {result['members']} members + the monitor"]
    if "load_start" in result:
        lines.append(
            "  load average (1, 5, 15 min) at start "
            + ", ".join(f"{x:.2f}" for x in result["load_start"])
            + "; at end "
            + ", ".join(f"{x:.2f}" for x in result["load_end"])
        )
    for row in result["broadcast"]:
        lines.append(
            f"  broadcast, workers={row['workers']}: {row['wall_s']:.2f} s wall, "
            f"{row['stdout']}, {row['warnings']} warnings, {row['still_pending']} pending"
        )
    for row in result["drain"]:
        lines.append(
            f"  drain_fleet, workers={row['workers']}: {row['wall_s']:.2f} s for "
            f"{row['pending_lines']} lines, {row['notified']} notified"
        )
    ml = result["member_list"]
    lines.append(
        f"  member list ({ml['members']} members): {ml['member_list_s'] * 1000:.0f} ms, "
        f"floor {ml['floor_s'] * 1000:.0f} ms, {ml['x_floor']:.2f}x ({ml.get('bytecode')})"
    )
    return lines
