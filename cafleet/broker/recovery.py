"""Recovery: what each member was spawned with, moving a placement to a new pane, and recording
a lost pane with its report to the Director (docs/storage.md §7.10).

`member_spawns` (revision 0003) keeps a member's spawn-prompt template, model and effort so
`member respawn` can start the same agent again; `member_placements.lost_at` marks a pane the
monitor loop found gone, so the loss is reported exactly once.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import text

from cafleet.broker._common import member_columns, member_from, stamp
from cafleet.broker.errors import PlacementsChanged
from cafleet.broker.fleets import _refuse_directed_pane
from cafleet.db import tx
from cafleet.db.runtime import Connection
from cafleet.records import (
    Member,
    PaneKey,
    PaneLike,
    Placement,
    SpawnSpec,
    member_from_row,
    placement_from_row,
)

_INSERT_SPAWN = text(
    "INSERT INTO member_spawns (member_id, prompt, model, effort) "
    "VALUES (:member_id, :prompt, :model, :effort)"
)
_SPAWN = text("SELECT prompt, model, effort FROM member_spawns WHERE member_id = :member_id")
_MEMBER = text(f"SELECT {member_columns()} FROM {member_from()} WHERE m.member_id = :member_id")
# Guarded on the pane the caller locked and saw: a placement that moved meanwhile changes nothing.
_REBIND = text(
    "UPDATE member_placements SET mux_session = :session, mux_window_id = :window, "
    "mux_pane_id = :pane, coding_agent = :agent, created_at = :now, lost_at = NULL "
    "WHERE member_id = :member_id AND backend = :backend AND mux_session = :old_session "
    "AND mux_pane_id IS :old_pane AND EXISTS "
    "(SELECT 1 FROM members WHERE member_id = :member_id AND status = 'active') "
    "RETURNING member_id, backend, mux_session, mux_window_id, mux_pane_id, coding_agent, "
    "created_at, lost_at"
)
_PLACED = text(
    f"SELECT {member_columns()} FROM {member_from()} WHERE m.fleet_id = :fleet_id "
    "AND m.status = 'active' AND p.mux_pane_id IS NOT NULL ORDER BY m.member_id"
)
_MARK_LOST = text(
    "UPDATE member_placements SET lost_at = :now WHERE member_id = :member_id "
    "AND backend = :backend AND mux_session = :session AND mux_pane_id = :pane "
    "AND lost_at IS NULL AND EXISTS "
    "(SELECT 1 FROM members WHERE member_id = :member_id AND status = 'active')"
)
# The report: a unicast delivery in the root Director's inbox (born notified when the Director
# reports to itself, as any self-send; otherwise never typed: the Director is never notified).
_INSERT_REPORT = text(
    "INSERT INTO messages (owner_member_id, from_member_id, to_member_id, type, created_at, "
    "status_state, status_timestamp, origin_message_id, text, notified_at) "
    "VALUES (:director_id, :sender_id, :director_id, 'unicast', :now, 'input_required', :now, "
    "NULL, :text, CASE WHEN :sender_id = :director_id THEN :now ELSE NULL END) "
    "RETURNING message_id"
)


def insert_spawn(conn: Connection, member_id: int, spawn: SpawnSpec) -> None:
    """Inside the caller's write transaction: record what ``member_id`` is spawned with."""
    conn.execute(
        _INSERT_SPAWN,
        {
            "member_id": member_id,
            "prompt": spawn.prompt,
            "model": spawn.model,
            "effort": spawn.effort,
        },
    )


def get_spawn(conn: Connection, member_id: int) -> SpawnSpec | None:
    """What the member was spawned with, or None (the root Director; members created before
    revision 0003)."""
    with tx.read(conn):
        row = conn.execute(_SPAWN, {"member_id": member_id}).first()
    return None if row is None else SpawnSpec(prompt=row[0], model=row[1], effort=row[2])


def rebind_placement(
    conn: Connection,
    *,
    member_id: int,
    expected: tuple[str, str, str | None],
    pane: PaneLike,
    coding_agent: str,
    now: datetime | None = None,
) -> Placement:
    """Point the member's placement at ``pane`` (the caller holds the old and the new pane's
    locks): new session, window, pane, agent and `created_at`, `lost_at` cleared.

    ``expected`` is the ``(backend, session, pane id)`` the caller locked. A member that is no
    longer active or whose placement changed raises `PlacementsChanged`. When the member is its
    fleet's root Director, the new pane must not already direct another live fleet
    (`PaneDirectsFleet`).
    """
    backend, old_session, old_pane = expected
    with tx.write(conn):
        ts = stamp(now)
        row = conn.execute(_MEMBER, {"member_id": member_id}).mappings().first()
        if row is not None and row["kind"] == "director":
            _refuse_directed_pane(conn, PaneKey(backend, pane.session, pane.pane_id))
        updated = (
            conn.execute(
                _REBIND,
                {
                    "member_id": member_id,
                    "backend": backend,
                    "old_session": old_session,
                    "old_pane": old_pane,
                    "session": pane.session,
                    "window": pane.window_id,
                    "pane": pane.pane_id,
                    "agent": coding_agent,
                    "now": ts,
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
        rows = conn.execute(_PLACED, {"fleet_id": fleet_id}).mappings().all()
    return [member_from_row(row) for row in rows]


def record_pane_loss(
    conn: Connection,
    *,
    member_id: int,
    pane_key: PaneKey,
    director_id: int,
    sender_id: int,
    text: str,
    now: datetime | None = None,
) -> int | None:
    """One transaction: mark the member's placement lost (only while it still names
    ``pane_key``, the member is active and no loss is recorded yet) and put the report in the
    root Director's inbox. Returns the report's message id, or None when nothing changed."""
    with tx.write(conn):
        ts = stamp(now)
        marked = conn.execute(
            _MARK_LOST,
            {
                "now": ts,
                "member_id": member_id,
                "backend": pane_key[0],
                "session": pane_key[1],
                "pane": pane_key[2],
            },
        ).rowcount
        if marked != 1:
            return None
        message_id = conn.execute(
            _INSERT_REPORT,
            {"director_id": director_id, "sender_id": sender_id, "now": ts, "text": text},
        ).scalar_one()
        return int(message_id)


__all__ = [
    "get_spawn",
    "insert_spawn",
    "placed_members",
    "rebind_placement",
    "record_pane_loss",
]
