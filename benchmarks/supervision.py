"""11. Supervision costs (docs/cli.md §1.11, §2.19): what every command's loop healing adds while every loop is
live, and how close `message wait --timeout` keeps to its deadline.

- healing, in process: `monitor.ensure.heal_dead_loops` on a database with F live fleets whose
  loops look live (this process's pid, a fresh heartbeat), TMUX set: one read plus one
  `kill(pid, 0)` per loop; against TMUX unset (nothing read).
- healing, whole process: `cafleet message poll` with TMUX set (the heal read runs) and unset,
  the same database, medians of alternating runs.
- the wait deadline: how far past its deadline `workflows.inbox.wait` returns in process, and
  the wall time of `cafleet message wait M --timeout T` on an empty inbox minus T (the process
  start is inside the deadline, docs/cli.md §2.19; what remains is the interpreter's exit).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from benchmarks.common import (
    base_env,
    cafleet_argv,
    connect,
    make_fleet,
    median,
    run_process,
    setup_db,
)

FLEETS = 5
CALLS = 2000
FAKE_TMUX = "/nonexistent/tmux-socket,1,0"  # set, never asked: every loop is live


def _live_rows(conn: Any, fleet_ids: list[int]) -> None:
    from cafleet.broker import claim_monitor

    for fleet_id in fleet_ids:
        claim_monitor(
            conn,
            fleet_id=fleet_id,
            pid=os.getpid(),
            tick_seconds=3600,  # the heartbeat stays fresh for the whole run
            wake_interval_seconds=0,
        )


def _wait_in_process(conn: Any, db_path: Path, member: int, rounds: int) -> dict[str, float]:
    """`workflows.inbox.wait` itself: how far past its deadline it returns (no process cost)."""
    from cafleet.config import load_settings
    from cafleet.workflows import inbox
    from cafleet.workflows.errors import WaitTimedOut

    # The stale-assets guard reads the agents' directories under HOME: the benchmark's own.
    saved = dict(os.environ)
    os.environ.update(base_env(db_path))
    try:
        settings = load_settings()
        overruns = []
        for _ in range(rounds):
            started = time.monotonic()
            try:
                inbox.wait(
                    conn, settings, member, timeout=1.0, warn=lambda _t: None, started=started
                )
            except WaitTimedOut:
                overruns.append(time.monotonic() - started - 1.0)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return {"median": median(overruns) * 1000, "max": max(overruns) * 1000}


def run(tmp: Path, runs: int) -> dict[str, Any]:
    from cafleet.db.runtime import close_connection
    from cafleet.monitor.ensure import heal_dead_loops

    db_path = tmp / "supervision" / "cafleet.db"
    setup_db(db_path)
    conn = connect(db_path)
    try:
        # One live fleet per Director pane: each fleet gets a pane of its own.
        fleets = [
            make_fleet(conn, 2, name=f"f{i}", director_pane_id=f"%{9000 + i}")
            for i in range(FLEETS)
        ]
        _live_rows(conn, [f.fleet_id for f in fleets])
        timings: dict[str, float] = {}
        for label, env in (("TMUX set", {"TMUX": FAKE_TMUX}), ("TMUX unset", {})):
            start = time.perf_counter()
            for _ in range(CALLS):
                started = heal_dead_loops(conn, env=env)
            timings[label] = (time.perf_counter() - start) / CALLS * 1e6
            assert started == []
        member = fleets[0].member_ids[0]
        inprocess = _wait_in_process(conn, db_path, member, max(runs // 2, 2))
    finally:
        close_connection(conn)

    prefix, how = cafleet_argv()
    env = base_env(db_path)
    poll = [*prefix, "message", "poll", str(member)]
    process: dict[str, list[float]] = {"TMUX set": [], "TMUX unset": []}
    run_process(poll, env)  # warm-up
    for _ in range(max(runs, 3)):
        process["TMUX set"].append(run_process(poll, {**env, "TMUX": FAKE_TMUX}).seconds)
        process["TMUX unset"].append(run_process(poll, env).seconds)

    deadlines: dict[str, list[float]] = {}
    for timeout in (1.0, 2.0):
        overruns = []
        for _ in range(max(runs // 2, 2)):
            result = run_process(
                [*prefix, "message", "wait", str(member), "--timeout", f"{timeout:g}"], env
            )
            assert result.returncode == 124, result.returncode
            overruns.append(result.seconds - timeout)
        deadlines[f"{timeout:g} s"] = overruns
    return {
        "invocation": how,
        "fleets": FLEETS,
        "heal_call_us": timings,
        "poll_process_ms": {k: median(v) * 1000 for k, v in process.items()},
        "poll_runs": len(process["TMUX set"]),
        "wait_inprocess_overrun_ms": inprocess,
        "wait_overrun_ms": {
            k: {"median": median(v) * 1000, "max": max(v) * 1000} for k, v in deadlines.items()
        },
    }


def render(result: dict[str, Any]) -> list[str]:
    heal = result["heal_call_us"]
    poll = result["poll_process_ms"]
    lines = [
        f"## 11. supervision ({result['fleets']} live fleets, {result['invocation']})",
        f"  heal_dead_loops per call: {heal['TMUX set']:.1f} us with TMUX set (one read), "
        f"{heal['TMUX unset']:.2f} us unset",
        f"  message poll, whole process (median of {result['poll_runs']}): "
        f"{poll['TMUX set']:.1f} ms with TMUX set, {poll['TMUX unset']:.1f} ms unset",
    ]
    inner = result["wait_inprocess_overrun_ms"]
    lines.append(
        f"  inbox.wait(timeout=1) in process: returns {inner['median']:.0f} ms after the deadline "
        f"(median; max {inner['max']:.0f} ms)"
    )
    for timeout, over in result["wait_overrun_ms"].items():
        lines.append(
            f"  message wait --timeout {timeout}: ends {over['median']:.0f} ms after the deadline "
            f"(median; max {over['max']:.0f} ms), exit 124"
        )
    return lines
