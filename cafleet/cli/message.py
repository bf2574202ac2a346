"""`cafleet message …` commands (docs/cli.md §2.14–§2.20, §2.31)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cafleet import broker
from cafleet.cli.app import message_group
from cafleet.cli.context import invocation
from cafleet.cli.params import id_argument, json_option
from cafleet.output import (
    envelope_lines,
    envelopes_lines,
    message_dict,
    out,
    out_json,
    out_lines,
)

if TYPE_CHECKING:
    from cafleet.db.runtime import Connection
    from cafleet.records import Message

MEMBER_ID_HELP = "Member ID."
MESSAGE_ID_HELP = "Message ID."


@message_group.command(
    "poll",
    help="List a member's un-ACKed messages, newest first (read-only; nothing is ACKed).",
)
@id_argument("member_id", MEMBER_ID_HELP)
@json_option
def message_poll(member_id: int, as_json: bool) -> None:
    inv = invocation()
    conn = inv.connection()
    inv.act_as(member_id)
    messages = broker.poll_inbox(conn, member_id)
    if as_json:
        out_json([message_dict(m) for m in messages])
    else:
        # whole bodies: what the member acts on
        out_lines(envelopes_lines(messages, None, _names(conn, messages)))


@message_group.command("ack", help="Acknowledge a delivered message (marks it completed).")
@id_argument("message_id", MESSAGE_ID_HELP)
@json_option
def message_ack(message_id: int, as_json: bool) -> None:
    inv = invocation()
    conn = inv.connection()
    inv.ack_own(message_id)
    message = broker.ack_message(conn, message_id=message_id)
    if as_json:
        out_json({"message": message_dict(message)})
    else:
        out("Message acknowledged.")
        out_lines(envelope_lines(message, inv.max_text_len, _names(conn, [message])))


@message_group.command("show", help="Show one message, any type or state.")
@id_argument("message_id", MESSAGE_ID_HELP)
@json_option
def message_show(message_id: int, as_json: bool) -> None:
    inv = invocation()
    conn = inv.connection()
    message = broker.get_message(conn, message_id)
    if as_json:
        # `received_at`: when the recipient's own hook saw the line (docs/cli.md §2.38).
        received = broker.received_at(conn, message_id)
        out_json({"message": {**message_dict(message), "received_at": received}})
    else:
        out_lines(envelope_lines(message, None, _names(conn, [message])))


def _names(conn: Connection, messages: list[Message]) -> dict[int, str]:
    """The senders' names for the text envelopes (`from:Director (1)`)."""
    return dict(broker.member_names(conn, {m.from_member_id for m in messages}))
