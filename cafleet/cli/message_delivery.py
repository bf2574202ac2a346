"""`cafleet message send | broadcast | wait | stream` (docs/cli.md §2.14, §2.15, §2.19, §2.20).

send and broadcast run `cafleet.workflows.messaging` (store, drain the recipients' pane
notifications, restart the fleet's monitor loop when notifications are still pending) and render
its result. wait and stream run `cafleet.workflows.inbox` (wait blocks on the member's inbox while
draining the fleet; stream emits the inbox as JSON lines and writes nothing) and render what it
returns or yields. The delivery and mux layers are imported only when a drain runs (docs/cli.md §1.8).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from cafleet import signals
from cafleet.cli.app import message_group
from cafleet.cli.context import invocation
from cafleet.cli.params import (
    body_argument,
    check_body_choice,
    file_option,
    id_argument,
    id_option,
    json_option,
    read_body,
)
from cafleet.output import (
    envelope_lines,
    envelopes_lines,
    err,
    flush,
    message_dict,
    out,
    out_json,
    out_lines,
)
from cafleet.text import truncate

if TYPE_CHECKING:
    pass


MAX_TIMEOUT = 86400


# --- shared pieces ------------------------------------------------------------------------------


def _timeout_callback(
    _ctx: click.Context, _param: click.Parameter, value: float | None
) -> float | None:
    if value is not None and math.isnan(value):
        raise click.BadParameter("NaN is not a valid number of seconds")
    return value


def _timeout_option(*, default: float | None, help: str) -> Callable[[Any], Any]:
    return click.option(
        "--timeout",
        type=click.FloatRange(0, MAX_TIMEOUT),
        default=default,
        show_default=default is not None,
        metavar="SECONDS",
        callback=_timeout_callback,
        help=help,
    )


def _key_callback(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    if value is not None:
        from cafleet.workflows.outcome import key_problem

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

    from cafleet.workflows.messaging import send

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
        from cafleet.workflows.inbox import sender_names

        out("Message sent." if result.stored else f"Message already sent with key {key}.")
        out_lines(envelope_lines(message, inv.max_text_len, sender_names(conn, [message])))


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

    from cafleet.workflows.messaging import broadcast

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


# --- wait ----------------------------------------------------------------------------------------


@message_group.command(
    "wait",
    help=(
        "Wait until the member's inbox holds an un-ACKed message and print it like poll "
        "(notifying the fleet's panes meanwhile); on timeout exit 124 with a timed-out error."
    ),
)
@id_argument("member_id", "Member ID.")
@_timeout_option(default=60, help="Seconds to wait (0 checks once; fractions allowed).")
@json_option
def message_wait(member_id: int, timeout: float, as_json: bool) -> None:
    from cafleet.cli import run_started

    inv = invocation()
    conn = inv.connection()
    inv.act_as(member_id)
    from cafleet.workflows import inbox

    shown = inbox.wait(  # an empty inbox at the deadline raises WaitTimedOut (exit 124)
        conn, inv.settings, member_id, timeout=timeout, warn=err, started=run_started()
    )
    if as_json:
        out_json([message_dict(m) for m in shown])
    else:
        out_lines(envelopes_lines(shown, None, inbox.sender_names(conn, shown)))  # whole, as poll


# --- stream --------------------------------------------------------------------------------------


@message_group.command(
    "stream",
    help=(
        "Emit each un-ACKed message of the member once, as JSON lines, as it appears "
        "(read-only: nothing is ACKed, stamped or typed)."
    ),
)
@id_argument("member_id", "Member ID.")
@_timeout_option(
    default=None,
    help="Stop after this many seconds (0 emits the backlog; default: run until stopped).",
)
@click.option(
    "--json", "as_json", is_flag=True, help="Accepted for habit; output is always JSON Lines."
)
def message_stream(member_id: int, timeout: float | None, as_json: bool) -> None:
    del as_json  # output is always JSON Lines (docs/cli.md §2.20)
    inv = invocation()
    conn = inv.connection()
    inv.act_as(member_id)
    from cafleet.workflows import inbox

    for message in inbox.stream(conn, member_id, timeout=timeout):
        out_json(message_dict(message))
        flush()
