"""Members: registration, pane-id patch, deregistration, rosters and lookups (docs/storage.md §7.4,
§7.8)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from cafleet.broker._common import (
    check_backend,
    check_coding_agent,
    identity,
    stamp,
)
from cafleet.broker.errors import (
    CannotDeregisterRootDirector,
    FleetDeleted,
    FleetNotFound,
    MemberDeregistered,
    MemberNotFound,
    MonitorSlotTaken,
    NoActiveMonitor,
    PlacementVanished,
    RootDirectorInactive,
)
from cafleet.db import tx
from cafleet.db.catalog import members as q
from cafleet.db.runtime import Connection
from cafleet.db.timefmt import parse_ts, utcnow
from cafleet.hosts import current_host
from cafleet.records import (
    Member,
    Placement,
    RosterEntry,
    check_enum,
    member_card,
    member_from_row,
    placement_from_row,
)

if TYPE_CHECKING:  # records a call only receives, or the wake line alone creates
    from cafleet.records import PlacementSpec, SpawnSpec, WakeRoster

Role = Literal["member", "monitor"]
NAME_BATCH = 500  # at most this many bound ids per `member_names` query


def _active_monitor_id(conn: Connection, fleet_id: int) -> int | None:
    found = conn.execute(q.ACTIVE_MONITOR, {"fleet_id": fleet_id}).scalar()
    return None if found is None else int(found)


def _insert_member(
    conn: Connection, *, fleet_id: int, name: str, description: str, card: str, now: str
) -> int:
    """Insert an active member; a lost monitor slot (the partial unique index) becomes
    `MonitorSlotTaken` naming the current monitor, read on the same transaction."""
    try:
        member_id = conn.execute(
            q.INSERT_MEMBER,
            {
                "fleet_id": fleet_id,
                "name": name,
                "description": description,
                "now": now,
                "card": card,
            },
        ).lastrowid
    except sqlite3.IntegrityError as e:
        if str(e) == "UNIQUE constraint failed: members.fleet_id":
            current = _active_monitor_id(conn, fleet_id)
            if current is not None:
                raise MonitorSlotTaken(fleet_id, current) from e
        raise
    assert member_id is not None
    return member_id


def register_member(
    conn: Connection,
    *,
    fleet_id: int,
    name: str,
    description: str,
    role: Role,
    placement: PlacementSpec | None,
    require_monitor: bool,
    skills: Sequence[Any] = (),
    spawn: SpawnSpec | None = None,
    now: datetime | None = None,
) -> Member:
    """Register a member (role `member`) or the fleet's monitor (role `monitor`), with an
    optional pending placement and what it is spawned with (``spawn``, for `member respawn`),
    in one BEGIN IMMEDIATE transaction that re-checks the root Director and the monitor slot
    before inserting anything."""
    if role not in ("member", "monitor"):
        raise ValueError(f"unknown role {role!r}")
    if placement is not None:
        check_backend(placement.backend)
        check_coding_agent(placement.coding_agent)
    with tx.write(conn):
        ts = stamp(now)
        check = conn.execute(q.REGISTER_CHECK, {"fleet_id": fleet_id}).mappings().first()
        if check is None:
            raise FleetNotFound(fleet_id)
        if check["deleted_at"] is not None:
            raise FleetDeleted(fleet_id)
        if check["director_status"] != "active":
            raise RootDirectorInactive(fleet_id, check["director_member_id"])
        monitor_id = check["monitor_member_id"]
        if role == "monitor" and monitor_id is not None:
            raise MonitorSlotTaken(fleet_id, monitor_id)
        if role == "member" and require_monitor and monitor_id is None:
            raise NoActiveMonitor(fleet_id)
        member_id = _insert_member(
            conn,
            fleet_id=fleet_id,
            name=name,
            description=description,
            card=member_card(name, description, list(skills), monitor=role == "monitor"),
            now=ts,
        )
        if spawn is not None:
            from cafleet.broker.recovery import insert_spawn

            insert_spawn(conn, member_id, spawn)
        placed: Placement | None = None
        if placement is not None:
            host = current_host() if placement.host_id is None else placement.host_id
            conn.execute(
                q.INSERT_PENDING_PLACEMENT,
                {
                    "member_id": member_id,
                    "session": placement.mux_session,
                    "window": placement.mux_window_id,
                    "backend": placement.backend,
                    "agent": placement.coding_agent,
                    "now": ts,
                    "socket": placement.mux_socket,
                    "host": host,
                },
            )
            placed = Placement(
                member_id=member_id,
                backend=placement.backend,
                mux_session=placement.mux_session,
                mux_window_id=placement.mux_window_id,
                mux_pane_id=None,
                coding_agent=placement.coding_agent,
                created_at=ts,
                mux_socket=placement.mux_socket,
                host_id=host,
            )
    return Member(
        member_id=member_id,
        fleet_id=fleet_id,
        name=name,
        description=description,
        status="active",
        registered_at=ts,
        deregistered_at=None,
        kind=role,
        skills=list(skills),
        placement=placed,
    )


def set_placement_pane(
    conn: Connection,
    *,
    member_id: int,
    pane_id: str,
    window_id: str | None = None,
    spawned: object = None,
) -> Placement:
    """Patch a pending placement's pane id, and its window when the pane landed in another
    one (the caller holds the new key's lock), with the server and process of ``spawned``
    (the mux `PaneContext` of the new pane; None records none).

    `PlacementVanished` when the member is not active or has no pending placement.
    """
    params = {"member_id": member_id, "pane_id": pane_id, "window_id": window_id}
    params.update(identity(spawned))
    row = tx.write_one(conn, q.PATCH_PANE, params)[0].first()
    if row is None:
        raise PlacementVanished(member_id)
    return placement_from_row(row)


def deregister_member(conn: Connection, *, member_id: int, now: datetime | None = None) -> Member:
    """Deregister an active member other than the root Director and delete its placement.

    The caller holds the pane lock of a concrete placement and already killed the pane.
    """
    with tx.write(conn):
        ts = stamp(now)
        row = conn.execute(q.MEMBER_BY_ID, {"member_id": member_id}).mappings().first()
        if row is None:
            raise MemberNotFound(member_id)
        if row["status"] != "active":
            raise MemberDeregistered(member_id)
        member = member_from_row(row)
        if member.kind == "director":
            raise CannotDeregisterRootDirector(member_id)
        conn.execute(q.DEREGISTER, {"member_id": member_id, "now": ts})
        conn.execute(q.DELETE_PLACEMENT, {"member_id": member_id})
    return member._replace(status="deregistered", deregistered_at=ts, placement=None)


def get_member(conn: Connection, member_id: int) -> Member:
    """The detailed view of any member, active or deregistered; `MemberNotFound` if absent."""
    with tx.read(conn):
        row = conn.execute(q.MEMBER_BY_ID, {"member_id": member_id}).mappings().first()
    if row is None:
        raise MemberNotFound(member_id)
    return member_from_row(row)


def get_active_member(conn: Connection, member_id: int) -> Member:
    """`get_member` for an active member: `MemberNotFound` for an unknown id,
    `MemberDeregistered` (a `MemberNotFound`) for a deregistered one."""
    member = get_member(conn, member_id)
    if not member.is_active:
        raise MemberDeregistered(member_id)
    return member


def get_active_monitor(conn: Connection, fleet_id: int) -> Member | None:
    """The fleet's active monitor member (the index predicate, literally), or None."""
    with tx.read(conn):
        row = conn.execute(q.ACTIVE_MONITOR_MEMBER, {"fleet_id": fleet_id}).mappings().first()
    return None if row is None else member_from_row(row)


def pane_shared_with(conn: Connection, placement: Placement) -> int | None:
    """Another active member whose placement names the same pane key as the concrete
    ``placement`` on this host (the lowest such id), or None. A member whose pane is recorded on
    another host does not share it: the same key names another pane there (docs/runtime.md
    §10.2); one whose host is not recorded is on every host, as before hosts were recorded."""
    assert placement.mux_pane_id is not None
    with tx.read(conn):
        rows = conn.execute(
            q.PANE_SHARED_WITH,
            {
                "backend": placement.backend,
                "session": placement.mux_session,
                "pane": placement.mux_pane_id,
                "member_id": placement.member_id,
            },
        ).all()
    here = current_host() if any(row[1] is not None for row in rows) else None
    for member_id, host in rows:
        if host is None or host == here:
            return int(member_id)
    return None


def idle_seconds(
    last_sent: str | None, last_recv: str | None, last_ack: str | None, now: datetime
) -> int | None:
    """Whole seconds since the greatest non-NULL of the three strings, clamped at 0.

    None when all are NULL or the chosen string does not parse (no fall-back to an older one).
    """
    present = [value for value in (last_sent, last_recv, last_ack) if value is not None]
    if not present:
        return None
    moment = parse_ts(max(present))
    if moment is None:
        return None
    try:
        return max(0, (now - moment) // timedelta(seconds=1))
    except (OverflowError, TypeError):
        return None


def member_roster(
    conn: Connection, *, fleet_id: int, now: datetime | None = None
) -> list[RosterEntry]:
    """Active members of a live fleet with placements and activity, by `member_id`."""
    with tx.read(conn):
        fleet = conn.execute(q.FLEET_STATE, {"fleet_id": fleet_id}).first()
        if fleet is None:
            raise FleetNotFound(fleet_id)
        if fleet[0] is not None:
            raise FleetDeleted(fleet_id)
        rows = conn.execute(q.ROSTER, {"fleet_id": fleet_id}).mappings().all()
    moment = now if now is not None else utcnow()
    return [
        RosterEntry(
            member=member_from_row(row),
            last_sent=row["last_sent"],
            last_recv=row["last_recv"],
            last_ack=row["last_ack"],
            idle=idle_seconds(row["last_sent"], row["last_recv"], row["last_ack"], moment),
        )
        for row in rows
    ]


def wake_roster(conn: Connection, *, fleet_id: int) -> WakeRoster:
    """The monitor wake line's data (docs/runtime.md §5.7): active members of kind `member` that
    have a placement row, by id, and the root Director (None when it is not an active member),
    each with its count of owned un-ACKed unicast rows."""
    with tx.read(conn):
        rows = conn.execute(q.WAKE_ROSTER, {"fleet_id": fleet_id}).mappings().all()
    from cafleet.agents.registry import agent_names  # not at the top: `member list` needs no agent
    from cafleet.records import WakeRoster, WakeRosterEntry

    entries: list[WakeRosterEntry] = []
    director: WakeRosterEntry | None = None
    for row in rows:
        agent = row["p_coding_agent"]
        if agent is not None:
            agent = check_enum(
                "member_placements",
                f"member_id {row['member_id']}",
                "coding_agent",
                agent,
                agent_names(),
            )
        entry = WakeRosterEntry(
            member_id=row["member_id"], name=row["name"], coding_agent=agent, unacked=row["unacked"]
        )
        if row["kind"] == "director":
            director = entry
        elif row["kind"] == "member" and row["p_member_id"] is not None:
            entries.append(entry)
    return WakeRoster(members=tuple(entries), director=director)


def member_names(conn: Connection, ids: Iterable[int]) -> list[tuple[int, str]]:
    """`(member_id, name)` of the known members among `ids`, active or deregistered, by id.

    De-duplicates; binds at most 500 ids per query; issues no SQL for empty input.
    """
    wanted = sorted(set(ids))
    if not wanted:
        return []
    found: list[tuple[int, str]] = []
    with tx.read(conn):
        for start in range(0, len(wanted), NAME_BATCH):
            batch = wanted[start : start + NAME_BATCH]
            found.extend(
                (row[0], row[1]) for row in conn.execute(q.NAMES, {"ids": json.dumps(batch)})
            )
    return found


__all__ = [
    "deregister_member",
    "get_active_member",
    "get_active_monitor",
    "get_member",
    "idle_seconds",
    "member_names",
    "member_roster",
    "register_member",
    "set_placement_pane",
    "wake_roster",
]
