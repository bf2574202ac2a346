"""Start-up of short commands, two checkouts side by side: `python scripts/startup_ab.py BEFORE AFTER
DB_DIR FLEET MEMBER [ROUNDS]` runs each command from each checkout (its PYTHONPATH) and the
`import click, sqlite3, json` floor in interleaved rounds, bytecode cached (a warm-up round
first), and prints the median and minimum of wall and CPU time and their ratios to the floor.
DB_DIR holds `cafleet.db` and the `home` the benchmark's setup made (benchmarks/startup.py).
On a loaded machine the minimum CPU time is the steadiest figure."""

from __future__ import annotations

import json
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.common import run_process  # noqa: E402

before, after, db_dir, fleet, member = sys.argv[1:6]
rounds = int(sys.argv[6]) if len(sys.argv) > 6 else 15
script = str(Path(sys.executable).with_name("cafleet"))
commands = {
    "fleet list": ["fleet", "list"],
    "fleet show": ["fleet", "show", fleet],
    "member list": ["member", "list", fleet],
    "message poll": ["message", "poll", member],
}
env = {k: v for k, v in os.environ.items() if not k.startswith(("CAFLEET_", "TMUX"))}
env.pop("PYTHONDONTWRITEBYTECODE", None)
env["HOME"] = str(Path(db_dir) / "home")
env["CAFLEET_DATABASE_URL"] = f"sqlite:///{Path(db_dir) / 'cafleet.db'}"
runs: dict[str, list[tuple[float, float]]] = {}
jobs = [("floor", [sys.executable, "-c", "import click, sqlite3, json"], env)]
for tree_name, tree in (("before", before), ("after", after)):
    for label, argv in commands.items():
        jobs.append((f"{label} ({tree_name})", [script, *argv], {**env, "PYTHONPATH": tree}))
for round_no in range(rounds + 1):
    for label, argv, job_env in jobs:
        result = run_process(argv, job_env)
        if result.returncode != 0:
            raise SystemExit(f"{label} exited {result.returncode}")
        if round_no:
            runs.setdefault(label, []).append((result.seconds, result.cpu_seconds))
floor = runs["floor"]
summary = {}
for label, values in runs.items():
    wall = [w for w, _ in values]
    cpu = [c for _, c in values]
    row = {
        "wall_median_ms": statistics.median(wall) * 1000,
        "wall_min_ms": min(wall) * 1000,
        "cpu_median_ms": statistics.median(cpu) * 1000,
        "cpu_min_ms": min(cpu) * 1000,
    }
    row["x_floor_wall_median"] = statistics.median(wall) / statistics.median(w for w, _ in floor)
    row["x_floor_cpu_min"] = min(cpu) / min(c for _, c in floor)
    row["x_floor_cpu_median"] = statistics.median(cpu) / statistics.median(c for _, c in floor)
    summary[label] = row
    print(
        f"{label:24} wall med {row['wall_median_ms']:7.1f} ms ({row['x_floor_wall_median']:.2f}x)"
        f"  cpu min {row['cpu_min_ms']:6.1f} ms ({row['x_floor_cpu_min']:.2f}x)"
        f"  cpu med {row['cpu_median_ms']:6.1f} ms ({row['x_floor_cpu_median']:.2f}x)"
    )
print(json.dumps({"rounds": rounds, "load": os.getloadavg(), "results": summary}))
