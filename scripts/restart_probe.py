"""Restart probes (docs/runtime.md §1.8, §5.11), run by hand against the checkout they sit in
(copy the file into another checkout to measure that one's code):

    python scripts/restart_probe.py misdirection [--restarts N]
    python scripts/restart_probe.py restores [--runs N] [--dialect sqlite|postgresql]

`misdirection`: a fleet (the Director, the monitor, members alpha and beta) on a private tmux
server with the fake agents (tests/harness); its foreground loop ticks every second and wakes
the monitor every second. Each round kills the server and starts a new one on the same socket
with the same session name and as many panes as it takes for every placement's pane id to be
taken again: alpha's old id gets a plain bash (its history file counts what it ran), the other
placements' ids a fake agent, the ids between them a `sleep`. Then, from `%0`, each
member gets a `message send`, a `member prompt` and a `member ping`, the Director broadcasts, and
the loop has 4 s. Every line that reached a pane of the new server is foreign: none of them is
a member's. Then `fleet restore` brings the fleet back on the new server for the next round.

`restores`: each run kills the fleet's server, starts a new one on the same socket (one fake
agent pane), and starts two `fleet restore` in that pane at the same moment; then it counts the
live agents of each member (a fake agent's `--name`). One agent per member is right.

Both print one JSON line of totals at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ["PYTHONPATH"] = str(REPO) + (
    os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else ""
)

CLEARED = (
    "CAFLEET_DATABASE_URL",
    "CAFLEET_MONITOR_WAKE_INTERVAL",
    "CAFLEET_PANE_LOCK_TIMEOUT",
    "CAFLEET_TMUX_FAULTS",
    "TMUX",
    "TMUX_PANE",
    "CLAUDE_CONFIG_DIR",
    "CODEX_HOME",
    "OPENCODE_CONFIG_DIR",
    "XDG_CONFIG_HOME",
)


@contextlib.contextmanager
def harness(database_url: str | None = None) -> Iterator[Any]:
    """A private tmux server with fake agents (tests/harness/fixtures.py), a private HOME and
    database, set up."""
    import pytest

    from tests.harness.fixtures import private_tmux

    home = Path(tempfile.mkdtemp(prefix="cafleet-probe-"))
    with pytest.MonkeyPatch.context() as mp:
        for name in CLEARED:
            mp.delenv(name, raising=False)
        mp.setenv("HOME", str(home))
        mp.setenv("CAFLEET_DATABASE_URL", database_url or f"sqlite:///{home}/db/cafleet.db")
        try:
            with private_tmux(mp) as h:
                ok(h.cli("setup"))
                yield h
        finally:
            shutil.rmtree(home, ignore_errors=True)


def ok(result: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    if result.returncode != 0:
        raise SystemExit(f"command failed ({result.returncode}): {result.stdout}{result.stderr}")
    return result


def fleet(h: Any, members: list[str]) -> tuple[int, int]:
    """A fleet with ``members``; its loop stopped (the probes run their own). (fleet, Director)."""
    from tests.fleet_helpers import create_member, stop_loop

    out = ok(h.cli("fleet", "create", "--name", "probe", "--coding-agent", "claude")).stdout
    found = re.match(r"(\d+) director=(\d+) monitor=(\d+)", out)
    assert found is not None, out
    fleet_id, director = int(found[1]), int(found[2])
    stop_loop(h, fleet_id)
    for name in members:
        create_member(h, fleet_id, name)
    return fleet_id, director


def new_server(h: Any, commands: list[list[str]]) -> dict[str, str]:
    """Kill ``h``'s server, start a new one on its socket with its session name, one pane per
    command in the first window (taking the old ids); the CLI environment of the first."""
    from tests.harness.util import pid_alive

    pid = h.tmux("display-message", "-p", "#{pid}", check=False).strip()
    h.tmux("kill-server", check=False)
    deadline = time.monotonic() + 10
    while pid.isdigit() and pid_alive(int(pid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    for log in h.fake_dir.glob("*.jsonl"):
        log.unlink()
    base = [h.real_tmux, "-S", h.socket_path, "-f", "/dev/null"]
    subprocess.run(
        [*base, "new-session", "-d", "-s", h.session_name, "-x", "400", "-y", "200", "-c",
         str(h.project_dir), *commands[0]],
        env=h.server_env, check=True, capture_output=True, timeout=15,
    )  # fmt: skip
    for command in commands[1:]:
        h.tmux("split-window", "-d", "-t", f"={h.session_name}:", "--", *command)
        h.tmux("select-layout", "-t", f"={h.session_name}:", "tiled", check=False)
    first = h.tmux("display-message", "-p", "-t", f"={h.session_name}:", "#{pid}|#{pane_id}")
    server, pane = first.strip().split("|")
    time.sleep(1.0)  # the new panes draw their prompts
    return {"TMUX": f"{h.socket_path},{server},0", "TMUX_PANE": pane}


def fake_lines(h: Any) -> list[str]:
    """Every line the new server's fake agents logged, as `<pane>: <text>`."""
    from tests.harness.util import read_jsonl

    return [
        f"{log.stem.replace('p', '%', 1)}: {r.get('text')!r}"
        for log in sorted(h.fake_dir.glob("*.jsonl"))
        for r in read_jsonl(log)
        if r.get("kind") == "line"
    ]


def misdirection(restarts: int) -> dict[str, Any]:
    with harness() as h:
        fleet_id, director = fleet(h, ["alpha", "beta"])
        members = [
            int(r[0])
            for r in h.sqlite(
                "SELECT member_id FROM members WHERE name IN ('alpha', 'beta') ORDER BY member_id"
            )
        ]
        history = h.dir / "shell-history"
        shell = ["env", f"HISTFILE={history}", "PROMPT_COMMAND=history -a", "bash", "--norc", "-i"]
        claude = [str(h.bin_dir / "claude")]

        def layout() -> list[list[str]]:
            """One pane per old id up to the highest placement's: alpha's runs the shell, the
            other placements' a fake agent, the ids between them a plain `sleep`."""
            ids = dict(h.sqlite("SELECT member_id, mux_pane_id FROM member_placements"))
            taken = {int(str(pane).lstrip("%")): member for member, pane in ids.items()}
            panes = []
            for n in range(max(taken) + 1):
                member = taken.get(n)
                if member is None:
                    panes.append(["sleep", "100000"])
                else:
                    panes.append(shell if member == members[0] else claude)
            return panes

        totals = {"restarts": 0, "attempts": 0, "foreign_lines": 0, "shell_lines": 0}
        for _ in range(restarts):
            loop = h.popen_cli("monitor", str(fleet_id), "--tick", "1", "--interval", "1")
            time.sleep(2.0)  # it ticks on the fleet's own server first
            history.unlink(missing_ok=True)
            here = new_server(h, layout())
            attempts = 0
            for member in members:
                for args in (
                    ("message", "send", "--from-member-id", str(director), "--to-member-id",
                     str(member), f"for {member}"),
                    ("member", "prompt", str(member), f"prompt {member}"),
                    ("member", "ping", str(member)),
                ):  # fmt: skip
                    h.cli(*args, env=here, timeout=60)
                    attempts += 1
            h.cli("message", "broadcast", "--from-member-id", str(director), "everyone",
                  env=here, timeout=60)  # fmt: skip
            attempts += 1
            time.sleep(4.0)  # the loop that ran before the restart ticks on
            with contextlib.suppress(ProcessLookupError):
                loop.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                loop.wait(timeout=10)
            ran = history.read_text().splitlines() if history.exists() else []
            lines = fake_lines(h) + [f"bash: {line!r}" for line in ran]
            shell_lines, foreign = len(ran), len(lines)
            totals["restarts"] += 1
            totals["attempts"] += attempts
            totals["foreign_lines"] += foreign
            totals["shell_lines"] += shell_lines
            print(json.dumps({"round": totals["restarts"], "foreign_lines": foreign,
                              "shell_lines": shell_lines, "lines": lines}), flush=True)  # fmt: skip
            began = time.monotonic()
            restored = h.cli("fleet", "restore", str(fleet_id), env=here, timeout=600)
            print(f"restore: exit {restored.returncode} in {time.monotonic() - began:.1f} s: "
                  f"{restored.stdout.strip()!r} {restored.stderr.strip()!r}", file=sys.stderr,
                  flush=True)  # fmt: skip
            h.cli("monitor", "stop", str(fleet_id), env=here, timeout=60)
        return totals


def agents(h: Any) -> dict[str, int]:
    """Live fake agents per `--name` on ``h``'s server now."""
    from tests.harness.util import read_jsonl

    counts: dict[str, int] = {}
    for pane in sorted(h.live_panes()):
        pid = int(h.pane_format(pane, "#{pane_pid}"))
        path = h.fake_dir / f"{pane.replace('%', 'p')}.jsonl"
        deadline = time.monotonic() + 15
        start = None
        while start is None and time.monotonic() < deadline:
            starts = [r for r in read_jsonl(path) if r.get("kind") == "start" and r["pid"] == pid]
            start = starts[-1] if starts else None
            if start is None:
                time.sleep(0.1)
        argv = [] if start is None else start["argv"]
        if "--name" in argv:
            name = argv[argv.index("--name") + 1]
            counts[name] = counts.get(name, 0) + 1
    return counts


def restores(runs: int, dialect: str) -> dict[str, Any]:
    server = None
    url = None
    if dialect == "postgresql":
        from tests.pg_server import PgDb, start_server

        server = start_server()
        if server is None:
            raise SystemExit("PostgreSQL server binaries not found")
        url = PgDb(server, server.new_database()).url
    try:
        with harness(url) as h:
            fleet_id, _director = fleet(h, ["alpha", "beta"])
            totals: dict[str, Any] = {"dialect": dialect, "runs": 0, "members": 0,
                                      "members_with_two_or_more": 0, "max_agents": 0,
                                      "failed_restores": 0}  # fmt: skip
            for _ in range(runs):
                here = new_server(h, [[str(h.bin_dir / "claude")]])
                both = [h.popen_cli("fleet", "restore", str(fleet_id), env=here) for _ in range(2)]
                for proc in both:
                    proc.wait(timeout=180)
                counts = agents(h)
                totals["runs"] += 1
                totals["members"] += 3
                totals["members_with_two_or_more"] += sum(1 for n in counts.values() if n > 1)
                totals["max_agents"] = max([totals["max_agents"], *counts.values()])
                totals["failed_restores"] += sum(1 for p in both if p.returncode != 0)
                print(json.dumps({"run": totals["runs"], "agents": counts,
                                  "exits": [p.returncode for p in both]}), flush=True)  # fmt: skip
            return totals
    finally:
        if server is not None:
            server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="probe", required=True)
    one = sub.add_parser("misdirection")
    one.add_argument("--restarts", type=int, default=10)
    two = sub.add_parser("restores")
    two.add_argument("--runs", type=int, default=10)
    two.add_argument("--dialect", choices=("sqlite", "postgresql"), default="sqlite")
    args = parser.parse_args()
    if args.probe == "misdirection":
        print(json.dumps(misdirection(args.restarts)))
    else:
        print(json.dumps(restores(args.runs, args.dialect)))


if __name__ == "__main__":
    main()
