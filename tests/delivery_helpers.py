"""Helpers for the messaging/delivery tests (issue 4).

Fleets are built with the repository functions, so no monitor loop runs unless a test starts one
(runtime.md §6.4: drain tests keep the loop out of the way). Against the private tmux server the
Director placement is the harness's Director pane and every other placement is a fresh fake agent
pane; without tmux, placements name pane ids that exist nowhere.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import sqlite3
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.cli_helpers import call_run, cli_env
from tests.harness import util

EM_DASH = "\u2014"
REPO_ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Pane:
    session: str
    window_id: str
    pane_id: str


@dataclass
class World:
    db_path: Path
    fleet_id: int
    director: int
    monitor: int
    monitor_pane: str | None
    director_pane: str
    session: str
    members: dict[str, int] = field(default_factory=dict)
    panes: dict[int, str | None] = field(default_factory=dict)

    def pane(self, member_id: int) -> str:
        pane = self.panes[member_id]
        assert pane is not None
        return pane

    def key(self, member_id: int) -> Any:
        from cafleet.mux import PaneKey

        return PaneKey("tmux", self.session, self.pane(member_id))


@contextlib.contextmanager
def connect(db_path: Path | str) -> Iterator[Any]:
    """A validated connection in this process, closed afterwards."""
    from cafleet.cli.guard import open_validated_connection
    from cafleet.db.engine import close_connection

    conn = open_validated_connection(str(db_path))
    try:
        yield conn
    finally:
        close_connection(conn)


def build_world(
    db_path: Path | str,
    *,
    members: Sequence[str] = ("alice", "bob"),
    harness: Any = None,
    pending: Sequence[str] = (),
    unplaced: Sequence[str] = (),
    fleet_name: str = "demo",
    screen: str | None = None,
) -> World:
    """A fleet (Director, monitor, ``members``) built through the repository, no loop.

    With ``harness`` every placed member gets a fresh fake-agent pane; names in ``pending`` keep a
    pending placement and names in ``unplaced`` get none. Without a harness pane ids are made up.
    ``screen`` puts those fakes in screen mode (``CAFLEET_FAKE_SCREEN``, e.g. ``""``: a ready
    Claude Code screen), so the delivery gate sees a real agent's screens instead of
    ``unknown``.
    """
    from cafleet import broker
    from cafleet.records import PlacementSpec

    db_path = Path(db_path)
    if harness is not None:
        session, window, director_pane = (
            harness.session_name,
            harness.window_id,
            harness.director_pane,
        )
        wanted = 1 + sum(1 for n in members if n not in pending and n not in unplaced)
        env = None if screen is None else {"CAFLEET_FAKE_SCREEN": screen}
        spawned = [harness.spawn_fake(wait=False, env=env) for _ in range(wanted)]
        for pane in spawned:
            util.start_record(pane, timeout=20)
    else:
        session, window, director_pane = "fake session", "@1", "%900"
        wanted = 1 + len(members)
        spawned = [f"%{901 + i}" for i in range(wanted)]
    panes = iter(spawned)
    monitor_pane = next(panes)
    with connect(db_path) as conn:
        boot = broker.create_fleet(
            conn,
            name=fleet_name,
            backend="tmux",
            coding_agent="claude",
            director_pane=Pane(session, window, director_pane),
            spawn_monitor=lambda _f, _d, _m: Pane(session, window, monitor_pane),
        )
        world = World(
            db_path=db_path,
            fleet_id=boot.fleet.fleet_id,
            director=boot.director.member_id,
            monitor=boot.monitor.member_id,
            monitor_pane=monitor_pane,
            director_pane=director_pane,
            session=session,
        )
        world.panes[world.director] = director_pane
        world.panes[world.monitor] = monitor_pane
        for name in members:
            placed = name not in unplaced
            member = broker.register_member(
                conn,
                fleet_id=world.fleet_id,
                name=name,
                description=f"{name} member",
                role="member",
                placement=PlacementSpec(session, window, "claude") if placed else None,
                require_monitor=False,
            )
            world.members[name] = member.member_id
            world.panes[member.member_id] = None
            if placed and name not in pending:
                pane = next(panes)
                broker.set_placement_pane(conn, member_id=member.member_id, pane_id=pane)
                world.panes[member.member_id] = pane
    return world


# --- reading the database with plain sqlite3 -----------------------------------------------------


def rows(db_path: Path | str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=10)
    try:
        return list(conn.execute(sql, params))
    finally:
        conn.close()


def message_row(db_path: Path | str, message_id: int) -> dict[str, Any]:
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=10)
    conn.row_factory = sqlite3.Row
    try:
        row = conn.execute("SELECT * FROM messages WHERE message_id = ?", (message_id,)).fetchone()
    finally:
        conn.close()
    assert row is not None, f"message {message_id} not found"
    return dict(row)


def notified_at(db_path: Path | str, message_id: int) -> str | None:
    return message_row(db_path, message_id)["notified_at"]


def sql_write(db_path: Path | str, sql: str, *params: Any) -> None:
    conn = sqlite3.connect(str(db_path), timeout=10, isolation_level=None)
    try:
        conn.execute(sql, params)
    finally:
        conn.close()


def file_state(db_path: Path | str) -> tuple[str | None, str | None, tuple[str, ...]]:
    """SHA-256 of the file and its -wal, and the directory listing (``locks/`` ignored)."""
    db_path = Path(db_path)

    def sha(p: Path) -> str | None:
        return hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else None

    listing = tuple(sorted(p for p in os.listdir(db_path.parent) if p != "locks"))
    return sha(db_path), sha(Path(f"{db_path}-wal")), listing


def lock_files(db_path: Path | str) -> list[str]:
    locks = Path(db_path).parent / "locks"
    return sorted(os.listdir(locks)) if locks.is_dir() else []


# --- the notification line as the fake agent records it -----------------------------------------


def expected_line(message_id: int, sender: str, sender_id: int, shown_body: str) -> str:
    return (
        f"[cafleet msg {message_id} from {sender} ({sender_id})] {shown_body} "
        f"{EM_DASH} ack with: cafleet message ack {message_id}"
    )


def record_of(line: str) -> bytes:
    """What the fake logs for one submitted notification: exactly the line (no Escape before
    it, runtime.md §1.7)."""
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
    """The `send-keys` calls the shim logged for ``pane``: E (Escape), L (literal), N (Enter),
    U (Ctrl-U)."""
    kinds = []
    for call in util.shim_calls():
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


_IMPORTS = """
import json, os, sys
fd = int(os.environ.pop("REPORT_FD"))
from cafleet.cli import main
try:
    main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
mods = [m for m in ("libtmux", "cafleet.mux.tmux", "cafleet.mux.locks", "cafleet.delivery")
        if m in sys.modules]
os.write(fd, json.dumps({"code": code, "modules": mods}).encode())
"""


def imports_after(
    *argv: str, env: Mapping[str, str] | None = None, cwd: str | None = None
) -> dict[str, Any]:
    """Run ``cafleet.cli.main(argv)`` in a fresh interpreter; report its exit code and which of
    libtmux / the tmux backend / the lock module / the delivery module it imported."""
    read_fd, write_fd = os.pipe()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-c", _IMPORTS, *argv],
            env={**(env if env is not None else os.environ), "REPORT_FD": str(write_fd)},
            cwd=cwd or str(REPO_ROOT),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(write_fd,),
        )
    finally:
        os.close(write_fd)
    with os.fdopen(read_fd, "rb") as reader:
        data = reader.read()
    proc.wait(60)
    return json.loads(data)
