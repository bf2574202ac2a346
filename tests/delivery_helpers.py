"""Helpers for the messaging/delivery tests (docs/runtime.md §4): plain-SQL reads of the database, the
notification line as the fake agent records it, the CLI in and out of process.

Fleets are built by `tests.factories.build_world` (re-exported here with `World` and `connect`).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from tests.cli_helpers import call_run, cli_env
from tests.factories import World as World
from tests.factories import build_world as build_world
from tests.factories import connect as connect
from tests.harness import util

EM_DASH = "\u2014"
REPO_ROOT = Path(__file__).resolve().parent.parent


# --- reading the database with plain sqlite3 -----------------------------------------------------


def _read(db_path: Path | str) -> sqlite3.Connection:
    """Read-only sqlite3 on the file, or the PostgreSQL test database's look-alike."""
    from tests.pg_server import PgDb, PgRaw

    if isinstance(db_path, PgDb):
        return PgRaw(db_path)  # type: ignore[return-value]
    return sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=10)


def rows(db_path: Path | str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    conn = _read(db_path)
    try:
        return [tuple(r) for r in conn.execute(sql, params)]
    finally:
        conn.close()


def message_row(db_path: Path | str, message_id: int) -> dict[str, Any]:
    conn = _read(db_path)
    try:
        cur = conn.execute("SELECT * FROM messages WHERE message_id = ?", (message_id,))
        row = cur.fetchone()
        names = [d[0] for d in cur.description]
    finally:
        conn.close()
    assert row is not None, f"message {message_id} not found"
    return dict(zip(names, row, strict=True))


def notified_at(db_path: Path | str, message_id: int) -> str | None:
    return message_row(db_path, message_id)["notified_at"]


def sql_write(db_path: Path | str, sql: str, *params: Any) -> None:
    from tests.pg_server import PgDb, PgRaw

    conn: Any = (
        PgRaw(db_path)
        if isinstance(db_path, PgDb)
        else sqlite3.connect(str(db_path), timeout=10, isolation_level=None)
    )
    try:
        conn.execute(sql, params)
    finally:
        conn.close()


def local_dir(db_path: Path | str) -> Path:
    """The database's local directory, home of `locks/` (docs/storage.md §10.1): the file's
    directory, or a PostgreSQL database's own directory under this test's HOME."""
    from cafleet.config import db_dir_of

    return Path(db_dir_of(str(db_path)))


def lock_files(db_path: Path | str) -> list[str]:
    locks = local_dir(db_path) / "locks"
    return sorted(os.listdir(locks)) if locks.is_dir() else []


@contextlib.contextmanager
def hold_writer_lock(db_path: Path | str) -> Iterator[None]:
    """Hold the writer lock (docs/storage.md §4.3, §10.4) from another process or session
    until the block ends: the file lock `locks/db-write.lock`, or PostgreSQL's advisory lock."""
    from tests.pg_server import PgDb

    if isinstance(db_path, PgDb):
        import psycopg

        from cafleet.db.pg.runtime import WRITER_LOCK_KEY

        with psycopg.connect(db_path.url, autocommit=True) as holder:
            holder.execute("SELECT pg_advisory_lock(%s)", (WRITER_LOCK_KEY,))
            yield
        return
    from tests.cli_helpers import hold_flock

    holder = hold_flock(local_dir(db_path) / "locks" / "db-write.lock", 600)
    try:
        yield
    finally:
        holder.kill()
        holder.wait(10)


# --- the notification line as the fake agent records it -----------------------------------------


def expected_line(message_id: int, sender: str, sender_id: int, shown_body: str) -> str:
    return (
        f"[cafleet msg {message_id} from {sender} ({sender_id})] {shown_body} "
        f"{EM_DASH} ack with: cafleet message ack {message_id}"
    )


def record_of(line: str) -> bytes:
    """What the fake logs for one submitted notification: exactly the line (no Escape before
    it, docs/runtime.md §1.7)."""
    return line.encode("utf-8")


MSG_ID_RE = re.compile(rb"\[cafleet msg (\d+) ")


def record_ids(pane: str) -> list[list[int]]:
    """The message ids each line record of ``pane`` carries."""
    return [[int(x) for x in MSG_ID_RE.findall(b)] for b in util.line_bytes(pane)]


def typed_ids(pane: str) -> list[int]:
    return [i for ids in record_ids(pane) for i in ids]


def warning(message_id: int, member_id: int, reason: str) -> str:
    return (
        f"Warning: message {message_id} not notified to member {member_id}: {reason} "
        "(it stays in the inbox; delivery will be retried)"
    )


def sent_id(stdout: str) -> int:
    """The message id of `message send`'s text output."""
    m = re.search(r"^\[(\d+) \| from:", stdout, re.M)
    assert m, stdout
    return int(m.group(1))


def send_json(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert result.returncode == 0, (result.returncode, result.stdout, result.stderr)
    return json.loads(result.stdout)


def send_keys_runs(pane: str) -> list[str]:
    """The `send-keys` calls the shim logged for ``pane``: E (Escape), L (literal, or the
    `paste-buffer` of an agent whose policy pastes, docs/runtime.md §1.7), N (Enter), U
    (Ctrl-U)."""
    kinds = []
    for call in util.shim_calls():
        if call.get("command") == "paste-buffer" and call.get("target") == pane:
            kinds.append("L")
            continue
        if call.get("command") != "send-keys" or call.get("target") != pane:
            continue
        argv = call["argv"]
        if argv[-1] == "Escape":
            kinds.append("E")
        elif "-l" in argv:
            kinds.append("L")
        elif argv[-1] == "Enter":
            kinds.append("N")
        elif argv[-1] == "C-u":
            kinds.append("U")
        else:
            kinds.append("?")
    return kinds


# --- the CLI in this process (cafleet.cli.run), for refusals and read-only commands -------------


def call(*argv: str, stdin: bytes = b"", env: Mapping[str, str | None] | None = None) -> Any:
    """Run ``cafleet.cli.run(argv)`` in this process; returns a CompletedProcess."""
    return call_run(*argv, stdin=stdin, env=env)


def cli(
    *args: str,
    env: Mapping[str, str | None] | None = None,
    input: bytes | None = None,
    timeout: float = 60,
) -> subprocess.CompletedProcess[str]:
    """``python -m cafleet <args>`` in a subprocess with this process's environment."""
    proc = subprocess.run(
        [sys.executable, "-m", "cafleet", *args],
        input=input,
        stdin=None if input is not None else subprocess.DEVNULL,
        capture_output=True,
        env=cli_env(env),
        cwd=str(REPO_ROOT),
        timeout=timeout,
    )
    return subprocess.CompletedProcess(
        proc.args,
        proc.returncode,
        proc.stdout.decode("utf-8", "replace"),
        proc.stderr.decode("utf-8", "replace"),
    )


# --- processes ------------------------------------------------------------------------------------


def popen(*args: str, env: Mapping[str, str | None] | None = None) -> subprocess.Popen[bytes]:
    """``python -m cafleet <args>`` in the background, stdout/stderr piped (bytes)."""
    return subprocess.Popen(
        [sys.executable, "-m", "cafleet", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cli_env(env),
        cwd=str(REPO_ROOT),
    )


class LineReader:
    """Read complete lines from a child's stdout with a deadline (no buffering surprises)."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        self.fd = proc.stdout.fileno()
        self.buf = b""
        self.eof = False

    def _fill(self, timeout: float) -> bool:
        import select

        ready, _, _ = select.select([self.fd], [], [], max(0.0, timeout))
        if not ready:
            return False
        chunk = os.read(self.fd, 65536)
        if not chunk:
            self.eof = True
        self.buf += chunk
        return True

    def line(self, timeout: float = 10.0) -> bytes:
        import time

        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            if self.eof:
                raise AssertionError(f"stdout closed; pending {self.buf!r}")
            left = deadline - time.monotonic()
            if left <= 0 or not self._fill(left):
                raise AssertionError(f"no line within {timeout} s; pending {self.buf!r}")
        line, self.buf = self.buf.split(b"\n", 1)
        return line

    def rest(self, timeout: float = 10.0) -> bytes:
        """Everything until EOF."""
        import time

        deadline = time.monotonic() + timeout
        while not self.eof:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"stdout still open after {timeout} s")
            self._fill(left)
        data, self.buf = self.buf, b""
        return data


def holds_db_open(pid: int, db_path: Path | str) -> bool:
    """True when process ``pid`` has the database open: the file, or for a PostgreSQL test
    database an established TCP connection to its server's port."""
    from tests.pg_server import PgDb, connected_to

    if isinstance(db_path, PgDb):
        return connected_to(pid, db_path.port)
    return holds_open(pid, db_path)


def holds_open(pid: int, path: str | os.PathLike[str]) -> bool:
    """True when process ``pid`` has ``path`` open."""
    target = os.fspath(path)
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                return True
        except OSError:
            continue
    return False


def shorten_verification(
    monkeypatch: Any, *, verify: float = 2.0, agents: tuple[str, ...] = (), enter_again: float = 0.5
) -> None:
    """Only the verified submit's waits shrink (docs/runtime.md §4.7): the verify timeout, and the
    re-Enter gap of ``agents``' input policies. What a verification concludes is the same as with
    15 s and the real gaps, as long as the test's fake outlasts the shorter waits."""
    from cafleet.agents.registry import load_agent
    from cafleet.delivery import submit

    monkeypatch.setattr(submit, "VERIFY_TIMEOUT", verify)
    for name in agents:
        agent = load_agent(name)
        monkeypatch.setattr(agent, "policy", agent.policy._replace(enter_again_after=enter_again))
