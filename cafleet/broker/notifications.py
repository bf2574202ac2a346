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

from cafleet.db import tx
from cafleet.db.catalog import notifications as q
from cafleet.db.runtime import Connection
from cafleet.records import (
    PendingNotification,
    member_from_row,
    message_from_row,
)

RecheckResult = Literal["pending", "not_pending", "rebound"]


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
        statement = q.NEXT_FOR_BOTH
        params.update(recipient_id=recipient_id, fleet_id=fleet_id)
    elif recipient_id is not None:
        statement = q.NEXT_FOR_RECIPIENT
        params["recipient_id"] = recipient_id
    elif fleet_id is not None:
        statement = q.NEXT_FOR_FLEET
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
    host_id: str | None = None,
    exclude: Iterable[int] = (),
) -> list[PendingNotification]:
    """Each recipient's oldest pending message (`created_at, message_id`), skipping the ids in
    `exclude`: one row per recipient of `fleet_id`, or of `recipient_ids`, that has one, oldest
    first. One statement whose cost follows the recipients, not their messages. ``host_id``
    instead: the recipients whose pane is recorded on that host, in every fleet whose root
    Director is on another host (a host's delivery loop, docs/runtime.md §10.4)."""
    params: dict[str, Any] = {"exclude": _id_array(exclude)}
    if host_id is not None:
        if fleet_id is not None or recipient_ids is not None:
            raise TypeError(
                "oldest_pending_by_recipient takes one of fleet_id, recipient_ids, host_id"
            )
        statement = q.HEADS_FOR_HOST
        params["host"] = host_id
    elif fleet_id is not None and recipient_ids is None:
        statement = q.HEADS_FOR_FLEET
        params["fleet_id"] = fleet_id
    elif recipient_ids is not None and fleet_id is None:
        statement = q.HEADS_FOR_MEMBERS
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
        director_host=row["d_host_id"],
    )


def recheck_pending(conn: Connection, *, message_id: int, pane_key: Sequence[str]) -> RecheckResult:
    """Under the pane lock: `pending` when the predicate still holds and the recipient's
    placement key still equals `pane_key` (a `PaneKey` or any `(backend, session, pane_id)`
    sequence); `rebound` when it holds with another key; `not_pending` otherwise."""
    with tx.read(conn):
        row = conn.execute(q.RECHECK, {"message_id": message_id}).mappings().first()
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
    result, _ = tx.write_one(conn, q.STAMP, {"message_id": message_id}, now)
    return result.rowcount == 1


__all__ = [
    "next_pending_notification",
    "oldest_pending_by_recipient",
    "recheck_pending",
    "stamp_notified",
]
