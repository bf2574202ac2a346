"""Tasks at scale (docs/performance.md §22): the `tasks` section of `python -m benchmarks`, or
`python -m benchmarks.tasks [--smoke]` alone.

- `task list --json` of a fleet with N tasks (1,000 by default), whole-process median wall and
  CPU time, beside the `import click, sqlite3, json` floor, alternating runs, bytecode cached;
  the target is <= 1.5x the floor.
- One `task done` whose task 100 waiting tasks come after: how many it releases (all, in the
  same transaction: no monitor tick is needed) and how long the call takes in-process.
- Search over 100,000 messages on SQLite and PostgreSQL (`benchmarks/search.py`).
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

from benchmarks import search
from benchmarks.common import (
    base_env,
    connect,
    make_fleet,
    median,
    run_process,
    setup_db,
)


def task_list(db: Path, tasks: int, runs: int) -> dict[str, Any]:
    from cafleet import broker

    conn = connect(db)
    fleet = make_fleet(conn, 4)
    for i in range(tasks):
        broker.create_task(
            conn,
            fleet_id=fleet.fleet_id,
            title=f"task {i}",
            body="do the thing " * 10,
            creator_id=fleet.director_id,
            assignee_id=None,
        )
    env = base_env(db)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # bytecode cached, as the target says
    argv, how = [sys.executable, "-m", "cafleet"], "python -m cafleet"  # as the floor runs
    listing = [*argv, "task", "list", "--fleet-id", str(fleet.fleet_id), "--json"]
    floor = [sys.executable, "-c", "import click, sqlite3, json"]
    times: dict[str, list[float]] = {"task list": [], "floor": []}
    cpu: dict[str, list[float]] = {"task list": [], "floor": []}
    for _ in range(runs + 1):  # the first round warms the bytecode cache and is dropped
        for label, cmd in (("task list", listing), ("floor", floor)):
            run = run_process(cmd, env)
            assert run.returncode == 0, label
            times[label].append(run.seconds)
            cpu[label].append(run.cpu_seconds)
    got = {label: median(values[1:]) for label, values in times.items()}
    got_cpu = {label: median(values[1:]) for label, values in cpu.items()}
    return {
        "tasks": tasks,
        "runs": runs,
        "how": how,
        "task_list_s": got["task list"],
        "floor_s": got["floor"],
        "x_floor": got["task list"] / got["floor"],
        "task_list_cpu_s": got_cpu["task list"],
        "floor_cpu_s": got_cpu["floor"],
        "x_floor_cpu": got_cpu["task list"] / got_cpu["floor"],
    }


def release(db: Path, dependents: int) -> dict[str, Any]:
    from cafleet import broker

    conn = connect(db)
    fleet = make_fleet(conn, 4, name="release", director_pane_id="%1")
    first = broker.create_task(
        conn,
        fleet_id=fleet.fleet_id,
        title="first",
        body="",
        creator_id=fleet.director_id,
        assignee_id=fleet.member_ids[0],
    ).task
    for i in range(dependents):
        broker.create_task(
            conn,
            fleet_id=fleet.fleet_id,
            title=f"after {i}",
            body="",
            creator_id=fleet.director_id,
            assignee_id=fleet.member_ids[i % len(fleet.member_ids)],
            after=[first.task_id],
        )
    broker.claim_task(conn, task_id=first.task_id, member_id=fleet.member_ids[0])
    t0 = time.perf_counter()
    change = broker.finish_task(
        conn, task_id=first.task_id, member_id=fleet.member_ids[0], result="done"
    )
    seconds = time.perf_counter() - t0
    ready = broker.task_board(conn, fleet.fleet_id, state="ready")
    return {
        "dependents": dependents,
        "released": len(ready),
        "messages": len(change.sent),
        "done_call_s": seconds,
    }


def run(
    tmp: Path,
    tasks: int,
    runs: int,
    dependents: int,
    messages: int,
    search_runs: int,
    postgres: bool = True,
) -> dict[str, Any]:
    db = tmp / "tasks" / "db" / "cafleet.db"
    setup_db(db)
    return {
        "load": os.getloadavg(),
        "task_list": task_list(db, tasks, runs),
        "release": release(db, dependents),
        "search": search.run(tmp, messages, search_runs, postgres),
    }


def render(r: dict[str, Any]) -> list[str]:
    t, rel = r["task_list"], r["release"]
    return [
        f"tasks (load {r['load'][0]:.1f}): task list --json of {t['tasks']:,} tasks "
        f"{t['task_list_s'] * 1000:.0f} ms wall ({t['x_floor']:.2f}x the floor), "
        f"{t['task_list_cpu_s'] * 1000:.0f} ms CPU ({t['x_floor_cpu']:.2f}x)",
        f"  one task done released {rel['released']}/{rel['dependents']} dependents and stored "
        f"{rel['messages']} messages in {rel['done_call_s'] * 1000:.0f} ms",
        *search.render(r["search"]),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.tasks")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes (seconds)")
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON")
    args = parser.parse_args(argv)
    sizes = (20, 1, 5, 200, 1) if args.smoke else (1000, 11, 100, 100_000, 11)
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["HOME"] = str(Path(tmp) / "home")
        # smoke: SQLite only (a PostgreSQL server costs more than the rest together)
        results = {
            "mode": "smoke" if args.smoke else "full",
            **run(Path(tmp), *sizes, postgres=not args.smoke),
        }
    text = json.dumps(results, indent=2)
    if args.out is not None:
        args.out.write_text(text + "\n")
    print("\n".join(render(results)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
