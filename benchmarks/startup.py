"""1. Whole-process wall time and peak RSS of short commands beside two floors.

Measured under two bytecode conditions, commands and floors alike:
- `cached`: PYTHONDONTWRITEBYTECODE unset and a warm-up run first, so every module (cafleet's
  included, even in an editable checkout) loads from __pycache__;
- `nocache`: PYTHONDONTWRITEBYTECODE=1, as this machine runs by default: site-packages still
  has its .pyc files from installation, but an editable checkout recompiles cafleet every run.
  PYTHONDONTWRITEBYTECODE only stops writing: Python still reads a `__pycache__` that exists.
  So when cafleet is a source checkout, this condition runs a copy of it without `__pycache__`
  (first on PYTHONPATH), and the result records whether any appeared meanwhile. The checkout's
  own bytecode stays: other processes (a test run's) keep using it.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Sequence
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

FLOORS = {
    "floor: import sqlite3": [sys.executable, "-c", "import sqlite3"],
    # docs/performance.md's floor: what any Click CLI over sqlite3 and JSON pays before doing anything.
    "floor: import click, sqlite3, json": [sys.executable, "-c", "import click, sqlite3, json"],
    "floor: import sqlalchemy, click": [sys.executable, "-c", "import sqlalchemy, click"],
}


def _prepare(db_path: Path, runs: int) -> dict[str, Any]:
    from cafleet.broker import send_message

    setup_db(db_path)
    conn = connect(db_path)
    try:
        fleet = make_fleet(conn, 2)
        sender, inbox_owner = fleet.director_id, fleet.member_ids[0]
        paneless = fleet.member_ids[1]
        for i in range(10):
            send_message(conn, from_member_id=sender, to_member_id=inbox_owner, text=f"pending {i}")
        # One fresh message per ack run (warm-ups included).
        ack_ids = [
            send_message(
                conn, from_member_id=inbox_owner, to_member_id=paneless, text="ack me"
            ).message_id
            for _ in range(2 * (runs + 1) + 2)
        ]
        trees = make_fleet(conn, 3, name="worktrees", director_pane_id="%1")
        # Ten members besides its Director and monitor: `member list` and `fleet show` of a
        # fleet of some size.
        ten = make_fleet(conn, 10, name="ten", director_pane_id="%3")
        # A member with a pane, run from that pane: the one-identity-per-pane check's case.
        panes = make_fleet(conn, 1, placed=True, name="panes", director_pane_id="%2")
        pane_member = panes.member_ids[0]
        for i in range(10):
            send_message(
                conn, from_member_id=panes.director_id, to_member_id=pane_member, text=f"p {i}"
            )
    finally:
        from cafleet.db.runtime import close_connection

        close_connection(conn)
    _give_worktrees(db_path, trees.member_ids)
    return {
        "worktree_fleet_id": trees.fleet_id,
        "ten_fleet_id": ten.fleet_id,
        "fleet_id": fleet.fleet_id,
        "sender": sender,
        "poll_member": inbox_owner,
        "paneless": paneless,
        "ack_ids": ack_ids,
        "show_id": ack_ids[0],
        "pane_member": pane_member,
        "pane_director": panes.director_id,
        # The member's own pane (its placement records no socket: any server's matches).
        "pane_env": {"TMUX": "/tmp/cafleet-bench-none,1,0", "TMUX_PANE": f"%{pane_member}"},
    }


def _give_worktrees(db_path: Path, member_ids: Sequence[int]) -> None:
    """A git repository beside the database with one worktree per member, recorded in
    `member_spawns` as `member create --worktree` records it (docs/worktrees.md): `member list`
    then runs git for each. One worktree has an uncommitted change, one a commit."""
    import json
    import sqlite3
    import subprocess

    repo = db_path.parent / "repo"
    repo.mkdir(parents=True, exist_ok=True)

    def git(*args: str, cwd: Path = repo) -> None:
        subprocess.run(
            ["git", "-c", "user.name=b", "-c", "user.email=b@b", *args],
            cwd=cwd,
            check=True,
            capture_output=True,
        )

    git("init", "-q", "-b", "main")
    for i in range(200):  # a checkout of some size for git status to scan
        (repo / f"f{i}.txt").write_text(f"{i}\n")
    git("add", ".")
    git("commit", "-qm", "first")
    rows = []
    for n, member_id in enumerate(member_ids):
        path = repo / ".cafleet" / "worktrees" / f"m{member_id}"
        git("worktree", "add", "-q", "-b", f"cafleet/m{member_id}", str(path), "main")
        if n == 1:
            (path / "f1.txt").write_text("changed\n")
        if n == 2:
            (path / "f2.txt").write_text("changed\n")
            git("commit", "-qam", "work", cwd=path)
        spec = {"path": str(path), "branch": f"cafleet/m{member_id}", "base": "main"}
        rows.append((member_id, json.dumps(spec)))
    conn = sqlite3.connect(db_path)
    try:
        conn.executemany("INSERT INTO member_spawns (member_id, worktree_json) VALUES (?, ?)", rows)
        conn.commit()
    finally:
        conn.close()


def commands(ctx: dict[str, Any]) -> dict[str, list[str]]:
    """Label -> argv after `cafleet`; `{ack}` is replaced by a fresh message id per run."""
    return {
        "--version": ["--version"],
        "fleet list": ["fleet", "list"],
        "member list": ["member", "list", str(ctx["fleet_id"])],
        "member list (3 worktrees)": ["member", "list", str(ctx["worktree_fleet_id"])],
        "member list (10 members)": ["member", "list", str(ctx["ten_fleet_id"])],
        "fleet show (10 members)": ["fleet", "show", str(ctx["ten_fleet_id"])],
        "message send (no pane)": [
            "message",
            "send",
            "--from-member-id",
            str(ctx["sender"]),
            "--to-member-id",
            str(ctx["paneless"]),
            "hello",
        ],
        "message poll (10 pending)": ["message", "poll", str(ctx["poll_member"])],
        "message ack": ["message", "ack", "{ack}"],
        "message show": ["message", "show", str(ctx["show_id"])],
        "message wait --timeout 0": [
            "message",
            "wait",
            str(ctx["poll_member"]),
            "--timeout",
            "0",
        ],
        # Run with `pane_env` (`PANE_LABELS`): TMUX_PANE names the member's own placement.
        "message poll (from its pane)": ["message", "poll", str(ctx["pane_member"])],
        "message send (from its pane)": [
            "message",
            "send",
            "--from-member-id",
            str(ctx["pane_member"]),
            "--to-member-id",
            str(ctx["pane_director"]),
            "hello",
        ],
    }


PANE_LABELS = ("message poll (from its pane)", "message send (from its pane)")


def cafleet_source_dir() -> Path | None:
    """The cafleet package directory when it is a source checkout (editable), else None."""
    import cafleet

    package = Path(cafleet.__file__).resolve().parent
    if any(part in ("site-packages", "dist-packages") for part in package.parts):
        return None
    return package


def bytecode_dirs(package: Path) -> list[Path]:
    return sorted(package.rglob("__pycache__"))


def source_copy(package: Path, root: Path) -> Path:
    """A copy of the checkout's package under ``root``, without bytecode: put ``root`` first on
    PYTHONPATH to run cafleet compiled on every run."""
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(package, root / package.name, ignore=shutil.ignore_patterns("__pycache__"))
    return root / package.name


def bytecode_note(condition: str, package: Path | None, reappeared: int) -> str:
    if package is None:
        return "cafleet installed from a wheel: its .pyc files from installation are used"
    if condition == "cached":
        return f"cafleet from the checkout {package}, warm __pycache__"
    if reappeared:
        return (
            f"cafleet from a copy of the checkout {package}: {reappeared} __pycache__ "
            "directories appeared during the runs (another process wrote them); figures may be low"
        )
    return f"cafleet from a copy of the checkout {package}, compiled on every run (no __pycache__)"


def run(tmp: Path, runs: int, only: Sequence[str] | None = None) -> dict[str, Any]:
    """``only``: the labels of `commands` to run (None: all); the floors always run."""
    db_path = tmp / "startup" / "cafleet.db"
    ctx = _prepare(db_path, runs)
    prefix, how = cafleet_argv()
    results: dict[str, Any] = {
        "invocation": how,
        "runs": runs,
        "conditions": {},
        "cafleet_bytecode": {},
    }
    package = cafleet_source_dir()
    uncompiled = None
    for condition in ("nocache", "cached"):
        env = base_env(db_path)
        if condition == "nocache":
            env["PYTHONDONTWRITEBYTECODE"] = "1"
            if package is not None:
                uncompiled = source_copy(package, tmp / "startup" / "uncompiled")
                env["PYTHONPATH"] = f"{uncompiled.parent}{os.pathsep}{env['PYTHONPATH']}"
                # `python -m cafleet` (no console script) puts the working directory, maybe
                # the checkout, before PYTHONPATH; safe-path mode leaves it out.
                env["PYTHONSAFEPATH"] = "1"
        else:
            env.pop("PYTHONDONTWRITEBYTECODE", None)
        cmds = {k: v for k, v in commands(ctx).items() if only is None or k in only}
        ack_iter = iter(ctx["ack_ids"][(runs + 1) * (condition == "nocache") :])
        argvs = {**FLOORS, **{k: prefix + v for k, v in cmds.items()}}
        times: dict[str, list[float]] = {label: [] for label in argvs}
        rss: dict[str, list[int]] = {label: [] for label in argvs}
        cpu: dict[str, list[float]] = {label: [] for label in argvs}
        # Rounds run every command once, in turn, so drift in machine load hits all alike;
        # round 0 warms the caches and is discarded.
        for round_no in range(runs + 1):
            for label, argv in argvs.items():
                real = [str(next(ack_iter)) if a == "{ack}" else a for a in argv]
                result = run_process(
                    real, {**env, **ctx["pane_env"]} if label in PANE_LABELS else env
                )
                if result.returncode != 0:
                    raise RuntimeError(f"{label} exited {result.returncode}: {real}")
                if round_no:
                    times[label].append(result.seconds)
                    rss[label].append(result.max_rss_kb)
                    cpu[label].append(result.cpu_seconds)
        table: dict[str, Any] = {
            label: {
                "median_s": median(times[label]),
                "min_s": min(times[label]),
                "peak_rss_kb": max(rss[label]),
                "median_cpu_s": median(cpu[label]),
            }
            for label in argvs
        }
        sqlite_floor = table["floor: import sqlite3"]["median_s"]
        sa_floor = table["floor: import sqlalchemy, click"]["median_s"]
        click_floor = table["floor: import click, sqlite3, json"]["median_s"]
        click_floor_cpu = table["floor: import click, sqlite3, json"]["median_cpu_s"]
        for row in table.values():
            row["x_sqlite3_floor"] = row["median_s"] / sqlite_floor
            row["x_click_sqlite3_json_floor"] = row["median_s"] / click_floor
            row["x_sqlalchemy_click_floor"] = row["median_s"] / sa_floor
            row["cpu_x_click_sqlite3_json_floor"] = row["median_cpu_s"] / click_floor_cpu
        results["conditions"][condition] = table
        reappeared = len(bytecode_dirs(uncompiled)) if uncompiled and condition == "nocache" else 0
        results["cafleet_bytecode"][condition] = bytecode_note(condition, package, reappeared)
    return results


def render(results: dict[str, Any]) -> list[str]:
    lines = [
        f"## 1. start-up ({results['invocation']}, median of {results['runs']} interleaved rounds; "
        "RSS includes a ~9 MB launcher floor)"
    ]
    for condition, table in results["conditions"].items():
        meaning = (
            "PYTHONDONTWRITEBYTECODE unset, warm __pycache__"
            if condition == "cached"
            else "PYTHONDONTWRITEBYTECODE=1 (machine default)"
        )
        lines.append(f"### bytecode {condition}: {meaning}")
        note = results.get("cafleet_bytecode", {}).get(condition)
        if note:
            lines.append(f"  ({note})")
        lines.append(
            f"  {'command':<34} {'median ms':>9} {'min ms':>8} {'RSS MB':>7} "
            f"{'x sqlite3':>9} {'x click+':>9} {'x sa+click':>10} {'cpu ms':>7} {'cpu x click+':>12}"
        )
        for label, row in table.items():
            lines.append(
                f"  {label:<34} {row['median_s'] * 1000:9.1f} {row['min_s'] * 1000:8.1f} "
                f"{row['peak_rss_kb'] / 1024:7.1f} {row['x_sqlite3_floor']:9.2f} "
                f"{row['x_click_sqlite3_json_floor']:9.2f} {row['x_sqlalchemy_click_floor']:10.2f} "
                f"{row.get('median_cpu_s', float('nan')) * 1000:7.1f} "
                f"{row.get('cpu_x_click_sqlite3_json_floor', float('nan')):12.2f}"
            )
    return lines
