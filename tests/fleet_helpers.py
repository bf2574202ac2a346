"""Helpers for the fleet / member / monitor tests that run against the private tmux server."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sqlite3
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cafleet.config import monitor_hold_path, monitor_log_path
from tests.cli_helpers import call_run
from tests.harness.fixtures import SESSION, TmuxHarness
from tests.harness.util import pid_alive, retry_until

START_RE = re.compile(
    r"^monitor loop started \(fleet (\d+), tick (\d+)s, wake interval (\d+)s, pid (\d+)\)$"
)
TS = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00"


@dataclass
class FleetIds:
    fleet_id: int
    director_id: int
    monitor_id: int
    loop_pid: int
    monitor_pane: str


def ok(result: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert result.returncode == 0, (result.returncode, result.stdout, result.stderr)
    return result


def create_fleet(
    h: TmuxHarness, *extra: str, name: str = "demo", agent: str = "claude"
) -> FleetIds:
    """`fleet create` from the Director pane's environment; returns the ids it printed."""
    result = ok(h.cli("fleet", "create", "--name", name, "--coding-agent", agent, *extra))
    first, second = result.stdout.splitlines()
    m = re.fullmatch(r"(\d+) director=(\d+) monitor=(\d+)", first)
    assert m, result.stdout
    m2 = re.fullmatch(r"monitor loop: pid (\d+)", second)
    assert m2, result.stdout
    fleet_id, director_id, monitor_id = (int(x) for x in m.groups())
    pane = h.sqlite("SELECT mux_pane_id FROM member_placements WHERE member_id = ?", monitor_id)
    return FleetIds(fleet_id, director_id, monitor_id, int(m2.group(1)), pane[0][0])


def create_member(
    h: TmuxHarness,
    fleet_id: int,
    name: str,
    prompt: str = "hello {member_id}",
    *extra: str,
    env: dict[str, str] | None = None,
) -> tuple[int, str]:
    result = ok(
        h.cli(
            "member",
            "create",
            "--fleet-id",
            str(fleet_id),
            "--name",
            name,
            "--description",
            f"{name} member",
            *extra,
            prompt,
            env=env,
        )
    )
    m = re.fullmatch(r"(\d+) (.+) agent=(\w+) pane=(%\d+)\n", result.stdout)
    assert m, result.stdout
    return int(m.group(1)), m.group(4)


def runtime_row(h: TmuxHarness, fleet_id: int) -> dict[str, Any] | None:
    rows = h.sqlite(
        "SELECT pid, started_at, last_tick_at, tick_seconds, last_wake_at, wake_interval_seconds,"
        " wake_requested_at FROM monitor_runtime WHERE fleet_id = ?",
        fleet_id,
    )
    if not rows:
        return None
    keys = (
        "pid",
        "started_at",
        "last_tick_at",
        "tick_seconds",
        "last_wake_at",
        "wake_interval_seconds",
        "wake_requested_at",
    )
    return dict(zip(keys, rows[0], strict=True))


def stop_loop(h: TmuxHarness, fleet_id: int, timeout: float = 10) -> None:
    """Hold the fleet's loop stopped as `cafleet monitor stop` does (so no command's healing
    restarts it), SIGTERM it (the pid in its row) and wait until the slot is released."""
    Path(monitor_hold_path(str(h.db_path), fleet_id)).write_text("test\n", encoding="utf-8")
    row = runtime_row(h, fleet_id)
    if row is None or row["pid"] is None:
        return
    pid = int(row["pid"])
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    retry_until(lambda: not pid_alive(pid), timeout=timeout, message=f"loop {pid} still running")
    retry_until(
        lambda: (r := runtime_row(h, fleet_id)) is None or r["pid"] is None,
        timeout=timeout,
        message="slot not released",
    )


def log_path(h: TmuxHarness, fleet_id: int) -> Path:
    return Path(monitor_log_path(str(h.db_path), fleet_id))


def log_lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8", errors="replace").splitlines()
    except FileNotFoundError:
        return []


def table_dump(h: TmuxHarness, *, skip: tuple[str, ...] = ("monitor_runtime",)) -> dict[str, Any]:
    """Every row of every application table (the logical "unchanged" check)."""
    dump: dict[str, Any] = {}
    for table in ("fleets", "members", "member_placements", "messages", "monitor_runtime"):
        if table in skip:
            continue
        dump[table] = h.sqlite(f"SELECT * FROM {table} ORDER BY 1")
    return dump


def sql_write(h: TmuxHarness, sql: str, *params: Any) -> None:
    """A direct write with plain sqlite3 (for fault set-ups the CLI cannot produce)."""
    conn = sqlite3.connect(str(h.db_path), timeout=10, isolation_level=None)
    try:
        conn.execute(sql, params)
    finally:
        conn.close()


def wait_log(path: Path, pattern: str, timeout: float = 10) -> list[str]:
    """Wait until some line of the log matches ``pattern`` (a regex); return all lines."""
    rx = re.compile(pattern)

    def found() -> list[str] | None:
        lines = log_lines(path)
        return lines if any(rx.search(x) for x in lines) else None

    return retry_until(
        found,
        timeout=timeout,
        message=lambda: f"no line matching {pattern!r} in {path}: {log_lines(path)[-8:]}",
    )


def inproc(
    *argv: str, env: dict[str, str | None] | None = None, stdin: bytes = b""
) -> subprocess.CompletedProcess[str]:
    """`cafleet.cli.run(argv)` in this process (docs/cli.md §1.8), for refusals that need no tmux.

    The test process never has TMUX/TMUX_PANE set, so these runs are "outside tmux". ``env``
    overrides variables for the duration (None removes one).
    """
    return call_run(*argv, stdin=stdin, env=env)


def popen_paused_at(h: TmuxHarness, command: str, *args: str) -> tuple[subprocess.Popen[str], Path]:
    """Start `cafleet <args>` with the tmux `command` paused, and return once it is reached.

    Touching the returned path lets the paused command go on.
    """
    release = h.dir / f"release-{command}"
    calls = len(h.shim_calls())
    h.set_faults([{"command": command, "action": "pause_until", "path": str(release)}])
    proc = h.popen_cli(*args)
    retry_until(lambda: any(c["command"] == command for c in h.shim_calls()[calls:]), timeout=15)
    return proc, release


@dataclass
class Loop:
    proc: subprocess.Popen[str]
    out: Path
    err: Path

    def lines(self) -> list[str]:
        return log_lines(self.out)

    def stderr(self) -> str:
        return self.err.read_text(encoding="utf-8", errors="replace") if self.err.exists() else ""

    def wait_line(self, pattern: str, timeout: float = 10) -> list[str]:
        return wait_log(self.out, pattern, timeout)

    def count(self, pattern: str) -> int:
        rx = re.compile(pattern)
        return sum(1 for line in self.lines() if rx.search(line))

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 10) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout=timeout)


_loop_counter = iter(range(1, 1_000_000))


def start_loop(
    h: TmuxHarness,
    fleet_id: int,
    *args: str,
    env: dict[str, str] | None = None,
    wait: bool = True,
) -> Loop:
    """Run `cafleet monitor <fleet_id> <args>` in the foreground, stdout/stderr to files."""
    n = next(_loop_counter)
    out = h.dir / f"loop-{fleet_id}-{n}.out"
    err = h.dir / f"loop-{fleet_id}-{n}.err"
    with open(out, "w") as fo, open(err, "w") as fe:
        proc = h.popen_cli("monitor", str(fleet_id), *args, env=env, stdout=fo, stderr=fe)
    loop = Loop(proc, out, err)
    if wait:
        retry_until(
            lambda: bool(loop.lines()) or proc.poll() is not None,
            timeout=15,
            message="the loop printed nothing",
        )
        assert START_RE.match(loop.lines()[0]) if loop.lines() else False, (
            loop.lines(),
            loop.stderr(),
        )
    return loop


def parse_ts(text: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(text).timestamp()


def new_server(h: TmuxHarness, cwd: Path | None = None) -> tuple[str, dict[str, str]]:
    """A new tmux server on the same socket (as after a reboot) with one fake-agent pane, in
    ``cwd`` (default: the harness's project): its pane id and the CLI environment of a command
    run in it."""
    retry_until(lambda: not pid_alive(h.server_pid), timeout=10, message="old server alive")
    subprocess.run(
        [h.real_tmux, "-S", h.socket_path, "-f", "/dev/null", "new-session", "-d", "-s",
         SESSION + "-new", "-x", "400", "-y", "200", "-c", str(cwd or h.project_dir),
         str(h.bin_dir / "claude")],
        env=h.server_env, check=True, capture_output=True, timeout=15,
    )  # fmt: skip
    out = h.tmux("display-message", "-p", "-t", f"={SESSION}-new:", "#{pid}|#{pane_id}")
    pid, pane = out.strip().split("|")
    return pane, {"TMUX": f"{h.socket_path},{pid},0", "TMUX_PANE": pane}
