"""The fleet's scope of the supervisor, `cafleet monitor FLEET_ID` (docs/runtime.md §5.4): its
slot is the fleet's `monitor_runtime` row, its start-up checks the fleet and its Director's pane,
and one pass is one tick (`cafleet.monitor.tick`), every tick's length.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from cafleet import broker
from cafleet.broker.errors import FleetDeleted, FleetNotFound
from cafleet.config import db_dir_of, monitor_hold_path, monitor_log_path
from cafleet.db.timefmt import utcnow
from cafleet.hosts import current_host
from cafleet.monitor.notify import fire, flush, payload
from cafleet.monitor.runtime import is_live, loop_env
from cafleet.monitor.state import LoopState
from cafleet.monitor.supervisor import LoopLog, LoopStartError, Scope
from cafleet.monitor.tick import run_tick

if TYPE_CHECKING:
    from cafleet.config import Settings
    from cafleet.db.runtime import Connection

DEFAULT_TICK = 5


class FleetScope(Scope):
    """One fleet's monitor loop. ``settings``, ``tick`` and ``interval`` matter to the loop
    process only (`open`)."""

    slot_name = "monitor slot"

    def __init__(
        self,
        conn: Connection,
        fleet_id: int,
        *,
        settings: Settings | None = None,
        tick: int | None = None,
        interval: int | None = None,
    ) -> None:
        super().__init__(conn)
        self.fleet_id = fleet_id
        self.settings = settings
        self.tick = tick
        self.interval = interval
        self.title = f"monitor loop for fleet {fleet_id}"
        self.words = ("monitor", str(fleet_id))
        self.state: LoopState | None = None

    @property
    def log_path(self) -> str:
        return monitor_log_path(self.conn.info["cafleet.path"], self.fleet_id)

    @property
    def hold_path(self) -> str:
        return monitor_hold_path(self.conn.info["cafleet.path"], self.fleet_id)

    def slot_pid(self) -> int | None:
        row = broker.get_monitor_runtime(self.conn, fleet_id=self.fleet_id)
        return None if row is None else row.pid

    def live_pid(self) -> int | None:
        row = broker.get_monitor_runtime(self.conn, fleet_id=self.fleet_id)
        if row is not None and row.pid is not None and is_live(row, utcnow()):
            return int(row.pid)
        return None

    def child(self, env: Mapping[str, str] | None) -> tuple[str, dict[str, str]]:
        cwd = db_dir_of(self.conn.info["cafleet.path"])  # PostgreSQL: its local directory
        return cwd, loop_env(self.conn, self.fleet_id) if env is None else dict(env)

    def open(self, pid: int, log: LoopLog) -> str:
        """docs/runtime.md §5.4 steps 1-5: the fleet, tmux, the Director's pane on this host,
        the interval, the claim."""
        from cafleet.mux import MultiplexerError, holds, usable_backend

        conn, fleet_id = self.conn, self.fleet_id
        settings = self.settings
        assert settings is not None, "the loop process passes its settings"
        try:
            fleet = broker.get_fleet(conn, fleet_id=fleet_id)
        except FleetNotFound as exc:
            raise LoopStartError(str(exc)) from None
        if fleet is None:
            raise LoopStartError(str(FleetNotFound(fleet_id)))
        if fleet.deleted_at is not None:
            raise LoopStartError(str(FleetDeleted(fleet_id)))
        try:
            backend = usable_backend()
            live = backend.list_panes()
        except MultiplexerError as exc:
            raise LoopStartError(str(exc)) from None
        # The loop types into this host's panes only (docs/runtime.md §10.2).
        director = broker.director_placement(conn, fleet_id)
        here = current_host()
        if director is not None and director.host_id not in (None, here):
            raise LoopStartError(
                f"director pane {director.mux_pane_id or '-'} is on host {director.host_id}, not "
                f"this host ({here}); the fleet's monitor loop runs there"
            )
        # Listed by id is not enough: the pane must be the one the placement records on the
        # server it records (docs/runtime.md §1.8).
        pane = None if director is None else director.mux_pane_id
        if director is None or pane is None or not holds(live, director):
            raise LoopStartError(f"director pane {pane or '-'} is gone")
        row = broker.get_monitor_runtime(conn, fleet_id=fleet_id)
        interval = self.interval
        if interval is None:
            if row is not None and row.wake_interval_seconds is not None:
                interval = row.wake_interval_seconds
            else:
                interval = settings.wake_interval_default
        try:
            claimed = broker.claim_monitor(
                conn,
                fleet_id=fleet_id,
                pid=pid,
                tick_seconds=self.tick,
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
            with contextlib.suppress(Exception):  # a failed start-up never leaves a claim
                broker.clear_monitor(conn, fleet_id=fleet_id, pid=pid)
            raise
        tick = row.tick_seconds if row is not None and row.tick_seconds else DEFAULT_TICK
        self.tick_seconds = int(tick)
        self.state = LoopState.of(
            conn, fleet_id, pid, self.tick_seconds, settings, log, backend=backend
        )
        return (
            f"monitor loop started (fleet {fleet_id}, tick {self.tick_seconds}s, "
            f"wake interval {interval}s, pid {pid})"
        )

    def step(self, due: bool) -> None:
        assert self.state is not None
        run_tick(self.state)

    def release(self, pid: int) -> None:
        broker.clear_monitor(self.conn, fleet_id=self.fleet_id, pid=pid)

    def stopped_line(self, pid: int) -> str:
        return f"monitor loop stopped (fleet {self.fleet_id}, pid {pid})"

    def on_stop(self, reason: str) -> None:
        """The `loop_stopped` event (docs/cli.md §2.35), sent before the process ends: no
        loop is left to send it later (a deleted fleet has nobody to tell)."""
        if "is deleted" in reason:
            return
        text = f"[cafleet] the monitor loop of fleet {self.fleet_id} stopped: {reason}"
        data = payload("loop_stopped", self.fleet_id, text)
        fire(self.conn, self.fleet_id, "loop_stopped", f"{os.getpid()}", data)
        sender = self.state.notifier if self.state is not None else None
        flush(self.conn, sender, log=self.state.log if self.state is not None else None)


__all__ = ["FleetScope"]
