"""The inbox workflows (docs/cli.md §2.19, §2.20, docs/runtime.md §4.5): wait for an un-ACKed message
while draining the fleet's pane notifications, and stream the inbox as it grows.

`cafleet message wait|stream` run these. The delivery and mux layers are imported only when a
drain runs (docs/cli.md §1.8). Each cycle re-runs the schema guard when `PRAGMA schema_version`
changed (docs/cli.md §1.7): a file that is no longer current raises the guard's `GuardRefused`, and
the caller closes the refused connection the guarded way (docs/storage.md §5.5).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cafleet import broker, signals
from cafleet.broker.errors import MemberNotFound
from cafleet.db.guard import recheck_schema
from cafleet.db.runtime import data_version
from cafleet.workflows.errors import WaitTimedOut, WorkflowError

if TYPE_CHECKING:
    from collections.abc import Iterable

    from cafleet.config import Settings
    from cafleet.db.runtime import Connection
    from cafleet.records import Message
    from cafleet.workflows.messaging import Warn

WAIT_CYCLE = 0.05  # message wait polls PRAGMA data_version every 50 ms (docs/cli.md §2.19)
WAIT_PASS_EVERY = 5.0  # and drains at least every 5 s
STREAM_CYCLE = 0.2  # message stream reads every 0.2 s (docs/cli.md §2.20)
SLEEP_STEP = 0.05  # no sleep lasts long without a signal check (docs/cli.md §1.4)
DEADLINE_GRACE = 0.2  # a deadline-bounded lock wait is abandoned (not failed) at the deadline
# A keystroke sequence takes the Escape settle, the submit settle and a few tmux calls
# (mux.tmux.ESCAPE_SETTLE + SUBMIT_SETTLE + margin); wait starts none it cannot finish by its
# deadline, so it keeps the deadline within one 50 ms cycle.
TYPING_BUDGET = 1.3


def _data_version(conn: Connection) -> int:
    """`PRAGMA data_version` on the command's connection, outside any transaction: it changes
    whenever another connection commits (on PostgreSQL a count of LISTEN/NOTIFY wake-ups,
    docs/storage.md §10.4)."""

    return data_version(conn)


def _member_active(conn: Connection, member_id: int) -> bool:

    try:
        return broker.get_member(conn, member_id).is_active
    except MemberNotFound:
        return False


def _pause_until(conn: Connection, moment: float) -> None:
    """The cycle's sleep, in short steps that see a stop. A connection that can be woken
    (PostgreSQL's LISTEN/NOTIFY, docs/storage.md §10.4) ends it as soon as another connection
    commits, so a new message is seen at once; SQLite's just sleeps."""
    while not signals.stop_requested():
        left = moment - time.monotonic()
        if left <= 0 or conn.wait_for_change(min(SLEEP_STEP, left)):
            return


# --- wait ----------------------------------------------------------------------------------------


class _Waiter:
    """The state of one `message wait` (docs/cli.md §2.19, docs/runtime.md §4.5)."""

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

        version = _data_version(self.conn)
        if version != self._seen_version:
            self._seen_version = version
            self._inbox_not_empty = bool(broker.unacked_deliveries(self.conn, self.member_id))
        return self._inbox_not_empty

    def keep_going(self) -> bool:
        """`before_attempt` and `keep_waiting` of the drain pass: no attempt (and no lock wait
        that would lead to one) starts unless its keystrokes can finish by the deadline."""
        if signals.stop_requested():
            return False
        if time.monotonic() + TYPING_BUDGET >= self.deadline:
            return False
        return not self.inbox_not_empty()


def wait(
    conn: Connection,
    settings: Settings,
    member_id: int,
    *,
    timeout: float,
    warn: Warn,
    started: float | None = None,
) -> list[Message]:
    """Block until the member's inbox holds an un-ACKed message or ``timeout`` seconds passed
    since ``started`` (a `time.monotonic()` value, default now: the CLI passes its own start),
    draining the fleet's pending notifications meanwhile (its own excepted); return the inbox,
    oldest first. An empty inbox at the deadline raises `WaitTimedOut`. Each failed
    attempt is warned about as it happens. The stale-assets guard runs first: the drain types
    into the fleet's panes.
    """
    from cafleet.assets.guard import require_assets

    require_assets(conn, fleet_of_member=member_id)
    deadline = (time.monotonic() if started is None else started) + timeout

    fleet_id = broker.get_active_member(conn, member_id).fleet_id

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
                raise WorkflowError(f"member {member_id} was deregistered")
        # 4. Deadline.
        if time.monotonic() >= deadline:
            break
        # 5. Drain pass: first cycle, on change, and at least every 5 s.
        if draining and (
            changed or last_pass is None or time.monotonic() - last_pass >= WAIT_PASS_EVERY
        ):
            from cafleet.delivery.drains import drain_fleet, warning_line

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
            for failure in report.failures:
                if not failure.handed_off:  # another drain is typing into that pane
                    warn(warning_line(failure))
            if report.not_attempted is not None:
                draining = False  # tmux unusable in this process: stop draining, silently
            if report.stopped or report.notified or report.failures:
                last_version = None  # look at the inbox again right away
                continue
        # 6. Schema; sleep until the next cycle.
        recheck_schema(conn)
        _pause_until(conn, cycle_start + WAIT_CYCLE)

    signals.check()
    if not inbox:
        raise WaitTimedOut(member_id, timeout)
    return inbox  # oldest first: the order they arrived in (unacked_deliveries' ascending ids)


# --- stream --------------------------------------------------------------------------------------


def stream(conn: Connection, member_id: int, *, timeout: float | None) -> Iterator[Message]:
    """Yield each un-ACKed message of the member once, ascending id, as it appears, until
    ``timeout`` seconds passed (None: until stopped); read-only. A deregistration ends it with
    `WorkflowError` after everything committed before it was yielded.
    """
    deadline = None if timeout is None else time.monotonic() + timeout

    broker.get_active_member(conn, member_id)

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
                yield message
                last_id = message.message_id
            # 3. Deregistered.
            if not active:
                raise WorkflowError(f"member {member_id} was deregistered")
        # 4. Deadline.
        if deadline is not None and time.monotonic() >= deadline:
            return
        # 5. Schema; sleep.
        recheck_schema(conn)
        _pause_until(
            conn,
            cycle_start + STREAM_CYCLE
            if deadline is None
            else min(cycle_start + STREAM_CYCLE, deadline),
        )


# --- reading: the senders' names and a member's history -------------------------------------


def sender_names(conn: Connection, messages: Iterable[Message]) -> dict[int, str]:
    """The names the text envelopes show beside each sender's id (one read by primary key)."""

    return dict(broker.member_names(conn, {m.from_member_id for m in messages}))


@dataclass(frozen=True, slots=True)
class History:
    member_id: int
    messages: list[Message]  # oldest first
    names: dict[int, str]  # every sender and recipient shown


def history(conn: Connection, member_id: int, *, limit: int) -> History:
    """`message history` (docs/cli.md §2.31): the newest ``limit`` messages to and from the
    member, ACKed or not, oldest first; a deregistered member's too. Read-only."""

    broker.get_member(conn, member_id)  # unknown: `member <id> not found`
    messages = broker.history_view(conn, member_id=member_id, limit=limit)
    ids = {m.from_member_id for m in messages} | {
        m.to_member_id or m.from_member_id for m in messages
    }
    return History(member_id, messages, dict(broker.member_names(conn, ids | {member_id})))
