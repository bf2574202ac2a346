"""A host's scope of the supervisor, `cafleet monitor host run` (docs/runtime.md §10.4).

One loop per host delivers the pending lines for panes on its host in every fleet whose root
Director is on another host (the fleet loop on the Director's host skips them), and wakes the
monitor members on this host of such fleets (`cafleet.monitor.hostwake`). Its slot is the
host's `host_loops` row, heartbeated once a tick, so other hosts see whether it is alive without
signalling its pid. A pass drains; a commit ends the wait between passes (PostgreSQL's
`LISTEN`, SQLite's `PRAGMA data_version` read every 0.2 s).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cafleet import broker, signals
from cafleet.config import host_hold_path, host_log_path
from cafleet.db.timefmt import utcnow
from cafleet.hosts import HostIdError, current_host
from cafleet.monitor import supervisor
from cafleet.monitor.hostwake import wake_remote_monitors
from cafleet.monitor.state import LoopState, log_drain_report
from cafleet.monitor.supervisor import LoopLog, LoopStartError, LoopStop, Scope
from cafleet.procs import pid_alive

if TYPE_CHECKING:
    from cafleet.config import Settings
    from cafleet.db.runtime import Connection

DEFAULT_TICK = 5


@dataclass
class _Pass:
    """What survives between a host loop's passes."""

    pid: int
    log: LoopLog
    settings: Settings
    lock_timeout: float
    displaced: bool = False
    held_logged: dict[int, str] = field(default_factory=dict)
    wakes: dict[int, LoopState] = field(default_factory=dict)  # per fleet (monitor wakes)


class HostScope(Scope):
    """One host's delivery loop. ``settings`` and ``tick`` matter to the loop process only."""

    slot_name = "host loop slot"
    words = ("monitor", "host", "run")
    wakes_on_change = True

    def __init__(
        self,
        conn: Connection,
        host_id: str,
        *,
        settings: Settings | None = None,
        tick: int | None = None,
    ) -> None:
        super().__init__(conn)
        self.host_id = host_id
        self.settings = settings
        self.tick_seconds = tick if tick is not None else DEFAULT_TICK
        self.title = f"delivery loop for host {host_id}"
        self.state: _Pass | None = None

    @property
    def log_path(self) -> str:
        return host_log_path(self.conn.info["cafleet.path"], self.host_id)

    @property
    def hold_path(self) -> str:
        return host_hold_path(self.conn.info["cafleet.path"], self.host_id)

    def slot_pid(self) -> int | None:
        row = broker.get_host_loop(self.conn, self.host_id)
        return None if row is None else row.pid

    def live_pid(self) -> int | None:
        row = broker.get_host_loop(self.conn, self.host_id)
        if row is not None and broker.host_loop_live(row, self.host_id):
            return row.pid
        return None

    def child(self, env: Mapping[str, str] | None) -> tuple[str, dict[str, str]]:
        child_env = dict(os.environ if env is None else env)
        child_env["CAFLEET_HOST_ID"] = self.host_id  # the loop serves exactly this host
        return os.path.dirname(self.log_path), child_env

    def open(self, pid: int, log: LoopLog) -> str:
        settings = self.settings
        assert settings is not None, "the loop process passes its settings"
        claimed = broker.claim_host_loop(
            self.conn, host_id=self.host_id, pid=pid, tick_seconds=self.tick_seconds
        )
        if claimed is None:
            running = self.slot_pid()
            holder = "" if running is None else f" (pid {running})"
            raise LoopStartError(f"delivery loop already running for host {self.host_id}{holder}")
        lock_timeout = float(min(settings.pane_lock_timeout, self.tick_seconds))
        self.state = _Pass(pid, log, settings, lock_timeout)
        return f"host loop started (host {self.host_id}, tick {self.tick_seconds}s, pid {pid})"

    def step(self, due: bool) -> None:
        run = self.state
        assert run is not None
        taken = LoopStop("host loop slot taken over by another loop; stopping")
        if due and not self._beat():
            raise taken
        self._drain(run)
        if run.displaced:
            raise taken
        if not signals.stop_requested():
            wake_remote_monitors(self.conn, self.host_id, run.wakes, self._wake_state, run.log)

    def release(self, pid: int) -> None:
        broker.clear_host_loop(self.conn, host_id=self.host_id, pid=pid)

    def stopped_line(self, pid: int) -> str:
        return f"host loop stopped (host {self.host_id}, pid {pid})"

    def _beat(self) -> bool:
        assert self.state is not None
        return broker.host_heartbeat(
            self.conn, host_id=self.host_id, pid=self.state.pid, now=utcnow()
        )

    def _drain(self, run: _Pass) -> None:
        from cafleet.delivery.drains import drain_host

        def before_attempt() -> bool:
            if signals.stop_requested():
                return False
            if not self._beat():
                run.displaced = True
                return False
            return True

        report = drain_host(
            self.conn,
            self.host_id,
            attempted=set(),
            blocked=set(),
            lock_timeout=run.lock_timeout,
            before_attempt=before_attempt,
            keep_waiting=lambda: not signals.stop_requested(),
            workers=run.settings.delivery_workers,
        )
        log_drain_report(report, run.held_logged, run.log, "host")

    def _wake_state(self, fleet_id: int, pid: int) -> LoopState:
        """The wake state of a fleet whose monitor is on this host (cafleet.monitor.hostwake)."""
        run = self.state
        assert run is not None
        return LoopState.of(
            self.conn,
            fleet_id,
            pid,
            self.tick_seconds,
            run.settings,
            run.log,
            backend=None,  # the wake lists the monitor's own server
            log_prefix="host",
            by_socket=True,
        )


def ensure_host_loop(
    conn: Connection, host_id: str, *, keep_waiting: Callable[[], bool] | None = None
) -> tuple[int, bool]:
    """`supervisor.ensure` for this host's loop; an interrupted wait is one more reason it did
    not start (`supervisor.LoopNotStarted`)."""
    scope = HostScope(conn, host_id)
    try:
        return supervisor.ensure(scope, keep_waiting=keep_waiting)
    except supervisor.StartAbandoned:
        raise supervisor.LoopNotStarted(
            scope.title, scope.log_path, "the wait was interrupted"
        ) from None


def heal_host_loop(conn: Connection, env: Mapping[str, str] | None = None) -> bool:
    """Run after any command that opened the database: restart, in the background, this host's
    delivery loop when it ran before (its row exists) and is dead now (its pid gone or
    released), `monitor host stop` does not hold it, and it has something to serve (a member
    of a live fleet on this host whose Director is on another host). True when it started one.

    The cost when no loop ever ran on this host, or it is live: one read by primary key."""
    try:
        here = current_host()
    except HostIdError:
        return False
    row = broker.get_host_loop(conn, here)
    if row is None or broker.host_loop_live(row, here):
        return False
    if row.pid is not None and pid_alive(row.pid):
        return False  # still running but beating late: left to `monitor host start`
    scope = HostScope(conn, here)
    if supervisor.is_held(scope) or not broker.host_serves(conn, here):
        return False
    try:
        supervisor.start_detached(scope, env)
    except supervisor.LoopNotStarted:
        return False
    return True


__all__ = ["HostScope", "ensure_host_loop", "heal_host_loop"]
