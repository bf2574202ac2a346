"""14. Blocked members (docs/runtime.md §5.12): how long a permission prompt waits before the
Director's inbox has its report, what reading prompts costs a tick, and what `member answer`
takes.

``run`` (in every run): a fleet in a private tmux server with its monitor loop (``--tick``
1 s, ``CAFLEET_ESCALATE_AFTER=0``, so the figure is the loop's own delay, not the threshold);
per trial a screen-mode fake Claude Code member opens its permission prompt on a `member
prompt`; the **latency** is from the prompt drawn (the fake's own record of the screen it drew)
to the report's ``created_at`` in the Director's inbox; then `member answer 1` is timed (lock,
probe, capture, key, captures until the prompt has gone) and the member deleted. Plus the
reader's cost per capture (`read_prompt` over every real capture) and what one tick's
escalation step costs with ``members`` prompting panes (in-process, real tmux).

``run_real`` (only with ``--only escalation_real``): the same latency with a real Claude Code
member at its real prompt (tests/test_real_escalation.py's set-up, the scripted model).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import time
from pathlib import Path
from typing import Any

from benchmarks.delivery import DATA, _private_tmux, _stats

TICK = 1


def reader_cost(rounds: int) -> dict[str, Any]:
    from cafleet.delivery.screens.prompts import read_prompt

    index = json.loads((DATA / "index.json").read_text(encoding="utf-8"))
    screens = [(name.split("/")[0], (DATA / name).read_text(encoding="utf-8")) for name in index]
    per: list[float] = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for agent, screen in screens:
            read_prompt(agent, screen)
        per.append((time.perf_counter() - t0) / len(screens))
    return {"captures": len(screens), "read_prompt_us": statistics.median(per) * 1e6}


def _created_at(h: Any, director: int, member: int) -> float | None:
    from cafleet.db.timefmt import parse_ts

    rows = h.sqlite(
        "SELECT created_at FROM messages WHERE owner_member_id = ? AND text LIKE ?",
        director,
        f"[cafleet] member {member} prompt %",
    )
    if not rows:
        return None
    stamp = parse_ts(rows[0][0])
    return None if stamp is None else stamp.timestamp()


def _wait_ready(pane: str) -> None:
    from tests.harness.util import fake_log, retry_until

    retry_until(lambda: any(r.get("state") == "ready" for r in fake_log(pane)), timeout=30)


def _trial(h: Any, ids: Any, n: int) -> dict[str, float]:
    from tests.fleet_helpers import create_member, ok
    from tests.harness.util import fake_log, retry_until, start_record

    member, pane = create_member(
        h, ids.fleet_id, f"bench-{n}", "#fake screen permission work=600\nhello"
    )
    start_record(pane)
    _wait_ready(pane)
    ok(h.cli("member", "prompt", str(member), "run the tests"))
    drawn = retry_until(
        lambda: next((r["t"] for r in fake_log(pane) if r.get("state") == "awaiting_user"), None),
        timeout=30,
    )
    reported = retry_until(
        lambda: _created_at(h, ids.director_id, member), timeout=60, interval=0.05
    )
    t0 = time.perf_counter()
    ok(h.cli("member", "answer", str(member), "1"))
    answer_s = time.perf_counter() - t0
    ok(h.cli("member", "delete", str(member)))
    return {"latency_s": reported - float(drawn), "answer_s": answer_s}


def tick_cost(h: Any, ids: Any, tmp: Path, members: int, rounds: int) -> dict[str, Any]:
    """The escalation step of one tick, in-process, with ``members`` panes at a prompt."""
    from benchmarks.common import connect
    from cafleet import broker
    from cafleet.db.runtime import close_connection
    from cafleet.monitor.escalate import escalate_prompts
    from cafleet.monitor.state import LoopState
    from tests.fleet_helpers import create_member, ok
    from tests.harness.util import start_record

    created = []
    for i in range(members):
        member, pane = create_member(
            h, ids.fleet_id, f"cost-{i}", "#fake screen permission work=600\nhello"
        )
        start_record(pane)
        _wait_ready(pane)
        ok(h.cli("member", "prompt", str(member), "run the tests"))
        created.append(member)
    backend = h.backend(tmux_bin=h.real_tmux)  # the product's cost, not the test shim's
    per: list[float] = []
    conn = connect(h.db_path)
    try:
        state = LoopState(
            conn=conn, fleet_id=ids.fleet_id, pid=os.getpid(), tick_seconds=TICK,
            pane_lock_timeout=1, env_wake_interval=None, backend=backend, log=lambda _t: None,
            stop_requested=lambda: False, escalate_after=10**9,  # measure, never report
        )  # fmt: skip
        state.last_beat = float("inf")  # this process holds no loop slot: never due to beat
        live = backend.list_panes()
        director = str(broker.director_placement(conn, ids.fleet_id).mux_pane_id)  # type: ignore[union-attr]
        for _ in range(rounds):
            members_now = broker.placed_members(conn, ids.fleet_id)
            t0 = time.perf_counter()
            escalate_prompts(state, live, director, members_now)
            per.append(time.perf_counter() - t0)
        seen = sum(1 for m in created if m in state.prompts_seen)
    finally:
        close_connection(conn)
    for member in created:
        ok(h.cli("member", "delete", str(member)))
    return {"members": members, "prompts_seen": seen, "step_ms": statistics.median(per) * 1000}


def run(tmp: Path, trials: int, rounds: int, sizes: list[int]) -> dict[str, Any]:
    result: dict[str, Any] = {"reader": reader_cost(rounds)}
    if shutil.which("tmux") is None:
        result["skipped"] = "tmux not installed"
        return result
    from tests.fleet_helpers import create_fleet, start_loop, stop_loop

    with _private_tmux() as h:
        assert h.cli("setup").returncode == 0
        ids = create_fleet(h)
        stop_loop(h, ids.fleet_id)
        loop = start_loop(
            h, ids.fleet_id, "--tick", str(TICK), "--interval", "0",
            env={"CAFLEET_ESCALATE_AFTER": "0"},
        )  # fmt: skip
        try:
            rows = [_trial(h, ids, n) for n in range(trials)]
        except AssertionError as exc:
            raise RuntimeError(f"{exc}; the loop's log:\n" + "\n".join(loop.lines())) from exc
        finally:
            loop.stop()
        result["tick_s"] = TICK
        result["latency_s"] = _stats([r["latency_s"] for r in rows])
        result["answer_s"] = _stats([r["answer_s"] for r in rows])
        result["tick_step"] = [tick_cost(h, ids, tmp, n, rounds) for n in sizes]
    return result


def render(r: dict[str, Any]) -> list[str]:
    lines = [
        "## 14. blocked members: escalation and answers",
        f"  read_prompt per capture ({r['reader']['captures']} real captures): "
        f"{r['reader']['read_prompt_us']:.0f} µs",
    ]
    if "skipped" in r:
        return [*lines, "  escalation: skipped (" + r["skipped"] + ")"]
    lat, ans = r["latency_s"], r["answer_s"]
    lines.append(
        f"  prompt drawn -> report in the Director's inbox (tick {r['tick_s']} s, "
        f"CAFLEET_ESCALATE_AFTER=0, fake Claude), n={lat['n']}: median {lat['median']:.2f} s, "
        f"p90 {lat['p90']:.2f} s, max {lat['max']:.2f} s"
    )
    lines.append(
        f"  member answer 1 (until the prompt left the screen), n={ans['n']}: median "
        f"{ans['median']:.2f} s, max {ans['max']:.2f} s"
    )
    for row in r["tick_step"]:
        lines.append(
            f"  tick escalation step, {row['members']} prompting panes: {row['step_ms']:.1f} ms "
            f"({row['prompts_seen']} prompts seen)"
        )
    return lines
