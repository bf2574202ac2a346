"""`cafleet message send | broadcast` (docs/cli.md §2.14, §2.15).

Both run `cafleet.workflows.messaging` (store, drain the recipients' pane notifications, restart
the fleet's monitor loop when notifications are still pending) and render its result.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from cafleet import broker, signals
from cafleet.cli.app import message_group
from cafleet.cli.context import invocation
from cafleet.cli.params import (
    body_argument,
    check_body_choice,
    file_option,
    id_option,
    json_option,
    read_body,
)
from cafleet.output import (
    envelope_lines,
    err,
    message_dict,
    out,
    out_json,
    out_lines,
)
from cafleet.text import truncate
from cafleet.workflows.messaging import broadcast, send
from cafleet.workflows.outcome import key_problem

if TYPE_CHECKING:
    pass


# --- shared pieces ------------------------------------------------------------------------------


def _key_callback(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    if value is not None:
        problem = key_problem(value)
        if problem is not None:
            raise click.BadParameter(problem)
    return value


def _key_option(what: str) -> Callable[[Any], Any]:
    return click.option(
        "--key",
        metavar="KEY",
        default=None,
        callback=_key_callback,
        help=(
            f"Your own id for this {what} (at most 200 characters): the same sender's same key "
            f"stores it once; running the command again returns the first {what} and stores "
            "nothing new (another text or recipient with a used key is refused)."
        ),
    )


# --- send ----------------------------------------------------------------------------------------


@message_group.command(
    "send",
    help=(
        "Send a message to one member and type a one-line notification into its pane "
        "(stored first; the notification is retried when it cannot be typed now). The body "
        "is echoed back only up to CAFLEET_MAX_TEXT_LEN."
    ),
)
@id_option("--from-member-id", "Sender's member ID.")
@id_option("--to-member-id", "Recipient's member ID.")
@body_argument("text", "Message text (or use --file).")
@file_option()
@_key_option("message")
@id_option("--task", "The task this message is about (task show lists it).", required=False)
@id_option("--reply-to", "The message this one answers (message thread).", required=False)
@json_option
def message_send(
    from_member_id: int,
    to_member_id: int,
    text: str | None,
    file: str | None,
    key: str | None,
    task: int | None,
    reply_to: int | None,
    as_json: bool,
) -> None:
    check_body_choice(text, file)
    inv = invocation()
    conn = inv.connection()
    inv.act_as(from_member_id)
    body = read_body(text, file)
    signals.check()  # nothing written yet: a signal stops the command here

    result = send(
        conn,
        inv.settings,
        from_member_id=from_member_id,
        to_member_id=to_member_id,
        text=body,
        warn=err,
        key=key,
        task_id=task,
        reply_to=reply_to,
    )
    message = result.message
    if as_json:
        # The body is echoed only up to the display limit, like the text envelope.
        echoed = message_dict(message)
        echoed["text"] = truncate(message.text, inv.max_text_len)
        out_json(
            {
                "message": echoed,
                "notification_sent": result.notification_sent,
                "notification_note": result.notification_note,
                "text_truncated": echoed["text"] != message.text,
                "already_sent": not result.stored,
            }
        )
    else:
        out("Message sent." if result.stored else f"Message already sent with key {key}.")
        out_lines(
            envelope_lines(
                message, inv.max_text_len, dict(broker.member_names(conn, {message.from_member_id}))
            )
        )


# --- broadcast -----------------------------------------------------------------------------------


@message_group.command(
    "broadcast",
    help=(
        "Send a message to every other active member of the sender's fleet (one delivery each, "
        "plus a summary for the sender) and notify their panes."
    ),
)
@id_option("--from-member-id", "Sender's member ID.")
@body_argument("text", "Message text (or use --file).")
@file_option()
@_key_option("broadcast")
@json_option
def message_broadcast(
    from_member_id: int, text: str | None, file: str | None, key: str | None, as_json: bool
) -> None:
    check_body_choice(text, file)
    inv = invocation()
    conn = inv.connection()
    inv.act_as(from_member_id)
    body = read_body(text, file)
    signals.check()

    result = broadcast(
        conn, inv.settings, from_member_id=from_member_id, text=body, warn=err, key=key
    )
    if as_json:
        out_json(
            {
                "message": message_dict(result.summary),
                "recipients": result.recipients,
                "notified": result.notified,
                "already_sent": not result.stored,
            }
        )
    else:
        again = "" if result.stored else f" (already sent with key {key})"
        out(
            f"broadcast id={result.summary.message_id} recipients={result.recipients} "
            f"notified={result.notified}{again}"
        )
