"""Test utilities for the tmux harness (docs/runtime.md §6.2, §6.4).

Functions locate the per-test directories through the environment the private-server fixture
sets: ``CAFLEET_FAKE_DIR`` (fake logs and control dirs) and ``TMUX_TMPDIR`` (the shim's log and
fault rules).
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

FAULTS_FILE = "tmux-faults.json"
SHIM_LOG = "tmux-calls.jsonl"


def retry_until(
    predicate: Callable[[], T | None],
    timeout: float = 10.0,
    interval: float = 0.05,
    message: str | Callable[[], str] = "",
) -> T:
    """Call ``predicate`` until it returns something truthy; return that value.

    Raises AssertionError after ``timeout`` seconds (monotonic), naming ``message``.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            text = message() if callable(message) else message
            raise AssertionError(
                f"condition not met within {timeout} s" + (f": {text}" if text else "")
            )
        time.sleep(interval)


def proc_state(pid: int) -> str:
    """The one-letter state of process ``pid`` from /proc ("" when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0].decode()
    except (OSError, IndexError):
        return ""


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` is a running process (a zombie or a dead one is not)."""
    return proc_state(pid) not in ("", "Z", "X")


# --------------------------------------------------------------------------- fake agents


def fake_dir() -> Path:
    value = os.environ.get("CAFLEET_FAKE_DIR")
    if not value:
        raise RuntimeError("CAFLEET_FAKE_DIR is not set; use the tmux_harness fixture")
    return Path(value)


def pane_stem(pane: str) -> str:
    return pane.replace("%", "p")


def fake_log_path(pane: str) -> Path:
    return fake_dir() / f"{pane_stem(pane)}.jsonl"


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    records = []
    for line in data.split(b"\n"):
        if line.strip():
            try:
                records.append(json.loads(line))
            except ValueError:
                continue  # a record being written right now
    return records


def fake_log(pane: str) -> list[dict[str, Any]]:
    """Every record the fake in ``pane`` wrote (start, line, command, printed, stalled)."""
    return read_jsonl(fake_log_path(pane))


def line_records(pane: str) -> list[dict[str, Any]]:
    return [r for r in fake_log(pane) if r.get("kind") == "line"]


def record_bytes(record: dict[str, Any]) -> bytes:
    """The exact bytes of a line record (ESC included, CR excluded)."""
    return base64.b64decode(record["bytes_b64"])


def line_bytes(pane: str) -> list[bytes]:
    return [record_bytes(r) for r in line_records(pane)]


def wait_records(pane: str, n: int, timeout: float = 10.0) -> list[dict[str, Any]]:
    """Wait until the fake in ``pane`` logged at least ``n`` line records; return them all."""

    def enough() -> list[dict[str, Any]] | None:
        recs = line_records(pane)
        return recs if len(recs) >= n else None

    return retry_until(
        enough,
        timeout=timeout,
        message=lambda: f"{pane} has {len(line_records(pane))} line records, wanted {n}",
    )


def start_record(pane: str, timeout: float = 10.0) -> dict[str, Any]:
    """Wait for and return the fake's start record."""

    def find() -> dict[str, Any] | None:
        for rec in fake_log(pane):
            if rec.get("kind") == "start":
                return rec
        return None

    return retry_until(find, timeout=timeout, message=f"no start record for {pane}")


def wait_drawn(pane: str, env: dict[str, str], agent: str = "claude", timeout: float = 20) -> str:
    """Wait until a screen-mode fake's pane shows more than a starting screen; return its state."""
    from cafleet.delivery.screens import classify
    from cafleet.mux import get_backend

    backend = get_backend("tmux", env=env)

    def drawn() -> str | None:
        state = classify(agent, backend.screen(pane))
        return None if state == "starting" else state

    return retry_until(drawn, timeout=timeout, message=f"{pane} still shows a starting screen")


def command_records(pane: str) -> list[dict[str, Any]]:
    return [r for r in fake_log(pane) if r.get("kind") == "command"]


def _control(pane: str, spec: dict[str, Any]) -> str:
    cmd_id: str = spec.setdefault("id", uuid.uuid4().hex)
    directory = fake_dir() / f"{pane_stem(pane)}.cmd"
    directory.mkdir(parents=True, exist_ok=True)
    name = f"{time.time_ns():020d}-{cmd_id}"
    tmp = directory / f"{name}.tmp"
    tmp.write_text(json.dumps(spec), encoding="utf-8")
    os.replace(tmp, directory / f"{name}.json")
    return cmd_id


def fake_run(
    pane: str,
    argv: Sequence[str],
    *,
    env: dict[str, str] | None = None,
    unset: Iterable[str] = (),
    cwd: str | None = None,
    wait: bool = True,
    timeout: float = 30.0,
) -> dict[str, Any]:
    """Make the fake in ``pane`` run ``argv`` in the pane's own environment.

    ``env`` adds or overrides variables and ``unset`` removes some. With ``wait`` (default),
    returns the command record ``{"kind":"command","argv","rc","stdout","stderr",...}``;
    otherwise returns ``{"id": <id>}`` at once (find it later with `wait_command`).
    """
    spec: dict[str, Any] = {"argv": list(argv)}
    if env:
        spec["env"] = dict(env)
    unset = list(unset)
    if unset:
        spec["unset"] = unset
    if cwd is not None:
        spec["cwd"] = cwd
    cmd_id = _control(pane, spec)
    if not wait:
        return {"id": cmd_id}
    return wait_command(pane, cmd_id, timeout=timeout)


def wait_command(pane: str, cmd_id: str, timeout: float = 30.0) -> dict[str, Any]:
    def find() -> dict[str, Any] | None:
        for rec in command_records(pane):
            if rec.get("id") == cmd_id:
                return rec
        return None

    return retry_until(find, timeout=timeout, message=f"command {cmd_id} did not finish in {pane}")


def _wait_logged(pane: str, kind: str, cmd_id: str, timeout: float, message: str) -> None:
    """Wait until the fake logs a ``kind`` record for control command ``cmd_id``."""
    retry_until(
        lambda: any(r.get("kind") == kind and r.get("id") == cmd_id for r in fake_log(pane)),
        timeout=timeout,
        message=message,
    )


def fake_print(pane: str, text: str, *, wait: bool = True, timeout: float = 10.0) -> None:
    """Make the fake write ``text`` raw to its terminal (use `\\r\\n` for new lines)."""
    cmd_id = _control(pane, {"print": text})
    if wait:
        _wait_logged(pane, "printed", cmd_id, timeout, f"{pane} did not print")


def fake_stall(pane: str, seconds: float, *, wait: bool = True, timeout: float = 10.0) -> None:
    """Make the fake stop reading its terminal for ``seconds`` from now."""
    cmd_id = _control(pane, {"stall": seconds})
    if wait:
        _wait_logged(pane, "stalled", cmd_id, timeout, f"{pane} did not stall")


# --------------------------------------------------------------------------- tmux shim


def harness_dir() -> Path:
    value = os.environ.get("TMUX_TMPDIR")
    if not value:
        raise RuntimeError("TMUX_TMPDIR is not set; use the tmux_harness fixture")
    return Path(value)


def shim_calls() -> list[dict[str, Any]]:
    """Every tmux call the shim logged in this test, in order."""
    return read_jsonl(harness_dir() / SHIM_LOG)


def faults_path() -> Path:
    return harness_dir() / FAULTS_FILE


def set_tmux_faults(rules: list[dict[str, Any]]) -> Path:
    """Install shim fault rules (see tests/harness/tmux_shim.py); resets `times` counters.

    Every CLI the harness runs has ``CAFLEET_TMUX_FAULTS`` pointing at this file, so rules
    apply to processes already running too.
    """
    path = faults_path()
    counts = Path(str(path) + ".counts")
    counts.unlink(missing_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(rules), encoding="utf-8")
    os.replace(tmp, path)
    return path


def clear_tmux_faults() -> None:
    faults_path().unlink(missing_ok=True)
    Path(str(faults_path()) + ".counts").unlink(missing_ok=True)


# --------------------------------------------------------------------------- pane locks

_HOLDER = """
import sys
from cafleet.mux import PaneKey
from cafleet.mux.locks import pane_input_lock
db_dir, backend, session, pane, purpose = sys.argv[1:6]
with pane_input_lock(db_dir, PaneKey(backend, session, pane), timeout=30, purpose=purpose):
    print("locked", flush=True)
    sys.stdin.read()
"""


@contextmanager
def hold_pane_lock(
    db_dir: str | os.PathLike[str],
    key: Any,
    purpose: str = "test",
) -> Iterator[subprocess.Popen[str]]:
    """Hold ``key``'s pane-input lock in a separate process until the block ends.

    ``key`` is a `cafleet.mux.PaneKey`. Yields the holder process (SIGKILL it to simulate a
    crashed holder); the lock is released when the block exits.
    """
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, os.fspath(db_dir), key.backend, key.session,
         key.pane_id, purpose],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        if line != "locked":
            raise AssertionError(f"lock holder did not get the lock (said {line!r})")
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)


__all__ = [
    "hold_pane_lock",
    "clear_tmux_faults",
    "command_records",
    "fake_dir",
    "fake_log",
    "fake_log_path",
    "fake_print",
    "fake_run",
    "fake_stall",
    "faults_path",
    "harness_dir",
    "line_bytes",
    "line_records",
    "pane_stem",
    "pid_alive",
    "proc_state",
    "read_jsonl",
    "record_bytes",
    "retry_until",
    "set_tmux_faults",
    "shim_calls",
    "start_record",
    "wait_command",
    "wait_records",
]
