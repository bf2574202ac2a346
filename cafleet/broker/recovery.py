"""Recovery: what each member was spawned with, moving a placement to a new pane, and recording
a lost pane with its report to the Director (docs/storage.md §7.10).

`member_spawns` (revision 0003) keeps a member's spawn-prompt template, model and effort so
`member respawn` can start the same agent again; `member_placements.lost_at` marks a pane the
monitor loop found gone, so the loss is reported exactly once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from cafleet.broker._common import identity, refuse_directed_pane, stamp
from cafleet.broker.errors import PlacementsChanged
from cafleet.db import tx
from cafleet.db.catalog import recovery as q
from cafleet.db.runtime import Connection
from cafleet.hosts import current_host
from cafleet.records import (
    Member,
    PaneKey,
    PaneLike,
    Placement,
    member_from_row,
    placement_from_row,
)

if TYPE_CHECKING:
    # Loaded only where a spawn is read: `member list` asks for worktrees on every run.
    from cafleet.records import RecordedWorktree, SpawnSpec, WorktreeSpec


def insert_spawn(conn: Connection, member_id: int, spawn: SpawnSpec) -> None:
    """Inside the caller's write transaction: record what ``member_id`` is spawned with."""
    conn.execute(
        q.INSERT_SPAWN,
        {
            "member_id": member_id,
            "prompt": spawn.prompt,
            "model": spawn.model,
            "effort": spawn.effort,
            "worktree": None if spawn.worktree is None else spawn.worktree.to_json(),
            "permissions": spawn.permissions,
        },
    )


def get_spawn(conn: Connection, member_id: int) -> SpawnSpec | None:
    """What the member was spawned with, or None (the root Director; members created before
    revision 0003)."""
    with tx.read(conn):
        row = conn.execute(q.SPAWN, {"member_id": member_id}).first()
    if row is None:
        return None
    from cafleet.records import SpawnSpec, WorktreeSpec

    return SpawnSpec(
        prompt=row[0],
        model=row[1],
        effort=row[2],
        worktree=WorktreeSpec.from_json(row[3]),
        permissions=row[4],
    )


def fleet_worktrees(conn: Connection, fleet_id: int) -> dict[int, WorktreeSpec]:
    """The worktree of each active member of the fleet that has one, by member id."""
    with tx.read(conn):
        rows = [r for r in conn.execute(q.FLEET_WORKTREES, {"fleet_id": fleet_id}).all() if r[1]]
    if not rows:
        return {}
    from cafleet.records import WorktreeSpec

    found = {int(row[0]): WorktreeSpec.from_json(row[1]) for row in rows}
    return {member_id: spec for member_id, spec in found.items() if spec is not None}


def recorded_worktrees(conn: Connection) -> list[RecordedWorktree]:
    """Every worktree a member was created with, any fleet's, by member id."""
    with tx.read(conn):
        rows = conn.execute(q.ALL_WORKTREES, {}).all()
    if not rows:
        return []
    from cafleet.records import RecordedWorktree, WorktreeSpec

    found: list[RecordedWorktree] = []
    for row in rows:
        spec = WorktreeSpec.from_json(row[5])
        if spec is not None:
            active = row[3] == "active"
            found.append(
                RecordedWorktree(int(row[0]), int(row[1]), row[2], active, row[4] is not None, spec)
            )
    return found


def fleet_permissions(conn: Connection, fleet_id: int) -> dict[int, str | None]:
    """member id -> the permission profile recorded with its spawn (None: recorded before
    profiles existed, or the monitor), for the fleet's members that have a spawn record."""
    with tx.read(conn):
        rows = conn.execute(q.FLEET_PERMISSIONS, {"fleet_id": fleet_id}).all()
    return {int(row[0]): row[1] for row in rows}


def rebind_placement(
    conn: Connection,
    *,
    member_id: int,
    expected: tuple[str, str, str | None],
    pane: PaneLike,
    coding_agent: str,
    mux_socket: str | None = None,
    host_id: str | None = None,
    made_at: str | None = None,
    spawned: bool = True,
    now: datetime | None = None,
) -> Placement:
    """Point the member's placement at ``pane`` (the caller holds the old and the new pane's
    locks): new session, window, pane, agent, `mux_socket` (the server ``pane`` is on; None:
    not known), the server and (``spawned``: cafleet started what runs in it) the process
    ``pane`` records (docs/runtime.md §1.8), and `created_at`, `lost_at` cleared.

    ``expected`` is the ``(backend, session, pane id)`` the caller locked and ``made_at`` the
    `created_at` of the placement it saw (None: whatever it is now). A member that is no
    longer active or whose placement changed raises `PlacementsChanged`. When the member is
    its fleet's root Director, the new pane must not already direct another live fleet
    (`PaneDirectsFleet`).
    """
    backend, old_session, old_pane = expected
    host = current_host() if host_id is None else host_id  # the new pane's host
    with tx.write(conn):
        ts = stamp(now)
        row = conn.execute(q.MEMBER, {"member_id": member_id}).mappings().first()
        if made_at is None and row is not None:
            made_at = row["p_created_at"]
        new_key = PaneKey(backend, pane.session, pane.pane_id)
        if row is not None and row["kind"] == "director" and new_key != expected:
            # (The same key: a new tmux server reused the id of the Director's own old pane,
            # which directs only this fleet.)
            refuse_directed_pane(conn, new_key, host)
        updated = (
            conn.execute(
                q.REBIND,
                {
                    "member_id": member_id,
                    "backend": backend,
                    "old_session": old_session,
                    "old_pane": old_pane,
                    "session": pane.session,
                    "window": pane.window_id,
                    "pane": pane.pane_id,
                    "agent": coding_agent,
                    "socket": mux_socket,
                    "host": host,
                    "now": ts,
                    "old_created": made_at,
                    **identity(pane, spawned=spawned),
                },
            )
            .mappings()
            .first()
        )
        if updated is None:
            raise PlacementsChanged(member_id, old_pane or "-")
        return placement_from_row(updated)


def placed_members(conn: Connection, fleet_id: int) -> list[Member]:
    """The fleet's active members with a concrete placement (root Director included), by id."""
    with tx.read(conn):
        rows = conn.execute(q.PLACED, {"fleet_id": fleet_id}).mappings().all()
    return [member_from_row(row) for row in rows]


def record_pane_losses(
    conn: Connection,
    *,
    losses: Sequence[tuple[int, PaneKey, str]],
    director_id: int,
    sender_id: int,
    text: Callable[[list[int]], str],
    now: datetime | None = None,
) -> tuple[int | None, list[int]]:
    """One transaction: mark each member's placement lost (only while it is the one seen,
    ``(member id, pane key, created_at)``, the member is active and no loss is recorded yet)
    and put one report, ``text``
    of the members marked, in the root Director's inbox. Returns the report's message id and
    the members marked; ``(None, [])`` when nothing changed."""
    with tx.write(conn):
        ts = stamp(now)
        marked = [
            member_id
            for member_id, (backend, session, pane), created in losses
            if conn.execute(
                q.MARK_LOST,
                {
                    "now": ts,
                    "member_id": member_id,
                    "backend": backend,
                    "session": session,
                    "pane": pane,
                    "created": created,
                },
            ).rowcount
            == 1
        ]
        if not marked:
            return None, []
        message_id = conn.execute(
            q.INSERT_REPORT,
            {"director_id": director_id, "sender_id": sender_id, "now": ts, "text": text(marked)},
        ).scalar_one()
        return int(message_id), marked


__all__ = [
    "fleet_worktrees",
    "recorded_worktrees",
    "fleet_permissions",
    "get_spawn",
    "insert_spawn",
    "placed_members",
    "rebind_placement",
    "record_pane_losses",
]
