"""Notification state: pending selection, recheck under the pane lock, the stamp
(docs/storage.md §7.6, docs/runtime.md §4.1).

A message is pending when it is an un-ACKed, un-notified unicast delivery that is not a
self-send, owned by an active member of a live fleet who is not the root Director and whose
concrete placement's pane key differs from the root Director's.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import text

from cafleet.broker._common import member_columns, message_columns, stamp
from cafleet.db import tx
from cafleet.db.predicates import PENDING_NOTIFICATION_PREDICATE
from cafleet.db.runtime import Connection
from cafleet.records import (
    PendingNotification,
    member_from_row,
    message_from_row,
)

RecheckResult = Literal["pending", "not_pending", "rebound"]

# The partial index is usable only when the query repeats its predicate literally (a bound
# parameter hides it), and left alone the planner prefers the wider owner indexes; hence the
# literal predicate and INDEXED BY, which makes a predicate drift fail loudly at prepare time.
# Excluded ids travel as one JSON array (`json_each`): the statement text never changes with
# their number, so it is prepared once, and thousands of ids cost one bound parameter.
_NOT_EXCLUDED = "x.message_id NOT IN (SELECT value FROM json_each(:exclude))"
_MEMBER_ELIGIBLE = (
    "m.status = 'active' AND f.deleted_at IS NULL "
    "AND m.member_id IS NOT f.director_member_id "
    "AND p.mux_pane_id IS NOT NULL "
    "AND NOT (dp.mux_pane_id IS NOT NULL AND dp.backend = p.backend "
    "AND dp.mux_session = p.mux_session AND dp.mux_pane_id = p.mux_pane_id)"
)
_ELIGIBLE = (
    f"{PENDING_NOTIFICATION_PREDICATE} "
    "AND x.from_member_id <> x.owner_member_id "
    f"AND {_NOT_EXCLUDED} AND {_MEMBER_ELIGIBLE}"
)
_COLUMNS = f"{message_columns('x', 'x_')}, s.name AS sender_name, {member_columns('m', 'f', 'p')}"
_JOINS = (
    "JOIN fleets AS f ON f.fleet_id = m.fleet_id "
    "JOIN member_placements AS p ON p.member_id = m.member_id "
    "LEFT JOIN member_placements AS dp ON dp.member_id = f.director_member_id "
    "LEFT JOIN members AS s ON s.member_id = x.from_member_id"
)
# By recipient: one range search of the pending index, in its own order.
_NEXT_FOR_RECIPIENT = text(
    f"SELECT {_COLUMNS} "
    "FROM messages AS x INDEXED BY idx_messages_pending_notification "
    f"JOIN members AS m ON m.member_id = x.owner_member_id {_JOINS} "
    f"WHERE x.owner_member_id = :recipient_id AND {_ELIGIBLE} "
    "ORDER BY x.created_at, x.message_id LIMIT 1"
)
# By fleet: the fleet's active members (idx_members_fleet_status) drive one pending-index search
# each (CROSS JOIN fixes that nesting order), then the rows found are sorted.
_NEXT_FOR_FLEET = text(
    f"SELECT {_COLUMNS} "
    "FROM members AS m CROSS JOIN messages AS x INDEXED BY idx_messages_pending_notification "
    f"ON x.owner_member_id = m.member_id {_JOINS} "
    f"WHERE m.fleet_id = :fleet_id AND m.status = 'active' AND {_ELIGIBLE} "
    "ORDER BY x.created_at, x.message_id LIMIT 1"
)
_NEXT_FOR_BOTH = text(
    f"SELECT {_COLUMNS} "
    "FROM messages AS x INDEXED BY idx_messages_pending_notification "
    f"JOIN members AS m ON m.member_id = x.owner_member_id {_JOINS} "
    f"WHERE x.owner_member_id = :recipient_id AND m.fleet_id = :fleet_id AND {_ELIGIBLE} "
    "ORDER BY x.created_at, x.message_id LIMIT 1"
)
# Each eligible member's oldest pending message, in one statement: per member, one correlated
# search of the pending index for its first row (the same range search as _NEXT_FOR_RECIPIENT),
# then the message row by its primary key. The unqualified predicate binds to `y`, the innermost
# `messages`, so the partial index applies.
_HEAD_OF_MEMBER = (
    "x.message_id = (SELECT y.message_id "
    "FROM messages AS y INDEXED BY idx_messages_pending_notification "
    f"WHERE y.owner_member_id = m.member_id AND {PENDING_NOTIFICATION_PREDICATE} "
    "AND y.from_member_id <> y.owner_member_id "
    "AND y.message_id NOT IN (SELECT value FROM json_each(:exclude)) "
    "ORDER BY y.created_at, y.message_id LIMIT 1)"
)
_HEADS_FOR_FLEET = text(
    f"SELECT {_COLUMNS} "
    f"FROM members AS m CROSS JOIN messages AS x ON {_HEAD_OF_MEMBER} {_JOINS} "
    f"WHERE m.fleet_id = :fleet_id AND {_MEMBER_ELIGIBLE} "
    "ORDER BY x.created_at, x.message_id"
)
_HEADS_FOR_MEMBERS = text(
    f"SELECT {_COLUMNS} "
    f"FROM members AS m CROSS JOIN messages AS x ON {_HEAD_OF_MEMBER} {_JOINS} "
    f"WHERE m.member_id IN (SELECT value FROM json_each(:members)) AND {_MEMBER_ELIGIBLE} "
    "ORDER BY x.created_at, x.message_id"
)

_RECHECK = text(
    "SELECT x.type AS type, x.status_state AS status_state, x.notified_at AS notified_at, "
    "x.from_member_id AS from_member_id, x.owner_member_id AS owner_member_id, "
    "m.status AS status, f.deleted_at AS deleted_at, f.director_member_id AS director_member_id, "
    "p.backend AS backend, p.mux_session AS mux_session, p.mux_pane_id AS mux_pane_id, "
    "dp.backend AS d_backend, dp.mux_session AS d_mux_session, dp.mux_pane_id AS d_mux_pane_id "
    "FROM messages AS x JOIN members AS m ON m.member_id = x.owner_member_id "
    "JOIN fleets AS f ON f.fleet_id = m.fleet_id "
    "LEFT JOIN member_placements AS p ON p.member_id = m.member_id "
    "LEFT JOIN member_placements AS dp ON dp.member_id = f.director_member_id "
    "WHERE x.message_id = :message_id"
)
_STAMP = text(
    "UPDATE messages SET notified_at = :now WHERE message_id = :message_id "
    "AND notified_at IS NULL AND status_state = 'input_required'"
)


def next_pending_notification(
    conn: Connection,
    *,
    fleet_id: int | None = None,
    recipient_id: int | None = None,
    exclude: Iterable[int] = (),
) -> PendingNotification | None:
    """The oldest pending message (`created_at, message_id`) of one recipient or one fleet,
    skipping the ids in `exclude`; None when there is none."""
    params: dict[str, Any] = {"exclude": _id_array(exclude)}
    if recipient_id is not None and fleet_id is not None:
        statement = _NEXT_FOR_BOTH
        params.update(recipient_id=recipient_id, fleet_id=fleet_id)
    elif recipient_id is not None:
        statement = _NEXT_FOR_RECIPIENT
        params["recipient_id"] = recipient_id
    elif fleet_id is not None:
        statement = _NEXT_FOR_FLEET
        params["fleet_id"] = fleet_id
    else:
        raise TypeError("next_pending_notification needs fleet_id or recipient_id")
    with tx.read(conn):
        row = conn.execute(statement, params).mappings().first()
    return None if row is None else _pending_from_row(row)


def oldest_pending_by_recipient(
    conn: Connection,
    *,
    fleet_id: int | None = None,
    recipient_ids: Iterable[int] | None = None,
    exclude: Iterable[int] = (),
) -> list[PendingNotification]:
    """Each recipient's oldest pending message (`created_at, message_id`), skipping the ids in
    `exclude`: one row per recipient of `fleet_id`, or of `recipient_ids`, that has one, oldest
    first. One statement whose cost follows the recipients, not their messages."""
    params: dict[str, Any] = {"exclude": _id_array(exclude)}
    if fleet_id is not None and recipient_ids is None:
        statement = _HEADS_FOR_FLEET
        params["fleet_id"] = fleet_id
    elif recipient_ids is not None and fleet_id is None:
        statement = _HEADS_FOR_MEMBERS
        params["members"] = _id_array(recipient_ids)
    else:
        raise TypeError("oldest_pending_by_recipient needs fleet_id or recipient_ids")
    with tx.read(conn):
        rows = conn.execute(statement, params).mappings().all()
    return [_pending_from_row(row) for row in rows]


def _id_array(ids: Iterable[int]) -> str:
    """Integer ids as the JSON array `json_each` reads (validated as integers first)."""
    return json.dumps(sorted({int(i) for i in ids}))


def _pending_from_row(row: Any) -> PendingNotification:
    recipient = member_from_row(row)
    assert recipient.placement is not None
    return PendingNotification(
        message=message_from_row(row, "x_"),
        sender_name=row["sender_name"],
        recipient=recipient,
        placement=recipient.placement,
    )


def recheck_pending(conn: Connection, *, message_id: int, pane_key: Sequence[str]) -> RecheckResult:
    """Under the pane lock: `pending` when the predicate still holds and the recipient's
    placement key still equals `pane_key` (a `PaneKey` or any `(backend, session, pane_id)`
    sequence); `rebound` when it holds with another key; `not_pending` otherwise."""
    with tx.read(conn):
        row = conn.execute(_RECHECK, {"message_id": message_id}).mappings().first()
    if row is None:
        return "not_pending"
    if not (
        row["type"] == "unicast"
        and row["status_state"] == "input_required"
        and row["notified_at"] is None
        and row["from_member_id"] != row["owner_member_id"]
        and row["status"] == "active"
        and row["deleted_at"] is None
        and row["owner_member_id"] != row["director_member_id"]
        and row["mux_pane_id"] is not None
    ):
        return "not_pending"
    key = (row["backend"], row["mux_session"], row["mux_pane_id"])
    director_key = (row["d_backend"], row["d_mux_session"], row["d_mux_pane_id"])
    if director_key[2] is not None and key == director_key:
        return "not_pending"
    if key != tuple(pane_key):
        return "rebound"
    return "pending"


def stamp_notified(conn: Connection, *, message_id: int, now: datetime | None = None) -> bool:
    """Record a complete submission. False when the message was ACKed or stamped meanwhile
    (an ACK before the stamp counts as notified). Changes nothing but `notified_at`."""
    with tx.write(conn):
        ts = stamp(now)
        return conn.execute(_STAMP, {"now": ts, "message_id": message_id}).rowcount == 1


__all__ = [
    "next_pending_notification",
    "oldest_pending_by_recipient",
    "recheck_pending",
    "stamp_notified",
]
