"""`cafleet message wait | stream | history` (docs/cli.md §2.19, §2.20, §2.31): the commands that
run `cafleet.workflows.inbox` (wait blocks on the member's inbox while draining the fleet; stream
emits the inbox as JSON lines and writes nothing; history lists what the member sent and received).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import click

from cafleet.cli import run_started
from cafleet.cli.app import message_group
from cafleet.cli.context import invocation
from cafleet.cli.params import id_argument, json_option
from cafleet.output import (
    envelopes_lines,
    err,
    flush,
    history_lines,
    message_dict,
    out_json,
    out_lines,
)
from cafleet.workflows import inbox

MAX_TIMEOUT = 86400
MEMBER_ID_HELP = "Member ID."
HISTORY_LIMIT_MAX = 1000


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
    inv = invocation()
    conn = inv.connection()
    inv.act_as(member_id)
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
    for message in inbox.stream(conn, member_id, timeout=timeout):
        out_json(message_dict(message))
        flush()


# --- history ---


@message_group.command(
    "history",
    help=(
        "Show a member's messages, ACKed or not: what it received and what it sent (a "
        "broadcast once), oldest first, the newest --limit of them (read-only)."
    ),
)
@id_argument("member_id", MEMBER_ID_HELP)
@click.option(
    "--limit",
    type=click.IntRange(1, HISTORY_LIMIT_MAX),
    default=50,
    show_default=True,
    help=f"How many of the newest messages to show (1-{HISTORY_LIMIT_MAX}).",
)
@json_option
def message_history(member_id: int, limit: int, as_json: bool) -> None:
    inv = invocation()
    conn = inv.connection()
    shown = inbox.history(conn, member_id, limit=limit)
    if as_json:
        out_json([message_dict(m) for m in shown.messages])
    else:
        out_lines(history_lines(shown.messages, member_id, inv.max_text_len, shown.names))
