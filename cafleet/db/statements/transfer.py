"""Statements of `cafleet.broker.transfer`: a fleet's rows read whole for `cafleet export`, and
written back with their ids by `cafleet import` (docs/cli.md §2.33)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Table, func, insert, literal_column, select, text, update

from cafleet.db.schema import (
    fleets,
    member_placements,
    member_spawns,
    members,
    messages,
    task_deps,
    task_events,
    tasks,
)
from cafleet.db.statements import param

# The tables a fleet's export holds, in the order an import writes them (foreign keys first).
TABLES: tuple[Table, ...] = (
    fleets,
    members,
    member_placements,
    member_spawns,
    tasks,
    task_deps,
    task_events,
    messages,
)


def _insert(table: Table) -> Any:
    values: dict[str, Any] = {c.name: param(c.name) for c in table.c}
    if table is fleets:
        values["director_member_id"] = literal_column("NULL")  # set once its members exist
    return insert(table).values(values)


def _of_fleet(table: Table) -> Any:
    if table is fleets:
        return select(*table.c).where(fleets.c.fleet_id == param("fleet_id"))
    if table in (members, tasks):
        key = members.c.member_id if table is members else tasks.c.task_id
        return select(*table.c).where(table.c.fleet_id == param("fleet_id")).order_by(key)
    if table in (member_placements, member_spawns):
        return (
            select(*table.c)
            .join(members, members.c.member_id == table.c.member_id)
            .where(members.c.fleet_id == param("fleet_id"))
            .order_by(table.c.member_id)
        )
    if table is messages:
        return (
            select(*table.c)
            .join(members, members.c.member_id == messages.c.owner_member_id)
            .where(members.c.fleet_id == param("fleet_id"))
            .order_by(messages.c.message_id)
        )
    key = task_deps.c.task_id if table is task_deps else task_events.c.event_id
    order = (
        (task_deps.c.task_id, task_deps.c.after_task_id)
        if table is task_deps
        else (task_events.c.event_id,)
    )
    return (
        select(*table.c)
        .join(
            tasks,
            tasks.c.task_id == key
            if table is task_deps
            else tasks.c.task_id == task_events.c.task_id,
        )
        .where(tasks.c.fleet_id == param("fleet_id"))
        .order_by(*order)
    )


FLEET_COUNT = select(func.count()).select_from(fleets)
SET_DIRECTOR = (
    update(fleets)
    .where(fleets.c.fleet_id == param("fleet_id"))
    .values(director_member_id=param("director_member_id"))
)
# SQLite's AUTOINCREMENT follows explicit ids by itself; PostgreSQL's sequences are moved past
# the imported ids (DIALECT_STATEMENTS).
SYNC_SEQUENCES: Any = select(literal_column("1"))
_SERIAL = (
    ("fleets", "fleet_id"),
    ("members", "member_id"),
    ("messages", "message_id"),
    ("tasks", "task_id"),
    ("task_events", "event_id"),
)
PG_SYNC_SEQUENCES = text(
    "SELECT "
    + ", ".join(
        f"setval(pg_get_serial_sequence('{t}', '{c}'), "
        f"(SELECT coalesce(max({c}), 0) + 1 FROM {t}), false)"
        for t, c in _SERIAL
    )
)

STATEMENTS: dict[str, Any] = {
    **{f"EXPORT_{t.name.upper()}": _of_fleet(t) for t in TABLES},
    **{f"IMPORT_{t.name.upper()}": _insert(t) for t in TABLES},
    "FLEET_COUNT": FLEET_COUNT,
    "SET_DIRECTOR": SET_DIRECTOR,
    "SYNC_SEQUENCES": SYNC_SEQUENCES,
}
DIALECT_STATEMENTS: dict[str, dict[str, Any]] = {
    "postgresql": {"SYNC_SEQUENCES": PG_SYNC_SEQUENCES}
}
