"""Statements of `cafleet.broker.hooks` (docs/storage.md §3.16, §7): what a member's agent
reported through its own hooks (`members.hook_*`, `messages.received_at`, revision 0013)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select, update

from cafleet.db.schema import members, messages
from cafleet.db.statements import const, json_ids, param

RECORD_STATE = (
    update(members)
    .where(members.c.member_id == param("member_id"), members.c.status == const("active"))
    .values(
        hook_state=param("state"),
        hook_at=param("now"),
        hook_text=param("text"),
        hook_event=param("event"),
    )
)
# A receipt: only the recipient's own hook, only once.
RECEIVED = (
    update(messages)
    .where(
        messages.c.message_id == param("message_id"),
        messages.c.to_member_id == param("member_id"),
        messages.c.received_at.is_(None),
    )
    .values(received_at=param("now"))
)
HOOK_OF = select(
    members.c.member_id,
    members.c.hook_state,
    members.c.hook_at,
    members.c.hook_text,
    members.c.hook_event,
).where(members.c.member_id == param("member_id"))
FLEET_HOOKS = select(
    members.c.member_id,
    members.c.hook_state,
    members.c.hook_at,
    members.c.hook_text,
    members.c.hook_event,
).where(members.c.fleet_id == param("fleet_id"), members.c.hook_at.is_not(None))
RECEIVED_AT = select(messages.c.received_at).where(messages.c.message_id == param("message_id"))
# Each fleet member's newest receipt (`member list`, `fleet show`, the WebUI roster).
FLEET_RECEIPTS = (
    select(messages.c.to_member_id, func.max(messages.c.received_at).label("received_at"))
    .select_from(messages.join(members, members.c.member_id == messages.c.to_member_id))
    .where(members.c.fleet_id == param("fleet_id"), messages.c.received_at.is_not(None))
    .group_by(messages.c.to_member_id)
)
# The receipts of some messages (the WebUI's inbox and sent lists); ids as one JSON array.
RECEIPTS_OF = select(messages.c.message_id, messages.c.received_at).where(
    messages.c.message_id.in_(json_ids("ids")), messages.c.received_at.is_not(None)
)

STATEMENTS: dict[str, Any] = {
    "RECORD_STATE": RECORD_STATE,
    "RECEIVED": RECEIVED,
    "HOOK_OF": HOOK_OF,
    "FLEET_HOOKS": FLEET_HOOKS,
    "RECEIVED_AT": RECEIVED_AT,
    "FLEET_RECEIPTS": FLEET_RECEIPTS,
    "RECEIPTS_OF": RECEIPTS_OF,
}
