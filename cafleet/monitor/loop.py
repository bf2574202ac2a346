"""The loop process `cafleet monitor FLEET_ID` (docs/runtime.md §5.4): start-up, schedule, stopping.

The loop writes its log lines (§5.9) to stdout, flushed line by line; when it runs detached,
stdout and stderr are both the fleet's log file. A start-up failure raises
:class:`LoopStartError` (the CLI prints ``Error: <message>``, exit 1) and never leaves a claimed
slot. After the start line every exit clears the slot and prints the stopped line.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
import traceback
from typing import TYPE_CHECKING, TextIO

from cafleet import signals
from cafleet.db.timefmt import now_ts, utcnow
from cafleet.errors import CafleetError, error_text

if TYPE_CHECKING:
    from cafleet.config import Settings
    from cafleet.db.runtime import Connection
    from cafleet.monitor.logspace import LogReserve

SLEEP_STEP = 0.2  # no sleep lasts longer, so the stop flag is seen within 0.2 s
MAX_FAILED_TICKS = 3
# Releasing the slot is retried: on a full disk the first UPDATE fails, and a WAL checkpoint
# between tries lets the next write reuse the WAL's already allocated pages.
RELEASE_TRIES = 5
RELEASE_PAUSE = 0.5


class LoopStartError(CafleetError):
    """A start-up failure (docs/cli.md §2.21); str() is the message after ``Error: ``."""


class _Log:
    def __init__(self, out: TextIO) -> None:
        self.out = out

    def raw(self, text: str) -> None:
        try:
            self.out.write(text + "\n")
            self.out.flush()
        except (OSError, ValueError):  # a closed or broken log never stops the loop
            pass

    def __call__(self, text: str) -> None:
        self.raw(f"{now_ts()} {text}")


def _startup(
    conn: Connection,
    settings: Settings,
    fleet_id: int,
    tick: int | None,
    interval: int | None,
) -> tuple[object, int, int]:
    """docs/runtime.md §5.4 steps 1–5. Returns (backend, tick_seconds, wake_interval); raises LoopStartError."""
    from cafleet import broker
    from cafleet.broker.errors import FleetDeleted, FleetNotFound
    from cafleet.monitor.runtime import is_live

    # 1. The fleet must exist and not be deleted.
    try:
        fleet = broker.get_fleet(conn, fleet_id=fleet_id)
    except FleetNotFound as exc:
        raise LoopStartError(str(exc)) from None
    if fleet is None:
        raise LoopStartError(str(FleetNotFound(fleet_id)))
    if fleet.deleted_at is not None:
        raise LoopStartError(str(FleetDeleted(fleet_id)))

    # 2. tmux availability, then one list_panes() probe.
    from cafleet.mux import MultiplexerError, usable_backend

    try:
        backend = usable_backend()
        live = backend.list_panes()
    except MultiplexerError as exc:
        raise LoopStartError(str(exc)) from None

    # 3. The Director's pane must be on this host (the loop types into this host's panes
    # only, docs/runtime.md §10.2) and live.
    from cafleet.hosts import current_host

    director = broker.director_placement(conn, fleet_id)
    here = current_host()
    if director is not None and director.host_id not in (None, here):
        raise LoopStartError(
            f"director pane {director.mux_pane_id or '-'} is on host {director.host_id}, not "
            f"this host ({here}); the fleet's monitor loop runs there"
        )
    from cafleet.mux import holds

    pane = None if director is None else director.mux_pane_id
    if director is None or pane is None or not holds(live, director):
        raise LoopStartError(f"director pane {pane or '-'} is gone")

    # 4. The interval: --interval, the stored value, the environment, 600.
    row = broker.get_monitor_runtime(conn, fleet_id=fleet_id)
    if interval is None:
        if row is not None and row.wake_interval_seconds is not None:
            interval = row.wake_interval_seconds
        else:
            interval = settings.wake_interval_default

    # 5. Claim.
    try:
        claimed = broker.claim_monitor(
            conn,
            fleet_id=fleet_id,
            pid=os.getpid(),
            tick_seconds=tick,
            wake_interval_seconds=interval,
            is_live=is_live,
            now=utcnow(),
        )
    except (FleetNotFound, FleetDeleted) as exc:
        raise LoopStartError(str(exc)) from None
    if not claimed:
        raise LoopStartError(f"monitor already running for fleet {fleet_id}")
    try:
        row = broker.get_monitor_runtime(conn, fleet_id=fleet_id)
    except BaseException:
        # A failed start-up never leaves a claimed slot.
        with contextlib.suppress(Exception):
            broker.clear_monitor(conn, fleet_id=fleet_id, pid=os.getpid())
        raise
    tick_seconds = row.tick_seconds if row is not None and row.tick_seconds else 5
    return backend, int(tick_seconds), int(interval)


def run_loop(
    conn: Connection,
    settings: Settings,
    fleet_id: int,
    *,
    tick: int | None = None,
    interval: int | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
    recheck_schema: object = None,
) -> int:
    """Run the loop until a stop condition; return the exit code (0 or 1).

    ``recheck_schema(conn)`` is the guard's long-running check: called once per cycle, it
    raises when the file is no longer current (its str() is the guard's message).
    """
    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    log = _Log(out)
    pid = os.getpid()
    from cafleet.monitor.logspace import reserve_for

    reserve = reserve_for(out)
    if reserve is not None:
        reserve.refresh()

    backend, tick_seconds, wake_interval = _startup(conn, settings, fleet_id, tick, interval)

    # 6. From here on the slot is ours: every exit clears it.
    from cafleet.monitor.state import LoopState

    code = 0
    try:
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        # 7. The start line.
        log.raw(
            f"monitor loop started (fleet {fleet_id}, tick {tick_seconds}s, "
            f"wake interval {wake_interval}s, pid {pid})"
        )
        state = LoopState(
            conn=conn,
            fleet_id=fleet_id,
            pid=pid,
            tick_seconds=tick_seconds,
            pane_lock_timeout=settings.pane_lock_timeout,
            env_wake_interval=settings.monitor_wake_interval,
            hold_timeout=settings.delivery_hold_timeout,
            escalate_after=settings.escalate_after,
            backend=backend,
            log=log,
            stop_requested=signals.stop_requested,
        )
        code = _schedule(state, log, err, recheck_schema, reserve)
    except BaseException as exc:
        # Whatever _schedule did not handle still ends in the log with its whole traceback
        # (then the slot is released below); an Exception is a failed stop, exit 1.
        log(f"loop failed: {error_text(exc)}; stopping")
        _write(err, traceback.format_exc().rstrip("\n"))
        if not isinstance(exc, Exception):
            raise
        code = 1
    finally:
        _release(conn, fleet_id, pid, log, err)
        log.raw(f"monitor loop stopped (fleet {fleet_id}, pid {pid})")
    return code


def _release(conn: Connection, fleet_id: int, pid: int, log: _Log, err: TextIO) -> None:
    """Clear our slot (pid-matched, so a successor's claim is never undone), retrying a failed
    write a few times with a WAL checkpoint in between; a slot that still cannot be released
    is logged and goes stale (the next start takes it over)."""
    from cafleet import broker

    for attempt in range(1, RELEASE_TRIES + 1):
        try:
            broker.clear_monitor(conn, fleet_id=fleet_id, pid=pid)
            return
        except Exception as exc:
            if attempt == RELEASE_TRIES:
                log(
                    f"cleanup failed for the monitor slot: {error_text(exc)}; the slot goes "
                    "stale and the next loop start takes it over"
                )
                _write(err, traceback.format_exc().rstrip("\n"))
                return
        with contextlib.suppress(Exception):
            from cafleet.db.runtime import raw

            if conn.in_transaction():
                conn.rollback()
            raw(conn).execute("PRAGMA wal_checkpoint(RESTART)")
        time.sleep(RELEASE_PAUSE)


def _write(stream: TextIO, text: str) -> None:
    try:
        stream.write(text + "\n")
        stream.flush()
    except (OSError, ValueError):
        pass


def _signal_line() -> str:
    received = signals.received()
    try:
        name = signal.Signals(received).name if received is not None else "signal"
    except ValueError:
        name = f"signal {received}"
    return f"received {name}; stopping"


def _schedule(
    state: object, log: _Log, err: TextIO, recheck_schema: object, reserve: LogReserve | None
) -> int:
    from cafleet.monitor.outage import Outage, is_transient
    from cafleet.monitor.state import LoopState
    from cafleet.monitor.tick import LoopStop, run_tick

    assert isinstance(state, LoopState)
    failed = 0
    next_start = time.monotonic()
    outage = Outage(state.conn, log, signals.stop_requested)
    while True:
        if signals.stop_requested():
            log(_signal_line())
            return 0
        if callable(recheck_schema):
            try:
                recheck_schema(state.conn)
            except Exception as exc:
                if is_transient(state.conn, exc):
                    outage.wait_out(exc)  # then the next cycle at once
                    continue
                _write(err, f"Error: {error_text(exc)}")
                return 1
        try:
            run_tick(state)
        except LoopStop as stop:
            log(stop.line)
            return stop.code
        except Exception as exc:
            if is_transient(state.conn, exc):
                # A busy or unreachable database is waited out, never counted as a failed
                # tick (docs/runtime.md §5.4).
                outage.wait_out(exc)
                next_start = time.monotonic()
                continue
            failed += 1
            log(f"tick failed: {error_text(exc)}")
            _write(err, traceback.format_exc().rstrip("\n"))
            if failed >= MAX_FAILED_TICKS:
                log(f"{MAX_FAILED_TICKS} consecutive failed ticks; stopping")
                return 1
        else:
            failed = 0
            outage.over()
        if reserve is not None:
            reserve.refresh()  # keep room for the log's last words (a full disk)
        next_start += state.tick_seconds
        now = time.monotonic()
        if next_start < now:  # the tick overran: start the next one at once
            next_start = now
        while not signals.stop_requested():
            remaining = next_start - time.monotonic()
            if remaining <= 0:
                break
            time.sleep(min(SLEEP_STEP, remaining))
