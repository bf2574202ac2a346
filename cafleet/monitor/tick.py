"""One monitor tick (docs/runtime.md §5.5).

A tick heartbeats, checks the fleet and the Director's pane, drains the fleet's pending
notifications and wakes the monitor member when a wake is due or was requested. It either
returns normally (a successful tick), raises `supervisor.LoopStop` (a clean stop, the log line
carried by the exception) or raises anything else (a failed tick; the loop counts those).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cafleet.broker.errors import FleetNotFound
from cafleet.db.timefmt import format_ts, utcnow
from cafleet.errors import CafleetError
from cafleet.monitor.budgets import check_budgets
from cafleet.monitor.collisions import report_collisions
from cafleet.monitor.notify import Sender
from cafleet.monitor.state import LoopState, UnverifiedWake, log_drain_report
from cafleet.monitor.supervisor import LoopStop

if TYPE_CHECKING:
    from cafleet.db.runtime import Connection
    from cafleet.delivery.keys import RecheckState


def _fleet_gone(state: LoopState) -> bool:
    from cafleet import broker

    try:
        fleet = broker.get_fleet(state.conn, fleet_id=state.fleet_id)
    except FleetNotFound:
        return True
    return fleet is None or fleet.deleted_at is not None


def _stop_for_lost_heartbeat(state: LoopState) -> LoopStop:
    if _fleet_gone(state):
        return LoopStop(f"fleet {state.fleet_id} is deleted; stopping")
    return LoopStop("monitor slot taken over by another loop; stopping")


def heartbeat_or_stop(state: LoopState) -> None:
    if not state.beat():
        raise _stop_for_lost_heartbeat(state)


def run_tick(state: LoopState) -> None:
    from cafleet import broker

    # 1. Heartbeat.
    heartbeat_or_stop(state)

    # 2. Fleet.
    if _fleet_gone(state):
        raise LoopStop(f"fleet {state.fleet_id} is deleted; stopping")

    # 3. Live set (a failure fails the tick).
    live = state.backend.list_panes()

    # 4. Director pane: its own, on the server its placement was made on (docs/runtime.md
    # §1.8; a server started again on the socket reuses the id for another pane).
    from cafleet.mux import holds

    director = broker.director_placement(state.conn, state.fleet_id)
    director_pane = None if director is None else director.mux_pane_id
    if director is None or director_pane is None or not holds(live, director):
        if _fleet_gone(state):  # deleted meanwhile: that is the reason to stop
            raise LoopStop(f"fleet {state.fleet_id} is deleted; stopping")
        raise LoopStop(f"director pane {director_pane or '-'} is gone; stopping")

    # 4a. Lost member and monitor panes: reported to the Director once each (§5.11).
    from cafleet.monitor.losses import report_losses

    # Only this host's panes: another host's are not in this server's list (a pane id there
    # may even name one of ours) and its own delivery loop serves them (docs/runtime.md §10.2).
    members = on_this_host(broker.placed_members(state.conn, state.fleet_id))
    if report_losses(state, live, director_pane, members):
        heartbeat_or_stop(state)  # a batch of losses took its time: beat before the drain

    # 4b. Members' agent session ids not learned yet (docs/runtime.md §9.4).
    _learn_sessions(state)

    # 5. Drain, with fresh sets, every tick.
    _drain(state, live)
    if state.displaced:
        raise _stop_for_lost_heartbeat(state)
    if state.stop_requested():
        return

    # 5a. Members blocked at a prompt: reported to the Director once per prompt (§5.12). After
    # the drain, so the drain still runs right after the live set was taken.
    from cafleet.monitor.escalate import escalate_prompts

    escalate_prompts(state, live, director_pane, members)
    if state.displaced:
        raise _stop_for_lost_heartbeat(state)

    # 5b. Budgets reached: the member is paused (docs/cli.md §2.36); then the notification outbox is handed
    # to the sender thread, which never holds the tick (§2.35).
    check_budgets(state, members)
    _notify(state)
    # 5c. Two members' worktrees changing one path: reported to the Director once each.
    _collisions(state)

    # 6. Re-read the row.
    now = utcnow()
    row = broker.get_monitor_runtime(state.conn, fleet_id=state.fleet_id)
    if row is None:  # fleet deleted meanwhile; the next heartbeat stops the loop
        return
    interval = state.resolve_interval(row.wake_interval_seconds)
    requested = row.wake_requested_at

    # 7. Decide.
    from cafleet.monitor.cadence import wake_due

    forced = requested is not None
    due = interval > 0 and wake_due(now, interval, row.last_wake_at, row.started_at)
    if not (forced or due):
        return
    wake_monitor(
        state, live, now=now, requested=requested, forced=forced, director_pane=director_pane
    )


def on_this_host(members: list[Any]) -> list[Any]:
    """The fleet's placed members whose panes are on this host (`hosts.is_local`, a placement
    without a host being on its root Director's)."""
    from cafleet.hosts import current_host, is_local

    director = next((m for m in members if m.kind == "director"), None)
    director_host = None
    if director is not None and director.placement is not None:
        director_host = director.placement.host_id
    here = current_host()
    return [
        m
        for m in members
        if m.placement is None or is_local(m.placement.host_id, director_host, here)
    ]


def _learn_sessions(state: LoopState) -> None:
    """Learn what it can; a failure is logged once per distinct text and never fails the tick
    (the ids are also learned by `member show` and `member usage`)."""
    import time

    from cafleet.monitor.learning import LEARN_EVERY, learn_fleet

    now = time.monotonic()
    if now < state.next_learn_at:
        return
    state.next_learn_at = now + LEARN_EVERY
    try:
        for line in learn_fleet(state.conn, state.db_dir, state.fleet_id, state.backend):
            state.log(f"learned agent session of {line}")
        state.session_note = None
    except (CafleetError, OSError, ValueError) as exc:
        note = f"agent sessions not learned this tick: {exc}"
        if note != state.session_note:
            state.log(note)
        state.session_note = note


def _collisions(state: LoopState) -> None:
    """A failure is logged once per distinct text and never fails the tick."""
    try:
        report_collisions(state)
        state.collision_note = None
    except (CafleetError, OSError) as exc:
        note = f"collisions not checked this tick: {exc}"
        if note != state.collision_note:
            state.log(note)
        state.collision_note = note


def _drain(state: LoopState, live: frozenset[str]) -> None:
    from cafleet.delivery.drains import drain_fleet

    def before_attempt() -> bool:
        return not state.stop_requested() and state.beat()

    report = drain_fleet(
        state.conn,
        state.fleet_id,
        attempted=set(),
        blocked=set(),
        lock_timeout=state.lock_timeout,
        live_panes=live,
        before_attempt=before_attempt,
        keep_waiting=lambda: not state.stop_requested(),
    )
    log_drain_report(report, state.held_logged, state.log, "tick")


def _notify(state: LoopState) -> None:
    if state.notifier is None:
        state.notifier = Sender()
    state.notifier.pump(state.conn, state.log)


def _skip(state: LoopState, reason: str) -> None:
    if reason != state.last_skip_reason:
        state.log(f"{state.log_prefix} -> wake skipped: {reason}")
    state.last_skip_reason = reason


def _backend(state: LoopState, placement: Any) -> Any:
    """The monitor pane's backend: the loop's own server, or (a host loop's wake) the server
    the placement records."""
    from cafleet.mux import get_backend, placement_backend

    if state.by_socket:
        return placement_backend(placement.backend, placement.mux_socket)
    return get_backend(placement.backend)


def wake_monitor(
    state: LoopState,
    live: frozenset[str] | None,
    *,
    now: Any,
    requested: str | None,
    forced: bool,
    director_pane: str | None,
) -> None:
    """Type the wake line into the monitor member's pane and record it. ``live``: the loop's
    live panes (None: list the monitor's server here); ``director_pane`` None: the Director is
    on another host, so no pane here is its."""
    from cafleet import broker

    # 8. Target.
    monitor = broker.get_active_monitor(state.conn, fleet_id=state.fleet_id)
    if monitor is None:
        _skip(state, "no active monitor member")
        return
    placement = monitor.placement
    if placement is None or placement.mux_pane_id is None:
        _skip(state, f"monitor member {monitor.member_id} has no pane")
        return
    pane_id = placement.mux_pane_id
    from cafleet.hosts import current_host

    if placement.host_id is not None and placement.host_id != current_host():
        # That host's delivery loop types it (docs/runtime.md §10.4); the wake stays due.
        _skip(
            state,
            f"monitor pane {pane_id} is on host {placement.host_id} (its delivery loop wakes it)",
        )
        return
    from cafleet.mux import holds

    if live is None:
        from cafleet.mux import MultiplexerError

        try:
            live = _backend(state, placement).list_panes()
        except MultiplexerError as exc:
            _skip(state, f"monitor pane {pane_id}'s tmux server cannot be listed: {exc}")
            return
    if not holds(live, placement):
        _skip(state, f"monitor pane {pane_id} is gone")
        return
    if pane_id == director_pane:
        # Decision: the Director's pane is never typed into, whatever the rows say.
        _skip(state, f"monitor pane {pane_id} is the root Director's pane")
        return

    import time

    from cafleet.delivery.keys import Target, type_into_pane
    from cafleet.delivery.policy import SCROLLBACK_LINES
    from cafleet.mux import PaneKey, owner_of
    from cafleet.text import id_tag, line_id

    member_id = monitor.member_id
    if _earlier_wake_pending(state, placement, member_id, now=now, requested=requested):
        return
    key = PaneKey(placement.backend, placement.mux_session, pane_id)
    if state.wake_held_pane != pane_id:
        state.wake_held_since = state.wake_held_state = None
    held_since = state.wake_held_since
    wake_id = line_id()
    target = Target(
        agent=placement.coding_agent,
        # This wake's own id: recognised whatever the pane's height (docs/runtime.md §5.7).
        frame=id_tag("wake", wake_id),
        waited=0.0 if held_since is None else time.monotonic() - held_since,
        hold_timeout=state.hold_timeout,
        owner=owner_of(placement),
        spawned=True,  # the monitor is always spawned by cafleet
        scrollback=SCROLLBACK_LINES,
    )
    counted: list[int] = []

    def recheck() -> RecheckState:
        # 10.1 The placement under the lock.
        fresh = broker.get_active_monitor(state.conn, fleet_id=state.fleet_id)
        fp = fresh.placement if fresh is not None else None
        if (
            fresh is None
            or fresh.member_id != member_id
            or fp is None
            or (fp.backend, fp.mux_session, fp.mux_pane_id) != (key.backend, key.session, pane_id)
        ):
            return "changed"
        return "pending"

    def wake_line() -> str:
        # 10.3 The wake line, from a fresh read.
        line, count = build_line(state.conn, state.fleet_id, wake_id)
        counted.append(count)
        return line

    # 9.-11. Lock, recheck, probe (nothing is typed when it fails), type, record.
    outcome = type_into_pane(
        key,
        wake_line,
        backend=lambda: _backend(state, placement),
        db_dir=state.db_dir,
        purpose=f"wake monitor {member_id}",
        lock_timeout=state.lock_timeout,
        target=target,
        keep_waiting=lambda: not state.stop_requested(),
        recheck=recheck,
        record=lambda: broker.record_monitor_wake(
            state.conn, fleet_id=state.fleet_id, pid=state.pid, now=now, seen_request=requested
        ),
    )
    if outcome.kind == "abandoned":
        return
    if outcome.kind == "held":
        # The wake stays due; the next tick tries again (its hold timeout runs from here).
        if state.wake_held_since is None:
            state.wake_held_since = time.monotonic()
            state.wake_held_pane = pane_id
        if outcome.detail != state.wake_held_state:
            state.wake_held_state = outcome.detail
            state.log(f"{state.log_prefix} -> wake monitor {member_id} held: {outcome.reason}")
        return
    if outcome.kind == "unrecorded":
        assert outcome.error is not None
        raise outcome.error  # a wake that cannot be recorded fails the tick
    if not outcome.typed:
        state.log(f"{state.log_prefix} -> wake monitor {member_id} not delivered: {outcome.reason}")
        if outcome.kind == "unverified" and counted:
            state.unverified_wake = UnverifiedWake(
                pane_id, id_tag("wake", wake_id), time.monotonic(), counted[0]
            )
        return
    state.unverified_wake = None
    state.wake_held_since = state.wake_held_state = None
    count = counted[0]
    noun = "member" if count == 1 else "members"
    prefix = "forced wake" if forced else "wake"
    state.log(f"{state.log_prefix} -> {prefix} monitor {member_id} ({count} {noun})")
    state.last_skip_reason = None


def _earlier_wake_pending(
    state: LoopState, placement: Any, member_id: int, *, now: Any, requested: str | None
) -> bool:
    """A wake typed but not seen taken may be queued or worked on (a short pane scrolled it
    away, the agent redrew late): before typing another, look for its id in the pane's screen
    and history. Found: it was taken, so it is recorded now and nothing is typed. Not found
    while the monitor works: nothing is typed (the line may be in its queue), until the hold
    timeout. Otherwise (ready, or a screen without cues) the wake is typed again, with a new
    id. True when this tick types nothing (docs/runtime.md §5.5 step 10)."""
    import time

    from cafleet import broker
    from cafleet.delivery.policy import SCROLLBACK_LINES
    from cafleet.delivery.screens import classify
    from cafleet.delivery.submit import taken
    from cafleet.mux import MultiplexerError

    earlier = state.unverified_wake
    if earlier is None or earlier.pane_id != placement.mux_pane_id:
        state.unverified_wake = None
        return False
    agent = placement.coding_agent
    try:
        backend = _backend(state, placement)
        history = backend.capture(earlier.pane_id, SCROLLBACK_LINES)
        screen = backend.screen(earlier.pane_id)
    except MultiplexerError:
        return False  # the attempt itself reports what is wrong with the pane
    if taken(agent, "", history, earlier.tag) == "submitted":
        state.unverified_wake = None
        state.wake_wait_logged = False
        broker.record_monitor_wake(
            state.conn, fleet_id=state.fleet_id, pid=state.pid, now=now, seen_request=requested
        )
        noun = "member" if earlier.count == 1 else "members"
        state.log(
            f"{state.log_prefix} -> wake monitor {member_id} ({earlier.count} {noun}): "
            f"{earlier.tag} was taken after all; not typed again"
        )
        state.last_skip_reason = None
        return True
    waited = time.monotonic() - earlier.since
    if classify(agent, screen, spawned=True) == "working" and waited < state.hold_timeout:
        if not state.wake_wait_logged:
            state.wake_wait_logged = True
            state.log(
                f"{state.log_prefix} -> wake monitor {member_id} waits: pane {earlier.pane_id} "
                f"is working and {earlier.tag} may be queued; not typed again while it works"
            )
        return True
    state.unverified_wake = None
    state.wake_wait_logged = False
    return False


TASK_OVERDUE_MINUTES = 30  # a task in progress longer than this is named in the wake


def build_line(conn: Connection, fleet_id: int, wake_id: str | None = None) -> tuple[str, int]:
    """The §5.7 wake line and its roster size, from a fresh read.

    A missing Director or Director placement is an integrity error, which fails the tick.
    """
    from cafleet import broker
    from cafleet.monitor.wakeline import WakeEntry, build_wake_line

    roster = broker.wake_roster(conn, fleet_id=fleet_id)
    director = roster.director
    if director is None or director.coding_agent is None:
        raise RuntimeError(
            f"integrity error: fleet {fleet_id}'s root Director has no "
            + ("member row" if director is None else "placement")
        )
    entries = [
        WakeEntry(e.member_id, e.name, e.coding_agent or "", e.unacked) for e in roster.members
    ]
    from datetime import timedelta

    cutoff = format_ts(utcnow() - timedelta(minutes=TASK_OVERDUE_MINUTES))
    overdue = broker.overdue_tasks(conn, fleet_id, started_before=cutoff)
    line = build_wake_line(
        fleet_id,
        entries,
        WakeEntry(director.member_id, director.name, director.coding_agent, director.unacked),
        wake_id,
        [(t.task_id, t.assignee_member_id) for t in overdue],
        TASK_OVERDUE_MINUTES,
    )
    return line, len(entries)
