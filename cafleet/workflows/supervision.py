"""What a fleet's supervision looks like right now (docs/cli.md §2.5, §2.8, §2.2): its monitor loop (live
pid and heartbeat, stale, stopped, never started) and each member's pane (alive, gone, pending,
no placement, or unknown when tmux cannot be asked).

`fleet show`, `member list` and `doctor` render these. Reading costs one indexed read of the
runtime row and, for panes, one `list-panes` call. The agent's own state inside a live pane
comes through `AgentStateProbe`: `classified_state` reads it with the delivery gate's
classifier (`cafleet.delivery.screens.classify`: starting, ready, working, awaiting_user, unknown;
docs/cli.md §2.5), at one more tmux call for all live panes together (their captures chained in
one `tmux` process; the `list-panes` call also says where each pane is, which is the pane-is-ours
check), so `fleet show` and `member list`
use it and `doctor` keeps the default, which knows nothing (None).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

if TYPE_CHECKING:
    from cafleet.db.runtime import Connection
    from cafleet.mux import Multiplexer, PaneState
    from cafleet.records import FleetSummary, Member, MonitorRuntime, Placement, RosterEntry

LoopState = Literal["live", "stale", "stopped", "never"]
WAITING_TEXT = "waiting (permission)"

# agent_state(backend, placement, spawned) -> the agent's state in the placement's live pane, or
# None when unknown; spawned: the member is not a Director (cafleet spawned it with its prompt).
AgentStateProbe = Callable[["Multiplexer", "Placement", bool], "str | None"]


def no_agent_state(_backend: Multiplexer, _placement: Placement, _spawned: bool) -> str | None:
    return None


def classified_state(backend: Multiplexer, placement: Placement, spawned: bool) -> str | None:
    """The pane's state as the delivery gate sees it (`cafleet.delivery.screens.classify` on the
    visible screen, for the placement's coding agent); None when the capture fails.

    It captures without checking the pane is the placement's: pass it only as `check_panes`'s
    ``agent_state``, which asks it about a live pane it found to be the placement's
    (docs/runtime.md §1.8: another server's pane, or a reused id, is never captured)."""
    from cafleet.delivery.screens import classify
    from cafleet.mux import MultiplexerError

    pane_id = placement.mux_pane_id
    if pane_id is None:
        return None
    try:
        screen = backend.screen(pane_id)
    except MultiplexerError:
        return None
    return classify(placement.coding_agent, screen, spawned=spawned)


# --- the loop ----------------------------------------------------------------------------------


class LoopStatus(NamedTuple):
    fleet_id: int
    state: LoopState
    pid: int | None  # the row's pid (live or stale), None when released or never claimed
    pid_running: bool | None  # does that pid exist (None without a pid)
    started_at: str | None
    last_tick_at: str | None
    heartbeat_age: int | None  # whole seconds since last_tick_at
    tick_seconds: int | None
    held: bool  # `cafleet monitor stop` holds it stopped: nothing restarts it by itself
    log_path: str

    @property
    def text(self) -> str:
        """`live (pid 4242, last heartbeat 3s ago)`, `stale: pid 4242 is not running (…)`,
        `stopped`, `stopped by 'cafleet monitor stop'`, `never started`."""
        from cafleet.text import idle_text

        beat = (
            f"last heartbeat {idle_text(self.heartbeat_age)} ago"
            if self.heartbeat_age is not None
            else "no heartbeat"
        )
        if self.state == "live":
            return f"live (pid {self.pid}, {beat})"
        if self.state == "stale":
            if self.pid_running is False:
                return f"stale: pid {self.pid} is not running ({beat})"
            return f"stale: pid {self.pid} stopped beating ({beat})"
        if self.state == "stopped":
            return "stopped by 'cafleet monitor stop'" if self.held else "stopped"
        return "never started"

    def as_dict(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "pid": self.pid,
            "pid_running": self.pid_running,
            "started_at": self.started_at,
            "last_tick_at": self.last_tick_at,
            "heartbeat_age": self.heartbeat_age,
            "tick_seconds": self.tick_seconds,
            "held": self.held,
            "log_path": self.log_path,
        }


def loop_status_of(
    row: MonitorRuntime | None, *, fleet_id: int, db_path: str, now: datetime | None = None
) -> LoopStatus:
    """The status a runtime row (None: no loop ever ran) shows at ``now``."""
    from cafleet.config import monitor_log_path
    from cafleet.db.timefmt import parse_ts, utcnow
    from cafleet.monitor.runtime import is_held, is_live
    from cafleet.procs import pid_alive

    moment = now if now is not None else utcnow()
    held = is_held(db_path, fleet_id)
    log_path = monitor_log_path(db_path, fleet_id)
    if row is None:
        return LoopStatus(fleet_id, "never", None, None, None, None, None, None, held, log_path)
    beat = parse_ts(row.last_tick_at)
    age = None if beat is None else max(0, int((moment - beat).total_seconds()))
    running = None if row.pid is None else pid_alive(int(row.pid))
    if row.pid is None:
        state: LoopState = "stopped"
    elif is_live(row, moment):
        state = "live"
    else:
        state = "stale"
    return LoopStatus(
        fleet_id,
        state,
        row.pid,
        running,
        row.started_at,
        row.last_tick_at,
        age,
        row.tick_seconds,
        held,
        log_path,
    )


def loop_status(conn: Connection, fleet_id: int) -> LoopStatus:
    """The fleet's loop now: one indexed read of its runtime row."""
    from cafleet import broker

    row = broker.get_monitor_runtime(conn, fleet_id=fleet_id)
    return loop_status_of(row, fleet_id=fleet_id, db_path=conn.info["cafleet.path"])


# --- the panes ---------------------------------------------------------------------------------


class PaneReport(NamedTuple):
    member_id: int
    pane_id: str | None
    state: PaneState
    agent_state: str | None = None  # the classifier's word for a live pane (None: unknown)

    @property
    def waiting(self) -> bool:
        """The pane shows a permission prompt or question (docs/runtime.md §5.12)."""
        return self.state == "alive" and self.agent_state == "awaiting_user"

    @property
    def text(self) -> str:
        """`alive`, `alive (ready)`, `waiting (permission)` (a live pane at a permission prompt
        or question), `gone`, `pending`, `-` (no placement), `?` (unknown)."""
        if self.waiting:
            return WAITING_TEXT
        if self.state == "alive":
            return f"alive ({self.agent_state})" if self.agent_state else "alive"
        return {"none": "-", "unknown": "?"}.get(self.state, self.state)

    def as_dict(self) -> dict[str, Any]:
        return {
            "member_id": self.member_id,
            "pane_id": self.pane_id,
            "pane_state": self.state,
            "agent_state": self.agent_state,
        }


class PaneCheck(NamedTuple):
    """Each member's pane, and why tmux could not be asked (None when it could)."""

    panes: dict[int, PaneReport]
    unknown_reason: str | None

    def gone(self) -> list[int]:
        return [r.member_id for r in self.panes.values() if r.state == "gone"]

    def summary(self) -> str:
        """`3 alive`, `2 alive, 1 gone (member 5)`, `3 alive, 1 waiting (permission) (member
        4)`, `not checked: <tmux message>`."""
        if self.unknown_reason is not None:
            return f"not checked: {self.unknown_reason}"
        counts: dict[str, int] = {}
        for report in self.panes.values():
            counts[report.state] = counts.get(report.state, 0) + 1
        parts = [f"{counts[s]} {s}" for s in ("alive", "gone", "pending") if counts.get(s)]
        waiting = [r.member_id for r in self.panes.values() if r.waiting]
        if waiting:
            noun = "member" if len(waiting) == 1 else "members"
            parts.insert(
                1, f"{len(waiting)} {WAITING_TEXT} ({noun} {', '.join(map(str, waiting))})"
            )
        gone = self.gone()
        if gone:
            noun = "member" if len(gone) == 1 else "members"
            parts[parts.index(f"{counts['gone']} gone")] += (
                f" ({noun} {', '.join(str(m) for m in gone)})"
            )
        return ", ".join(parts) if parts else "no panes"


def check_panes(
    members: Iterable[Member],
    *,
    env: Mapping[str, str] | None = None,
    agent_state: AgentStateProbe = no_agent_state,
) -> PaneCheck:
    """Each member's pane (`cafleet.mux.pane_state`) against one `list-panes` per server: the
    one its placement records (`member_placements.mux_socket`, so this works from any shell),
    else the one ``env`` (default: this process's environment) points at. The one
    implementation behind `fleet show`, `member list`, `doctor` and the WebUI roster. A pane
    whose server cannot be asked is `unknown` (``unknown_reason`` says why); members without a
    placement are `none`, pending ones `pending`, and no server is asked when no member has a
    concrete pane. That one call also tells where each pane is, so ``agent_state`` is asked
    only about a live pane that is the placement's (its server, session and window:
    docs/runtime.md §1.8); another is plain `alive`, never captured."""
    from cafleet.mux import (
        MultiplexerError,
        is_owners_place,
        owner_of,
        pane_state,
        placement_backend,
    )

    members = list(members)
    Server = tuple[str, str | None]  # (backend, the socket the placement records)
    backends: dict[Server, Any] = {}
    live: dict[Server, dict[str, frozenset[tuple[str, str]]]] = {}  # -> pane -> places
    reason: str | None = None
    servers = {
        (m.placement.backend, m.placement.mux_socket)
        for m in members
        if m.placement and m.placement.mux_pane_id
    }
    for server in sorted(servers, key=lambda s: (s[0], s[1] or "")):
        try:
            backend = backends[server] = placement_backend(*server, env)
            together = getattr(backend, "available_places", None)  # one tmux call, not two
            if together is not None:
                live[server] = together()
            else:
                backend.ensure_available()
                live[server] = backend.pane_places()
        except MultiplexerError as exc:
            reason = reason or str(exc)
    panes: dict[int, PaneReport] = {}
    asked: list[tuple[Member, Placement, str]] = []  # live panes that are the placement's
    for member in members:
        placement = member.placement
        key = None if placement is None else (placement.backend, placement.mux_socket)
        places = None if key is None else live.get(key)
        state = pane_state(placement, places)
        pane = None if placement is None else placement.mux_pane_id
        panes[member.member_id] = PaneReport(member.member_id, pane, state)
        if state == "alive":
            assert key is not None and placement is not None and places is not None
            assert pane is not None
            if is_owners_place(backends[key], owner_of(placement), places[pane]):
                asked.append((member, placement, pane))
    if agent_state is no_agent_state or not asked:
        return PaneCheck(panes, reason)
    # The probes' captures, one tmux call per server for all of them: each probe then reads
    # its pane's screen from that answer (docs/performance.md §17).
    readers: dict[Server, Any] = {}
    for server in {(placement.backend, placement.mux_socket) for _m, placement, _p in asked}:
        wanted = [
            pane for _m, placement, pane in asked
            if (placement.backend, placement.mux_socket) == server
        ]  # fmt: skip
        readers[server] = _Prefetched(backends[server], wanted)
    for member, placement, _pane in asked:
        reader = readers[(placement.backend, placement.mux_socket)]
        agent = agent_state(reader, placement, member.kind != "director")
        panes[member.member_id] = panes[member.member_id]._replace(agent_state=agent)
    return PaneCheck(panes, reason)


class _Prefetched:
    """A backend whose `screen` answers from one `screens` call made up front (a pane missing
    from it is captured alone); everything else goes to the backend itself."""

    def __init__(self, backend: Any, pane_ids: list[str]) -> None:
        from cafleet.mux import MultiplexerError

        self._backend = backend
        self._screens: dict[str, str] = {}
        batch = getattr(backend, "screens", None)
        if batch is not None and len(pane_ids) > 1:
            try:
                self._screens = dict(batch(pane_ids))
            except MultiplexerError:
                self._screens = {}  # each probe captures its pane alone and reports its failure

    def screen(self, pane_id: str) -> str:
        found = self._screens.pop(pane_id, None)
        return str(self._backend.screen(pane_id)) if found is None else found

    def __getattr__(self, name: str) -> Any:
        return getattr(self._backend, name)


# --- a fleet's report (fleet show, member list, doctor) ---------------------------------------


class FleetReport(NamedTuple):
    summary: FleetSummary
    roster: list[RosterEntry]  # active members (empty for a soft-deleted fleet)
    loop: LoopStatus
    panes: PaneCheck


def fleet_report(
    conn: Connection,
    fleet_id: int,
    *,
    roster_required: bool = False,
    env: Mapping[str, str] | None = None,
    agent_state: AgentStateProbe = no_agent_state,
) -> FleetReport:
    """The fleet's summary, active roster, loop and panes. `FleetNotFound` for an unknown id;
    a soft-deleted fleet has no roster (``roster_required``: `FleetDeleted`, as `member
    list` refuses)."""
    from cafleet import broker

    summary = broker.fleet_summary(conn, fleet_id)
    roster: list[RosterEntry] = []
    if summary.deleted_at is None or roster_required:
        roster = broker.member_roster(conn, fleet_id=fleet_id)
    panes = check_panes([e.member for e in roster], env=env, agent_state=agent_state)
    return FleetReport(summary, roster, loop_status(conn, fleet_id), panes)


__all__ = [
    "WAITING_TEXT",
    "AgentStateProbe",
    "FleetReport",
    "LoopState",
    "LoopStatus",
    "PaneCheck",
    "PaneReport",
    "check_panes",
    "classified_state",
    "fleet_report",
    "loop_status",
    "loop_status_of",
    "no_agent_state",
]
