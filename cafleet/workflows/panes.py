"""Member panes seen from outside: one member's capture (`cafleet member capture`, the WebUI's
pane view) and every roster member's pane state (the WebUI roster).

A pane is `alive` when tmux lists it and `gone` when its placement names a pane tmux no longer
has; `pending` (placement without a pane id yet), `none` (no placement) and `unknown` (tmux could
not be asked) need no keystroke and no capture. The activity classifier (docs/runtime.md §7.1) plugs in
as ``classify``: given the coding agent and a capture of an alive pane it returns
`awaiting_user | working | finished | unknown`; without one, ``activity`` stays None.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from cafleet.workflows.errors import PaneUnavailable

if TYPE_CHECKING:
    from cafleet.db.runtime import Connection
    from cafleet.records import Member, Placement

PaneStateName = Literal["alive", "gone", "pending", "none", "unknown"]
Classifier = Callable[[str, str], str]  # (coding_agent, capture) -> activity
CLASSIFY_LINES = 40  # docs/runtime.md §7.1: the classifier reads a 40-line capture


@dataclass(frozen=True, slots=True)
class Capture:
    member_id: int
    pane_id: str
    content: str


@dataclass(frozen=True, slots=True)
class PaneState:
    member_id: int
    pane_id: str | None
    state: PaneStateName
    activity: str | None  # the classifier's verdict for an alive pane, else None


@dataclass(frozen=True, slots=True)
class PaneStates:
    panes: tuple[PaneState, ...]
    error: str | None  # why tmux could not be asked (every placed pane is then `unknown`)


def backend_for(name: str, socket_path: str | None = None) -> Any:
    """The placement's backend, available, on the server the placement records (any shell
    reaches it; else the one ``TMUX`` names); the tmux message as `PaneUnavailable` otherwise."""
    from cafleet.mux import MultiplexerError, placement_backend

    try:
        backend = placement_backend(name, socket_path)
        backend.ensure_available()
    except MultiplexerError as exc:
        raise PaneUnavailable(str(exc)) from exc
    return backend


def active_member(conn: Connection, member_id: int) -> Member:
    """The member; `MemberNotFound` (`member <id> not found`) for an unknown id,
    `MemberDeregistered` (`member <id> is deregistered`) for a deregistered one."""
    from cafleet.broker.errors import MemberDeregistered
    from cafleet.broker.members import get_member

    member = get_member(conn, member_id)
    if member.status != "active":
        raise MemberDeregistered(member_id)
    return member


def concrete_placement(member: Member, what: str) -> Placement:
    """The member's placement with a pane id; `what` ends the pending refusal."""
    placement = member.placement
    if placement is None:
        raise PaneUnavailable(
            f"member {member.member_id} has no placement row; it was not spawned via "
            "'cafleet member create'"
        )
    if placement.mux_pane_id is None:
        raise PaneUnavailable(
            f"member {member.member_id} has no pane yet (pending placement) \u2014 {what}"
        )
    return placement


def capture_member(conn: Connection, member_id: int, *, lines: int, ansi: bool = False) -> Capture:
    """The last ``lines`` lines of an active member's pane.

    Refusals, in order: `MemberNotFound` (unknown or deregistered), no placement row, a pending
    placement, tmux unusable, a pane that is not the placement's (another server's, or an id
    reused elsewhere: issue 10 item 7), the capture call failing.
    """
    member = active_member(conn, member_id)
    placement = concrete_placement(member, "nothing to capture")
    pane_id = placement.mux_pane_id
    assert pane_id is not None
    backend = backend_for(placement.backend, placement.mux_socket)
    from cafleet.mux import MultiplexerError, owner_of, owner_problem

    not_ours = owner_problem(backend, pane_id, owner_of(placement))
    if not_ours is not None:
        raise PaneUnavailable(not_ours)
    try:
        content = backend.capture(pane_id, lines, ansi=ansi)
    except MultiplexerError as exc:
        raise PaneUnavailable(f"capture failed: {exc}") from exc
    return Capture(member_id=member_id, pane_id=pane_id, content=content)


def pane_states(members: Sequence[Member], *, classify: Classifier | None = None) -> PaneStates:
    """The pane state of each member, in the order given; one `list-panes` per backend."""
    from cafleet.mux import MultiplexerError

    # One `list-panes` per server: (backend, the socket the placement records).
    Server = tuple[str, str | None]
    live: dict[Server, dict[str, frozenset[tuple[str, str]]]] = {}  # -> pane -> places
    error: str | None = None
    backends: dict[Server, Any] = {}
    servers = {
        (m.placement.backend, m.placement.mux_socket) for m in members if m.placement is not None
    }
    for server in sorted(servers, key=lambda s: (s[0], s[1] or "")):
        try:
            backends[server] = backend_for(*server)
            live[server] = backends[server].pane_places()
        except (PaneUnavailable, MultiplexerError) as exc:
            error = error or str(exc)
    states: list[PaneState] = []
    for member in members:
        placement = member.placement
        if placement is None:
            states.append(PaneState(member.member_id, None, "none", None))
            continue
        pane_id = placement.mux_pane_id
        if pane_id is None:
            states.append(PaneState(member.member_id, None, "pending", None))
            continue
        server = (placement.backend, placement.mux_socket)
        panes = live.get(server)
        if panes is None:
            states.append(PaneState(member.member_id, pane_id, "unknown", None))
            continue
        if pane_id not in panes:
            states.append(PaneState(member.member_id, pane_id, "gone", None))
            continue
        activity = None
        if classify is not None:
            from cafleet.mux import is_owners_place, owner_of

            where = panes[pane_id]
            if not is_owners_place(backends[server], owner_of(placement), where):
                # Not the placement's pane (issue 10 item 7): never captured.
                states.append(PaneState(member.member_id, pane_id, "gone", None))
                continue
            try:
                content = backends[server].capture(pane_id, CLASSIFY_LINES)
            except MultiplexerError:
                activity = None
            else:
                activity = classify(placement.coding_agent, content)
        states.append(PaneState(member.member_id, pane_id, "alive", activity))
    return PaneStates(panes=tuple(states), error=error)


__all__ = [
    "CLASSIFY_LINES",
    "Capture",
    "Classifier",
    "active_member",
    "backend_for",
    "concrete_placement",
    "PaneState",
    "PaneStates",
    "capture_member",
    "pane_states",
]
