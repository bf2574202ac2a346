"""Review and merge at size (docs/performance.md §23), on real git repositories and a
real SQLite database at head, all under a temporary directory (HOME included):

1. Whole-process wall time of `cafleet task merge T` (console script, bytecode cached, no gate)
   on a repository of `--files` files, median over `--runs`, beside the `import click, sqlite3,
   json` floor, alternating runs. Each run merges a fresh done task whose member's branch (a
   member worktree made as `member create --worktree` makes it) changes `CHANGED` files; the
   merge checks out the whole tree in a temporary worktree, so its cost follows `--files`.
   Each round also merges one more task in this process, each git call timed: where it goes.
2. The collision check (`cafleet.monitor.collisions`) over `--worktrees` member worktrees, each
   with committed, uncommitted and untracked changes, two of them changing one path (the check
   must find exactly that collision): cold, as `fleet show` runs it (`current`), and warm, as
   the fleet loop's tick runs it with the fingerprints of the tick before (nothing moved).

The machine's load average and CPU and I/O pressure are recorded before and after each part.

python -m benchmarks.merge [--files 500] [--worktrees 10] [--runs N] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.common import (
    base_env,
    cafleet_argv,
    connect,
    make_fleet,
    median,
    run_process,
    setup_db,
)

if TYPE_CHECKING:
    from cafleet.db.runtime import Connection

FLOOR = [sys.executable, "-c", "import click, sqlite3, json"]
CHANGED = 3  # files a task's branch changes
DIRS = 20  # the repository's files are spread over this many directories
WARMUPS = 2  # merges (and floors) run first and dropped: bytecode cached


def git(cwd: Path | str, *args: str) -> str:
    proc = subprocess.run(
        ["git", *args], cwd=str(cwd), capture_output=True, text=True, check=False, timeout=60
    )
    if proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed in {cwd}: {proc.stderr.strip()}")
    return proc.stdout


def rel(i: int) -> str:
    return f"src/d{i % DIRS:02d}/file{i:05d}.txt"


def make_repo(path: Path, files: int) -> Path:
    """A repository with one commit on `main` of ``files`` text files of 20 lines each."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.name", "Bench")
    git(path, "config", "user.email", "bench@example.invalid")
    for i in range(files):
        f = path / rel(i)
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text("".join(f"file {i} line {n}\n" for n in range(20)))
    git(path, "add", "-A")
    git(path, "commit", "-qm", "first")
    return path


def add_worktree_member(conn: Connection, fleet_id: int, repo: Path, name: str) -> tuple[int, str]:
    """A member with its own worktree, made as `member create --worktree` makes it (the plan and
    `make` of `cafleet.workflows.worktrees`), its spawn recorded; no pane: (member id, path)."""
    from cafleet import broker
    from cafleet.records import SpawnSpec
    from cafleet.workflows import worktrees

    plan = worktrees.plan(fleet_id, name, worktrees.Request(wanted=True), directory=str(repo))
    worktrees.make(plan)
    member = broker.register_member(
        conn, fleet_id=fleet_id, name=name, description="benchmark member", role="member",
        placement=None, require_monitor=False,
        spawn=SpawnSpec(prompt=None, model=None, effort=None, worktree=plan.spec),
    )  # fmt: skip
    return member.member_id, plan.path


def append(path: Path | str, text: str) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(text)


def done_task(
    conn: Connection, fleet: Any, member: int, path: str, repo: Path, files: int, n: int
) -> int:
    """Task ``n``: the member's worktree catches up with `main`, changes `CHANGED` files and
    commits; the task is claimed and done with that HEAD recorded (as `task done` records it)."""
    from cafleet import broker
    from cafleet.records.tasks import GitWork

    git(path, "merge", "-q", "--ff-only", "main")
    for k in range(CHANGED):
        append(Path(path) / rel((n * CHANGED + k) % files), f"task {n}\n")
    git(path, "commit", "-qam", f"task {n}")
    head = git(path, "rev-parse", "HEAD").strip()
    branch = git(path, "branch", "--show-current").strip()
    task = broker.create_task(conn, fleet_id=fleet.fleet_id, title=f"task {n}", body="",
                              creator_id=fleet.director_id, assignee_id=member).task  # fmt: skip
    broker.claim_task(conn, task_id=task.task_id, member_id=member)
    work = GitWork(str(repo), branch, "main", head)
    broker.finish_task(conn, task_id=task.task_id, member_id=member, result="ok", git=work)
    return int(task.task_id)


def _git_call(args: Sequence[str]) -> str:
    """A git call's name: its command (`-c` pairs skipped), with a `worktree`'s subcommand."""
    rest = list(args)
    while rest[:1] == ["-c"]:
        rest = rest[2:]
    return " ".join(rest[:2]) if rest[:1] == ["worktree"] else rest[0]


class TimedGit:
    """Merges in this process (`review.merge`, what the command runs) with each call of
    `cafleet.git.run` timed, summed per git command over one merge."""

    def __init__(self, db: Path) -> None:
        import cafleet.git as cafleet_git
        from cafleet.config import load_settings

        self.module = cafleet_git
        self.original = cafleet_git.run
        self.settings = load_settings(base_env(db))
        self.calls: dict[str, float] = {}
        self.whole: list[float] = []
        self.per: dict[str, list[float]] = {}

    def run(
        self, args: Sequence[str], cwd: str, *, check: bool = True, timeout: float = 30.0
    ) -> subprocess.CompletedProcess[str]:
        start = time.perf_counter()
        try:
            return self.original(args, cwd, check=check, timeout=timeout)
        finally:
            name = _git_call(args)
            self.calls[name] = self.calls.get(name, 0.0) + time.perf_counter() - start

    def merge(self, conn: Connection, task_id: int, *, keep: bool) -> None:
        from cafleet.workflows import review

        self.calls.clear()
        self.module.run = self.run
        try:
            start = time.perf_counter()
            review.merge(conn, self.settings, task_id=task_id, warn=print)
            seconds = time.perf_counter() - start
        finally:
            self.module.run = self.original
        if keep:
            self.whole.append(seconds)
            for name, spent in self.calls.items():
                self.per.setdefault(name, []).append(spent)

    def result(self) -> dict[str, Any]:
        """Medians, seconds: a merge's whole time and its time per git command."""
        by_call = {name: median(v) for name, v in self.per.items()}
        return {
            "merge_s": median(self.whole),
            "git_s": dict(sorted(by_call.items(), key=lambda kv: -kv[1])),
        }


def merge_cost(db: Path, repo: Path, files: int, runs: int) -> dict[str, Any]:
    """Per round: a task merged by `cafleet task merge`, the floor, a task merged in process."""
    load_before, pressure_before = os.getloadavg(), pressure()
    conn = connect(db)
    fleet = make_fleet(conn, 0, name="merge")
    member, path = add_worktree_member(conn, fleet.fleet_id, repo, "worker")
    env = base_env(db)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # bytecode cached
    argv, how = cafleet_argv()
    in_process = TimedGit(db)
    times: dict[str, list[float]] = {"merge": [], "floor": []}
    cpu: dict[str, list[float]] = {"merge": [], "floor": []}
    for n in range(WARMUPS + runs):
        task = done_task(conn, fleet, member, path, repo, files, 2 * n)
        for label, cmd in (("merge", [*argv, "task", "merge", str(task)]), ("floor", FLOOR)):
            done = run_process(cmd, env)
            assert done.returncode == 0, (label, done)
            if label == "merge":
                assert done.stdout.startswith(f"Task {task} merged into main as ".encode()), done
            times[label].append(done.seconds)
            cpu[label].append(done.cpu_seconds)
        task = done_task(conn, fleet, member, path, repo, files, 2 * n + 1)
        in_process.merge(conn, task, keep=n >= WARMUPS)
    merges = int(git(repo, "rev-list", "--count", "--merges", "main"))
    assert merges == 2 * (WARMUPS + runs), merges  # every one merged, into the Director's checkout
    assert git(repo, "status", "--porcelain") == ""
    wall = {k: median(v[WARMUPS:]) for k, v in times.items()}
    used = {k: median(v[WARMUPS:]) for k, v in cpu.items()}
    return {
        "how": how,
        "runs": runs,
        "changed_files": CHANGED,
        "merge_s": wall["merge"],
        "floor_s": wall["floor"],
        "x_floor": wall["merge"] / wall["floor"],
        "merge_cpu_s": used["merge"],
        "floor_cpu_s": used["floor"],
        "x_floor_cpu": used["merge"] / used["floor"],
        "merge_runs_s": times["merge"][WARMUPS:],
        "in_process": in_process.result(),
        "load_before": load_before,
        "pressure_before": pressure_before,
        "load_after": os.getloadavg(),
        "pressure_after": pressure(),
    }


def pressure() -> dict[str, float] | None:
    """The kernel's CPU and I/O pressure (`some` avg60, % of time tasks waited), if it has it."""
    found = {}
    for kind in ("cpu", "io"):
        try:
            with open(f"/proc/pressure/{kind}", encoding="ascii") as f:
                some = f.readline().split()
        except OSError:
            return None
        found[f"{kind}_some_avg60"] = float(some[2].split("=")[1])
    return found


def collision_cost(db: Path, repo: Path, worktrees: int, runs: int) -> dict[str, Any]:
    """Each member commits changes to two files of its own, leaves a third changed and adds an
    untracked file; the first two members both change the repository's first file too (one
    committed, one not): exactly one collision."""
    from cafleet.monitor.collisions import Seen, collisions, current

    load_before, pressure_before = os.getloadavg(), pressure()
    conn = connect(db)
    fleet = make_fleet(conn, 0, name="collisions", director_pane_id="%1")
    members = []
    for i in range(worktrees):
        member, path = add_worktree_member(conn, fleet.fleet_id, repo, f"w{i}")
        own = [rel(1 + 3 * i + k) for k in range(3)]
        for f in own[:2]:
            append(Path(path) / f, f"member {i}\n")
        if i == 0:
            append(Path(path) / rel(0), "member 0\n")
        git(path, "commit", "-qam", f"member {i}")
        append(Path(path) / own[2], "uncommitted\n")
        (Path(path) / f"new-{i}.txt").write_text("untracked\n")
        if i == 1:
            append(Path(path) / rel(0), "member 1, uncommitted\n")
        members.append(member)
    expected = [((members[0], members[1]), (rel(0),))]
    cold: list[float] = []
    for _ in range(runs + 1):  # the first call warms git's and the OS's caches; dropped
        start = time.perf_counter()
        found = current(conn, fleet.fleet_id)
        cold.append(time.perf_counter() - start)
        assert [(c.members, c.paths) for c in found] == expected, found
    seen = Seen()
    collisions(conn, fleet.fleet_id, seen)
    warm: list[float] = []
    for _ in range(runs):
        start = time.perf_counter()
        found = collisions(conn, fleet.fleet_id, seen)
        warm.append(time.perf_counter() - start)
        assert [(c.members, c.paths) for c in found] == expected, found
    return {
        "worktrees": worktrees,
        "runs": runs,
        "changed_per_worktree": 4,
        "found": [{"members": list(m), "paths": list(p)} for m, p in expected],
        "fleet_show_s": median(cold[1:]),
        "tick_s": median(warm),
        "load_before": load_before,
        "pressure_before": pressure_before,
        "load_after": os.getloadavg(),
        "pressure_after": pressure(),
    }


def run(tmp: Path, files: int, worktrees: int, runs: int) -> dict[str, Any]:
    db = tmp / "db" / "cafleet.db"
    setup_db(db)
    return {
        "files": files,
        "git": git(tmp, "--version").strip(),
        "merge": merge_cost(db, make_repo(tmp / "merge-repo", files), files, runs),
        "collisions": collision_cost(db, make_repo(tmp / "collision-repo", files), worktrees, runs),
    }


def render(r: dict[str, Any]) -> list[str]:
    m, c = r["merge"], r["collisions"]
    top = m["in_process"]["git_s"]
    load = f"load {m['load_before'][0]:.1f} -> {m['load_after'][0]:.1f}"
    return [
        f"task merge ({m['how']}, {r['files']} files, {m['changed_files']} changed, {load}): "
        f"{m['merge_s'] * 1000:.0f} ms median wall ({m['x_floor']:.1f}x the floor "
        f"{m['floor_s'] * 1000:.0f} ms), {m['merge_cpu_s'] * 1000:.0f} ms CPU "
        f"({m['x_floor_cpu']:.1f}x)",
        f"  in process: {m['in_process']['merge_s'] * 1000:.0f} ms, of it "
        + ", ".join(f"git {k} {v * 1000:.0f} ms" for k, v in list(top.items())[:4]),
        f"collision check ({c['worktrees']} worktrees, load {c['load_before'][0]:.1f} -> "
        f"{c['load_after'][0]:.1f}): fleet show {c['fleet_show_s'] * 1000:.1f} ms, a loop tick "
        f"{c['tick_s'] * 1000:.1f} ms; found {c['found']}",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.merge")
    parser.add_argument("--files", type=int, default=500, help="files in the repository")
    parser.add_argument("--worktrees", type=int, default=10, help="member worktrees (>= 2)")
    parser.add_argument("--runs", type=int, default=11, help="measured runs of each")
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON")
    args = parser.parse_args(argv)
    if args.worktrees < 2 or args.files < 3 * args.worktrees + 1 or args.runs < 1:
        parser.error("need --worktrees >= 2, --files >= 3 x --worktrees + 1, --runs >= 1")
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["HOME"] = str(Path(tmp) / "home")  # git and cafleet read nothing of the user's
        results = {
            "command": " ".join(["python -m benchmarks.merge", *(argv or sys.argv[1:])]),
            "runs": args.runs,
            **run(Path(tmp), args.files, args.worktrees, args.runs),
        }
    text = json.dumps(results, indent=2)
    if args.out is not None:
        args.out.write_text(text + "\n")
    print("\n".join(render(results)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
