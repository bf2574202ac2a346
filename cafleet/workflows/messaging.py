"""send and broadcast (docs/cli.md §2.14, §2.15): store, drain the recipients' pane notifications
(docs/runtime.md §4.5), then start the fleet's monitor loop when a notification is still pending and
tmux was usable (docs/cli.md §1.11).

`cafleet message send`/`broadcast` and the WebUI's `POST /api/messages/send` both run these. The
delivery and mux layers are imported only when a drain runs (docs/cli.md §1.8).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, NamedTuple

from cafleet import broker, signals
from cafleet.assets.guard import require_assets
from cafleet.broker.errors import MemberNotFound
from cafleet.db import lost
from cafleet.db.errors import StorageError
from cafleet.delivery.drains import NOTIFY_PURPOSE, drain_recipients, held_line, warning_line
from cafleet.errors import error_text
from cafleet.hosts import current_host
from cafleet.monitor.runtime import is_held
from cafleet.workflows import outcome

if TYPE_CHECKING:
    from cafleet.config import Settings
    from cafleet.db.runtime import Connection
    from cafleet.delivery.drains import DrainFailure, DrainReport
    from cafleet.records import Broadcast, Message

SEND_LOCK_CAP = 1  # send and broadcast try each pane lock for at most 1 s (docs/cli.md §1.11)

Warn = Callable[[str], None]


class SendResult(NamedTuple):
    message: Message
    notification_sent: bool  # this message's line was typed into the recipient's pane
    stored: bool = True  # False: the key had stored this message already (nothing new)
    # Not sent: the line that said why (a warning, `Held: …`, `Pending: …`); None when sent or
    # when no attempt was made (the recipient has no pane, a self-send)
    notification_note: str | None = None


class BroadcastResult(NamedTuple):
    summary: Message
    recipients: int  # deliveries stored
    notified: int  # of those, typed into their recipients' panes
    stored: bool = True  # False: the key had stored this broadcast already (nothing new)


def send(
    conn: Connection,
    settings: Settings,
    *,
    from_member_id: int,
    to_member_id: int,
    text: str,
    warn: Warn,
    key: str | None = None,
    task_id: int | None = None,
    reply_to: int | None = None,
) -> SendResult:
    """Store one delivery, drain its recipient, restart the loop when needed.

    Broker refusals (`SenderNotActive`, `RecipientNotFound`, `NotSameFleet`, `DatabaseBusy`,
    `KeyReused`) propagate before anything is typed. The stale-assets guard runs first: the
    recipient's agent must have this version's skills. The row carries ``key`` or a new
    token: a write that failed is settled by it (`cafleet.workflows.outcome`), and a key that
    stored this message already stores nothing new. ``task_id`` and ``reply_to`` link the row
    to a task and to the message it answers (docs/cli.md §2.32).
    """

    token = key or outcome.new_token()
    _before_store(lambda: require_assets(conn, member_id=to_member_id))
    session = _session(conn)
    try:
        if task_id is None and reply_to is None:
            message, new = broker.store_send(
                conn,
                from_member_id=from_member_id,
                to_member_id=to_member_id,
                text=text,
                token=token,
            )
        else:  # a message about a task or answering one: stored with its links
            message, new = broker.store_task_send(
                conn,
                from_member_id=from_member_id,
                to_member_id=to_member_id,
                text=text,
                token=token,
                task_id=task_id,
                reply_to=reply_to,
            )
    except Exception as exc:
        if not outcome.doubtful(exc):
            raise
        found = outcome.settle(
            conn, exc, session, token, lambda: broker.find_sent(conn, from_member_id, token)
        )
        if found is None:
            raise outcome.NotSent(outcome.named(conn, error_text(exc))) from exc
        warn(_reconnected_line(conn, exc, found.message_id))
        message, new = found, True  # (this run's, or with a key maybe an earlier one's)
    notification_sent = False
    if from_member_id != to_member_id:
        # A self-send is born notified and runs no drain (docs/runtime.md §4.5). For the Director or
        # a paneless recipient the drain finds nothing pending and never touches tmux.
        notes: dict[int, str] = {}

        def after() -> bool:
            notified, tmux_usable = _drain_recipients(
                conn, settings, {to_member_id: message.message_id}, warn, notes
            )
            if tmux_usable and not signals.stop_requested():
                fleet_id = _fleet_of(conn, to_member_id)
                if fleet_id is not None:
                    _restart_loop_if_needed(conn, [fleet_id], warn)
            return (message.message_id, to_member_id) in notified

        notification_sent = _after_store(conn, [message.message_id], after, warn)
        note = None if notification_sent else notes.get(to_member_id)
        return SendResult(message, notification_sent, stored=new, notification_note=note)
    return SendResult(message=message, notification_sent=notification_sent, stored=new)


def broadcast(
    conn: Connection,
    settings: Settings,
    *,
    from_member_id: int,
    text: str,
    warn: Warn,
    key: str | None = None,
) -> BroadcastResult:
    """Store the summary and one delivery per other active member, drain each recipient in id
    order, restart the loop when needed. The stale-assets guard runs first, on the agents of the
    sender's fleet. The summary carries ``key`` or a new token, as `send`'s row does."""

    token = key or outcome.new_token()
    _before_store(lambda: require_assets(conn, fleet_of_member=from_member_id))
    session = _session(conn)
    try:
        result, new = broker.store_broadcast(
            conn, from_member_id=from_member_id, text=text, token=token
        )
    except Exception as exc:
        if not outcome.doubtful(exc):
            raise

        def find() -> Broadcast | None:
            return _stored_broadcast(conn, from_member_id, text, token)

        found = outcome.settle(conn, exc, session, token, find)
        if found is None:
            raise outcome.NotSent(outcome.named(conn, error_text(exc))) from exc
        warn(_reconnected_line(conn, exc, found.summary.message_id))
        result, new = found, True
    recipients = sorted(d.owner_member_id for d in result.deliveries)
    delivery_ids = {(d.message_id, d.owner_member_id) for d in result.deliveries}
    notified: set[tuple[int, int]] = set()
    if recipients:
        own = {d.owner_member_id: d.message_id for d in result.deliveries}

        def after() -> bool:
            nonlocal notified
            notified, tmux_usable = _drain_recipients(conn, settings, own, warn)
            if tmux_usable and not signals.stop_requested():
                fleet_id = _fleet_of(conn, from_member_id)
                if fleet_id is not None:
                    _restart_loop_if_needed(conn, [fleet_id], warn)
            return True

        _after_store(conn, sorted(own.values()), after, warn)
    return BroadcastResult(
        summary=result.summary,
        recipients=len(result.deliveries),
        notified=len(delivery_ids & notified),
        stored=new,
    )


# --- a send's database failures (docs/cli.md §2.14) -------------------------------------------


def _session(conn: Connection) -> int | None:

    return lost.session_of(conn)


def _before_store(check: Callable[[], object]) -> None:
    """A check before the write: a database failure there stored nothing (`NotSent`)."""
    try:
        check()
    except Exception as exc:
        if not outcome.doubtful(exc):
            raise
        raise outcome.NotSent(error_text(exc)) from exc


def _after_store(
    conn: Connection, message_ids: list[int], after: Callable[[], bool], warn: Warn
) -> bool:
    """The drain and the loop restart after the write: the message is stored whatever fails
    here, so a database failure is a warning (the loop delivers the line), never the result."""

    try:
        return after()
    except (sqlite3.Error, StorageError) as exc:
        shown = ", ".join(str(i) for i in message_ids)
        noun = "message" if len(message_ids) == 1 else "messages"
        warn(
            f"Warning: {noun} {shown} stored, but not notified: "
            f"{outcome.named(conn, error_text(exc))} (the monitor loop will deliver it)"
        )
        return False


def _reconnected_line(conn: Connection, exc: BaseException, message_id: int) -> str:
    return (
        f"Warning: {outcome.named(conn, error_text(exc))}; reconnected and found message "
        f"{message_id} stored: sent"
    )


def _stored_broadcast(
    conn: Connection, from_member_id: int, text: str, token: str
) -> Broadcast | None:
    """The broadcast ``token`` stored, read back (its deliveries as stored)."""

    if broker.find_sent(conn, from_member_id, token) is None:
        return None
    return broker.store_broadcast(conn, from_member_id=from_member_id, text=text, token=token)[0]


# --- the pieces ---------------------------------------------------------------------------------


def _keep_going() -> bool:
    """Keep attempting (and keep waiting for a lock) until a signal arrives."""
    return not signals.stop_requested()


def _drain_recipients(
    conn: Connection,
    settings: Settings,
    own: Mapping[int, int],
    warn: Warn,
    notes: dict[int, str] | None = None,
) -> tuple[set[tuple[int, int]], bool]:
    """The recipients' drains in ascending id (different panes at the same time, docs/runtime.md
    §4.10), sharing one `attempted` set and one pane list; ``own`` maps each recipient to this
    command's message to it.

    Returns the notified ``(message_id, recipient_id)`` pairs and whether tmux was usable.
    Each failure is said as it happens (`own_outcome_lines`: the line names this command's
    message, and the recipient's other pending messages get a line of their own); ``notes``
    gets each recipient's first such line (why its line was not typed).
    """

    if signals.stop_requested():
        return set(), False

    def on_recipient(report: DrainReport) -> None:
        lines = own_outcome_lines(conn, report, own)
        if notes is not None and lines and report.failures:
            notes.setdefault(report.failures[0].recipient_id, lines[0])
        for line in lines:
            warn(line)

    report = drain_recipients(
        conn,
        sorted(own),
        attempted=set(),
        lock_timeout=float(min(settings.pane_lock_timeout, SEND_LOCK_CAP)),
        before_attempt=_keep_going,
        keep_waiting=_keep_going,
        max_text_len=settings.max_text_len,
        on_recipient=on_recipient,
        workers=settings.delivery_workers,
    )
    return set(report.notified), report.tmux_usable


ALSO_PENDING_SHOWN = 5  # message ids an also-pending line lists before "and more"


def own_outcome_lines(conn: Connection, report: DrainReport, own: Mapping[int, int]) -> list[str]:
    """What one recipient's drain means for this command's own message to it (docs/cli.md
    §1.11): the warning (or held line) names the command's message even when the drain stopped
    at an older one first, and a separate line names the recipient's other messages still
    waiting for their notification. A pane another notification drain holds is no warning
    (that drain types this line too) but is said (`handed_off_line`)."""

    lines: list[str] = []
    for failure in report.failures:
        mine = own.get(failure.recipient_id, failure.message_id)
        if failure.handed_off:
            if (mine, failure.recipient_id) not in report.notified:
                lines.append(handed_off_line(failure._replace(message_id=mine)))
            continue
        if (mine, failure.recipient_id) not in report.notified:
            # (Notified: its own line went in and a later one, a concurrent send's, failed.)
            if failure.message_id != mine and failure.reason.startswith("typed into pane"):
                # The reason is about the older line that was typed; this one never was.
                reason = f"message {failure.message_id} ahead of it failed first: {failure.reason}"
                failure = failure._replace(reason=reason)
            failure = failure._replace(message_id=mine)
            if failure.remote is not None:
                lines.append(held_line(failure, _host_loop_note(conn, failure.remote)))
            else:
                lines.append(held_line(failure) if failure.held else warning_line(failure))
        others = also_pending(conn, failure.recipient_id, mine)
        if others:
            lines.append(also_pending_line(failure.recipient_id, others))
    return lines


def handed_off_line(failure: DrainFailure) -> str:
    """This send's line was not typed because another notification drain holds the pane (it
    goes on with the recipient's pending lines, this one included): not a warning, but said."""

    if failure.holder == f"{NOTIFY_PURPOSE}{failure.message_id}":
        return (
            f"Pending: message {failure.message_id} for member {failure.recipient_id} is being "
            f"typed into pane {failure.pane_id} by another delivery (the monitor loop's, or a "
            "send's)"
        )
    return (
        f"Pending: message {failure.message_id} for member {failure.recipient_id} is not typed "
        f"yet: pane {failure.pane_id} is busy typing another line ({failure.holder}); it stays "
        "in the inbox and is typed after that one"
    )


def _host_loop_note(conn: Connection, host_id: str) -> str:
    """What a held-for-another-host line adds about that host's delivery loop: nothing while
    its heartbeat is fresh, else how to start it (docs/runtime.md §10.4)."""

    row = broker.get_host_loop(conn, host_id)
    if broker.host_loop_live(row, current_host()):
        return ""
    return f"; that loop is not running: run 'cafleet monitor host start' on host {host_id}"


def also_pending(conn: Connection, recipient_id: int, mine: int) -> list[int]:
    """The recipient's other messages still waiting for their notification, oldest first (at
    most `ALSO_PENDING_SHOWN` + 1: one more says the list goes on). Paid only after a failure."""

    found: list[int] = []
    exclude = {mine}
    while len(found) <= ALSO_PENDING_SHOWN:
        pending = broker.next_pending_notification(conn, recipient_id=recipient_id, exclude=exclude)
        if pending is None:
            break
        found.append(pending.message.message_id)
        exclude.add(pending.message.message_id)
    return found


def also_pending_line(recipient_id: int, others: list[int]) -> str:
    """`Also pending for member 3: message 22 (not notified yet)`; several:
    `messages 20, 21, 22`, more than `ALSO_PENDING_SHOWN`: `… and more`."""
    shown = ", ".join(str(i) for i in others[:ALSO_PENDING_SHOWN])
    more = " and more" if len(others) > ALSO_PENDING_SHOWN else ""
    noun = "message" if len(others) == 1 else "messages"
    return f"Also pending for member {recipient_id}: {noun} {shown}{more} (not notified yet)"


def _restart_loop_if_needed(conn: Connection, fleet_ids: Iterable[int], warn: Warn) -> None:
    """docs/cli.md §1.11: after draining, start the loop of a fleet that still has a pending
    notification when tmux was usable and the loop is not live (`ensure.needs_restart`, which
    leaves a loop `cafleet monitor stop` holds alone: that only warns). Failure only warns."""
    from cafleet.monitor.ensure import ensure_monitor_loop, live_pid, needs_restart
    from cafleet.monitor.supervisor import LoopNotStarted, StartAbandoned

    for fleet_id in sorted(set(fleet_ids)):
        if signals.stop_requested():
            return
        if not needs_restart(conn, fleet_id):
            if (
                is_held(conn.info["cafleet.path"], fleet_id)
                and live_pid(conn, fleet_id) is None
                and _pending(conn, fleet_id)
            ):
                warn(
                    f"Warning: monitor loop for fleet {fleet_id} is stopped by 'cafleet monitor "
                    f"stop'; pending notifications wait for 'cafleet monitor start {fleet_id}'"
                )
            continue
        try:
            ensure_monitor_loop(conn, fleet_id, keep_waiting=signals.keep_waiting)
        except StartAbandoned:
            return
        except LoopNotStarted as exc:
            warn(
                f"Warning: monitor loop for fleet {fleet_id} is not running and could not be "
                f"started: {exc.detail}; see {exc.log_path}"
            )


def _pending(conn: Connection, fleet_id: int) -> bool:

    return broker.next_pending_notification(conn, fleet_id=fleet_id) is not None


def _fleet_of(conn: Connection, member_id: int) -> int | None:

    try:
        return broker.get_member(conn, member_id).fleet_id
    except MemberNotFound:
        return None


__all__ = ["SEND_LOCK_CAP", "BroadcastResult", "SendResult", "broadcast", "send"]
