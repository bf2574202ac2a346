"""Fleets: bootstrap, soft deletion and reads (docs/storage.md §7.3)."""

from __future__ import annotations

from collections.abc import Callable, Container
from datetime import datetime
from typing import Any

from sqlalchemy import text

from cafleet.broker._common import (
    check_backend,
    check_coding_agent,
    member_columns,
    member_from,
    stamp,
)
from cafleet.broker.errors import (
    BootstrapAborted,
    FleetNotFound,
    PaneDirectsFleet,
    PlacementsChanged,
)
from cafleet.db import tx
from cafleet.db.predicates import ACTIVE_MONITOR_PREDICATE
from cafleet.db.runtime import Connection
from cafleet.records import (
    Fleet,
    FleetBootstrap,
    FleetSummary,
    PaneKey,
    PaneLike,
    Placement,
    SpawnSpec,
    fleet_from_row,
    fleet_summary_from_row,
    member_card,
    member_from_row,
    placement_from_row,
)

DIRECTOR_NAME = "Director"
DIRECTOR_DESCRIPTION = "Root Director for this fleet"
MONITOR_NAME = "monitor"
MONITOR_DESCRIPTION = "Monitor member for this fleet"

SpawnMonitor = Callable[[int, int, int], PaneLike]

_INSERT_FLEET = text(
    "INSERT INTO fleets (name, created_at, deleted_at, director_member_id) "
    "VALUES (:name, :now, NULL, NULL)"
)
_INSERT_MEMBER = text(
    "INSERT INTO members (fleet_id, name, description, status, registered_at, deregistered_at, "
    "member_card_json) VALUES (:fleet_id, :name, :description, 'active', :now, NULL, :card)"
)
_INSERT_PLACEMENT = text(
    "INSERT INTO member_placements (member_id, mux_session, mux_window_id, mux_pane_id, backend, "
    "coding_agent, created_at) VALUES (:member_id, :session, :window, :pane, :backend, :agent, :now)"
)
_SET_DIRECTOR = text("UPDATE fleets SET director_member_id = :member_id WHERE fleet_id = :fleet_id")

_FLEET_BY_ID = text(
    "SELECT fleet_id, name, created_at, deleted_at, director_member_id FROM fleets "
    "WHERE fleet_id = :fleet_id"
)
_MEMBERS_BY_FLEET = text(
    f"SELECT {member_columns()} FROM {member_from()} WHERE m.fleet_id = :fleet_id "
    "ORDER BY m.member_id"
)

_SOFT_DELETE = text(
    "UPDATE fleets SET deleted_at = :now WHERE fleet_id = :fleet_id AND deleted_at IS NULL"
)
_PLACEMENT_COLUMNS = (
    "p.member_id AS member_id, p.backend AS backend, p.mux_session AS mux_session, "
    "p.mux_window_id AS mux_window_id, p.mux_pane_id AS mux_pane_id, "
    "p.coding_agent AS coding_agent, p.created_at AS created_at, p.lost_at AS lost_at"
)
_FLEET_PLACEMENTS = text(
    f"SELECT {_PLACEMENT_COLUMNS} FROM members AS m "
    "JOIN member_placements AS p ON p.member_id = m.member_id "
    "WHERE m.fleet_id = :fleet_id ORDER BY m.member_id"
)
_FLEET_CONCRETE_PLACEMENTS = text(
    f"SELECT {_PLACEMENT_COLUMNS} FROM members AS m "
    "JOIN member_placements AS p ON p.member_id = m.member_id "
    "WHERE m.fleet_id = :fleet_id AND p.mux_pane_id IS NOT NULL ORDER BY m.member_id"
)
_DIRECTOR_PLACEMENT = text(
    f"SELECT f.fleet_id AS fleet_id, {_PLACEMENT_COLUMNS} FROM fleets AS f "
    "LEFT JOIN member_placements AS p ON p.member_id = f.director_member_id "
    "WHERE f.fleet_id = :fleet_id"
)
_DEREGISTER_FLEET_MEMBERS = text(
    "UPDATE members SET status = 'deregistered', deregistered_at = :now "
    "WHERE fleet_id = :fleet_id AND status = 'active'"
)
_DELETE_FLEET_PLACEMENTS = text(
    "DELETE FROM member_placements WHERE member_id IN "
    "(SELECT member_id FROM members WHERE fleet_id = :fleet_id)"
)
_DELETE_RUNTIME = text("DELETE FROM monitor_runtime WHERE fleet_id = :fleet_id")

_SUMMARY_COLUMNS = (
    "f.fleet_id AS fleet_id, f.name AS name, f.created_at AS created_at, "
    "f.deleted_at AS deleted_at, f.director_member_id AS director_member_id, "
    "(SELECT member_id FROM members WHERE fleet_id = f.fleet_id AND "
    f"{ACTIVE_MONITOR_PREDICATE}) AS monitor_member_id, "
    "(SELECT COUNT(*) FROM members WHERE fleet_id = f.fleet_id AND status = 'active') "
    "AS member_count"
)
_LIST_FLEETS = text(
    f"SELECT {_SUMMARY_COLUMNS} FROM fleets AS f WHERE f.deleted_at IS NULL "
    "ORDER BY f.created_at DESC, f.fleet_id DESC"
)
# One live fleet per Director pane (docs/cli.md §2.3): the live fleet whose active root Director's
# placement names the pane key.
_FLEET_DIRECTED_FROM = text(
    "SELECT f.fleet_id, f.name, f.created_at, f.deleted_at, f.director_member_id FROM fleets AS f "
    "JOIN members AS d ON d.member_id = f.director_member_id "
    "JOIN member_placements AS p ON p.member_id = d.member_id "
    "WHERE f.deleted_at IS NULL AND d.status = 'active' AND p.backend = :backend "
    "AND p.mux_session = :session AND p.mux_pane_id = :pane ORDER BY f.fleet_id LIMIT 1"
)
# Panes of the fleet's active members that an active member of another fleet also names
# (`fleet delete` never kills those), with the lowest such member.
_SHARED_OUTSIDE = text(
    "SELECT p.backend, p.mux_session, p.mux_pane_id, MIN(o.member_id) "
    "FROM members AS m JOIN member_placements AS p ON p.member_id = m.member_id "
    "JOIN member_placements AS op ON op.backend = p.backend "
    "AND op.mux_session = p.mux_session AND op.mux_pane_id = p.mux_pane_id "
    "JOIN members AS o ON o.member_id = op.member_id "
    "WHERE m.fleet_id = :fleet_id AND m.status = 'active' AND p.mux_pane_id IS NOT NULL "
    "AND o.fleet_id <> :fleet_id AND o.status = 'active' "
    "GROUP BY p.backend, p.mux_session, p.mux_pane_id"
)
_FLEET_SUMMARY = text(f"SELECT {_SUMMARY_COLUMNS} FROM fleets AS f WHERE f.fleet_id = :fleet_id")


def create_fleet(
    conn: Connection,
    *,
    name: str | None,
    backend: str,
    coding_agent: str,
    director_pane: PaneLike,
    spawn_monitor: SpawnMonitor,
    monitor_spawn: SpawnSpec | None = None,
    now: datetime | None = None,
) -> FleetBootstrap:
    """Bootstrap a fleet in one write transaction, spawning the monitor pane inside it.

    `spawn_monitor(fleet_id, director_member_id, monitor_member_id)` runs with the writer lock
    and SQLite's write lock held. If it raises, everything rolls back and its exception
    propagates unchanged. ``monitor_spawn`` is recorded for the monitor (`member respawn`). A failure after it returned raises `BootstrapAborted` carrying the
    spawned pane; nothing is committed.
    """
    check_backend(backend)
    check_coding_agent(coding_agent)
    spawned: list[Any] = []
    try:
        with tx.write(conn):
            ts = stamp(now)
            _refuse_directed_pane(
                conn, PaneKey(backend, director_pane.session, director_pane.pane_id)
            )
            fleet_id = conn.execute(_INSERT_FLEET, {"name": name, "now": ts}).lastrowid
            director_id = conn.execute(
                _INSERT_MEMBER,
                {
                    "fleet_id": fleet_id,
                    "name": DIRECTOR_NAME,
                    "description": DIRECTOR_DESCRIPTION,
                    "now": ts,
                    "card": member_card(DIRECTOR_NAME, DIRECTOR_DESCRIPTION),
                },
            ).lastrowid
            conn.execute(
                _INSERT_PLACEMENT,
                {
                    "member_id": director_id,
                    "session": director_pane.session,
                    "window": director_pane.window_id,
                    "pane": director_pane.pane_id,
                    "backend": backend,
                    "agent": coding_agent,
                    "now": ts,
                },
            )
            conn.execute(_SET_DIRECTOR, {"member_id": director_id, "fleet_id": fleet_id})
            monitor_id = conn.execute(
                _INSERT_MEMBER,
                {
                    "fleet_id": fleet_id,
                    "name": MONITOR_NAME,
                    "description": MONITOR_DESCRIPTION,
                    "now": ts,
                    "card": member_card(MONITOR_NAME, MONITOR_DESCRIPTION, monitor=True),
                },
            ).lastrowid
            assert fleet_id is not None and director_id is not None and monitor_id is not None
            if monitor_spawn is not None:
                from cafleet.broker.recovery import insert_spawn

                insert_spawn(conn, monitor_id, monitor_spawn)
            pane = spawn_monitor(fleet_id, director_id, monitor_id)
            spawned.append(pane)
            conn.execute(
                _INSERT_PLACEMENT,
                {
                    "member_id": monitor_id,
                    "session": pane.session,
                    "window": pane.window_id,
                    "pane": pane.pane_id,
                    "backend": backend,
                    "agent": coding_agent,
                    "now": ts,
                },
            )
            fleet_row = conn.execute(_FLEET_BY_ID, {"fleet_id": fleet_id}).mappings().one()
            member_rows = conn.execute(_MEMBERS_BY_FLEET, {"fleet_id": fleet_id}).mappings().all()
    except Exception as exc:
        if not spawned:
            raise
        raise BootstrapAborted(exc, spawned[0], _rollback_leftover(conn)) from exc
    members = {row["member_id"]: member_from_row(row) for row in member_rows}
    return FleetBootstrap(
        fleet=fleet_from_row(fleet_row),
        director=members[director_id],
        monitor=members[monitor_id],
    )


def _directed_from(conn: Connection, key: PaneKey) -> Fleet | None:
    row = (
        conn.execute(_FLEET_DIRECTED_FROM, {"backend": key[0], "session": key[1], "pane": key[2]})
        .mappings()
        .first()
    )
    return None if row is None else fleet_from_row(row)


def _refuse_directed_pane(conn: Connection, key: PaneKey) -> None:
    fleet = _directed_from(conn, key)
    if fleet is not None:
        raise PaneDirectsFleet(key[2], fleet.fleet_id, fleet.name)


def fleet_directed_from(conn: Connection, key: PaneKey) -> Fleet | None:
    """The live fleet whose active root Director's placement names ``key``, or None."""
    with tx.read(conn):
        return _directed_from(conn, key)


def _rollback_leftover(conn: Connection) -> BaseException | None:
    """After a failed bootstrap, make sure SQLite's transaction is gone; report a failure."""
    try:
        return conn.rollback_leftover()
    except Exception as exc:  # the connection itself is unusable
        return exc


def delete_fleet(
    conn: Connection,
    *,
    fleet_id: int,
    locked_panes: Container[PaneKey],
    try_lock: Callable[[PaneKey], bool],
    locked_late: list[tuple[int, PaneKey]] | None = None,
    now: datetime | None = None,
) -> int:
    """Soft-delete a fleet; return how many active members were deregistered (0 on a repeat).

    `locked_panes` holds the pane keys whose locks the caller already holds; every other
    concrete placement found inside the transaction gets exactly one `try_lock(key)`. A failed
    try rolls back and raises `PlacementsChanged(member_id, pane_id)`. Each successful try is
    appended to ``locked_late`` as ``(member_id, key)`` (a pane the caller did not know of).
    """
    with tx.write(conn):
        ts = stamp(now)
        if conn.execute(_FLEET_BY_ID, {"fleet_id": fleet_id}).first() is None:
            raise FleetNotFound(fleet_id)
        if conn.execute(_SOFT_DELETE, {"now": ts, "fleet_id": fleet_id}).rowcount == 0:
            return 0
        tried: set[PaneKey] = set()
        for row in conn.execute(_FLEET_CONCRETE_PLACEMENTS, {"fleet_id": fleet_id}).mappings():
            key = PaneKey(row["backend"], row["mux_session"], row["mux_pane_id"])
            if key in locked_panes or key in tried:
                continue
            tried.add(key)
            if not try_lock(key):
                raise PlacementsChanged(row["member_id"], row["mux_pane_id"])
            if locked_late is not None:
                locked_late.append((row["member_id"], key))
        count = conn.execute(_DEREGISTER_FLEET_MEMBERS, {"now": ts, "fleet_id": fleet_id}).rowcount
        conn.execute(_DELETE_FLEET_PLACEMENTS, {"fleet_id": fleet_id})
        conn.execute(_DELETE_RUNTIME, {"fleet_id": fleet_id})
        return count


def get_fleet(conn: Connection, fleet_id: int) -> Fleet:
    """The fleet, soft-deleted included; `FleetNotFound` when no row exists."""
    with tx.read(conn):
        row = conn.execute(_FLEET_BY_ID, {"fleet_id": fleet_id}).mappings().first()
    if row is None:
        raise FleetNotFound(fleet_id)
    return fleet_from_row(row)


def list_fleets(conn: Connection) -> list[FleetSummary]:
    """Live fleets, `created_at DESC, fleet_id DESC`."""
    with tx.read(conn):
        rows = conn.execute(_LIST_FLEETS).mappings().all()
    return [fleet_summary_from_row(row) for row in rows]


def fleet_summary(conn: Connection, fleet_id: int) -> FleetSummary:
    """One fleet's summary, soft-deleted included; `FleetNotFound` when no row exists."""
    with tx.read(conn):
        row = conn.execute(_FLEET_SUMMARY, {"fleet_id": fleet_id}).mappings().first()
    if row is None:
        raise FleetNotFound(fleet_id)
    return fleet_summary_from_row(row)


def panes_shared_outside(conn: Connection, fleet_id: int) -> dict[PaneKey, int]:
    """Pane keys of the fleet's active members that an active member of another fleet also
    names, each with the lowest such member id."""
    with tx.read(conn):
        rows = conn.execute(_SHARED_OUTSIDE, {"fleet_id": fleet_id}).all()
    return {PaneKey(r[0], r[1], r[2]): int(r[3]) for r in rows}


def fleet_placements(
    conn: Connection, fleet_id: int, *, concrete_only: bool = True
) -> list[Placement]:
    """Placements of the fleet's members (the set `delete_fleet` removes), by member id.

    With `concrete_only` (the default) pending placements are left out, so every returned
    placement has a `pane_key`. Does not check that the fleet exists.
    """
    query = _FLEET_CONCRETE_PLACEMENTS if concrete_only else _FLEET_PLACEMENTS
    with tx.read(conn):
        rows = conn.execute(query, {"fleet_id": fleet_id}).mappings().all()
    return [placement_from_row(row) for row in rows]


def director_placement(conn: Connection, fleet_id: int) -> Placement | None:
    """The root Director's placement, pending included; None when the fleet has no Director or
    the Director has no placement row. `FleetNotFound` when no fleet row exists."""
    with tx.read(conn):
        row = conn.execute(_DIRECTOR_PLACEMENT, {"fleet_id": fleet_id}).mappings().first()
    if row is None:
        raise FleetNotFound(fleet_id)
    if row["member_id"] is None:
        return None
    return placement_from_row(row)


__all__ = [
    "create_fleet",
    "delete_fleet",
    "fleet_directed_from",
    "director_placement",
    "fleet_placements",
    "fleet_summary",
    "get_fleet",
    "list_fleets",
    "panes_shared_outside",
]
