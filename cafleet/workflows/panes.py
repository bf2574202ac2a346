"""One member's pane seen from outside: its capture (`cafleet member capture`, the WebUI's pane
view) and the refusals on the way there. Every roster member's pane state (the WebUI roster,
`member list`, `fleet show`, `doctor`) is `cafleet.workflows.supervision.check_panes`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cafleet import broker
from cafleet.broker.errors import MemberDeregistered
from cafleet.hosts import current_host, effective_host
from cafleet.mux import MultiplexerError, owner_of, owner_problem, placement_backend
from cafleet.workflows.errors import PaneUnavailable
from cafleet.workflows.halfmade import refuse

if TYPE_CHECKING:
    from cafleet.db.runtime import Connection
    from cafleet.records import Member, Placement


@dataclass(frozen=True, slots=True)
class Capture:
    member_id: int
    pane_id: str
    content: str


def backend_for(name: str, socket_path: str | None = None) -> Any:
    """The placement's backend, available, on the server the placement records (any shell
    reaches it; else the one ``TMUX`` names); the tmux message as `PaneUnavailable` otherwise."""
    try:
        backend = placement_backend(name, socket_path)
        backend.ensure_available()
        return backend
    except MultiplexerError as exc:
        raise PaneUnavailable(str(exc)) from exc


def active_member(conn: Connection, member_id: int) -> Member:
    """The member; `MemberNotFound` (`member <id> not found`) for an unknown id,
    `MemberDeregistered` (`member <id> is deregistered`) for a deregistered one."""
    member = broker.get_member(conn, member_id)
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


def elsewhere(conn: Connection, member: Member) -> str | None:
    """The other host the member's pane is on (its placement's, else its root Director's), or
    None when it is on this one (docs/runtime.md §10.2)."""
    placement = member.placement
    if placement is None:
        return None
    director_host = None
    if placement.host_id is None:
        director = broker.director_placement(conn, member.fleet_id)
        director_host = None if director is None else director.host_id
    host = effective_host(placement.host_id, director_host)
    return None if host is None or host == current_host() else host


def refuse_elsewhere(conn: Connection, member: Member) -> None:
    """Commands that read or type into one member's pane run on its host (docs/runtime.md
    §10.2): the same pane id names another pane here."""
    host = elsewhere(conn, member)
    if host is not None:
        pane = member.placement.mux_pane_id if member.placement is not None else None
        raise PaneUnavailable(
            f"member {member.member_id}'s pane {pane or '-'} is on host {host}, not this host "
            f"({current_host()}); run this command on host {host}"
        )


def predates_server(backend: Any, placement: Placement) -> bool:
    """Whether ``placement`` was made on an earlier tmux server on its socket than the one
    there now: its pane belonged to a server that died (e.g. in a reboot), whatever pane of this
    server now has the same id, session name and window id. The server the placement records
    (docs/runtime.md §1.8) decides; a placement that records none, its making before this
    server started."""
    from cafleet.db.timefmt import parse_ts
    from cafleet.mux import MultiplexerError, same_server

    if not same_server(getattr(backend, "socket_path", None), placement.mux_socket):
        return False
    if placement.mux_server_pid is not None and placement.mux_server_start is not None:
        server_id = getattr(backend, "server_id", None)
        try:
            now = None if server_id is None else server_id()
        except MultiplexerError:
            return False
        recorded = (placement.mux_server_pid, placement.mux_server_start)
        return now is not None and tuple(now) != recorded
    started_at = getattr(backend, "server_started_at", None)
    if started_at is None:
        return False
    created = parse_ts(placement.created_at)
    try:
        started = started_at()
    except MultiplexerError:
        return False
    return created is not None and started is not None and created.timestamp() < started


def capture_member(conn: Connection, member_id: int, *, lines: int, ansi: bool = False) -> Capture:
    """The last ``lines`` lines of an active member's pane.

    Refusals, in order: `MemberNotFound` (unknown or deregistered), no placement row, a pending
    placement, tmux unusable, a pane that is not the placement's (another server's, or an id
    reused elsewhere: docs/runtime.md §1.8), the capture call failing.
    """
    member = active_member(conn, member_id)
    refuse(conn, member)  # its create was interrupted: say so, and how to finish it
    placement = concrete_placement(member, "nothing to capture")
    refuse_elsewhere(conn, member)
    pane_id = placement.mux_pane_id
    assert pane_id is not None
    backend = backend_for(placement.backend, placement.mux_socket)
    not_ours = owner_problem(backend, pane_id, owner_of(placement))
    if not_ours is not None:
        raise PaneUnavailable(not_ours)
    try:
        content = backend.capture(pane_id, lines, ansi=ansi)
    except MultiplexerError as exc:
        raise PaneUnavailable(f"capture failed: {exc}") from exc
    return Capture(member_id=member_id, pane_id=pane_id, content=content)


__all__ = [
    "Capture",
    "active_member",
    "backend_for",
    "concrete_placement",
    "capture_member",
    "elsewhere",
    "predates_server",
    "refuse_elsewhere",
]
