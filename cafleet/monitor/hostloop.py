"""A host's delivery loop, `cafleet monitor host run` (docs/runtime.md §10.4): start-up, schedule,
stopping, and how commands start and heal it.

One loop per host delivers the pending lines for panes on its host in every fleet whose root
Director is on another host (no fleet loop runs on this host for those; the fleet loop on the
Director's host skips them), and wakes the monitor members on this host of such fleets
(`cafleet.monitor.hostwake`). It heartbeats in `host_loops` every tick, so other hosts see
whether it is alive without signalling its pid. Between ticks it waits for new work: on
PostgreSQL the commit notifications (`LISTEN`, docs/storage.md §10.4) end the wait at once; on
SQLite `PRAGMA data_version` is read every 0.2 s, which costs no query.

Its log lines (`<P>.host-<host>.log` when detached) follow the fleet loop's (docs/runtime.md §5.9).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TextIO

from cafleet import signals
from cafleet.db.timefmt import now_ts
from cafleet.errors import CafleetError, error_text
from cafleet.monitor.detached import (
    STOP_TIMEOUT,
    reap,
    runs_cafleet,
    spawn_detached,
    terminate_and_wait,
)
from cafleet.monitor.state import log_drain_report

if TYPE_CHECKING:
    from cafleet.config import Settings
    from cafleet.db.runtime import Connection
    from cafleet.monitor.state import LoopState

DEFAULT_TICK = 5
WAIT_STEP = 0.2  # no wait lasts longer: the stop flag and SQLite's data_version are read as often
MAX_FAILED_TICKS = 3
READY_TIMEOUT = 5.0
READY_POLL = 0.1


class HostLoopStartError(CafleetError):
    """A start-up failure (`Error: <message>`, exit 1); nothing is claimed."""


class HostLoopNotStarted(CafleetError):
    """A detached host loop did not become live; str() names the log, ``detail`` says why."""

    def __init__(self, host_id: str, log_path: str, detail: str) -> None:
        self.host_id = host_id
        self.log_path = log_path
        self.detail = detail
        super().__init__(f"delivery loop for host {host_id} did not start; see {log_path}")


def _log_line(out: TextIO, text: str) -> None:
    try:
        out.write(text + "\n")
        out.flush()
    except (OSError, ValueError):  # a closed or broken log never stops the loop
        pass


@dataclass
class _State:
    conn: Connection
    host_id: str
    pid: int
    tick_seconds: int
    lock_timeout: float
    workers: int
    out: TextIO
    settings: Settings
    displaced: bool = False
    held_logged: dict[int, str] = field(default_factory=dict)
    wakes: dict[int, LoopState] = field(default_factory=dict)  # per fleet (monitor wakes)

    def log(self, text: str) -> None:
        _log_line(self.out, f"{now_ts()} {text}")

    def wake_state(self, fleet_id: int, pid: int) -> LoopState:
        """The wake state of a fleet whose monitor is on this host (cafleet.monitor.hostwake)."""
        from cafleet.monitor.state import LoopState

        return LoopState(
            conn=self.conn,
            fleet_id=fleet_id,
            pid=pid,
            tick_seconds=self.tick_seconds,
            pane_lock_timeout=self.settings.pane_lock_timeout,
            env_wake_interval=self.settings.monitor_wake_interval,
            hold_timeout=self.settings.delivery_hold_timeout,
            backend=None,  # the wake lists the monitor's own server
            log=self.log,
            stop_requested=signals.stop_requested,
            log_prefix="host",
            by_socket=True,
        )


# --- the loop process -----------------------------------------------------------------------


def run_host_loop(
    conn: Connection,
    settings: Settings,
    host_id: str,
    *,
    tick: int | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
    recheck_schema: Callable[[Connection], object] | None = None,
) -> int:
    """Claim the host's slot and run until a stop condition; return the exit code (0 or 1).
    A live loop already holding the slot raises `HostLoopStartError`."""
    from cafleet import broker

    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    pid = os.getpid()
    tick_seconds = tick if tick is not None else DEFAULT_TICK
    row = broker.claim_host_loop(conn, host_id=host_id, pid=pid, tick_seconds=tick_seconds)
    if row is None:
        running = broker.get_host_loop(conn, host_id)
        holder = "" if running is None or running.pid is None else f" (pid {running.pid})"
        raise HostLoopStartError(f"delivery loop already running for host {host_id}{holder}")
    state = _State(
        conn=conn,
        host_id=host_id,
        pid=pid,
        tick_seconds=tick_seconds,
        lock_timeout=float(min(settings.pane_lock_timeout, tick_seconds)),
        workers=settings.delivery_workers,
        out=out,
        settings=settings,
    )
    code = 0
    try:
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        _log_line(out, f"host loop started (host {host_id}, tick {tick_seconds}s, pid {pid})")
        code = _schedule(state, err, recheck_schema)
    except BaseException as exc:
        state.log(f"loop failed: {error_text(exc)}; stopping")
        _log_line(err, traceback.format_exc().rstrip("\n"))
        if not isinstance(exc, Exception):
            raise
        code = 1
    finally:
        try:
            broker.clear_host_loop(conn, host_id=host_id, pid=pid)
        except Exception as exc:  # the slot goes stale; the next start takes it over
            state.log(f"cleanup failed for the host loop slot: {error_text(exc)}")
        _log_line(out, f"host loop stopped (host {host_id}, pid {pid})")
    return code


def _schedule(
    state: _State, err: TextIO, recheck_schema: Callable[[Connection], object] | None
) -> int:
    from cafleet import broker
    from cafleet.db.runtime import data_version
    from cafleet.db.timefmt import utcnow
    from cafleet.monitor.outage import Outage, is_transient

    failed = 0
    next_beat = time.monotonic()
    version = data_version(state.conn)  # on PostgreSQL: LISTEN from here on
    outage = Outage(state.conn, state.log, signals.stop_requested)
    while True:
        if signals.stop_requested():
            state.log(_signal_line())
            return 0
        try:
            if time.monotonic() >= next_beat:
                if recheck_schema is not None:
                    try:
                        recheck_schema(state.conn)
                    except Exception as exc:
                        if is_transient(state.conn, exc):
                            raise
                        _log_line(err, f"Error: {error_text(exc)}")
                        return 1
                if not broker.host_heartbeat(
                    state.conn, host_id=state.host_id, pid=state.pid, now=utcnow()
                ):
                    state.log("host loop slot taken over by another loop; stopping")
                    return 0
                next_beat = max(next_beat + state.tick_seconds, time.monotonic())
            _drain(state)
            if state.displaced:
                state.log("host loop slot taken over by another loop; stopping")
                return 0
            if not signals.stop_requested():
                from cafleet.monitor.hostwake import wake_remote_monitors

                wake_remote_monitors(
                    state.conn, state.host_id, state.wakes, state.wake_state, state.log
                )
        except Exception as exc:
            if is_transient(state.conn, exc):
                # A busy or unreachable database is waited out, never counted as a failed
                # pass; back, the loop beats and drains at once (docs/runtime.md §10.4).
                outage.wait_out(exc)
                next_beat = time.monotonic()
                continue
            failed += 1
            state.log(f"tick failed: {error_text(exc)}")
            _log_line(err, traceback.format_exc().rstrip("\n"))
            if failed >= MAX_FAILED_TICKS:
                state.log(f"{MAX_FAILED_TICKS} consecutive failed ticks; stopping")
                return 1
            next_beat = time.monotonic() + state.tick_seconds  # a failed tick waits its tick
        else:
            failed = 0
            outage.over()
        try:
            version = _wait(state.conn, next_beat, version)
        except Exception as exc:
            if not is_transient(state.conn, exc):
                raise
            # The wait is where a listening loop first hears of a lost connection.
            outage.wait_out(exc)
            next_beat = time.monotonic()


def _wait(conn: Connection, until: float, version: int) -> int:
    """Wait until the monotonic ``until``, a stop, or another connection's commit (new work);
    returns the data version seen last."""
    from cafleet.db.runtime import data_version, is_postgres_connection

    postgres = is_postgres_connection(conn)
    while not signals.stop_requested():
        left = until - time.monotonic()
        if left <= 0:
            break
        if postgres:
            from cafleet.db.pg.runtime import wait_for_change

            if wait_for_change(conn, min(WAIT_STEP, left)):  # type: ignore[arg-type]
                break
        else:
            time.sleep(min(WAIT_STEP, left))
            if data_version(conn) != version:
                break
    return data_version(conn)


def _signal_line() -> str:
    received = signals.received()
    try:
        name = signal.Signals(received).name if received is not None else "signal"
    except ValueError:
        name = f"signal {received}"
    return f"received {name}; stopping"


def _drain(state: _State) -> None:
    from cafleet import broker
    from cafleet.db.timefmt import utcnow
    from cafleet.delivery.drains import drain_host

    def before_attempt() -> bool:
        if signals.stop_requested():
            return False
        if not broker.host_heartbeat(
            state.conn, host_id=state.host_id, pid=state.pid, now=utcnow()
        ):
            state.displaced = True
            return False
        return True

    report = drain_host(
        state.conn,
        state.host_id,
        attempted=set(),
        blocked=set(),
        lock_timeout=state.lock_timeout,
        before_attempt=before_attempt,
        keep_waiting=lambda: not signals.stop_requested(),
        workers=state.workers,
    )
    log_drain_report(report, state.held_logged, state.log, "host")


# --- starting, healing, stopping (docs/runtime.md §10.4) --------------------------------------


def log_path_for(conn: Connection, host_id: str) -> str:
    from cafleet.config import host_log_path

    return host_log_path(conn.info["cafleet.path"], host_id)


def is_held(conn: Connection, host_id: str) -> bool:
    """`cafleet monitor host stop` left its hold: nothing restarts the loop by itself."""
    from cafleet.config import host_hold_path

    return os.path.exists(host_hold_path(conn.info["cafleet.path"], host_id))


def live_pid(conn: Connection, host_id: str) -> int | None:
    """The pid of the host's live loop, or None."""
    from cafleet import broker

    row = broker.get_host_loop(conn, host_id)
    if row is not None and broker.host_loop_live(row, host_id):
        return row.pid
    return None


def start_detached(
    conn: Connection, host_id: str, env: Mapping[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Spawn ``python -m cafleet monitor host run`` detached (its own session, stdin from
    /dev/null, stdout and stderr appended to the host's log, run from the local state
    directory), with this process's environment (``CAFLEET_HOST_ID`` included). Raises
    `HostLoopNotStarted` when it cannot be spawned; does not wait."""
    reap()
    log_path = log_path_for(conn, host_id)
    argv = [sys.executable, "-m", "cafleet", "monitor", "host", "run"]
    child_env = dict(os.environ if env is None else env)
    child_env["CAFLEET_HOST_ID"] = host_id  # the loop serves exactly this host
    try:
        return spawn_detached(argv, log_path=log_path, cwd=os.path.dirname(log_path), env=child_env)
    except OSError as exc:
        from cafleet import status

        detail = f"it could not be spawned: {status.os_error_text(exc)}"
        raise HostLoopNotStarted(host_id, log_path, detail) from exc


def ensure_host_loop(
    conn: Connection,
    host_id: str,
    *,
    keep_waiting: Callable[[], bool] | None = None,
    timeout: float = READY_TIMEOUT,
) -> tuple[int, bool]:
    """The pid of the host's live loop and whether this call started it: a new detached loop
    once its row is live (up to ``timeout`` s). Raises `HostLoopNotStarted`."""
    reap()
    pid = live_pid(conn, host_id)
    if pid is not None:
        return pid, False
    log_path = log_path_for(conn, host_id)
    child = start_detached(conn, host_id)
    deadline = time.monotonic() + timeout
    while True:
        pid = live_pid(conn, host_id)
        if pid is not None:
            return pid, True
        code = child.poll()
        if code is not None:
            pid = live_pid(conn, host_id)  # a racing starter may have won
            if pid is not None:
                return pid, False
            raise HostLoopNotStarted(host_id, log_path, f"it exited with status {code}")
        if time.monotonic() >= deadline:
            raise HostLoopNotStarted(
                host_id, log_path, f"it did not become live within {timeout:g} s"
            )
        if keep_waiting is not None and not keep_waiting():
            raise HostLoopNotStarted(host_id, log_path, "the wait was interrupted")
        time.sleep(READY_POLL)


def heal_host_loop(conn: Connection, env: Mapping[str, str] | None = None) -> bool:
    """Run after any command that opened the database: restart, in the background, this host's
    delivery loop when it ran before (its row exists) and is dead now (its pid gone or
    released), `monitor host stop` does not hold it, and it has something to serve (a member
    of a live fleet on this host whose Director is on another host). True when it started one.

    The cost when no loop ever ran on this host, or it is live: one read by primary key."""
    from cafleet import broker
    from cafleet.hosts import HostIdError, current_host
    from cafleet.procs import pid_alive

    try:
        here = current_host()
    except HostIdError:
        return False
    row = broker.get_host_loop(conn, here)
    if row is None or broker.host_loop_live(row, here):
        return False
    if row.pid is not None and pid_alive(row.pid):
        return False  # still running but beating late: left to `monitor host start`
    if is_held(conn, here) or not broker.host_serves(conn, here):
        return False
    try:
        start_detached(conn, here, env)
    except HostLoopNotStarted:
        return False
    return True


def _is_our_loop(pid: int) -> bool:
    """The pid runs `cafleet monitor host run`."""
    return runs_cafleet(pid, "host", "run")


def stop_host_loop(conn: Connection, host_id: str, *, timeout: float = STOP_TIMEOUT) -> int | None:
    """Hold this host's loop stopped, SIGTERM the running one and wait until it exited; the pid
    stopped, or None when none was running."""
    from cafleet import broker
    from cafleet.config import host_hold_path
    from cafleet.files import write_private
    from cafleet.procs import pid_alive

    write_private(
        host_hold_path(conn.info["cafleet.path"], host_id), f"{now_ts()} pid {os.getpid()}\n"
    )
    row = broker.get_host_loop(conn, host_id)
    pid = None if row is None else row.pid
    if pid is None or not pid_alive(pid) or not _is_our_loop(pid):
        return None
    if not terminate_and_wait(pid, _is_our_loop, timeout=timeout):
        raise HostLoopStartError(
            f"delivery loop for host {host_id} (pid {pid}) did not stop within "
            f"{timeout:g} s; it stays held stopped"
        )
    return pid


def lift_hold(conn: Connection, host_id: str) -> None:
    from cafleet.config import host_hold_path

    with contextlib.suppress(FileNotFoundError):
        os.unlink(host_hold_path(conn.info["cafleet.path"], host_id))


__all__ = [
    "HostLoopNotStarted",
    "HostLoopStartError",
    "ensure_host_loop",
    "heal_host_loop",
    "is_held",
    "lift_hold",
    "live_pid",
    "log_path_for",
    "run_host_loop",
    "start_detached",
    "stop_host_loop",
]
