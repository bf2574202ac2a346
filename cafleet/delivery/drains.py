"""Notification delivery (docs/runtime.md §4): the notification line and the recipient/fleet drains.

A *drain* types one line per pending message into its recipient's pane, oldest first, each under
the pane-input lock, and stamps ``notified_at`` only after the complete submission. A failed
attempt ends the drain for that recipient and is reported as a :class:`DrainFailure` whose
``reason`` is docs/cli.md §1.11's text; callers print it (the CLI) or log it (the monitor loop).

Nothing here imports libtmux or the multiplexer package until an attempt actually happens
(docs/cli.md §1.8): a drain that finds nothing pending costs one indexed read.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

if TYPE_CHECKING:
    from cafleet.db.runtime import Connection
    from cafleet.delivery.keys import RecheckState

EM_DASH = "\u2014"  # —
NOTIFY_PURPOSE = "notify msg "  # the pane-lock purpose of a notification attempt


# --- the notification line (docs/runtime.md §4.2) -------------------------------------------------


def notification_line(
    *, message_id: int, sender_name: str | None, from_member_id: int, body: str, max_text_len: int
) -> str:
    """The exact one-line notification for one message (docs/runtime.md §4.2).

    ``sender_name`` None (no member row) renders as ``unknown``. The stored text is never
    altered; only this rendering is normalised and truncated.
    """
    from cafleet.text import normalize_notification_text, truncate

    name = normalize_notification_text("unknown" if sender_name is None else sender_name)
    shown = truncate(normalize_notification_text(body), max_text_len)
    return (
        f"[cafleet msg {message_id} from {name} ({from_member_id})] {shown} "
        f"{EM_DASH} ack with: cafleet message ack {message_id}"
    )


# --- reports ------------------------------------------------------------------------------------


class DrainFailure(NamedTuple):
    """One failed attempt (docs/runtime.md §4.3): the message stays pending. ``held`` is the pane
    state when the gate held the line (docs/runtime.md §4.9): not a failure to warn about."""

    message_id: int
    recipient_id: int
    pane_id: str | None
    reason: str
    busy: bool = False  # the pane lock stayed taken
    holder: str | None = None  # a busy pane lock: its holder's purpose (`notify msg 36`)
    held: str | None = None  # the gate held the line: the pane's state (`starting`)

    @property
    def handed_off(self) -> bool:
        """The pane lock was busy because another drain is typing notifications into that pane:
        it goes on with every pending line of its recipient, so this one is not lost and not
        worth a warning (8 parallel sends to one pane must not warn 7 times)."""
        return self.holder is not None and self.holder.startswith(NOTIFY_PURPOSE)


@dataclass
class DrainReport:
    """docs/runtime.md §4.3's report.

    ``notified`` holds ``(message_id, recipient_id)`` pairs (an ACK before the stamp counts);
    ``failures`` one :class:`DrainFailure` per failed attempt; ``not_attempted`` the fleet-level
    reason of §4.4 (tmux unusable, or ``list_panes`` failed), else None.

    Two plain attributes, not dataclass fields, carry what the CLI needs besides: ``tmux_usable``
    (some attempt resolved its backend in this process, docs/cli.md §1.11's loop-restart condition)
    and ``stopped`` (``before_attempt`` or an abandoned lock wait ended the drain early).
    """

    notified: list[tuple[int, int]] = field(default_factory=list)
    failures: list[DrainFailure] = field(default_factory=list)
    not_attempted: str | None = None

    tmux_usable = False
    stopped = False

    def merge(self, other: DrainReport) -> None:
        """Fold one recipient's report into a multi-recipient drain's (`drain_recipients`)."""
        self.notified.extend(other.notified)
        self.failures.extend(other.failures)
        if other.not_attempted is not None and self.not_attempted is None:
            self.not_attempted = other.not_attempted
        self.tmux_usable = self.tmux_usable or other.tmux_usable
        self.stopped = self.stopped or other.stopped


LockTimeout = float | Callable[[], float]


def warning_line(failure: DrainFailure) -> str:
    """docs/cli.md §1.11's not-notified warning (without the trailing newline); a held line's is
    `held_line`."""
    if failure.held is not None:
        return held_line(failure)
    return (
        f"Warning: message {failure.message_id} not notified to member {failure.recipient_id}: "
        f"{failure.reason} (it stays in the inbox; delivery will be retried)"
    )


def held_line(failure: DrainFailure) -> str:
    """What send, broadcast and wait print for a held line (docs/runtime.md §4.9): it is pending,
    the loop delivers it; not a warning."""
    return (
        f"Held: message {failure.message_id} for member {failure.recipient_id} waits while pane "
        f"{failure.pane_id} is {failure.held}; the monitor loop will deliver it"
    )


# --- helpers ------------------------------------------------------------------------------------


def _db_dir(conn: Connection) -> str:
    path = conn.info.get("cafleet.path")
    if not path:
        from cafleet.config import load_settings

        path = load_settings().db_path
    return os.path.dirname(path)


def _max_text_len() -> int:
    from cafleet.config import load_settings

    return load_settings().max_text_len


def _hold_timeout() -> int:
    from cafleet.config import load_settings

    return load_settings().delivery_hold_timeout


def _waited(created_at: str, placed_at: str | None = None) -> float:
    """Seconds the line has waited for its pane (the hold timeout): since the message was sent,
    or since the placement got its pane when that is later (a member respawned onto a new pane
    is `starting` again and gets a hold of its own, not one a long-pending message used up)."""
    from cafleet.db.timefmt import parse_ts, utcnow

    since = [t for t in (parse_ts(created_at), parse_ts(placed_at)) if t is not None]
    return 0.0 if not since else max(0.0, (utcnow() - max(since)).total_seconds())


class _Backends:
    """Resolves and caches one backend per name for an invocation (docs/runtime.md §4.3 step 3)."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        self._env = env
        self._cache: dict[str, Any] = {}
        self._errors: dict[str, str] = {}

    def get(self, name: str, socket_path: str | None = None) -> Any:
        """The available backend on the server ``socket_path`` names (the one a placement
        records, so a drain reaches its pane from any shell; None: the one ``TMUX`` names), or
        raise MultiplexerError (str() is the tmux message)."""
        key = f"{name}\0{socket_path or ''}"
        if key in self._errors:
            from cafleet.mux import MultiplexerUnavailable

            raise MultiplexerUnavailable(self._errors[key])
        backend = self._cache.get(key)
        if backend is None:
            from cafleet.mux import MultiplexerError, placement_backend

            try:
                backend = placement_backend(name, socket_path, self._env)
                backend.ensure_available()
            except MultiplexerError as exc:
                self._errors[key] = str(exc)
                raise
            self._cache[key] = backend
        return backend


def _resolve_timeout(lock_timeout: LockTimeout) -> float:
    value = lock_timeout() if callable(lock_timeout) else lock_timeout
    return max(0.0, float(value))


# --- the recipient drain (docs/runtime.md §4.3) ---------------------------------------------------


@dataclass
class _Attempt:
    """The outcome of one attempt: exactly one of these is set (or none: not pending any more)."""

    notified: bool = False
    failure: DrainFailure | None = None
    stop: bool = False  # abandoned lock wait: end the drain, not a failure


# broker.recheck_pending's answer in the typing path's terms.
_RECHECKED: dict[str, RecheckState] = {
    "pending": "pending",
    "not_pending": "stale",
    "rebound": "changed",
}


def _attempt(
    conn: Connection,
    pending: Any,
    *,
    backends: _Backends,
    report: DrainReport,
    lock_timeout: LockTimeout,
    keep_waiting: Callable[[], bool] | None,
    max_text_len: int,
) -> _Attempt:
    from cafleet import broker

    message = pending.message
    placement = pending.placement
    recipient_id = pending.recipient.member_id
    pane_id = placement.mux_pane_id

    def fail(
        reason: str, busy: bool = False, holder: str | None = None, held: str | None = None
    ) -> _Attempt:
        return _Attempt(
            failure=DrainFailure(
                message.message_id, recipient_id, pane_id, reason, busy, holder, held
            )
        )

    # 3. Backend.
    from cafleet.mux import MultiplexerError, PaneKey

    try:
        backend = backends.get(placement.backend, placement.mux_socket)
    except MultiplexerError as exc:
        return fail(str(exc))
    report.tmux_usable = True

    # 4.-9. Lock, recheck, probe, gate, type, verify, stamp (False: ACKed meanwhile, counts),
    # release. The stamp follows the verification: "complete submission" means the agent took
    # the line (docs/runtime.md §4.9).
    from cafleet.delivery.keys import Target, type_into_pane
    from cafleet.delivery.screens import message_frame
    from cafleet.mux import owner_of

    key = PaneKey(placement.backend, placement.mux_session, pane_id)
    target = Target(
        agent=placement.coding_agent,
        frame=message_frame(message.message_id),
        waited=_waited(message.created_at, placement.created_at),
        hold_timeout=_hold_timeout(),
        owner=owner_of(placement),
        spawned=pending.recipient.kind != "director",
    )
    outcome = type_into_pane(
        key,
        lambda: notification_line(
            message_id=message.message_id,
            sender_name=pending.sender_name,
            from_member_id=message.from_member_id,
            body=message.text,
            max_text_len=max_text_len,
        ),
        backend=lambda: backend,
        db_dir=_db_dir(conn),
        purpose=f"{NOTIFY_PURPOSE}{message.message_id}",
        lock_timeout=_resolve_timeout(lock_timeout),
        target=target,
        keep_waiting=keep_waiting,
        recheck=lambda: _RECHECKED[
            broker.recheck_pending(conn, message_id=message.message_id, pane_key=key)
        ],
        record=lambda: broker.stamp_notified(conn, message_id=message.message_id),
    )
    if outcome.kind == "typed":
        return _Attempt(notified=True)
    if outcome.kind == "abandoned":
        return _Attempt(stop=True)
    if outcome.kind == "stale":
        return _Attempt()
    assert outcome.reason is not None
    if outcome.kind == "busy":
        return fail(outcome.reason, True, outcome.detail)
    if outcome.kind == "held":
        return fail(outcome.reason, held=outcome.detail)
    return fail(outcome.reason)


@dataclass
class _Drain:
    """One drain invocation's settings, shared by its attempts."""

    conn: Connection
    backends: _Backends
    lock_timeout: LockTimeout
    before_attempt: Callable[[], object] | None
    keep_waiting: Callable[[], bool] | None
    max_text_len: int | None

    def step(
        self, pending: Any, attempted: set[int], report: DrainReport, gone: str | None = None
    ) -> Literal["stop", "failed", "next"]:
        """The one attempt step of every drain (docs/runtime.md §4.3 steps 2-9): mark the
        message attempted, run the hook, attempt (``gone``: the pane is known gone, the attempt
        fails with that reason untried) and fold the outcome into ``report``. Returns ``stop``
        (the hook or an abandoned lock wait ended the drain), ``failed`` or ``next``."""
        message_id = pending.message.message_id
        recipient_id = pending.recipient.member_id
        attempted.add(message_id)
        if self.before_attempt is not None and self.before_attempt() is False:
            report.stopped = True
            return "stop"
        if gone is not None:
            pane_id = pending.placement.mux_pane_id
            report.failures.append(DrainFailure(message_id, recipient_id, pane_id, gone))
            return "failed"
        if self.max_text_len is None:
            self.max_text_len = _max_text_len()
        outcome = _attempt(
            self.conn,
            pending,
            backends=self.backends,
            report=report,
            lock_timeout=self.lock_timeout,
            keep_waiting=self.keep_waiting,
            max_text_len=self.max_text_len,
        )
        if outcome.stop:
            report.stopped = True
            return "stop"
        if outcome.failure is not None:
            report.failures.append(outcome.failure)
            return "failed"
        if outcome.notified:
            report.notified.append((message_id, recipient_id))
        return "next"


def _drain_one_recipient(
    drain: _Drain,
    recipient_id: int,
    *,
    attempted: set[int],
    report: DrainReport,
    first: Any = None,
) -> None:
    """The §4.3 loop; ``first`` is the recipient's oldest pending message when the caller
    already selected it (one query fewer)."""
    from cafleet import broker

    while True:
        # 1. Select.
        if first is not None:
            pending, first = first, None
        else:
            pending = broker.next_pending_notification(
                drain.conn, recipient_id=recipient_id, exclude=attempted
            )
        if pending is None or drain.step(pending, attempted, report) != "next":
            return


def drain_recipient(
    conn: Connection,
    recipient_id: int,
    *,
    attempted: set[int],
    lock_timeout: LockTimeout,
    before_attempt: Callable[[], object] | None = None,
    keep_waiting: Callable[[], bool] | None = None,
    max_text_len: int | None = None,
    env: Mapping[str, str] | None = None,
) -> DrainReport:
    """Notify ``recipient_id``'s pending messages, oldest first, until one attempt fails.

    ``attempted`` is the invocation's set of message ids already attempted; it is updated in
    place. ``lock_timeout`` is seconds or a callable giving them at each attempt.
    ``before_attempt`` runs before each attempt; returning ``False`` (exactly) ends the drain,
    which is not a failure. ``keep_waiting`` goes to the pane lock: when it returns False the
    wait is abandoned, the drain ends and the message stays pending. ``max_text_len`` defaults
    to ``CAFLEET_MAX_TEXT_LEN``; ``env`` is the environment the backend reads (``TMUX``),
    default ``os.environ``.
    """
    report = DrainReport()
    drain = _Drain(conn, _Backends(env), lock_timeout, before_attempt, keep_waiting, max_text_len)
    _drain_one_recipient(drain, recipient_id, attempted=attempted, report=report)
    return report


# --- several recipients at once (broadcast; docs/runtime.md §4.5) ---------------------------------


def _live_tmux_panes(
    backends: _Backends, report: DrainReport, socket_path: str | None = None
) -> frozenset[str] | None:
    """One `list-panes -a` of a server for a whole drain, or None when tmux cannot say (the
    attempts then find out pane by pane, as a single-recipient drain does)."""
    from cafleet.mux import MultiplexerError

    try:
        live = frozenset(backends.get("tmux", socket_path).list_panes())
    except MultiplexerError:
        return None
    report.tmux_usable = True
    return live


def drain_recipients(
    conn: Connection,
    recipient_ids: list[int],
    *,
    attempted: set[int],
    lock_timeout: LockTimeout,
    before_attempt: Callable[[], object] | None = None,
    keep_waiting: Callable[[], bool] | None = None,
    max_text_len: int | None = None,
    env: Mapping[str, str] | None = None,
    on_recipient: Callable[[DrainReport], object] | None = None,
) -> DrainReport:
    """:func:`drain_recipient` for each of ``recipient_ids`` in the order given, at a cost that
    follows the recipients: one query finds every recipient's oldest pending message, and one
    `list-panes -a` (when more than one has something pending) tells which tmux panes are
    alive. A recipient whose tmux pane is gone fails at once with the probe's reason
    (`typing into pane <pane_id> failed: pane not found`) instead of a probe of its own.
    ``on_recipient`` receives each recipient's report as soon as its drain ends; the merged
    report is returned.
    """
    from cafleet import broker

    report = DrainReport()
    backends = _Backends(env)
    drain = _Drain(conn, backends, lock_timeout, before_attempt, keep_waiting, max_text_len)
    heads = {
        head.recipient.member_id: head
        for head in broker.oldest_pending_by_recipient(
            conn, recipient_ids=recipient_ids, exclude=attempted
        )
    }
    # For a single recipient its own probe is the one cheap check; a list would be a second.
    # One list per server the heads' placements record.
    lives: dict[str | None, frozenset[str] | None] = {}
    for recipient_id in recipient_ids:
        head = heads.get(recipient_id)
        if head is None:
            continue
        live = None
        if len(heads) > 1:
            socket = head.placement.mux_socket
            if socket not in lives:
                lives[socket] = _live_tmux_panes(backends, report, socket)
            live = lives[socket]
        one = DrainReport()
        one.tmux_usable = report.tmux_usable
        pane_id = head.placement.mux_pane_id
        if live is not None and head.placement.backend == "tmux" and pane_id not in live:
            drain.step(head, attempted, one, f"typing into pane {pane_id} failed: pane not found")
        else:
            _drain_one_recipient(drain, recipient_id, attempted=attempted, report=one, first=head)
        report.merge(one)
        if on_recipient is not None:
            on_recipient(one)
        if one.stopped:
            return report
    return report


# --- the fleet drain (docs/runtime.md §4.4) -------------------------------------------------------


def drain_fleet(
    conn: Connection,
    fleet_id: int,
    *,
    attempted: set[int],
    blocked: set[int],
    lock_timeout: LockTimeout,
    live_panes: frozenset[str] | set[str] | None = None,
    before_attempt: Callable[[], object] | None = None,
    keep_waiting: Callable[[], bool] | None = None,
    max_text_len: int | None = None,
    env: Mapping[str, str] | None = None,
) -> DrainReport:
    """One recipient drain per eligible recipient of ``fleet_id`` (docs/runtime.md §4.4).

    ``live_panes`` is the live pane set when the caller already listed it (the monitor tick);
    otherwise ``list_panes()`` runs once, and its failure, or tmux being unavailable, returns
    with ``not_attempted`` set and nothing attempted. Recipients whose pane is not live, or who
    are in ``blocked``, are skipped without an attempt. A failed attempt adds its recipient to
    ``blocked`` (updated in place, like ``attempted``).

    The cost follows the recipients, never the messages skipped: one query takes every
    recipient's oldest pending message, and only a recipient that was just attempted is asked
    for its next one. Attempts still go oldest first across the fleet (a heap of the
    recipients' oldest messages); the recipients are those with a pending message when the
    drain starts.
    """
    import heapq

    from cafleet import broker

    report = DrainReport()
    backends = _Backends(env)
    heads = [
        head
        for head in broker.oldest_pending_by_recipient(conn, fleet_id=fleet_id, exclude=attempted)
        if head.recipient.member_id not in blocked
    ]
    if not heads:
        return report
    if live_panes is not None:
        live = frozenset(live_panes)
    else:
        # Listed once, and only when there is something to attempt (a quiet `message wait`
        # makes no tmux call at all).
        from cafleet.mux import MultiplexerError

        try:
            live = frozenset(backends.get("tmux").list_panes())
        except MultiplexerError as exc:
            report.not_attempted = str(exc)
            return report

    def order(head: Any) -> tuple[str, int, Any]:
        return (head.message.created_at, head.message.message_id, head)

    queue = [order(head) for head in heads if head.placement.mux_pane_id in live]
    heapq.heapify(queue)
    drain = _Drain(conn, backends, lock_timeout, before_attempt, keep_waiting, max_text_len)
    while queue:
        current = heapq.heappop(queue)[2]
        recipient_id = current.recipient.member_id
        done = drain.step(current, attempted, report)
        if done == "stop":
            return report
        if done == "failed":
            blocked.add(recipient_id)
            continue
        following = broker.next_pending_notification(
            conn, fleet_id=fleet_id, recipient_id=recipient_id, exclude=attempted
        )
        if following is not None and following.placement.mux_pane_id in live:
            heapq.heappush(queue, order(following))
    return report
