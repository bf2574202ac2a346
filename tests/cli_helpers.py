"""Helpers for the CLI tests: run `cafleet` in a subprocess or in-process through
`cafleet.cli.main` (docs/cli.md §1.8), and check which modules a command imported. The "unchanged"
check is `tests.storage_helpers.snapshot`, the data builders are `tests.factories`."""

from __future__ import annotations

import io
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from cafleet.agents.registry import agent_names

# The "unchanged" check lives in tests.storage_helpers; these names stay importable from here.
from tests.storage_helpers import Snapshot as Snapshot
from tests.storage_helpers import assert_unchanged as assert_unchanged
from tests.storage_helpers import snapshot as snapshot
from tests.storage_helpers import sql as sql

REPO_ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN_ALWAYS = ("sqlalchemy", "alembic", "libtmux", "fastapi", "uvicorn", "starlette")
# What a command that types into no pane never needs (docs/cli.md §1.8).
TYPING_MODULES = ("libtmux", "cafleet.mux.tmux", "cafleet.mux.locks", "cafleet.delivery.drains")


# JSON records' keys in contract order (docs/cli.md §1.10).
MESSAGE_KEYS = [
    "message_id",
    "owner_member_id",
    "from_member_id",
    "to_member_id",
    "type",
    "created_at",
    "status_state",
    "status_timestamp",
    "origin_message_id",
    "text",
]
PLACEMENT_KEYS = [
    "backend",
    "mux_session",
    "mux_window_id",
    "mux_pane_id",
    "coding_agent",
    "created_at",
    "lost_at",
    "host_id",
]
MEMBER_KEYS = [
    "member_id",
    "fleet_id",
    "name",
    "description",
    "kind",
    "status",
    "registered_at",
    "deregistered_at",
    "placement",
]


def stamp(moment: datetime) -> str:
    """A stored timestamp: ISO 8601 with microseconds."""
    return moment.isoformat(timespec="microseconds")


# --- running the CLI ---------------------------------------------------------------------------


def cli_env(env: Mapping[str, str | None] | None = None) -> dict[str, str]:
    """The test process environment with `env` applied (None removes a variable)."""
    merged = dict(os.environ)
    for key, value in (env or {}).items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    return merged


def run_cli(
    *args: str,
    env: Mapping[str, str | None] | None = None,
    input: str | bytes | None = None,
    timeout: float = 60,
) -> tuple[int, str, str]:
    """`python -m cafleet <args>` in a subprocess; returns (code, stdout, stderr)."""
    data = input.encode() if isinstance(input, str) else input
    proc = subprocess.run(
        [sys.executable, "-m", "cafleet", *args],
        input=data,
        capture_output=True,
        env=cli_env(env),
        timeout=timeout,
        cwd=str(REPO_ROOT),
    )
    return (
        proc.returncode,
        proc.stdout.decode("utf-8", "replace"),
        proc.stderr.decode("utf-8", "replace"),
    )


def start_cli(*args: str, env: Mapping[str, str | None] | None = None) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "cafleet", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cli_env(env),
        cwd=str(REPO_ROOT),
    )


def run_in_process(
    entry: Callable[[list[str]], Any],
    argv: Sequence[str],
    stdin: bytes = b"",
    env: Mapping[str, str | None] | None = None,
) -> tuple[Any, str, str]:
    """`entry(list(argv))` in this process; returns (what it returned, stdout, stderr).

    ``env`` overrides variables for the duration (None removes one). Streams are swapped for
    UTF-8 buffers; signal handlers, the signal record and the environment are restored.
    """
    from cafleet import signals

    saved_env = {k: os.environ.get(k) for k in (env or {})}
    for key, value in (env or {}).items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    saved = (sys.stdin, sys.stdout, sys.stderr)
    handlers = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
    out_buf, err_buf = io.BytesIO(), io.BytesIO()
    streams = (
        io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"),
        io.TextIOWrapper(out_buf, encoding="utf-8", write_through=True),
        io.TextIOWrapper(err_buf, encoding="utf-8", write_through=True),
    )
    sys.stdin, sys.stdout, sys.stderr = streams
    try:
        result = entry(list(argv))
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        sys.stdin, sys.stdout, sys.stderr = saved
        signal.signal(signal.SIGINT, handlers[0])
        signal.signal(signal.SIGTERM, handlers[1])
        signals.reset()
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    out, err = out_buf.getvalue().decode("utf-8"), err_buf.getvalue().decode("utf-8")
    for stream in streams:
        stream.detach()
    return result, out, err


def call_main(argv: Sequence[str], stdin: bytes = b"") -> tuple[int, str, str]:
    """`cafleet.cli.main(argv)` in this process; returns (code, stdout, stderr).

    Streams are swapped for UTF-8 buffers; signal handlers and the signal record are restored.
    """
    from cafleet.cli import main

    def entry(args: list[str]) -> Any:
        try:
            main(args)
        except SystemExit as exc:  # main() always exits
            return exc.code

    code, out, err = run_in_process(entry, argv, stdin)
    assert isinstance(code, int), f"main did not exit with an int: {code!r}"
    return code, out, err


def call_run(
    *argv: str, stdin: bytes = b"", env: Mapping[str, str | None] | None = None
) -> subprocess.CompletedProcess[str]:
    """`cafleet.cli.run(argv)` in this process (docs/cli.md §1.8); returns a CompletedProcess.

    ``env`` overrides variables for the duration (None removes one).
    """
    from cafleet.cli import run

    code, out, err = run_in_process(run, argv, stdin, env)
    return subprocess.CompletedProcess(list(argv), code, out, err)


def imported_after(
    argv: Sequence[str],
    modules: Sequence[str] = FORBIDDEN_ALWAYS,
    env: Mapping[str, str | None] | None = None,
    cwd: str | Path | None = None,
) -> tuple[int, list[str]]:
    """Run `cafleet.cli.main(argv)` in a fresh interpreter (in ``cwd``, default the checkout);
    return its exit code and which of `modules` (or their submodules) ended up in `sys.modules`
    (docs/cli.md §1.8). The one import checker of the tests."""
    code = f"""
        import json, os, sys
        from cafleet.cli import main
        try:
            main({list(argv)!r})
        except SystemExit as exc:
            code = exc.code
        else:
            code = None
        found = sorted(
            m for m in {list(modules)!r}
            if any(k == m or k.startswith(m + ".") for k in sys.modules)
        )
        os.write(int(os.environ["CAFLEET_TEST_REPORT_FD"]),
                 json.dumps({{"code": code, "found": found}}).encode())
    """
    read_fd, write_fd = os.pipe()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(code)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**cli_env(env), "CAFLEET_TEST_REPORT_FD": str(write_fd)},
            cwd=str(cwd or REPO_ROOT),
            pass_fds=(write_fd,),
        )
    finally:
        os.close(write_fd)
    with os.fdopen(read_fd, "rb") as reader:
        raw = reader.read()
    proc.wait(timeout=60)
    result = json.loads(raw)
    return result["code"], result["found"]


# --- `cafleet setup`'s two halves (docs/cli.md §3.2) ----------------------------------------------

SETUP_AGENTS = agent_names()


def setup_db_line(out: str) -> str:
    """The db half's success line: the first line `cafleet setup` prints."""
    return out.split("\n", 1)[0]


def setup_agent_summaries(out: str) -> dict[str, str]:
    """Each agent's summary line of `cafleet setup`'s text output (file lines dropped)."""
    summaries: dict[str, str] = {}
    for line in out.splitlines():
        agent, sep, _rest = line.partition(": ")
        if sep and agent in SETUP_AGENTS:  # `<agent>: <path> (<source>): <summary>`
            summaries[agent] = line.rpartition(": ")[2]
    return summaries


def db_half_failed_err(message: str) -> str:
    """stderr of a setup whose db half failed with ``message``: the assets half still installs
    every agent's files but cannot record them."""
    return (
        f"db half failed: {message}\n"
        + "".join(
            f"assets half failed: {agent}: installed but not recorded: the db half failed\n"
            for agent in SETUP_AGENTS
        )
        + "Error: db and assets half failed\n"
    )


def _connect(db: Path | str) -> sqlite3.Connection:
    """sqlite3 on the file, or the PostgreSQL test database's look-alike (tests/pg_server.py)."""
    from tests.pg_server import PgDb, PgRaw

    if isinstance(db, PgDb):
        return PgRaw(db)  # type: ignore[return-value]
    return sqlite3.connect(str(db), isolation_level=None)


def query(db: Path, statement: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    con = _connect(db)
    try:
        return [tuple(r) for r in con.execute(statement, params).fetchall()]
    finally:
        con.close()


# --- waiting -----------------------------------------------------------------------------------


def hold_flock(path: Path, seconds: float) -> subprocess.Popen[bytes]:
    """A process holding an exclusive flock on `path` for `seconds`; returns once it holds it."""
    code = f"""
        import fcntl, os, sys, time
        path = {str(path)!r}
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        sys.stdout.write("locked\\n"); sys.stdout.flush()
        time.sleep({seconds!r})
    """
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.strip() == b"locked", line
    return proc
