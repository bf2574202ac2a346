"""`cafleet hook`'s cost and how soon cafleet knows an agent went idle: hook vs screen
(docs/runtime.md §4.12).

1. Whole-process wall time of `cafleet hook stop --member-id M` (console script, bytecode
   cached, a real SQLite database at head) beside the `import click, sqlite3, json` floor,
   alternating runs; the target is <= 1.2 x the floor.
2. Idle to known: a hook's report is committed when its process exits, so the hook's delay is
   its wall time; the screen's is the wait for the loop's next tick (uniform over the tick:
   half of it on average, `tick_seconds` default 5) plus one capture's classification,
   measured here on a recorded Claude Code screen.

python -m benchmarks.hooks_idle [--runs N]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
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

FLOOR = [sys.executable, "-c", "import click, sqlite3, json"]
TICK_SECONDS = 5.0  # the loop's default tick (docs/runtime.md §5)
SCREENS = Path(__file__).resolve().parent.parent / "tests" / "data" / "screens" / "claude"


def hook_cost(runs: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "db" / "cafleet.db"
        setup_db(db)
        conn = connect(db)
        try:
            fleet = make_fleet(conn, 1)
        finally:
            from cafleet.db.runtime import close_connection

            close_connection(conn)
        env = base_env(db)
        argv, how = cafleet_argv()
        hook = [*argv, "hook", "stop", "--member-id", str(fleet.member_ids[0])]
        times: dict[str, list[float]] = {"hook": [], "floor": []}
        for _ in range(2):  # warm-up: bytecode cached
            run_process(hook, env)
            run_process(FLOOR, env)
        for _ in range(runs):
            for label, cmd in (("hook", hook), ("floor", FLOOR)):
                done = run_process(cmd, env)
                assert done.returncode == 0 and done.stdout == b"", (label, done)
                times[label].append(done.seconds)
    hook_s, floor_s = median(times["hook"]), median(times["floor"])
    return {"how": how, "hook_s": hook_s, "floor_s": floor_s, "x_floor": hook_s / floor_s}


def screen_cost(runs: int) -> dict[str, Any]:
    from cafleet.delivery.screens import classify

    captures = sorted(SCREENS.glob("*.txt"))
    texts = [p.read_text(encoding="utf-8") for p in captures] or [""]
    start = time.perf_counter()
    for _ in range(runs):
        for text in texts:
            classify("claude", text, spawned=True)
    per = (time.perf_counter() - start) / (runs * len(texts))
    return {"classify_s": per, "screen_mean_s": TICK_SECONDS / 2 + per}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--out", type=Path, help="also write the figures here as JSON")
    args = parser.parse_args(argv)
    load_before = os.getloadavg()
    cost = hook_cost(args.runs)
    screen = screen_cost(200)
    if args.out is not None:
        figures = {"hook": cost, "screen": screen, "runs": args.runs}
        figures["load"] = [*load_before, *os.getloadavg()]
        args.out.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    print(
        f"cafleet hook ({cost['how']}): {cost['hook_s'] * 1000:.0f} ms median; floor "
        f"{cost['floor_s'] * 1000:.0f} ms; {cost['x_floor']:.2f}x"
    )
    print(
        f"idle known: hook {cost['hook_s'] * 1000:.0f} ms after the agent's event; screen "
        f"{screen['screen_mean_s'] * 1000:.0f} ms on average (tick {TICK_SECONDS:g} s / 2 + "
        f"classify {screen['classify_s'] * 1000:.2f} ms)"
    )


if __name__ == "__main__":
    main()
