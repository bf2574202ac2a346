"""Tasks at scale (docs/performance.md): `python -m benchmarks.tasks [--smoke]`.

- `task list --json` of a fleet with N tasks (1,000 by default), whole-process median, beside
  the `import click, sqlite3, json` floor, alternating runs, bytecode cached; the target is
  <= 1.5x the floor.
- One `task done` whose task 100 waiting tasks come after: how many it releases (all, in the
  same transaction: no tick is needed) and how long the call takes in-process.
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
    for _ in range(runs + 1):  # the first round warms the bytecode cache and is dropped
        for label, cmd in (("task list", listing), ("floor", floor)):
            run = run_process(cmd, env)
            assert run.returncode == 0, label
            times[label].append(run.seconds)
    got = {label: median(values[1:]) for label, values in times.items()}
    return {
        "tasks": tasks,
        "runs": runs,
        "how": how,
        "task_list_s": got["task list"],
        "floor_s": got["floor"],
        "x_floor": got["task list"] / got["floor"],
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.tasks")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes (seconds)")
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON")
    args = parser.parse_args(argv)
    tasks, runs, dependents = (20, 1, 5) if args.smoke else (1000, 11, 100)
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "db" / "cafleet.db"
        db.parent.mkdir()
        os.environ["HOME"] = str(Path(tmp) / "home")
        setup_db(db)
        results = {
            "mode": "smoke" if args.smoke else "full",
            "load": os.getloadavg(),
            "task_list": task_list(db, tasks, runs),
            "release": release(db, dependents),
        }
    text = json.dumps(results, indent=2)
    if args.out is not None:
        args.out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
