"""The one supervisor behind the fleet's monitor loop and a host's delivery loop (docs/runtime.md
§5.3, §5.4, §10.4): claim a slot, heartbeat it, run passes, wait out database outages, stop on a
signal or after `MAX_FAILED_TICKS` failed passes, and release the slot; start a loop detached
and wait until it is live, or stop it and hold it stopped.

What differs between the two is their `Scope` (`cafleet.monitor.loop.FleetScope`,
`cafleet.monitor.hostloop.HostScope`): which row is the slot, what a start-up checks, what one
pass does, and whether a commit ends the wait between passes.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import traceback
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, TextIO

from cafleet import signals
from cafleet.db.runtime import data_version
from cafleet.db.timefmt import now_ts
from cafleet.errors import CafleetError, error_text
from cafleet.monitor.detached import (
    STOP_TIMEOUT,
    reap,
    runs_cafleet,
    spawn_detached,
    terminate_and_wait,
)

if TYPE_CHECKING:
    from cafleet.db.runtime import Connection
    from cafleet.monitor.logspace import LogReserve

WAIT_STEP = 0.2  # no wait lasts longer: the stop flag and SQLite's data_version are read as often
MAX_FAILED_TICKS = 3
READY_TIMEOUT = 5.0
READY_POLL = 0.1
# Releasing the slot is retried: on a full disk the first UPDATE fails, and a WAL checkpoint
# between tries lets the next write reuse the WAL's already allocated pages.
RELEASE_TRIES = 5
RELEASE_PAUSE = 0.5

RecheckSchema = Callable[["Connection"], object]


class LoopStartError(CafleetError):
    """A start-up failure (`Error: <message>`, exit 1); nothing is left claimed."""


class LoopNotStarted(CafleetError):
    """A detached loop did not become live; str() names the log, ``detail`` says why."""

    def __init__(self, title: str, log_path: str, detail: str) -> None:
        self.log_path = log_path
        self.detail = detail
        super().__init__(f"{title} did not start; see {log_path}")


class StartAbandoned(CafleetError):
    """``keep_waiting`` returned False (a signal) before the loop became live."""


class LoopNotStopped(CafleetError):
    """The loop outlived `stop`'s wait; it stays held stopped."""


class LoopStop(CafleetError):
    """A clean stop raised by a pass: ``line`` is logged, then the loop exits ``code``."""

    def __init__(self, line: str, code: int = 0) -> None:
        self.line = line
        self.code = code
        super().__init__(line)


class _Refused(CafleetError):
    """The schema re-check refused the database (not an outage): the loop exits 1."""


class LoopLog:
    """A loop's log: ``raw`` writes a line as is, a call writes it after a timestamp; a closed
    or broken log never stops the loop."""

    def __init__(self, out: TextIO) -> None:
        self.out = out

    def raw(self, text: str) -> None:
        _write(self.out, text)

    def __call__(self, text: str) -> None:
        _write(self.out, f"{now_ts()} {text}")


def _write(stream: TextIO, text: str) -> None:
    try:
        stream.write(text + "\n")
        stream.flush()
    except (OSError, ValueError):
        pass


class Scope(ABC):
    """What one loop supervises: its slot (a runtime row), its files, its detached command and
    its passes."""

    title: str  # `monitor loop for fleet 3`, `delivery loop for host h1`
    slot_name: str  # `monitor slot`, `host loop slot`
    words: tuple[str, ...]  # the command after `python -m cafleet`
    wakes_on_change: bool = False  # a commit ends the wait between passes
    tick_seconds: int = 5

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    @property
    @abstractmethod
    def log_path(self) -> str: ...

    @property
    @abstractmethod
    def hold_path(self) -> str: ...

    @abstractmethod
    def slot_pid(self) -> int | None:
        """The pid the slot holds, live or not."""

    @abstractmethod
    def live_pid(self) -> int | None:
        """The pid of the scope's live loop, or None."""

    @abstractmethod
    def child(self, env: Mapping[str, str] | None) -> tuple[str, dict[str, str]]:
        """The working directory and environment of a detached loop."""

    @abstractmethod
    def open(self, pid: int, log: LoopLog) -> str:
        """Check and claim the slot for ``pid``; the start line. Raises `LoopStartError`."""

    @abstractmethod
    def step(self, due: bool) -> None:
        """One pass (``due``: a tick's length passed, so it heartbeats); raises `LoopStop`."""

    @abstractmethod
    def release(self, pid: int) -> None:
        """Clear the slot where ``pid`` still holds it."""

    @abstractmethod
    def stopped_line(self, pid: int) -> str: ...

    def on_stop(self, reason: str) -> None:  # noqa: B027 - most scopes have nothing to do
        """The loop stops by itself (not on a signal): ``reason`` is its log line."""


# --- the loop process ------------------------------------------------------------------------


def run(
    scope: Scope,
    *,
    out: TextIO | None = None,
    err: TextIO | None = None,
    recheck_schema: RecheckSchema | None = None,
) -> int:
    """Claim the scope's slot and run until a stop condition; the exit code (0 or 1). A start-up
    failure raises `LoopStartError`; after the start line every exit releases the slot and
    logs the stopped line. ``recheck_schema(conn)`` raises when the database is no longer
    current (the guard's long-running check), once a tick."""
    from cafleet.monitor.logspace import reserve_for

    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    log = LoopLog(out)
    pid = os.getpid()
    reserve = reserve_for(out)
    if reserve is not None:
        reserve.refresh()
    start_line = scope.open(pid, log)
    code = 0
    try:
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        log.raw(start_line)
        code = _schedule(scope, log, err, recheck_schema, reserve)
    except BaseException as exc:
        # Whatever the schedule did not handle still ends in the log with its whole traceback
        # (then the slot is released below); an Exception is a failed stop, exit 1.
        log(f"loop failed: {error_text(exc)}; stopping")
        _write(err, traceback.format_exc().rstrip("\n"))
        if not isinstance(exc, Exception):
            raise
        code = 1
    finally:
        _release(scope, pid, log, err)
        log.raw(scope.stopped_line(pid))
    return code


def _schedule(
    scope: Scope,
    log: LoopLog,
    err: TextIO,
    recheck_schema: RecheckSchema | None,
    reserve: LogReserve | None,
) -> int:
    from cafleet.monitor.outage import Outage, is_transient

    conn = scope.conn
    failed = 0
    next_beat = time.monotonic()
    version = data_version(conn) if scope.wakes_on_change else 0  # PostgreSQL: LISTEN from here
    outage = Outage(conn, log, signals.stop_requested)
    while True:
        if signals.stop_requested():
            log(_signal_line())
            return 0
        try:
            due = time.monotonic() >= next_beat
            if due and recheck_schema is not None:
                _recheck(conn, recheck_schema)
            scope.step(due)
            if due:
                next_beat = max(next_beat + scope.tick_seconds, time.monotonic())
        except LoopStop as stop:
            log(stop.line)
            _stopping(scope, stop.line, log)
            return stop.code
        except _Refused as exc:
            _write(err, f"Error: {exc}")
            return 1
        except Exception as exc:
            if is_transient(conn, exc):
                # A busy or unreachable database is waited out, never counted as a failed
                # pass; back, the loop beats at once (docs/runtime.md §5.4).
                outage.wait_out(exc)
                next_beat = time.monotonic()
                continue
            failed += 1
            log(f"tick failed: {error_text(exc)}")
            _write(err, traceback.format_exc().rstrip("\n"))
            if failed >= MAX_FAILED_TICKS:
                log(f"{MAX_FAILED_TICKS} consecutive failed ticks; stopping")
                _stopping(scope, f"{MAX_FAILED_TICKS} consecutive failed ticks", log)
                return 1
            next_beat = time.monotonic() + scope.tick_seconds  # a failed pass waits its tick
        else:
            failed = 0
            outage.over()
        if reserve is not None:
            reserve.refresh()  # keep room for the log's last words (a full disk)
        try:
            version = _wait(scope, next_beat, version)
        except Exception as exc:
            if not is_transient(conn, exc):
                raise
            # The wait is where a listening loop first hears of a lost connection.
            outage.wait_out(exc)
            next_beat = time.monotonic()


def _stopping(scope: Scope, reason: str, log: LoopLog) -> None:
    """`Scope.on_stop`, whose failure is logged and never changes how the loop ends."""
    try:
        scope.on_stop(reason)
    except Exception as exc:
        log(f"stop notification failed: {error_text(exc)}")


def _recheck(conn: Connection, recheck_schema: RecheckSchema) -> None:
    from cafleet.monitor.outage import is_transient

    try:
        recheck_schema(conn)
    except Exception as exc:
        if is_transient(conn, exc):
            raise
        raise _Refused(error_text(exc)) from exc


def _wait(scope: Scope, until: float, version: int) -> int:
    """Wait until the monotonic ``until`` or a stop; a scope that wakes on change also until
    another connection's commit (new work). Returns the data version seen last."""

    conn = scope.conn
    while not signals.stop_requested():
        left = until - time.monotonic()
        if left <= 0:
            break
        if not scope.wakes_on_change:
            time.sleep(min(WAIT_STEP, left))
        elif conn.wait_for_change(min(WAIT_STEP, left), version):
            break
    return data_version(conn) if scope.wakes_on_change else version


def _signal_line() -> str:
    received = signals.received()
    try:
        name = signal.Signals(received).name if received is not None else "signal"
    except ValueError:
        name = f"signal {received}"
    return f"received {name}; stopping"


def _release(scope: Scope, pid: int, log: LoopLog, err: TextIO) -> None:
    """Clear our slot (pid-matched, so a successor's claim is never undone), retrying a failed
    write with a WAL checkpoint in between; a slot that still cannot be released is logged and
    goes stale (the next start takes it over)."""
    for attempt in range(1, RELEASE_TRIES + 1):
        try:
            scope.release(pid)
            return
        except Exception as exc:
            if attempt == RELEASE_TRIES:
                log(
                    f"cleanup failed for the {scope.slot_name}: {error_text(exc)}; the slot "
                    "goes stale and the next loop start takes it over"
                )
                _write(err, traceback.format_exc().rstrip("\n"))
                return
        with contextlib.suppress(Exception):
            if scope.conn.in_transaction():
                scope.conn.rollback()
            scope.conn.checkpoint()
        time.sleep(RELEASE_PAUSE)


# --- starting, healing, stopping ----------------------------------------------------------------


def is_held(scope: Scope) -> bool:
    """A stop left its hold: nothing restarts the loop by itself."""
    return os.path.exists(scope.hold_path)


def lift_hold(scope: Scope) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(scope.hold_path)


def start_detached(scope: Scope, env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
    """Spawn ``python -m cafleet <words>`` detached (its own session, stdin from /dev/null,
    stdout and stderr appended to the scope's log); raises `LoopNotStarted` when it cannot be
    spawned. Does not wait."""
    reap()
    cwd, child_env = scope.child(env)
    argv = [sys.executable, "-m", "cafleet", *scope.words]
    try:
        return spawn_detached(argv, log_path=scope.log_path, cwd=cwd, env=child_env)
    except OSError as exc:
        from cafleet import status

        detail = f"it could not be spawned: {status.os_error_text(exc)}"
        raise LoopNotStarted(scope.title, scope.log_path, detail) from exc


def ensure(
    scope: Scope,
    *,
    keep_waiting: Callable[[], bool] | None = None,
    timeout: float = READY_TIMEOUT,
) -> tuple[int, bool]:
    """The pid of the scope's live loop and whether this call started it: a new detached loop
    once its row is live, whoever's pid it holds (polled every 0.1 s for up to ``timeout`` s).
    Raises `LoopNotStarted`; ``keep_waiting`` False (before the spawn or between checks)
    raises `StartAbandoned`."""
    reap()
    pid = scope.live_pid()
    if pid is not None:
        return pid, False
    if keep_waiting is not None and not keep_waiting():
        raise StartAbandoned()
    child = start_detached(scope)
    deadline = time.monotonic() + timeout
    while True:
        pid = scope.live_pid()
        if pid is not None:
            return pid, True
        code = child.poll()
        if code is not None:
            pid = scope.live_pid()  # a racing starter may have won while this child refused
            if pid is not None:
                return pid, False
            raise LoopNotStarted(scope.title, scope.log_path, f"it exited with status {code}")
        if time.monotonic() >= deadline:
            detail = f"it did not become live within {timeout:g} s"
            raise LoopNotStarted(scope.title, scope.log_path, detail)
        if keep_waiting is not None and not keep_waiting():
            raise StartAbandoned()
        time.sleep(READY_POLL)


def stop(scope: Scope, *, timeout: float = STOP_TIMEOUT) -> int | None:
    """Hold the loop stopped, SIGTERM the slot's pid when it runs this scope's command (a
    recycled pid is never signalled) and wait until it exited; the pid stopped, or None when
    none was running. Raises `LoopNotStopped`."""
    from cafleet.files import write_private
    from cafleet.procs import pid_alive

    write_private(scope.hold_path, f"{now_ts()} pid {os.getpid()}\n")
    pid = scope.slot_pid()

    def ours(p: int) -> bool:
        return runs_cafleet(p, *scope.words)

    if pid is None or not pid_alive(pid) or not ours(pid):
        return None
    if not terminate_and_wait(pid, ours, timeout=timeout):
        raise LoopNotStopped(
            f"{scope.title} (pid {pid}) did not stop within {timeout:g} s; it stays held stopped"
        )
    return pid


__all__ = [
    "LoopLog",
    "LoopNotStarted",
    "LoopNotStopped",
    "LoopStartError",
    "LoopStop",
    "Scope",
    "StartAbandoned",
    "ensure",
    "is_held",
    "lift_hold",
    "run",
    "start_detached",
    "stop",
]
