"""`fleet restore` (docs/cli.md §2.27; docs/operations.md §4.1): bring a fleet back
after its tmux server is gone, from a new pane.

The calling pane becomes the root Director's (as `fleet adopt`; skipped when it already is),
every active member whose pane is gone is respawned continuing its own agent session
(`member respawn --resume`), a member left half-made by an interrupted `member create` has that
create finished (`member respawn`), then the fleet's loop is started. Members whose pane runs are left
alone, so a second run changes nothing. Each member's outcome is reported; one member's failure
does not stop the others.

Across hosts (docs/runtime.md §10.3): a pane can be re-created only on its own host's tmux
server, so each host restores its own members. On the root Director's host the command works as
above for the members there; on another host it leaves the Director and its fleet loop alone,
restores the members whose pane is on this host next to the calling pane (as `member respawn`
there) and starts this host's delivery loop. A member on another host is reported with the host
to run `fleet restore` on; nothing is tried or written for it, and it is not a failure.

Each member is looked at and respawned under its member lock (`recovery.member_held`), so two
restores at once give each member one agent: the second finds the first one's pane running and
reports it `alive`. A rerun after a killed restore first ends any agent the killed run spawned
but never recorded (`recovery._end_strays`).

Decision: a member whose agent session was never learned (its agent recorded none, or the loop
never saw it) has no conversation to lose, so it is started afresh with its spawn prompt and
reported so; a member whose session is known but that its agent no longer has is not restored
(`member respawn --resume`'s error): starting it afresh would drop its work silently.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cafleet import broker, signals
from cafleet.broker import session_id
from cafleet.errors import CafleetError, error_text
from cafleet.hosts import current_host, effective_host
from cafleet.mux import MultiplexerError, PaneGone, owner_of, same_server, tmux_backend
from cafleet.mux.locks import PaneLockAbandoned
from cafleet.workflows.errors import WorkflowError
from cafleet.workflows.hosts import start_on_demand
from cafleet.workflows.recovery import server_gone, start_loop, take_over

if TYPE_CHECKING:
    from cafleet.config import Settings
    from cafleet.db.runtime import Connection
    from cafleet.records import Member


@dataclass(frozen=True, slots=True)
class Outcome:
    member_id: int
    name: str
    state: str  # "alive" | "resumed" | "afresh" | "finished" | "failed" | "elsewhere"
    detail: str  # the pane (alive, resumed), the error (failed), the host (elsewhere)
    session_id: str | None = None


@dataclass(frozen=True, slots=True)
class Restored:
    fleet_id: int
    director_pane: str | None  # None: the root Director is on another host (director_host)
    adopted_from: str | None  # the Director's previous pane when this run adopted it
    outcomes: list[Outcome]
    loop_pid: int | None
    loop_warning: str | None
    director_host: str | None = None  # the root Director's host (None: not recorded)
    host_id: str | None = None  # this host, when its delivery loop serves the members here
    host_loop_pid: int | None = None
    host_loop_warning: str | None = None

    @property
    def failed(self) -> bool:
        return any(o.state == "failed" for o in self.outcomes)


def _pane_runs(conn: Connection, backend: Any, member: Member) -> bool:
    """Whether the member's own pane still runs (on its server, in its session and window, the
    process the placement records: docs/runtime.md §1.8)."""
    from cafleet.mux import MultiplexerError, replaced
    from cafleet.workflows.panes import predates_server

    placement = member.placement
    assert placement is not None and placement.mux_pane_id is not None
    if broker.pane_shared_with(conn, placement) is not None or predates_server(backend, placement):
        return False  # the id now names another member's pane, or an earlier server's
    if not same_server(backend.socket_path, placement.mux_socket):
        # A live other server is not ours to judge: left alone. A gone one took the pane along.
        return not server_gone(placement.mux_socket)
    try:
        status = backend.pane_status(placement.mux_pane_id)
    except PaneGone:
        return False
    except MultiplexerError:
        return True  # cannot tell: leave it alone (the outcome says alive, never a double)
    owner = owner_of(placement)
    where = (status.session, status.window_id)
    if None not in where and where != (owner.session, owner.window_id):
        return False
    return not status.dead and not replaced(owner, status.server, status.pane_pid)


def restore(
    conn: Connection, settings: Settings, fleet_id: int, *, coding_agent: str | None = None
) -> Restored:

    fleet = broker.get_fleet(conn, fleet_id)
    if fleet.deleted_at is not None:
        raise broker.FleetDeleted(fleet_id)
    backend = tmux_backend()
    try:
        backend.ensure_available()
        here = backend.discover_context()
    except MultiplexerError as exc:
        raise WorkflowError(f"cafleet fleet restore must be run inside a tmux pane: {exc}") from exc
    if fleet.director_member_id is None:
        raise WorkflowError(f"fleet {fleet_id} has no root Director")
    director = broker.get_member(conn, fleet.director_member_id)
    me = current_host()
    director_host = director.placement.host_id if director.placement is not None else None
    director_here = director_host in (None, me)
    adopted_from = None
    taken = None
    if director_here:
        # Decided under the Director's lock: a restore that ran meanwhile already adopted it.
        taken = take_over(conn, settings, fleet_id, coding_agent=coding_agent, if_needed=True)
    if taken is not None:
        director, moved, previous = taken
        adopted_from = previous or "-"
        director_host = moved.host_id
    outcomes = []
    for member in _members(conn, settings, fleet_id):
        signals.check()
        other = _other_host(member, director_host, me)
        if other is not None:  # its own host restores it: nothing is tried from here
            outcomes.append(Outcome(member.member_id, member.name, "elsewhere", other))
            continue
        try:
            outcomes.append(_restore_member(conn, settings, backend, member))
        except Exception as exc:
            if not _reportable(exc):
                raise
            outcomes.append(Outcome(member.member_id, member.name, "failed", error_text(exc)))
    # A restarted agent comes back idle: what it had in progress is sent to it again, and the
    # loop started below types it.
    restarted = [o.member_id for o in outcomes if o.state in ("resumed", "afresh")]
    if restarted:
        broker.remind_restarted(conn, fleet_id=fleet_id, member_ids=restarted)
    if director_here:
        pid, warning = start_loop(conn, fleet_id)
        return Restored(fleet_id, here.pane_id, adopted_from, outcomes, pid, warning, director_host)
    restored = Restored(fleet_id, None, None, outcomes, None, None, director_host)
    if all(o.state == "elsewhere" for o in outcomes) or signals.stop_requested():
        return restored
    # The members here are served by this host's delivery loop (docs/runtime.md §10.4).
    host_pid, problem = start_on_demand(conn, me, "the members on this host")
    return dataclasses.replace(
        restored, host_id=me, host_loop_pid=host_pid, host_loop_warning=problem
    )


def _members(conn: Connection, settings: Settings, fleet_id: int) -> list[Member]:
    """The fleet's placed members but the root Director, and those left half-made here by an
    interrupted `member create` (`cafleet.workflows.halfmade`), by id."""
    from cafleet.workflows.halfmade import half_made

    placed = [m for m in broker.placed_members(conn, fleet_id) if m.kind != "director"]
    roster = [e.member for e in broker.member_roster(conn, fleet_id=fleet_id)]
    pending = [m for m in roster if m.placement is not None and m.placement.mux_pane_id is None]
    left = [hm.member for hm in half_made(conn, settings.db_dir, pending)]
    return sorted([*placed, *left], key=lambda m: m.member_id)


def _restore_member(conn: Connection, settings: Settings, backend: Any, member: Member) -> Outcome:
    """One member of this host, under its member lock: left alone while its own pane runs (a
    restore that ran meanwhile may have just re-created it), else respawned continuing its
    session when one is known. A half-made member's create is finished (`member respawn`)."""
    from cafleet.workflows.panes import active_member
    from cafleet.workflows.recovery import PaneStillRunning, member_held, respawn_locked

    mid = member.member_id
    with member_held(conn, settings, mid):
        fresh = active_member(conn, mid)
        placement = fresh.placement
        alive = Outcome(mid, member.name, "alive", "")
        if placement is not None and placement.mux_pane_id is not None:
            alive = dataclasses.replace(alive, detail=f"pane {placement.mux_pane_id}")
            if _pane_runs(conn, backend, fresh):
                return alive
        resume = session_id(conn, mid) is not None
        try:
            done = respawn_locked(conn, settings, mid, resume=resume)
        except PaneStillRunning as exc:  # another server's pane it could not judge first
            return dataclasses.replace(alive, detail=f"pane {exc.pane_id}")
    state = "resumed" if resume else "afresh"
    if done.previous_pane_id is None:
        state = "finished"  # its interrupted create: the pane it spawned, or a new one
    return Outcome(mid, member.name, state, f"pane {done.pane_id}", done.resumed_session)


def _other_host(member: Member, director_host: str | None, me: str) -> str | None:
    """The host the member's pane is on when that is not this one (docs/runtime.md §10.1)."""
    own = member.placement.host_id if member.placement is not None else None
    host = effective_host(own, director_host)
    return None if host is None or host == me else host


def _reportable(exc: BaseException) -> bool:
    """A member's failure that is its outcome line (a cafleet error); anything else, and a
    signal's stop, ends the command."""
    return isinstance(exc, CafleetError) and not isinstance(exc, PaneLockAbandoned)


__all__ = ["Outcome", "Restored", "restore"]
