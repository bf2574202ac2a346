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

from cafleet import broker
from cafleet.config import db_dir_of, monitor_log_path
from cafleet.db.timefmt import parse_ts, utcnow
from cafleet.hosts import HostIdError, current_host, effective_host
from cafleet.monitor.runtime import is_held, is_live
from cafleet.mux import MultiplexerError, is_owners_place, owner_of, pane_state, placement_backend
from cafleet.procs import pid_alive, stale_after
from cafleet.text import idle_text
from cafleet.workflows.halfmade import half_made
from cafleet.workflows.leftovers import left_behind
from cafleet.workflows.witness import choose

if TYPE_CHECKING:
    from cafleet.broker import HookSignal
    from cafleet.db.runtime import Connection
    from cafleet.mux import Multiplexer, PaneState
    from cafleet.records import (
        FleetSummary,
        Member,
        MonitorRuntime,
        Placement,
        RecordedWorktree,
        RosterEntry,
    )
    from cafleet.records.notify import Channel
    from cafleet.workflows.halfmade import HalfMade

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
    row: MonitorRuntime | None,
    *,
    fleet_id: int,
    db_path: str,
    now: datetime | None = None,
    remote: bool = False,
) -> LoopStatus:
    """The status a runtime row (None: no loop ever ran) shows at ``now``. ``remote``: the loop
    runs on another host (its root Director's), whose pid this host cannot ask: the heartbeat
    alone decides (docs/runtime.md §10.5)."""
    moment = now if now is not None else utcnow()
    held = is_held(db_path, fleet_id)
    log_path = monitor_log_path(db_path, fleet_id)
    if row is None:
        return LoopStatus(fleet_id, "never", None, None, None, None, None, None, held, log_path)
    beat = parse_ts(row.last_tick_at)
    age = None if beat is None else max(0, int((moment - beat).total_seconds()))
    running = None if row.pid is None or remote else pid_alive(int(row.pid))
    fresh = age is not None and age <= stale_after(row.tick_seconds)
    if row.pid is None:
        state: LoopState = "stopped"
    elif fresh if remote else is_live(row, moment):
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


def loop_status(conn: Connection, fleet_id: int, *, remote: bool = False) -> LoopStatus:
    """The fleet's loop now: one indexed read of its runtime row (``remote``: `loop_status_of`)."""
    row = broker.get_monitor_runtime(conn, fleet_id=fleet_id)
    return loop_status_of(row, fleet_id=fleet_id, db_path=conn.info["cafleet.path"], remote=remote)


# --- the panes ---------------------------------------------------------------------------------


class PaneReport(NamedTuple):
    member_id: int
    pane_id: str | None
    state: PaneState
    agent_state: str | None = None  # the classifier's word for a live pane (None: unknown)
    elsewhere: str | None = None  # the pane is on this other host: not asked from here
    paused: str | None = None  # why its lines wait (`budget`: docs/cli.md §2.36), else None

    @property
    def waiting(self) -> bool:
        """The pane shows a permission prompt or question (docs/runtime.md §5.12)."""
        return self.state == "alive" and self.agent_state == "awaiting_user"

    @property
    def text(self) -> str:
        """`alive`, `alive (ready)`, `waiting (permission)` (a live pane at a permission prompt
        or question), `gone`, `pending`, `-` (no placement), `?` (unknown)."""
        if self.elsewhere is not None:
            return f"on host {self.elsewhere}"
        if self.paused is not None and self.state == "alive":
            return f"paused ({self.paused})"
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
            "elsewhere": self.elsewhere,
            "paused": self.paused,
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
        elsewhere = sum(1 for r in self.panes.values() if r.elsewhere is not None)
        if elsewhere:
            parts.append(f"{elsewhere} on other hosts")
        paused = [r.member_id for r in self.panes.values() if r.paused is not None]
        if paused:
            noun = "member" if len(paused) == 1 else "members"
            parts.append(f"{len(paused)} paused (budget) ({noun} {', '.join(map(str, paused))})")
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
    elsewhere: Mapping[int, str] | None = None,
) -> PaneCheck:
    """Each member's pane (`cafleet.mux.pane_state`) against one `list-panes` per server: the
    one its placement records (`member_placements.mux_socket`, so this works from any shell),
    else the one ``env`` (default: this process's environment) points at. The one
    implementation behind `fleet show`, `member list`, `doctor` and the WebUI roster. A pane
    whose server cannot be asked is `unknown` (``unknown_reason`` says why); members without a
    placement are `none`, pending ones `pending`, and no server is asked when no member has a
    concrete pane. That one call also tells where each pane is, so ``agent_state`` is asked
    only about a live pane that is the placement's (its server, session and window:
    docs/runtime.md §1.8); another is plain `alive`, never captured. A member in ``elsewhere``
    (member id -> host id) has its pane on another host: its server is not asked from here and
    it reads `unknown`, `on host <H>` (docs/runtime.md §10.5)."""
    remote = dict(elsewhere or {})
    every = list(members)
    members = [m for m in every if m.member_id not in remote]
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
    for member in every:
        if member.member_id in remote:
            pane = None if member.placement is None else member.placement.mux_pane_id
            panes[member.member_id] = PaneReport(
                member.member_id, pane, "unknown", None, remote[member.member_id]
            )
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


class HostLoopStatus(NamedTuple):
    """One host of a fleet across machines (docs/runtime.md §10.5): its members and who
    delivers their lines there: the fleet's monitor loop on the root Director's host, the
    host's delivery loop (`host_loops`) elsewhere."""

    host_id: str
    member_ids: tuple[int, ...]
    director: bool  # the root Director's host: its fleet loop delivers here
    live: bool  # director: the fleet loop is live; else the host loop's heartbeat is fresh
    pid: int | None
    heartbeat_age: int | None

    @property
    def text(self) -> str:
        """`A: members 1, 2; the root Director's host (its monitor loop delivers)`,
        `B: members 4, 5; delivery loop live (pid 77, last heartbeat 2s ago)`,
        `B: members 4; delivery loop not running`."""
        noun = "member" if len(self.member_ids) == 1 else "members"
        who = f"{self.host_id}: {noun} {', '.join(map(str, self.member_ids))}"
        if self.director:
            return f"{who}; the root Director's host (its monitor loop delivers)"
        if not self.live:
            return f"{who}; delivery loop not running"
        beat = (
            ""
            if self.heartbeat_age is None
            else f", last heartbeat {idle_text(self.heartbeat_age)} ago"
        )
        return f"{who}; delivery loop live (pid {self.pid}{beat})"

    def as_dict(self) -> dict[str, Any]:
        return {
            "host_id": self.host_id,
            "member_ids": list(self.member_ids),
            "director": self.director,
            "live": self.live,
            "pid": self.pid,
            "heartbeat_age": self.heartbeat_age,
        }


class HostsReport(NamedTuple):
    """Each member's host (None: not recorded anywhere, a one-host fleet) and each host's
    delivery; ``spans`` when the fleet's panes are on more than one host, the only case
    `member list`, `fleet show` and `doctor` show hosts (one-host output stays as it was)."""

    here: str | None
    member_host: dict[int, str | None]
    hosts: list[HostLoopStatus]

    @property
    def spans(self) -> bool:
        return len(self.hosts) > 1

    def with_loop(self, loop: LoopStatus) -> HostsReport:
        """The Director's host's delivery is the fleet loop's: its state filled in."""
        hosts = [
            h._replace(live=loop.state == "live", pid=loop.pid, heartbeat_age=loop.heartbeat_age)
            if h.director
            else h
            for h in self.hosts
        ]
        return self._replace(hosts=hosts)

    def elsewhere(self) -> dict[int, str]:
        """The members whose panes are on another host than this process's."""
        if self.here is None:
            return {}
        return {m: h for m, h in self.member_host.items() if h is not None and h != self.here}


def hosts_report(
    conn: Connection, members: Iterable[Member], director_id: int | None
) -> HostsReport:
    """The fleet's hosts, from the placements read already (``members``, the Director among
    them) and, only for a fleet across machines, one read of the host loops."""
    try:
        here: str | None = current_host()
    except HostIdError:
        here = None
    members = list(members)
    director_host: str | None = None
    for member in members:
        if member.member_id == director_id and member.placement is not None:
            director_host = member.placement.host_id
    member_host: dict[int, str | None] = {}
    for member in members:
        placement = member.placement
        member_host[member.member_id] = effective_host(
            None if placement is None else placement.host_id, director_host
        )
    by_host: dict[str, list[int]] = {}
    for member_id, host in member_host.items():
        if host is not None:
            by_host.setdefault(host, []).append(member_id)
    if len(by_host) < 2:
        hosts = [
            HostLoopStatus(h, tuple(ids), h == director_host, False, None, None)
            for h, ids in by_host.items()
        ]
        return HostsReport(here, member_host, hosts)
    now = utcnow()
    rows = {row.host_id: row for row in broker.host_loops(conn)}
    hosts = []
    for host in sorted(by_host, key=lambda h: (h != director_host, h)):
        ids = tuple(sorted(by_host[host]))
        if host == director_host:
            hosts.append(HostLoopStatus(host, ids, True, False, None, None))  # `with_loop`
            continue
        row = rows.get(host)
        live = broker.host_loop_live(row, here or "", now)
        beat = None if row is None else parse_ts(row.last_tick_at)
        age = None if beat is None else max(0, int((now - beat).total_seconds()))
        hosts.append(HostLoopStatus(host, ids, False, live, None if row is None else row.pid, age))
    return HostsReport(here, member_host, hosts)


class FleetReport(NamedTuple):
    summary: FleetSummary
    roster: list[RosterEntry]  # active members (empty for a soft-deleted fleet)
    loop: LoopStatus
    panes: PaneCheck
    hosts: HostsReport | None = None  # None: not asked (a soft-deleted fleet)
    # Pending members whose `member create` was interrupted (`cafleet.workflows.halfmade`).
    half_made: tuple[HalfMade, ...] = ()
    # Its deregistered members' worktrees still on disk (`cafleet.workflows.leftovers`).
    left_trees: tuple[RecordedWorktree, ...] = ()
    channels: tuple[Channel, ...] = ()  # its notification channels (docs/cli.md §2.35)
    # Two members' worktrees changing one path (`cafleet.monitor.collisions`; `fleet show` only).
    collisions: tuple[Any, ...] = ()


def _with_hooks(panes: PaneCheck, hooks: Mapping[int, HookSignal]) -> PaneCheck:
    """Each live pane's agent state as the freshest witness tells it: its own hooks or its
    screen (`cafleet.workflows.witness.choose`, docs/runtime.md §4.12)."""
    reports = dict(panes.panes)
    for member_id, report in panes.panes.items():
        hook = hooks.get(member_id)
        if hook is not None and report.state == "alive" and report.elsewhere is None:
            state = choose(hook, report.agent_state).state
            reports[member_id] = report._replace(agent_state=state)
    return panes._replace(panes=reports)


def fleet_report(
    conn: Connection,
    fleet_id: int,
    *,
    roster_required: bool = False,
    env: Mapping[str, str] | None = None,
    agent_state: AgentStateProbe = no_agent_state,
    collisions: Callable[[Connection, int], Iterable[Any]] | None = None,
) -> FleetReport:
    """The fleet's summary, active roster, loop and panes, its half-made members and the
    worktrees its deleted members left behind. `FleetNotFound` for an unknown id; a
    soft-deleted fleet has no roster (``roster_required``: `FleetDeleted`, as `member list`
    refuses). ``collisions``: `fleet show`'s probe of the members' worktrees
    (`cafleet.monitor.collisions.current`)."""
    summary = broker.fleet_summary(conn, fleet_id)
    roster: list[RosterEntry] = []
    if summary.deleted_at is None or roster_required:
        roster = broker.member_roster(conn, fleet_id=fleet_id)
    hosts = hosts_report(conn, [e.member for e in roster], summary.director_member_id)
    director_host = hosts.member_host.get(summary.director_member_id or 0)
    remote = director_host is not None and hosts.here is not None and director_host != hosts.here
    loop = loop_status(conn, fleet_id, remote=remote)
    if summary.deleted_at is not None:  # its delete stopped the loop and dropped its row
        loop = loop._replace(state="stopped")
    hosts = hosts.with_loop(loop)
    panes = check_panes(
        [e.member for e in roster], env=env, agent_state=agent_state, elsewhere=hosts.elsewhere()
    )
    paused = broker.paused_members(conn)
    if paused:
        marked = {
            mid: report._replace(paused=paused[mid]) if mid in paused else report
            for mid, report in panes.panes.items()
        }
        panes = panes._replace(panes=marked)
    if agent_state is not no_agent_state:
        panes = _with_hooks(panes, broker.fleet_hook_signals(conn, fleet_id))
    db_dir = db_dir_of(conn.info["cafleet.path"])
    broken = tuple(half_made(conn, db_dir, [e.member for e in roster]))
    left = tuple(left_behind(conn, fleet_id))
    channels = tuple(broker.notify_channels(conn, fleet_id))
    met: tuple[Any, ...] = ()
    if collisions is not None and summary.deleted_at is None:
        met = tuple(collisions(conn, fleet_id))
    return FleetReport(summary, roster, loop, panes, hosts, broken, left, channels, met)


__all__ = [
    "WAITING_TEXT",
    "AgentStateProbe",
    "FleetReport",
    "HostLoopStatus",
    "HostsReport",
    "LoopState",
    "LoopStatus",
    "PaneCheck",
    "PaneReport",
    "check_panes",
    "classified_state",
    "fleet_report",
    "hosts_report",
    "loop_status",
    "loop_status_of",
    "no_agent_state",
]
