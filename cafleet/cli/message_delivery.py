"""`cafleet message send | broadcast | wait | stream` (cli.md §2.14, §2.15, §2.19, §2.20).

send and broadcast store first, then drain the recipients' pane notifications (runtime.md §4.5)
and restart the fleet's monitor loop when notifications are still pending (cli.md §1.11). wait
blocks on the member's inbox while draining the fleet; stream emits the inbox as JSON lines and
writes nothing. The delivery and mux layers are imported only when a drain runs (cli.md §1.8).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import click

from cafleet import signals
from cafleet.cli.app import message_group
from cafleet.cli.assets_guard import require_assets
from cafleet.cli.context import Invocation, invocation
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

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from cafleet.delivery import DrainReport
    from cafleet.records import Message

SEND_LOCK_CAP = 1  # send and broadcast try each pane lock for at most 1 s (cli.md §1.11)
WAIT_CYCLE = 0.05  # message wait polls PRAGMA data_version every 50 ms (cli.md §2.19)
WAIT_PASS_EVERY = 5.0  # and drains at least every 5 s
STREAM_CYCLE = 0.2  # message stream reads every 0.2 s (cli.md §2.20)
SLEEP_STEP = 0.05  # no sleep lasts long without a signal check (cli.md §1.4)
MAX_TIMEOUT = 86400
DEADLINE_GRACE = 0.2  # a deadline-bounded lock wait is abandoned (not failed) at the deadline


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


def _send_keep_going() -> bool:
    """send/broadcast: keep attempting (and keep waiting for a lock) until a signal arrives."""
    return not signals.stop_requested()


def _print_failures(report: DrainReport) -> None:
    from cafleet.delivery import warning_line

    for failure in report.failures:
        err(warning_line(failure))


def _restart_loop_if_needed(conn: Connection, fleet_ids: Iterable[int]) -> None:
    """cli.md §1.11: after draining, start the loop of a fleet that still has a pending
    notification when tmux was usable and the loop is not live. Failure only warns."""
    from cafleet import broker
    from cafleet.monitor.ensure import MonitorStartError, StartAbandoned, ensure_monitor_loop

    for fleet_id in sorted(set(fleet_ids)):
        if signals.stop_requested():
            return
        if broker.next_pending_notification(conn, fleet_id=fleet_id) is None:
            continue
        try:
            ensure_monitor_loop(conn, fleet_id, keep_waiting=signals.keep_waiting)
        except StartAbandoned:
            return
        except MonitorStartError as exc:
            err(
                f"Warning: monitor loop for fleet {fleet_id} is not running and could not be "
                f"started: {exc.detail}; see {exc.log_path}"
            )


def _fleet_of(conn: Connection, member_id: int) -> int | None:
    from cafleet import broker
    from cafleet.broker.errors import MemberNotFound

    try:
        return broker.get_member(conn, member_id).fleet_id
    except MemberNotFound:
        return None


def _drain_recipients(
    inv: Invocation, conn: Connection, recipients: Iterable[int]
) -> tuple[set[tuple[int, int]], bool]:
    """One recipient drain per id, in the order given, sharing one `attempted` set.

    Returns the notified ``(message_id, recipient_id)`` pairs and whether tmux was usable.
    Warnings are printed as they happen.
    """
    from cafleet.delivery import drain_recipient

    settings = inv.settings
    attempted: set[int] = set()
    notified: set[tuple[int, int]] = set()
    tmux_usable = False
    lock_timeout = float(min(settings.pane_lock_timeout, SEND_LOCK_CAP))
    for recipient_id in recipients:
        if signals.stop_requested():
            break
        report = drain_recipient(
            conn,
            recipient_id,
            attempted=attempted,
            lock_timeout=lock_timeout,
            before_attempt=_send_keep_going,
            keep_waiting=_send_keep_going,
            max_text_len=settings.max_text_len,
        )
        _print_failures(report)
        notified.update(report.notified)
        tmux_usable = tmux_usable or report.tmux_usable
    return notified, tmux_usable


def _data_version(conn: Connection) -> int:
    """`PRAGMA data_version` on the command's connection, outside any transaction: it changes
    whenever another connection commits."""
    from cafleet.db.engine import raw

    return int(raw(conn).execute("PRAGMA data_version").fetchone()[0])


def _active_member(conn: Connection, member_id: int) -> Any:
    from cafleet import broker
    from cafleet.broker.errors import MemberNotFound

    member = broker.get_member(conn, member_id)
    if member.status != "active":
        raise MemberNotFound(member_id)
    return member


def _member_active(conn: Connection, member_id: int) -> bool:
    from cafleet import broker
    from cafleet.broker.errors import MemberNotFound

    try:
        return broker.get_member(conn, member_id).status == "active"
    except MemberNotFound:
        return False


def _check_schema(conn: Connection) -> None:
    """cli.md §1.7: re-run the guard when `PRAGMA schema_version` changed; a file that is no
    longer current stops the command with the guard's message (exit 1). The invocation then
    closes the refused connection the guarded way (storage.md §5.5)."""
    from cafleet.cli.guard import GuardRefused, recheck_schema

    try:
        recheck_schema(conn)
    except GuardRefused as exc:
        raise click.ClickException(str(exc)) from exc


def _sleep_until(moment: float) -> None:
    """Sleep until the monotonic ``moment`` in short steps, stopping early on a signal."""
    while not signals.stop_requested():
        left = moment - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(SLEEP_STEP, left))


def _poll_order(messages: list[Message]) -> list[Message]:
    """`message poll`'s order: status_timestamp descending, then message_id descending."""
    return sorted(messages, key=lambda m: (m.status_timestamp, m.message_id), reverse=True)


# --- send ----------------------------------------------------------------------------------------


@message_group.command(
    "send",
    help=(
        "Send a message to one member and type a one-line notification into its pane "
        "(stored first; the notification is retried when it cannot be typed now)."
    ),
)
@id_option("--from-member-id", "Sender's member ID.")
@id_option("--to-member-id", "Recipient's member ID.")
@body_argument("text", "Message text (or use --file).")
@file_option()
@json_option
def message_send(
    from_member_id: int, to_member_id: int, text: str | None, file: str | None, as_json: bool
) -> None:
    check_body_choice(text, file)
    inv = invocation()
    conn = inv.connection()
    require_assets(conn, member_id=to_member_id)
    body = read_body(text, file)
    signals.check()  # nothing written yet: a signal stops the command here

    from cafleet import broker

    message = broker.send_message(
        conn, from_member_id=from_member_id, to_member_id=to_member_id, text=body
    )
    notification_sent = False
    if from_member_id != to_member_id:
        # A self-send is born notified and runs no drain (runtime.md §4.5). For the Director or
        # a paneless recipient the drain finds nothing pending and never touches tmux.
        notified, tmux_usable = _drain_recipients(inv, conn, [to_member_id])
        notification_sent = (message.message_id, to_member_id) in notified
        if tmux_usable and not signals.stop_requested():
            fleet_id = _fleet_of(conn, to_member_id)
            if fleet_id is not None:
                _restart_loop_if_needed(conn, [fleet_id])

    if as_json:
        out_json({"message": message_dict(message), "notification_sent": notification_sent})
    else:
        out("Message sent.")
        out_lines(envelope_lines(message, inv.max_text_len))


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
@json_option
def message_broadcast(
    from_member_id: int, text: str | None, file: str | None, as_json: bool
) -> None:
    check_body_choice(text, file)
    inv = invocation()
    conn = inv.connection()
    require_assets(conn, fleet_of_member=from_member_id)
    body = read_body(text, file)
    signals.check()

    from cafleet import broker

    result = broker.broadcast_message(conn, from_member_id=from_member_id, text=body)
    recipients = sorted(d.owner_member_id for d in result.deliveries)
    delivery_ids = {(d.message_id, d.owner_member_id) for d in result.deliveries}
    notified: set[tuple[int, int]] = set()
    if recipients:
        notified, tmux_usable = _drain_recipients(inv, conn, recipients)
        if tmux_usable and not signals.stop_requested():
            fleet_id = _fleet_of(conn, from_member_id)
            if fleet_id is not None:
                _restart_loop_if_needed(conn, [fleet_id])
    count = len(delivery_ids & notified)

    if as_json:
        out_json(
            {
                "message": message_dict(result.summary),
                "recipients": len(result.deliveries),
                "notified": count,
            }
        )
    else:
        out(
            f"broadcast id={result.summary.message_id} recipients={len(result.deliveries)} "
            f"notified={count}"
        )


# --- wait ----------------------------------------------------------------------------------------


class _Waiter:
    """The state of one `message wait` (cli.md §2.19, runtime.md §4.5)."""

    def __init__(
        self, conn: Connection, member_id: int, deadline: float, pane_lock_timeout: int
    ) -> None:
        self.conn = conn
        self.pane_lock_timeout = pane_lock_timeout
        self.member_id = member_id
        self.deadline = deadline
        self._seen_version: int | None = None  # data_version the inbox check last looked at
        self._inbox_not_empty = False

    def time_left(self) -> float:
        return max(0.0, self.deadline - time.monotonic())

    def lock_timeout(self) -> float:
        """At most CAFLEET_PANE_LOCK_TIMEOUT, else until just past the deadline.

        Decision: when the wait's own deadline is what ends a lock wait, `keep_waiting` (which
        checks the deadline between tries) abandons it first, so the pass simply ends with no
        warning; only a lock wait cut short by CAFLEET_PANE_LOCK_TIMEOUT is a failed attempt.
        """
        return min(float(self.pane_lock_timeout), self.time_left() + DEADLINE_GRACE)

    def inbox_not_empty(self) -> bool:
        """Between attempts and lock tries: query the inbox only when data_version changed."""
        from cafleet import broker

        version = _data_version(self.conn)
        if version != self._seen_version:
            self._seen_version = version
            self._inbox_not_empty = bool(broker.unacked_deliveries(self.conn, self.member_id))
        return self._inbox_not_empty

    def keep_going(self) -> bool:
        """`before_attempt` and `keep_waiting` of the drain pass."""
        if signals.stop_requested():
            return False
        if time.monotonic() >= self.deadline:
            return False
        return not self.inbox_not_empty()


@message_group.command(
    "wait",
    help=(
        "Wait until the member's inbox holds an un-ACKed message and print it like poll "
        "(notifying the fleet's panes meanwhile); prints the empty result on timeout."
    ),
)
@id_argument("member_id", "Member ID.")
@_timeout_option(default=60, help="Seconds to wait (0 checks once; fractions allowed).")
@json_option
def message_wait(member_id: int, timeout: float, as_json: bool) -> None:
    inv = invocation()
    conn = inv.connection()
    require_assets(conn, fleet_of_member=member_id)
    settings = inv.settings
    started = time.monotonic()
    deadline = started + timeout
    member = _active_member(conn, member_id)
    fleet_id = member.fleet_id

    from cafleet import broker

    waiter = _Waiter(conn, member_id, deadline, settings.pane_lock_timeout)
    attempted: set[int] = set()
    blocked: set[int] = {member_id}  # its own messages go to stdout, not to its pane
    draining = True
    last_version: int | None = None
    last_pass: float | None = None
    inbox: list[Message] = []
    while True:
        signals.check()
        cycle_start = time.monotonic()
        # 1. data_version; the status and inbox queries run only when it changed.
        version = _data_version(conn)
        changed = version != last_version
        if changed:
            last_version = version
            active = _member_active(conn, member_id)
            inbox = broker.unacked_deliveries(conn, member_id)
            # 2. Not empty: print it as poll does, even if the member was deregistered meanwhile.
            if inbox:
                break
            # 3. Deregistered.
            if not active:
                raise click.ClickException(f"member {member_id} was deregistered")
        # 4. Deadline.
        if time.monotonic() >= deadline:
            break
        # 5. Drain pass: first cycle, on change, and at least every 5 s.
        if draining and (
            changed or last_pass is None or time.monotonic() - last_pass >= WAIT_PASS_EVERY
        ):
            from cafleet.delivery import drain_fleet

            last_pass = time.monotonic()
            report = drain_fleet(
                conn,
                fleet_id,
                attempted=attempted,
                blocked=blocked,
                lock_timeout=waiter.lock_timeout,
                before_attempt=waiter.keep_going,
                keep_waiting=waiter.keep_going,
                max_text_len=settings.max_text_len,
            )
            _print_failures(report)
            if report.not_attempted is not None:
                draining = False  # tmux unusable in this process: stop draining, silently
            if report.stopped or report.notified or report.failures:
                last_version = None  # look at the inbox again right away
                continue
        # 6. Schema; sleep until the next cycle.
        _check_schema(conn)
        _sleep_until(cycle_start + WAIT_CYCLE)

    signals.check()
    shown = _poll_order(inbox)
    if as_json:
        out_json([message_dict(m) for m in shown])
    else:
        out_lines(envelopes_lines(shown, inv.max_text_len))


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
    del as_json  # output is always JSON Lines (cli.md §2.20)
    inv = invocation()
    conn = inv.connection()
    deadline = None if timeout is None else time.monotonic() + timeout
    _active_member(conn, member_id)

    from cafleet import broker

    last_id = 0
    last_version: int | None = None
    while True:
        signals.check()
        cycle_start = time.monotonic()
        version = _data_version(conn)
        if version != last_version:
            last_version = version
            # 1. Status first, so everything committed before a deregistration is emitted.
            active = _member_active(conn, member_id)
            # 2. New un-ACKed deliveries, ascending id.
            for message in broker.unacked_deliveries(conn, member_id, after_message_id=last_id):
                signals.check()
                out_json(message_dict(message))
                flush()
                last_id = message.message_id
            # 3. Deregistered.
            if not active:
                raise click.ClickException(f"member {member_id} was deregistered")
        # 4. Deadline.
        if deadline is not None and time.monotonic() >= deadline:
            return
        # 5. Schema; sleep.
        _check_schema(conn)
        _sleep_until(
            cycle_start + STREAM_CYCLE
            if deadline is None
            else min(cycle_start + STREAM_CYCLE, deadline)
        )
