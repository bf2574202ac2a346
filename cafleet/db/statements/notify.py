"""Statements of `cafleet.broker.notify` (docs/storage.md §2.14): notification channels, their
outbox and the phone page's answer links."""

from __future__ import annotations

from typing import Any

from sqlalchemy import BigInteger, cast, delete, insert, null, or_, select, update

from cafleet.db.schema import answer_links, fleets, members, notify_channels, notify_outbox
from cafleet.db.statements import const, needs_savepoint, param

_CH = notify_channels.c
_OB = notify_outbox.c

FLEET = select(fleets.c.fleet_id, fleets.c.deleted_at).where(fleets.c.fleet_id == param("fleet_id"))
INSERT_CHANNEL = (
    insert(notify_channels)
    .values(
        fleet_id=param("fleet_id"),
        kind=param("kind"),
        target=param("target"),
        events=param("events"),
        answer_base=param("answer_base"),
        created_at=param("now"),
        failures=const(0),
    )
    .returning(_CH.channel_id)
)
CHANNELS = (
    select(*notify_channels.c)
    .where(or_(cast(param("fleet_id"), BigInteger).is_(None), _CH.fleet_id == param("fleet_id")))
    .order_by(_CH.channel_id)
)
CHANNEL = select(*notify_channels.c).where(_CH.channel_id == param("channel_id"))
DELETE_OUTBOX = delete(notify_outbox).where(_OB.channel_id == param("channel_id"))
DELETE_CHANNEL = delete(notify_channels).where(_CH.channel_id == param("channel_id"))
INSERT_EVENT = needs_savepoint(insert(notify_outbox)).values(
    channel_id=param("channel_id"),
    event_key=param("event_key"),
    event=param("event"),
    payload_json=param("payload_json"),
    created_at=param("now"),
    attempts=const(0),
    next_at=param("now"),
)
# Rows due now, oldest first; a channel's rows go in order.
DUE = (
    select(*notify_outbox.c, _CH.kind, _CH.target, _CH.fleet_id)
    .select_from(notify_outbox.join(notify_channels, _CH.channel_id == _OB.channel_id))
    .where(_OB.next_at.is_not(None), _OB.next_at <= param("now"))
    .order_by(_OB.next_at, _OB.outbox_id)
    .limit(param("limit"))
)
PENDING_COUNT = select(_OB.outbox_id).where(
    _OB.channel_id == param("channel_id"), _OB.next_at.is_not(None)
)
MARK_SENT = (
    update(notify_outbox)
    .where(_OB.outbox_id == param("outbox_id"))
    .values(
        sent_at=param("now"), next_at=null(), attempts=_OB.attempts + const(1), last_error=null()
    )
)
MARK_FAILED = (
    update(notify_outbox)
    .where(_OB.outbox_id == param("outbox_id"))
    .values(next_at=param("next_at"), attempts=_OB.attempts + const(1), last_error=param("error"))
)
CHANNEL_OK = (
    update(notify_channels)
    .where(_CH.channel_id == param("channel_id"))
    .values(failures=const(0), failing_since=null(), last_error=null())
)
CHANNEL_FAILED = (
    update(notify_channels)
    .where(_CH.channel_id == param("channel_id"))
    .values(failures=_CH.failures + const(1), last_error=param("error"))
)
CHANNEL_FAILING = (
    update(notify_channels)
    .where(_CH.channel_id == param("channel_id"), _CH.failing_since.is_(None))
    .values(failing_since=param("now"))
)
OUTBOX_OF = (
    select(*notify_outbox.c).where(_OB.channel_id == param("channel_id")).order_by(_OB.outbox_id)
)
MEMBER = select(members.c.member_id, members.c.fleet_id).where(
    members.c.member_id == param("member_id")
)
INSERT_LINK = insert(answer_links).values(
    token_hash=param("token_hash"),
    member_id=param("member_id"),
    prompt_digest=param("digest"),
    created_at=param("now"),
    expires_at=param("expires_at"),
)
LINK = select(*answer_links.c).where(answer_links.c.token_hash == param("token_hash"))
USE_LINK = (
    update(answer_links)
    .where(answer_links.c.token_hash == param("token_hash"), answer_links.c.used_at.is_(None))
    .values(used_at=param("now"))
)

STATEMENTS: dict[str, Any] = {
    "FLEET": FLEET,
    "INSERT_CHANNEL": INSERT_CHANNEL,
    "CHANNELS": CHANNELS,
    "CHANNEL": CHANNEL,
    "DELETE_OUTBOX": DELETE_OUTBOX,
    "DELETE_CHANNEL": DELETE_CHANNEL,
    "INSERT_EVENT": INSERT_EVENT,
    "DUE": DUE,
    "PENDING_COUNT": PENDING_COUNT,
    "MARK_SENT": MARK_SENT,
    "MARK_FAILED": MARK_FAILED,
    "CHANNEL_OK": CHANNEL_OK,
    "CHANNEL_FAILED": CHANNEL_FAILED,
    "CHANNEL_FAILING": CHANNEL_FAILING,
    "OUTBOX_OF": OUTBOX_OF,
    "MEMBER": MEMBER,
    "INSERT_LINK": INSERT_LINK,
    "LINK": LINK,
    "USE_LINK": USE_LINK,
}
