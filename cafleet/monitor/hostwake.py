"""The wake of a monitor member whose pane is on this host while its fleet's loop runs on the
root Director's host (docs/runtime.md §10.4): the host's delivery loop types it.

Only a process on the pane's host may type into it (docs/runtime.md §10.2), so the fleet loop
leaves such a wake due and this host's loop does the wake step of a tick (docs/runtime.md §5.5
steps 6-12) for it: while the fleet loop is live (its heartbeat: its pid is on another host),
when its wake is due by the fleet's cadence or was requested; the wake is recorded in the fleet
loop's row, guarded by that loop's pid as read, exactly as the loop itself records it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from cafleet.db.timefmt import utcnow
from cafleet.errors import error_text

if TYPE_CHECKING:
    from cafleet.db.runtime import Connection
    from cafleet.monitor.state import LoopState


def wake_remote_monitors(
    conn: Connection,
    host_id: str,
    states: dict[int, LoopState],
    new_state: Callable[[int, int], LoopState],
    log: Callable[[str], None],
) -> None:
    """One pass: every due wake of a monitor on ``host_id`` whose fleet is directed from another
    host. ``states`` keeps each fleet's wake state between passes (held and unverified wakes);
    ``new_state(fleet_id, pid)`` makes one. A failure is logged and never stops the pass."""
    from cafleet import broker
    from cafleet.monitor.cadence import wake_due
    from cafleet.monitor.runtime import is_live
    from cafleet.monitor.tick import wake_monitor

    now = utcnow()
    rows = broker.remote_monitor_runtimes(conn, host_id)
    for gone in set(states) - {row.fleet_id for row in rows}:
        del states[gone]
    for row in rows:
        if row.pid is None or not is_live(row, now, remote=True):
            continue  # no fleet loop runs: nobody wakes the monitor (as on one host)
        state = states.get(row.fleet_id)
        if state is None:
            state = states[row.fleet_id] = new_state(row.fleet_id, row.pid)
        state.pid = row.pid  # recorded in the fleet loop's row only while that loop holds it
        interval = state.resolve_interval(row.wake_interval_seconds)
        forced = row.wake_requested_at is not None
        due = interval > 0 and wake_due(now, interval, row.last_wake_at, row.started_at)
        if not (forced or due):
            continue
        moment = time.monotonic()
        if moment < state.next_wake_try and row.wake_requested_at == state.request_tried:
            continue  # tried this tick already (held, not delivered): the next tick tries again
        state.next_wake_try = moment + state.tick_seconds
        state.request_tried = row.wake_requested_at
        try:
            wake_monitor(
                state,
                None,
                now=now,
                requested=row.wake_requested_at,
                forced=forced,
                director_pane=None,
            )
        except Exception as exc:
            log(f"host -> wake of fleet {row.fleet_id}'s monitor failed: {error_text(exc)}")


__all__ = ["wake_remote_monitors"]
