"""What a member's agent reports through its own hooks (docs/storage.md §3.16, docs/runtime.md
§4.12): its state, the receipts of notification lines that reached its context, its session id.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import NamedTuple

from cafleet.db import tx
from cafleet.db.catalog import hooks as q
from cafleet.db.runtime import Connection, Row
from cafleet.db.timefmt import format_ts, parse_ts, utcnow

# Seconds a hook report outranks a screen whose change time is unknown (docs/runtime.md §4.12).
HOOK_FRESH = 5.0


class HookSignal(NamedTuple):
    """A member's last hook report (`members.hook_*`)."""

    member_id: int
    state: str
    at: str
    text: str
    event: str

    def fresh(self, now: datetime | None = None) -> bool:
        """Reported within `HOOK_FRESH` seconds: it outranks a screen whose change time is
        unknown (`cafleet.workflows.witness`, the loop's disagreement log)."""
        at = parse_ts(self.at)
        return at is not None and ((now or utcnow()) - at).total_seconds() <= HOOK_FRESH


class HookRecorded(NamedTuple):
    member_known: bool
    received: tuple[int, ...]  # the message ids this report stamped `received_at` on
    at: str


def record_hook(
    conn: Connection,
    member_id: int,
    *,
    state: str,
    event: str,
    text: str,
    message_ids: Iterable[int] = (),
    now: datetime | None = None,
) -> HookRecorded:
    """One hook report in one write: the member's state, then each receipt (only the
    recipient's, only once). An unknown or deregistered member changes nothing. The session a
    payload names is `cafleet.hook.learn_session`'s (docs/runtime.md §9.4)."""
    at = format_ts(now if now is not None else utcnow())
    received: list[int] = []
    with tx.write(conn):
        params = {"member_id": member_id, "state": state, "text": text, "event": event, "now": at}
        if conn.execute(q.RECORD_STATE, params).rowcount != 1:
            return HookRecorded(False, (), at)
        for message_id in dict.fromkeys(message_ids):
            hit = conn.execute(
                q.RECEIVED, {"message_id": message_id, "member_id": member_id, "now": at}
            )
            if hit.rowcount == 1:
                received.append(message_id)
    return HookRecorded(True, tuple(received), at)


def _signal(r: Row | None) -> HookSignal | None:
    if r is None or r["hook_at"] is None:
        return None
    return HookSignal(
        int(r["member_id"]),
        str(r["hook_state"]),
        str(r["hook_at"]),
        str(r["hook_text"] or ""),
        str(r["hook_event"] or ""),
    )


def hook_signal(conn: Connection, member_id: int) -> HookSignal | None:
    """The member's last hook report; None when no hook has reported (or no such member)."""
    with tx.read(conn):
        row = conn.execute(q.HOOK_OF, {"member_id": member_id}).first()
    return _signal(row)


def fleet_hook_signals(conn: Connection, fleet_id: int) -> dict[int, HookSignal]:
    """Every member of the fleet whose hooks have reported, by member id."""
    with tx.read(conn):
        rows = conn.execute(q.FLEET_HOOKS, {"fleet_id": fleet_id}).all()
    signals = (_signal(r) for r in rows)
    return {s.member_id: s for s in signals if s is not None}


def received_at(conn: Connection, message_id: int) -> str | None:
    """When the recipient's hook reported the message's notification line; None: not (yet)."""
    with tx.read(conn):
        row = conn.execute(q.RECEIVED_AT, {"message_id": message_id}).first()
    return None if row is None else row["received_at"]


def fleet_receipts(conn: Connection, fleet_id: int) -> dict[int, str]:
    """Each fleet member's newest `received_at` (members without a receipt are absent)."""
    with tx.read(conn):
        rows = conn.execute(q.FLEET_RECEIPTS, {"fleet_id": fleet_id}).all()
    return {int(r[0]): str(r[1]) for r in rows}


def receipts_of(conn: Connection, message_ids: Iterable[int]) -> dict[int, str]:
    """The `received_at` of those of ``message_ids`` that have one."""
    ids = sorted(set(message_ids))
    if not ids:
        return {}
    import json

    with tx.read(conn):
        rows = conn.execute(q.RECEIPTS_OF, {"ids": json.dumps(ids)}).all()
    return {int(r[0]): str(r[1]) for r in rows}


__all__ = [
    "HookRecorded",
    "HookSignal",
    "fleet_hook_signals",
    "fleet_receipts",
    "hook_signal",
    "received_at",
    "receipts_of",
    "record_hook",
]
