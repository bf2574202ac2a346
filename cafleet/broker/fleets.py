"""Fleets: bootstrap, soft deletion and reads (docs/storage.md §7.3)."""

from __future__ import annotations

import json
from collections.abc import Callable, Container, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from cafleet.broker._common import (
    check_backend,
    check_coding_agent,
    directed_from,
    identity,
    refuse_directed_pane,
    stamp,
)
from cafleet.broker.errors import (
    BootstrapAborted,
    FleetNotFound,
    PlacementsChanged,
)
from cafleet.db import tx
from cafleet.db.catalog import fleets as q
from cafleet.db.runtime import Connection
from cafleet.hosts import current_host
from cafleet.records import (
    Fleet,
    FleetBootstrap,
    FleetSummary,
    PaneKey,
    PaneLike,
    fleet_from_row,
    fleet_summary_from_row,
    member_card,
)

if TYPE_CHECKING:
    from cafleet.records import Placement, SpawnSpec

# Member and placement records are imported where they are decoded: `fleet list` and
# `fleet show` create neither (each record class costs about a millisecond to create).

DIRECTOR_NAME = "Director"
DIRECTOR_DESCRIPTION = "Root Director for this fleet"
MONITOR_NAME = "monitor"
MONITOR_DESCRIPTION = "Monitor member for this fleet"

SpawnMonitor = Callable[[int, int, int], PaneLike]


def create_fleet(
    conn: Connection,
    *,
    name: str | None,
    backend: str,
    coding_agent: str,
    director_pane: PaneLike,
    spawn_monitor: SpawnMonitor,
    monitor_spawn: SpawnSpec | None = None,
    mux_socket: str | None = None,
    member_defaults: Mapping[str, object] | None = None,
    host_id: str | None = None,
    now: datetime | None = None,
) -> FleetBootstrap:
    """Bootstrap a fleet in one write transaction, spawning the monitor pane inside it.

    `spawn_monitor(fleet_id, director_member_id, monitor_member_id)` runs with the writer lock
    and SQLite's write lock held. If it raises, everything rolls back and its exception
    propagates unchanged. ``monitor_spawn`` is recorded for the monitor (`member respawn`). A
    failure after it returned raises `BootstrapAborted` carrying the spawned pane; nothing is
    committed. ``mux_socket`` is the tmux server both panes are on (recorded in both placements).
    ``member_defaults`` are the defaults for the fleet's new members (`fleets.member_defaults_json`;
    None or empty: none). ``host_id`` is the host both panes are on (default: this process's,
    `hosts.current_host`).
    """
    check_backend(backend)
    host = current_host() if host_id is None else host_id
    check_coding_agent(coding_agent)
    spawned: list[Any] = []
    try:
        with tx.write(conn):
            ts = stamp(now)
            refuse_directed_pane(
                conn, PaneKey(backend, director_pane.session, director_pane.pane_id), host
            )
            defaults = (
                json.dumps(dict(member_defaults), sort_keys=True) if member_defaults else None
            )
            fleet_id = conn.execute(
                q.INSERT_FLEET, {"name": name, "now": ts, "defaults": defaults}
            ).lastrowid
            director_id = conn.execute(
                q.INSERT_MEMBER,
                {
                    "fleet_id": fleet_id,
                    "name": DIRECTOR_NAME,
                    "description": DIRECTOR_DESCRIPTION,
                    "now": ts,
                    "card": member_card(DIRECTOR_NAME, DIRECTOR_DESCRIPTION),
                },
            ).lastrowid
            conn.execute(
                q.INSERT_PLACEMENT,
                {
                    "member_id": director_id,
                    "session": director_pane.session,
                    "window": director_pane.window_id,
                    "pane": director_pane.pane_id,
                    "backend": backend,
                    "agent": coding_agent,
                    "now": ts,
                    "socket": mux_socket,
                    "host": host,
                    # The root Director's pane runs what the user started: its server only.
                    **identity(director_pane, spawned=False),
                },
            )
            conn.execute(q.SET_DIRECTOR, {"member_id": director_id, "fleet_id": fleet_id})
            monitor_id = conn.execute(
                q.INSERT_MEMBER,
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
                q.INSERT_PLACEMENT,
                {
                    "member_id": monitor_id,
                    "session": pane.session,
                    "window": pane.window_id,
                    "pane": pane.pane_id,
                    "backend": backend,
                    "agent": coding_agent,
                    "now": ts,
                    "socket": mux_socket,
                    "host": host,
                    **identity(pane),
                },
            )
            fleet_row = conn.execute(q.FLEET_BY_ID, {"fleet_id": fleet_id}).mappings().one()
            member_rows = conn.execute(q.MEMBERS_BY_FLEET, {"fleet_id": fleet_id}).mappings().all()
    except Exception as exc:
        if not spawned:
            raise
        raise BootstrapAborted(exc, spawned[0], _rollback_leftover(conn)) from exc
    from cafleet.records import member_from_row

    members = {row["member_id"]: member_from_row(row) for row in member_rows}
    return FleetBootstrap(
        fleet=fleet_from_row(fleet_row),
        director=members[director_id],
        monitor=members[monitor_id],
    )


def fleet_directed_from(conn: Connection, key: PaneKey) -> Fleet | None:
    """The live fleet whose active root Director's placement names ``key`` on this host (or
    records no host), or None."""
    with tx.read(conn):
        return directed_from(conn, key, current_host())


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
        if conn.execute(q.FLEET_BY_ID, {"fleet_id": fleet_id}).first() is None:
            raise FleetNotFound(fleet_id)
        if conn.execute(q.SOFT_DELETE, {"now": ts, "fleet_id": fleet_id}).rowcount == 0:
            return 0
        tried: set[PaneKey] = set()
        for row in conn.execute(q.FLEET_CONCRETE_PLACEMENTS, {"fleet_id": fleet_id}).mappings():
            key = PaneKey(row["backend"], row["mux_session"], row["mux_pane_id"])
            if key in locked_panes or key in tried:
                continue
            tried.add(key)
            if not try_lock(key):
                raise PlacementsChanged(row["member_id"], row["mux_pane_id"])
            if locked_late is not None:
                locked_late.append((row["member_id"], key))
        count = conn.execute(q.DEREGISTER_FLEET_MEMBERS, {"now": ts, "fleet_id": fleet_id}).rowcount
        conn.execute(q.DELETE_FLEET_PLACEMENTS, {"fleet_id": fleet_id})
        conn.execute(q.DELETE_RUNTIME, {"fleet_id": fleet_id})
        return count


def get_fleet(conn: Connection, fleet_id: int) -> Fleet:
    """The fleet, soft-deleted included; `FleetNotFound` when no row exists."""
    with tx.read(conn):
        row = conn.execute(q.FLEET_BY_ID, {"fleet_id": fleet_id}).mappings().first()
    if row is None:
        raise FleetNotFound(fleet_id)
    return fleet_from_row(row)


def member_defaults(conn: Connection, fleet_id: int) -> dict[str, Any]:
    """The fleet's defaults for new members (`fleet create --worktree`): {} when it has none."""
    with tx.read(conn):
        text = conn.execute(q.MEMBER_DEFAULTS, {"fleet_id": fleet_id}).scalar()
    try:
        found = json.loads(text) if text else {}
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def list_fleets(conn: Connection) -> list[FleetSummary]:
    """Live fleets, `created_at DESC, fleet_id DESC`."""
    with tx.read(conn):
        rows = conn.execute(q.LIST_FLEETS).mappings().all()
    return [fleet_summary_from_row(row) for row in rows]


def fleet_summary(conn: Connection, fleet_id: int) -> FleetSummary:
    """One fleet's summary, soft-deleted included; `FleetNotFound` when no row exists."""
    with tx.read(conn):
        row = conn.execute(q.FLEET_SUMMARY, {"fleet_id": fleet_id}).mappings().first()
    if row is None:
        raise FleetNotFound(fleet_id)
    return fleet_summary_from_row(row)


def panes_shared_outside(conn: Connection, fleet_id: int) -> dict[PaneKey, int]:
    """Pane keys of the fleet's active members that an active member of another fleet also
    names, each with the lowest such member id."""
    with tx.read(conn):
        rows = conn.execute(q.SHARED_OUTSIDE, {"fleet_id": fleet_id}).all()
    return {PaneKey(r[0], r[1], r[2]): int(r[3]) for r in rows}


def fleet_placements(
    conn: Connection, fleet_id: int, *, concrete_only: bool = True
) -> list[Placement]:
    """Placements of the fleet's members (the set `delete_fleet` removes), by member id.

    With `concrete_only` (the default) pending placements are left out, so every returned
    placement has a `pane_key`. Does not check that the fleet exists.
    """
    query = q.FLEET_CONCRETE_PLACEMENTS if concrete_only else q.FLEET_PLACEMENTS
    with tx.read(conn):
        rows = conn.execute(query, {"fleet_id": fleet_id}).mappings().all()
    from cafleet.records import placement_from_row

    return [placement_from_row(row) for row in rows]


def director_placement(conn: Connection, fleet_id: int) -> Placement | None:
    """The root Director's placement, pending included; None when the fleet has no Director or
    the Director has no placement row. `FleetNotFound` when no fleet row exists."""
    with tx.read(conn):
        row = conn.execute(q.DIRECTOR_PLACEMENT, {"fleet_id": fleet_id}).mappings().first()
    if row is None:
        raise FleetNotFound(fleet_id)
    if row["member_id"] is None:
        return None
    from cafleet.records import placement_from_row

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
    "member_defaults",
    "panes_shared_outside",
]
