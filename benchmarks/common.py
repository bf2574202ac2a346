"""Shared pieces of the benchmark harness: temp databases, fleets without tmux, process timing."""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cafleet.db.runtime import Connection

REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class FakePane:
    session: str
    window_id: str
    pane_id: str


@dataclass(frozen=True)
class BenchFleet:
    fleet_id: int
    director_id: int
    monitor_id: int
    member_ids: tuple[int, ...]


# The coding agents' own configuration variables (cafleet/assets/targets.py): removed, so each
# agent's directory is under the benchmark's own HOME and nothing touches the user's.
AGENT_VARIABLES = ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "OPENCODE_CONFIG_DIR", "XDG_CONFIG_HOME")


def bench_home(db_path: Path | str) -> Path:
    """The HOME every benchmark command runs with: beside its temporary database (for a
    PostgreSQL database, `tests.pg_server.PgDb`, beside its server's directory)."""
    from tests.pg_server import PgDb

    if isinstance(db_path, PgDb):
        return db_path.server.dir / f"home-{db_path.name}"
    return Path(db_path).parent / "home"


def database_url(db_path: Path | str) -> str:
    """CAFLEET_DATABASE_URL for a database file, or a PostgreSQL database's URL (with its
    password: the benchmark's own throw-away server)."""
    from tests.pg_server import PgDb

    if isinstance(db_path, PgDb):
        return db_path.url
    return f"sqlite:///{db_path}"


def base_env(db_path: Path | str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("CAFLEET_", "TMUX")) and k not in AGENT_VARIABLES
    }
    env["HOME"] = str(bench_home(db_path))
    env["CAFLEET_DATABASE_URL"] = database_url(db_path)
    env["PYTHONPATH"] = str(REPO) + (
        os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""
    )
    return env


def use_db(db_path: Path | str) -> None:
    """Point this process at `db_path` (the repository functions take paths from settings; a
    PostgreSQL connection reads its password from there)."""
    os.environ["CAFLEET_DATABASE_URL"] = database_url(db_path)


def setup_db(db_path: Path | str) -> None:
    """`cafleet setup`'s two halves: the database, and every agent's assets installed under
    `bench_home` and recorded, so the stale-assets guard lets the measured commands run."""
    import cafleet
    from cafleet.assets.setup import run_assets_half
    from cafleet.db.migrate import run_setup

    if not isinstance(db_path, Path):
        use_db(db_path)
    run_setup(str(db_path))
    bench_home(db_path).mkdir(parents=True, exist_ok=True)
    results = run_assets_half(
        ("claude", "codex", "opencode"),
        db_path=str(db_path),
        record=True,
        version=cafleet.__version__,
        env=base_env(db_path),
    )
    failed = [f"{r.coding_agent}: {r.error}" for r in results if not r.ok]
    if failed:
        raise RuntimeError(f"assets half failed: {failed}")


def connect(db_path: Path | str) -> Connection:
    from cafleet.cli.guard import open_validated_connection

    if not isinstance(db_path, Path):
        use_db(db_path)  # a PostgreSQL database: the password comes from the URL

    return open_validated_connection(str(db_path))


def make_fleet(
    conn: Connection,
    members: int,
    *,
    placed: bool = False,
    name: str = "bench",
    director_pane_id: str = "%0",
) -> BenchFleet:
    """A fleet whose monitor 'pane' is fake: no tmux is involved (the spawn is a callback)."""
    from cafleet.broker import create_fleet, register_member, set_placement_pane
    from cafleet.records import PlacementSpec

    boot = create_fleet(
        conn,
        name=name,
        backend="tmux",
        coding_agent="claude",
        director_pane=FakePane("bench", "@0", director_pane_id),
        spawn_monitor=lambda f, d, m: FakePane("bench", "@0", f"%{m}00"),
    )
    ids = []
    for i in range(members):
        placement = (
            PlacementSpec(
                mux_session="bench", mux_window_id="@0", backend="tmux", coding_agent="codex"
            )
            if placed
            else None
        )
        member = register_member(
            conn,
            fleet_id=boot.fleet.fleet_id,
            name=f"worker-{i}",
            description="benchmark member",
            role="member",
            placement=placement,
            require_monitor=True,
        )
        if placed:
            set_placement_pane(conn, member_id=member.member_id, pane_id=f"%{member.member_id}")
        ids.append(member.member_id)
    return BenchFleet(
        boot.fleet.fleet_id, boot.director.member_id, boot.monitor.member_id, tuple(ids)
    )


def cafleet_argv() -> tuple[list[str], str]:
    """How an agent runs cafleet: the console script when installed, else `python -m cafleet`.

    The script beside this interpreter comes first: a version manager's shim found on PATH
    (pyenv's is a shell script) would add its own start-up to every command but not to the
    floors, which run this interpreter directly."""
    beside = Path(sys.executable).with_name("cafleet")
    if beside.is_file() and os.access(beside, os.X_OK):
        return [str(beside)], "console script"
    script = shutil.which("cafleet")
    if script:
        return [script], "console script"
    return [sys.executable, "-m", "cafleet"], "python -m cafleet"


@dataclass(frozen=True)
class ProcessRun:
    seconds: float
    max_rss_kb: int
    returncode: int
    stdout: bytes
    # The command's own user+system CPU time: far less sensitive than wall time to other
    # processes competing for the machine's cores.
    cpu_seconds: float = float("nan")


# Linux keeps a forked child's peak RSS at least as high as its parent's at fork time (the
# high-water mark survives exec), so measuring straight from this process would report our own
# size for every command. A small launcher forks the command from a fresh interpreter, times
# it, and reports the grandchild's own rusage.
_LAUNCHER = r"""
import os, sys, time
report_fd, argv = int(sys.argv[1]), sys.argv[2:]
start = time.perf_counter()
pid = os.fork()
if pid == 0:
    os.execvp(argv[0], argv)
_, status, usage = os.wait4(pid, 0)
elapsed = time.perf_counter() - start
cpu = usage.ru_utime + usage.ru_stime
os.write(report_fd, f"{elapsed} {usage.ru_maxrss} {os.waitstatus_to_exitcode(status)} {cpu}".encode())
"""


def run_process(argv: Sequence[str], env: Mapping[str, str]) -> ProcessRun:
    """Whole-process wall time and the command's own peak RSS (see _LAUNCHER)."""
    read_fd, write_fd = os.pipe()
    proc = subprocess.Popen(
        [sys.executable, "-S", "-c", _LAUNCHER, str(write_fd), *argv],
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        pass_fds=(write_fd,),
    )
    os.close(write_fd)
    out, _ = proc.communicate()
    with os.fdopen(read_fd, "rb") as report:
        seconds, rss, code, cpu = report.read().decode().split()
    return ProcessRun(float(seconds), int(rss), int(code), out, float(cpu))


def percentile(values: Sequence[float], pct: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = (len(ordered) - 1) * pct / 100
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")
