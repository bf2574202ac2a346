"""Statements of `cafleet.broker.transfer`: a fleet's rows read whole for `cafleet export`, and
written back with their ids by `cafleet import` (docs/cli.md §2.33)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Table, func, insert, literal_column, select, text, update

from cafleet.db.schema import (
    answer_links,
    asset_installs,
    fleet_budgets,
    fleets,
    host_loops,
    member_budgets,
    member_placements,
    member_spawns,
    members,
    messages,
    monitor_runtime,
    notify_channels,
    notify_outbox,
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
    notify_channels,
    notify_outbox,
    member_budgets,
    fleet_budgets,
)
# Tables no export holds: a host's or a loop's running state, and answer links (single-use
# tokens that expire within minutes; a copy must not answer for the original).
NOT_EXPORTED: tuple[Table, ...] = (monitor_runtime, host_loops, asset_installs, answer_links)


def _through(owner: Table, table: Table, column: str, key: str) -> tuple[Table, Any]:
    """``table``'s rows reach their fleet through ``owner``: ``table.<column> = owner.<key>``."""
    return owner, owner.c[key] == table.c[column]


# Table -> (the table that holds its fleet_id, the join to it; None: the table itself). Rows are
# exported in primary-key order.
_OWNER: dict[Table, tuple[Table, Any]] = {
    members: (members, None),
    tasks: (tasks, None),
    notify_channels: (notify_channels, None),
    fleet_budgets: (fleet_budgets, None),
    member_placements: _through(members, member_placements, "member_id", "member_id"),
    member_spawns: _through(members, member_spawns, "member_id", "member_id"),
    member_budgets: _through(members, member_budgets, "member_id", "member_id"),
    messages: _through(members, messages, "owner_member_id", "member_id"),
    task_deps: _through(tasks, task_deps, "task_id", "task_id"),
    task_events: _through(tasks, task_events, "task_id", "task_id"),
    notify_outbox: _through(notify_channels, notify_outbox, "channel_id", "channel_id"),
}


def _insert(table: Table) -> Any:
    values: dict[str, Any] = {c.name: param(c.name) for c in table.c}
    if table is fleets:
        values["director_member_id"] = literal_column("NULL")  # set once its members exist
    return insert(table).values(values)


def _of_fleet(table: Table) -> Any:
    if table is fleets:
        return select(*table.c).where(fleets.c.fleet_id == param("fleet_id"))
    owner, join = _OWNER[table]
    order = tuple(table.primary_key.columns)
    query = select(*table.c)
    if join is not None:
        query = query.join(owner, join)
    return query.where(owner.c.fleet_id == param("fleet_id")).order_by(*order)


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
    ("notify_channels", "channel_id"),
    ("notify_outbox", "outbox_id"),
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
