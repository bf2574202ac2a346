"""A fleet's board (docs/cli.md §2.32): its tasks in one read. Apart from `cafleet.broker.tasks`
so that `task list` imports neither the send path nor the message records
(`docs/performance.md` §22)."""

from __future__ import annotations

from typing import Any

from cafleet.broker.errors import FleetDeleted, FleetNotFound
from cafleet.db import tx
from cafleet.db.catalog import tasks as q
from cafleet.db.runtime import Connection
from cafleet.records.tasks import Task, task_from_row


def task_board(
    conn: Connection, fleet_id: int, *, state: str | None = None, member_id: int | None = None
) -> list[Task]:
    """The fleet's tasks in id order, optionally only one state or one assignee's."""
    with tx.read(conn):
        _fleet(conn, fleet_id, live=False)
        rows = conn.execute(
            q.BOARD, {"fleet_id": fleet_id, "state": state, "member": member_id}
        ).all()
        after = _fleet_after(conn, fleet_id)
        return [task_from_row(r, tuple(after.get(r["task_id"], ()))) for r in rows]


# --- inside a transaction (shared with `cafleet.broker.tasks`) ---------------------------------


def _fleet_after(conn: Connection, fleet_id: int) -> dict[int, list[int]]:
    after: dict[int, list[int]] = {}
    for row in conn.execute(q.FLEET_DEPS, {"fleet_id": fleet_id}):
        after.setdefault(row["task_id"], []).append(row["after_task_id"])
    return after


def _fleet(conn: Connection, fleet_id: int, *, live: bool) -> Any:
    row = conn.execute(q.FLEET, {"fleet_id": fleet_id}).first()
    if row is None:
        raise FleetNotFound(fleet_id)
    if live and row["deleted_at"] is not None:
        raise FleetDeleted(fleet_id)
    return row


__all__ = ["task_board"]
