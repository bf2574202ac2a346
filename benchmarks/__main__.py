"""Run every benchmark on fresh temp databases; print a table and write JSON results.

python -m benchmarks            # full run (several minutes)
python -m benchmarks --smoke    # tiny sizes, seconds; the test suite runs this
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks import (
    assets_guard,
    concurrency,
    delivery,
    drains,
    escalation,
    fleet,
    notify,
    parallel,
    postgres,
    scale,
    send_paths,
    startup,
    supervision,
    tasks,
    throughput,
    usage,
    wait_latency,
    webui,
)

FULL: dict[str, Any] = {
    "runs": 11,
    "startup_commands": None,  # every one
    "sends": 5000,
    "procs": 16,
    "per_proc": 500,
    "trials": 50,
    "scale": 100_000,
    "notify_runs": 7,
    "send_paths": 2000,
    "send_path_rounds": 3,
    "drain_sizes": [1000, 5000],
    "dead_panes": [1000, 5000],
    "guard_calls": 2000,
    "delivery_rounds": 50,
    "delivery_sends": 20,
    "fleet_mixes": ["claude", "codex", "opencode", "mixed"],
    "fleet_tasks": [3, 8],
    "escalation_trials": 20,
    "escalation_panes": [1, 4, 8],
    "usage_replies": 100_000,
    "parallel_members": 32,
    "parallel_workers": [1, 8],
    "parallel_list_runs": 11,
    "pg_sends": 2000,
    "pg_per_proc": 500,
    "tasks": {"tasks": 1000, "runs": 11, "dependents": 100, "messages": 100_000, "search_runs": 11},
}
SMOKE: dict[str, Any] = {
    "runs": 1,
    # a paneless read, a write and a pane-bound command: the smoke proves the section runs
    "startup_commands": (
        "message poll (10 pending)",
        "message ack",
        "message send (from its pane)",
    ),
    "sends": 50,
    "procs": 2,
    "per_proc": 10,
    "trials": 2,
    "scale": 2_000,
    "notify_runs": 1,
    "send_paths": 20,
    "send_path_rounds": 1,
    "drain_sizes": [50],
    "dead_panes": [20],
    "guard_calls": 20,
    "delivery_rounds": 2,
    "delivery_sends": 2,
    "fleet_mixes": ["claude"],
    "fleet_tasks": [2],
    "escalation_trials": 1,
    "escalation_panes": [1],
    "usage_replies": 200,
    "parallel_members": 3,
    "parallel_workers": [1, 3],
    "parallel_list_runs": 1,
    "pg_sends": 50,
    "pg_per_proc": 10,
    "tasks": {"tasks": 20, "runs": 1, "dependents": 5, "messages": 200, "search_runs": 1},
}
# Section 13 spawns real agents for tens of minutes: run only when named (--only delivery_real).
OPT_IN = ("delivery_real", "fleet_roundtrip")

TARGETS = [
    "short commands: median <= 1.5 x the `import click, sqlite3, json` floor (bytecode cached), "
    "peak RSS <= 25 MB",
    ">= 4,000 sends/s in-process with synchronous=FULL",
    "0 errors and 0 lost with 16 concurrent writers",
    "message wait wake-up p50 <= 100 ms",
    "poll on 100k messages <= 5 ms of query time",
    "GET /api/timeline on 100k messages: median server time <= 20 ms",
    "send-to-verified into a ready pane: median <= 1.5 s (typing settles included)",
    "broadcast to 32 ready fake-agent members: <= 2.5 s wall; loop drain of 32 panes: <= 3 s",
    "member list of a 32-member fleet: <= 2 x the `import click, sqlite3, json` floor",
    "PostgreSQL: message wait wake-up p50 <= 50 ms, >= 1,500 sends/s in-process, short "
    "commands <= 2 x their SQLite time",
    "fresh real members, message at 0-15 s: 20/20 received intact, 0 stamped-but-missing, "
    "0 interruptions",
    "task list of 1,000 tasks <= 1.5 x the floor; search over 100,000 messages <= 50 ms median "
    "on SQLite and PostgreSQL; 100 dependent tasks released at once",
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes (seconds)")
    parser.add_argument("--out", type=Path, default=None, help="JSON results file")
    parser.add_argument(
        "--only",
        action="append",
        default=None,
        help=(
            "run only these sections (startup, throughput, concurrency, wait, scale, notify, "
            "send_paths, webui, drains, assets_guard, supervision, delivery, escalation, "
            "usage, parallel, postgres, tasks; delivery_real and fleet_roundtrip run only when named)"
        ),
    )
    parser.add_argument(
        "--skip",
        action="append",
        default=[],
        help="run every section but these (repeatable; sections as for --only)",
    )
    parser.add_argument(
        "--real-trials", type=int, default=20, help="delivery_real: trials per agent"
    )
    parser.add_argument(
        "--real-ready", type=int, default=3, help="delivery_real: ready-pane sends per agent"
    )
    parser.add_argument(
        "--real-agents", default="claude,codex,opencode,gemini", help="delivery_real: agents"
    )
    parser.add_argument(
        "--fleet-mixes",
        default=None,
        help="fleet_roundtrip: agent mixes (claude,codex,opencode,mixed; default: all, "
        "smoke: claude)",
    )
    args = parser.parse_args(argv)
    sizes = SMOKE if args.smoke else FULL
    out = args.out or Path("benchmarks/results") / ("smoke.json" if args.smoke else "latest.json")
    sections: dict[str, tuple[Callable[[Path], dict[str, Any]], Callable[[Any], list[str]]]] = {
        "startup": (
            lambda t: startup.run(t, sizes["runs"], sizes["startup_commands"]),
            startup.render,
        ),
        "throughput": (lambda t: throughput.run(t, sizes["sends"]), throughput.render),
        "concurrency": (
            lambda t: concurrency.run(t, sizes["procs"], sizes["per_proc"]),
            concurrency.render,
        ),
        "wait": (lambda t: wait_latency.run(t, sizes["trials"]), wait_latency.render),
        "scale": (lambda t: scale.run(t, sizes["scale"], sizes["runs"]), scale.render),
        "notify": (lambda t: notify.run(t, sizes["notify_runs"]), notify.render),
        "send_paths": (
            lambda t: send_paths.run(t, sizes["send_paths"], sizes["send_path_rounds"]),
            send_paths.render,
        ),
        "webui": (lambda t: webui.run(t, sizes["scale"], sizes["runs"]), webui.render),
        "drains": (
            lambda t: drains.run(t, sizes["drain_sizes"], sizes["dead_panes"]),
            drains.render,
        ),
        "assets_guard": (lambda t: assets_guard.run(t, sizes["guard_calls"]), assets_guard.render),
        "supervision": (lambda t: supervision.run(t, sizes["runs"]), supervision.render),
        "delivery": (
            lambda t: delivery.run(t, sizes["delivery_rounds"], sizes["delivery_sends"]),
            delivery.render,
        ),
        "escalation": (
            lambda t: escalation.run(
                t, sizes["escalation_trials"], sizes["runs"], sizes["escalation_panes"]
            ),
            escalation.render,
        ),
        "parallel": (
            lambda t: parallel.run(
                t, sizes["parallel_members"], sizes["parallel_workers"], sizes["parallel_list_runs"]
            ),
            parallel.render,
        ),
        "fleet_roundtrip": (
            lambda t: fleet.run(
                t,
                args.fleet_mixes.split(",") if args.fleet_mixes else sizes["fleet_mixes"],
                sizes["fleet_tasks"],
            ),
            fleet.render,
        ),
        "usage": (lambda t: usage.run(t, sizes["usage_replies"], sizes["runs"]), usage.render),
        "postgres": (
            lambda t: postgres.run(
                t,
                sizes["pg_sends"],
                sizes["procs"],
                sizes["pg_per_proc"],
                sizes["trials"],
                sizes["runs"],
            ),
            postgres.render,
        ),
        # smoke: search on SQLite only (the postgres section already starts a server)
        "tasks": (
            lambda t: tasks.run(t, **sizes["tasks"], postgres=not args.smoke),
            tasks.render,
        ),
        "delivery_real": (
            lambda t: delivery.run_real(
                t, args.real_trials, args.real_ready, args.real_agents.split(",")
            ),
            delivery.render_real,
        ),
    }
    unknown = [name for name in (args.only or []) + args.skip if name not in sections]
    if unknown:
        parser.error(f"unknown section(s): {', '.join(unknown)}")
    chosen = args.only or [name for name in sections if name not in OPT_IN]
    chosen = [name for name in chosen if name not in args.skip]
    results: dict[str, object] = {
        "mode": "smoke" if args.smoke else "full",
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "python": sys.version.split()[0],
        "sqlite": sqlite3.sqlite_version,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "targets": TARGETS,
    }
    lines = [
        f"cafleet benchmarks ({results['mode']}; Python {results['python']}, "
        f"SQLite {results['sqlite']}, {results['machine']})"
    ]
    with tempfile.TemporaryDirectory(prefix="cafleet-bench-") as tmp:
        for name in chosen:
            run, render = sections[name]
            result = run(Path(tmp))
            results[name] = result
            lines.extend(render(result))
            print("\n".join(render(result)), flush=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"results written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
