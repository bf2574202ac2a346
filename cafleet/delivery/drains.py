"""Notification delivery (docs/runtime.md §4): the notification line and the recipient/fleet drains.

A *drain* types one line per pending message into its recipient's pane, oldest first, each under
the pane-input lock, and stamps ``notified_at`` only after the complete submission. A failed
attempt ends the drain for that recipient and is reported as a :class:`DrainFailure` whose
``reason`` is docs/cli.md §1.11's text; callers print it (the CLI) or log it (the monitor loop).

Nothing here imports libtmux or the multiplexer package until an attempt actually happens
(docs/cli.md §1.8): a drain that finds nothing pending costs one indexed read.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, TypeVar

from cafleet import broker
from cafleet.agents.registry import find_agent
from cafleet.config import db_dir_of, load_settings
from cafleet.db.timefmt import parse_ts, utcnow
from cafleet.delivery.policy import SCROLLBACK_LINES
from cafleet.digest import sha256
from cafleet.hosts import HostIdError, current_host
from cafleet.text import cut_naming_the_rest, normalize_notification_text

if TYPE_CHECKING:
    from cafleet.db.runtime import Connection
    from cafleet.delivery.keys import RecheckState
    from cafleet.delivery.parallel import Coordinator

T = TypeVar("T")

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

    name = normalize_notification_text("unknown" if sender_name is None else sender_name)
    shown = cut_naming_the_rest(normalize_notification_text(body), max_text_len, message_id)
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
    remote: str | None = None  # the pane is on this host id, not ours: its loop delivers it

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
    if failure.held is not None or failure.remote is not None:
        return held_line(failure)
    return (
        f"Warning: message {failure.message_id} not notified to member {failure.recipient_id}: "
        f"{failure.reason} (it stays in the inbox; delivery will be retried)"
    )


def held_line(failure: DrainFailure, loop_note: str = "") -> str:
    """What send, broadcast and wait print for a held line (docs/runtime.md §4.9): it is pending,
    the loop delivers it; not a warning. A line for a pane on another host waits for that
    host's delivery loop (docs/runtime.md §10.2); ``loop_note`` says more about that loop."""
    if failure.remote is not None:
        return (
            f"Held: message {failure.message_id} for member {failure.recipient_id} waits for "
            f"host {failure.remote}'s delivery loop (pane {failure.pane_id} is on host "
            f"{failure.remote}, not this one){loop_note}"
        )
    return (
        f"Held: message {failure.message_id} for member {failure.recipient_id} waits while pane "
        f"{failure.pane_id} is {failure.held}; the monitor loop will deliver it"
    )


# --- helpers ------------------------------------------------------------------------------------


def _db_dir(conn: Connection) -> str:
    path = conn.info.get("cafleet.path")
    if not path:
        path = load_settings().db_path

    return db_dir_of(path)  # PostgreSQL's local directory, not the URL's "dirname"


class _TypedLedger:
    """This host's record of notification lines typed but not yet stamped (docs/runtime.md
    §4.3 step 8): a file `<db dir>/typed/<database hash>-<message id>` written once the agent
    took the line and removed once the stamp is written. Only this host types into its panes,
    so a later attempt here that finds the file stamps the message without typing it again,
    whoever typed it (a send, a loop) and however its stamp failed (the database went away, a
    kill -9). Read and written only under the pane's lock."""

    def __init__(self, conn: Connection) -> None:

        path = str(conn.info.get("cafleet.path") or "")
        self.dir = os.path.join(_db_dir(conn), "typed")
        self.prefix = sha256(path.encode("utf-8", "surrogatepass")).hexdigest()[:16]

    def _file(self, message_id: int) -> str:
        return os.path.join(self.dir, f"{self.prefix}-{message_id}")

    def has(self, message_id: int) -> bool:
        return os.path.exists(self._file(message_id))

    def add(self, message_id: int) -> bool:
        """Keep the fact; False when it cannot be kept (the old behaviour then holds)."""
        try:
            os.makedirs(self.dir, mode=0o700, exist_ok=True)
            os.close(os.open(self._file(message_id), os.O_WRONLY | os.O_CREAT, 0o600))
        except OSError:
            return False
        return True

    def discard(self, message_id: int) -> None:
        with contextlib.suppress(OSError):
            os.unlink(self._file(message_id))


def _max_text_len() -> int:

    return load_settings().max_text_len


def _hold_timeout() -> int:

    return load_settings().delivery_hold_timeout


def _waited(created_at: str, placed_at: str | None = None) -> float:
    """Seconds the line has waited for its pane (the hold timeout): since the message was sent,
    or since the placement got its pane when that is later (a member respawned onto a new pane
    is `starting` again and gets a hold of its own, not one a long-pending message used up)."""

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


def _attempt(drain: _Drain, pending: Any, *, report: DrainReport, max_text_len: int) -> _Attempt:

    conn = drain.conn

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
        backend = drain.backends.get(placement.backend, placement.mux_socket)
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
    ledger = _TypedLedger(conn)
    message_id = message.message_id

    def record() -> None:
        drain.db(broker.stamp_notified, conn, message_id=message_id)
        ledger.discard(message_id)

    target = Target(
        agent=placement.coding_agent,
        frame=message_frame(message.message_id),
        waited=_waited(message.created_at, placement.created_at),
        hold_timeout=_hold_timeout(),
        owner=owner_of(placement),
        spawned=pending.recipient.kind != "director",
        # A retry first looks for the line an earlier attempt typed: taken after that attempt's
        # verification gave up (a late redraw), it is stamped, not typed twice (§4.9).
        look_back=SCROLLBACK_LINES,
        witness=_witness(drain, placement.coding_agent, recipient_id, message.message_id),
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
        lock_timeout=_resolve_timeout(drain.lock_timeout),
        target=target,
        keep_waiting=drain.keep_waiting_here(),
        # Both run on the connection's thread (docs/runtime.md §4.10), under this attempt's
        # pane lock: a parallel drain's worker holds the lock while the coordinator stamps.
        recheck=lambda: _RECHECKED[
            drain.db(broker.recheck_pending, conn, message_id=message.message_id, pane_key=key)
        ],
        record=record,
        # A line typed once is stamped, never typed again, when its stamp failed (§4.3 step 8)
        # or the agent's hook already reported it received (§4.12), whatever its screen shows.
        typed_before=lambda: ledger.has(message_id) or _received(drain, message_id),
        on_typed=lambda: ledger.add(message_id),
    )
    if outcome.kind == "typed":
        return _Attempt(notified=True)
    if outcome.kind == "abandoned":
        return _Attempt(stop=True)
    if outcome.kind == "stale":
        ledger.discard(message_id)  # stamped or ACKed elsewhere meanwhile
        return _Attempt()
    assert outcome.reason is not None
    if outcome.kind == "busy":
        return fail(outcome.reason, True, outcome.detail)
    if outcome.kind == "held":
        return fail(outcome.reason, held=outcome.detail)
    return fail(outcome.reason)


def _received(drain: _Drain, message_id: int) -> bool:
    """The recipient's hook reported the message's line received (docs/runtime.md §4.12): the
    agent's own word that it has it."""
    return drain.db(broker.received_at, drain.conn, message_id) is not None


def _witness(
    drain: _Drain, agent: str | None, member_id: int, message_id: int
) -> Callable[[], bool] | None:
    """The second witness of the verified submit (docs/runtime.md §4.9): the recipient's agent
    said it has the line. First its hook's receipt (`received_at`, §4.12), then its own
    record, whose session and file (learned by the loop, `cafleet.monitor.learning`) are looked
    up at the first question only; none known: no."""
    if find_agent(agent) is None:
        return None
    from cafleet.delivery.screens import message_frame

    frame = message_frame(message_id)
    found: list[Any] = []

    def record() -> Any:
        from cafleet.sessions.usage import known_record

        sid = drain.db(broker.session_id, drain.conn, member_id)
        return None if sid is None else known_record(_db_dir(drain.conn), member_id, sid)

    def holds() -> bool:
        from cafleet.sessions.witness import holds_line

        if _received(drain, message_id):
            return True  # while verifying: a screen that never shows it taken is outvoted
        if not found:
            found.append(record())
        known = found[0]
        return known is not None and holds_line(str(agent), known.path, known.session_id, frame)

    return holds


@dataclass
class _Drain:
    """One drain invocation's settings, shared by its attempts.

    ``coordinator`` is set in a parallel drain (docs/runtime.md §4.10): every database call and
    every caller hook then runs on the connection's thread, and ``halt`` (set by the first
    attempt that stops) makes every worker stop before its next attempt."""

    conn: Connection
    backends: _Backends
    lock_timeout: LockTimeout
    before_attempt: Callable[[], object] | None
    keep_waiting: Callable[[], bool] | None
    max_text_len: int | None
    coordinator: Coordinator | None = None
    halt: Any = None  # threading.Event of a parallel drain
    here: str | None = None  # this host's id, read at the first attempt (cafleet.hosts)

    def remote_host(self, pending: Any) -> str | None:
        """The other host ``pending``'s pane is on; None when this host types into it (the
        only-own-host rule, docs/runtime.md §10.2)."""
        host: str | None = pending.host
        if host is None:
            return None
        if self.here is None:
            try:
                self.here = current_host()
            except HostIdError:
                self.here = ""  # no host id: every recorded host is another one (never typed)
        return None if host == self.here else host

    def db(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` on the connection's thread."""
        if self.coordinator is None:
            return fn(*args, **kwargs)
        return self.coordinator.call(fn, *args, **kwargs)

    def keep_waiting_here(self) -> Callable[[], bool] | None:
        """``keep_waiting`` as the pane lock's wait calls it, from whatever thread waits."""
        keep_waiting = self.keep_waiting
        if keep_waiting is None or self.coordinator is None:
            return keep_waiting
        return lambda: bool(self.db(keep_waiting))

    def step(
        self, pending: Any, attempted: set[int], report: DrainReport, gone: str | None = None
    ) -> Literal["stop", "failed", "next"]:
        """The one attempt step of every drain (docs/runtime.md §4.3 steps 2-9): mark the
        message attempted, run the hook, attempt (``gone``: the pane is known gone, the attempt
        fails with that reason untried) and fold the outcome into ``report``. Returns ``stop``
        (the hook or an abandoned lock wait ended the drain), ``failed`` or ``next``."""
        message_id = pending.message.message_id
        recipient_id = pending.recipient.member_id
        if self.halt is not None and self.halt.is_set():
            report.stopped = True  # another worker's attempt stopped the drain: untried
            return "stop"
        self.db(attempted.add, message_id)
        if self.before_attempt is not None and self.db(self.before_attempt) is False:
            return self._stop(report)
        if gone is not None:
            pane_id = pending.placement.mux_pane_id
            report.failures.append(DrainFailure(message_id, recipient_id, pane_id, gone))
            return "failed"
        remote = self.remote_host(pending)
        if remote is not None:
            pane_id = pending.placement.mux_pane_id
            reason = f"pane {pane_id} is on host {remote}"
            report.failures.append(
                DrainFailure(message_id, recipient_id, pane_id, reason, remote=remote)
            )
            return "failed"
        if self.max_text_len is None:
            self.max_text_len = _max_text_len()
        outcome = _attempt(self, pending, report=report, max_text_len=self.max_text_len)
        if outcome.stop:
            return self._stop(report)
        if outcome.failure is not None:
            report.failures.append(outcome.failure)
            return "failed"
        if outcome.notified:
            report.notified.append((message_id, recipient_id))
        return "next"

    def _stop(self, report: DrainReport) -> Literal["stop"]:
        report.stopped = True
        if self.halt is not None:
            self.halt.set()
        return "stop"

    def parallel(self, coordinator: Coordinator) -> _Drain:
        """This drain's settings for the workers of a parallel drain."""
        import threading
        from dataclasses import replace

        return replace(self, coordinator=coordinator, halt=threading.Event())


# --- the one drain over heads (docs/runtime.md §4.3, §4.4, §4.10) --------------------------------

# Whether a head's pane is live: True, False (gone), or None (not listed: its attempt finds out).
Live = Callable[[Any], "bool | None"]


def _drain_heads(
    drain: _Drain,
    heads: list[Any],
    live: Live,
    *,
    attempted: set[int],
    report: DrainReport,
    workers: int | None,
    fleet_id: int | None = None,
    by_age: bool = True,
    gone_fails: bool = False,
    on_recipient: Callable[[DrainReport], object] | None = None,
) -> None:
    """Every drain: each recipient's pending lines from its oldest one (its head), oldest
    first, until its first failure. A head whose pane is gone is skipped untried, or with
    ``gone_fails`` fails at once with the probe's reason (`typing into pane <pane_id> failed:
    pane not found`). In one thread the attempts go oldest first across recipients
    (``by_age``: one heap of the recipients' oldest lines) or one recipient after another in
    the order given; with more than one worker and pane, one task per pane (§4.10).
    ``on_recipient`` gets each recipient's report in the order given, as soon as it and every
    recipient before it ended; a drain that stops starts no further attempt."""

    def chain(each: _Drain, head: Any) -> DrainReport:
        return _drain_chain(each, head, live, fleet_id, attempted, gone_fails)

    if not gone_fails:
        heads = [head for head in heads if live(head) is not False]
    heads = _not_paused(drain, heads, report, on_recipient)
    if by_age:
        heads = sorted(heads, key=_age)
    groups = _by_pane(heads)
    if _workers(workers) > 1 and len(groups) > 1:
        order = [head for group in groups for head in group] if by_age else heads
        _drain_parallel(drain, groups, order, _workers(workers), report, on_recipient, chain)
        return
    if by_age:
        _drain_by_age(drain, heads, live, fleet_id, attempted, report)
        return
    for head in heads:
        one = chain(drain, head)
        report.merge(one)
        if on_recipient is not None:
            on_recipient(one)
        if one.stopped:
            return


PAUSED = "paused (budget)"


def _not_paused(
    drain: _Drain,
    heads: list[Any],
    report: DrainReport,
    on_recipient: Callable[[DrainReport], object] | None,
) -> list[Any]:
    """The heads whose recipient is not paused by its budget (docs/cli.md §2.36): a paused
    member's lines are held untried, stored, until `member resume` (one read per drain)."""
    if not heads:
        return heads
    paused = drain.db(broker.paused_members, drain.conn)
    if not paused:
        return heads
    kept = []
    for head in heads:
        recipient = head.recipient.member_id
        if recipient not in paused:
            kept.append(head)
            continue
        one = DrainReport()
        one.failures.append(
            DrainFailure(
                head.message.message_id,
                recipient,
                head.placement.mux_pane_id,
                f"member {recipient} is {PAUSED}",
                held=PAUSED,
            )
        )
        report.merge(one)
        if on_recipient is not None:
            on_recipient(one)
    return kept


def _age(head: Any) -> tuple[str, int]:
    return (head.message.created_at, head.message.message_id)


def _drain_chain(
    drain: _Drain,
    head: Any,
    live: Live,
    fleet_id: int | None,
    attempted: set[int],
    gone_fails: bool,
) -> DrainReport:
    """One recipient's lines from ``head``, oldest first, until its first failure."""

    one = DrainReport()
    if gone_fails and live(head) is False:
        reason = f"typing into pane {head.placement.mux_pane_id} failed: pane not found"
        drain.step(head, attempted, one, reason)
        return one
    current = head
    while current is not None and drain.step(current, attempted, one) == "next":
        current = drain.db(
            broker.next_pending_notification,
            drain.conn,
            fleet_id=fleet_id,
            recipient_id=current.recipient.member_id,
            exclude=attempted,
        )
        if current is not None and live(current) is False:
            current = None
    return one


def _drain_by_age(
    drain: _Drain,
    heads: list[Any],
    live: Live,
    fleet_id: int | None,
    attempted: set[int],
    report: DrainReport,
) -> None:
    """One thread, oldest first across recipients: a heap of each recipient's oldest line; only
    a recipient just attempted is asked for its next one."""
    import heapq

    queue = [(*_age(head), head) for head in heads]
    heapq.heapify(queue)
    while queue:
        current = heapq.heappop(queue)[2]
        done = drain.step(current, attempted, report)
        if done == "stop":
            return
        if done == "failed":
            continue
        following = broker.next_pending_notification(
            drain.conn,
            fleet_id=fleet_id,
            recipient_id=current.recipient.member_id,
            exclude=attempted,
        )
        if following is not None and live(following) is not False:
            heapq.heappush(queue, (*_age(following), following))


def _drain_parallel(
    drain: _Drain,
    groups: list[list[Any]],
    order: list[Any],
    workers: int,
    report: DrainReport,
    on_recipient: Callable[[DrainReport], object] | None,
    chain: Callable[[_Drain, Any], DrainReport],
) -> None:
    """One task per pane (docs/runtime.md §4.10), each of its recipients one after another;
    their reports merge (and go to ``on_recipient``) in ``order``, each once it and every
    recipient before it ended (or will never be attempted: the drain stopped)."""
    import functools

    from cafleet.delivery.parallel import Coordinator

    coordinator = Coordinator()
    shared = drain.parallel(coordinator)
    _resolve_backends(drain.backends, groups)
    ids = [head.recipient.member_id for head in order]
    done: dict[int, DrainReport] = {}
    emitted = 0

    def task(group: list[Any]) -> list[tuple[int, DrainReport]]:
        ended: list[tuple[int, DrainReport]] = []
        for head in group:
            if shared.halt.is_set():
                break  # a stopped drain starts no further recipient
            one = chain(shared, head)
            ended.append((head.recipient.member_id, one))
            if one.stopped:
                break
        return ended

    def emit(one: DrainReport) -> None:
        report.merge(one)
        if on_recipient is not None:
            on_recipient(one)

    def on_done(_index: int, ended: list[tuple[int, DrainReport]]) -> None:
        nonlocal emitted
        done.update(ended)
        while emitted < len(ids) and ids[emitted] in done:
            emit(done[ids[emitted]])
            emitted += 1

    try:
        coordinator.run([functools.partial(task, group) for group in groups], workers, on_done)
    finally:
        # What ended is reported even when a task raised (in order, skipping the recipients a
        # stop or an error left untried).
        for recipient_id in ids[emitted:]:
            if recipient_id in done:
                emit(done[recipient_id])


def _workers(workers: int | None) -> int:
    if workers is not None:
        return max(1, workers)

    return load_settings().delivery_workers


def _by_pane(heads: Iterable[Any]) -> list[list[Any]]:
    """Heads grouped by the pane they type into, in the order given: placements that name one
    pane share its lock (docs/runtime.md §3.1), so they go one after another in one task."""
    groups: dict[tuple[str, str | None, str | None], list[Any]] = {}
    for head in heads:
        placement = head.placement
        key = (placement.backend, placement.mux_socket, placement.mux_pane_id)
        groups.setdefault(key, []).append(head)
    return list(groups.values())


def _resolve_backends(backends: _Backends, groups: list[list[Any]]) -> None:
    """Resolve every backend the tasks will use here, before they start, so the workers only
    read `_Backends`' cache (a failure is cached too: the attempt reports it)."""
    from cafleet.mux import MultiplexerError

    servers = {(h.placement.backend, h.placement.mux_socket) for group in groups for h in group}
    for name, socket in sorted(servers, key=lambda server: (server[0], server[1] or "")):
        with contextlib.suppress(MultiplexerError):
            backends.get(name, socket)


# --- which heads: recipients, a fleet, a host ----------------------------------------------------


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
    workers: int | None = None,
) -> DrainReport:
    """Notify each recipient's pending messages, oldest first, until one attempt fails (send:
    one recipient; broadcast: several, in the order given), at a cost that follows the
    recipients: one query finds every recipient's oldest pending message, and one `list-panes
    -a` per server (when more than one has something pending) tells which tmux panes are
    alive; a gone one fails at once with the probe's reason.

    ``attempted`` is the invocation's set of message ids already attempted; it is updated in
    place. ``lock_timeout`` is seconds or a callable giving them at each attempt.
    ``before_attempt`` runs before each attempt; returning ``False`` (exactly) ends the drain,
    which is not a failure. ``keep_waiting`` goes to the pane lock: when it returns False the
    wait is abandoned, the drain ends and the message stays pending. ``max_text_len`` defaults
    to ``CAFLEET_MAX_TEXT_LEN``; ``env`` is the environment the backend reads (``TMUX``),
    default ``os.environ``. Recipients in different panes go at the same time on up to
    ``workers`` threads (default ``CAFLEET_DELIVERY_WORKERS``); ``on_recipient`` receives each
    recipient's report in the order given.
    """

    report = DrainReport()
    backends = _Backends(env)
    drain = _Drain(conn, backends, lock_timeout, before_attempt, keep_waiting, max_text_len)
    found = {
        head.recipient.member_id: head
        for head in broker.oldest_pending_by_recipient(
            conn, recipient_ids=recipient_ids, exclude=attempted
        )
    }
    heads = [found[r] for r in recipient_ids if r in found]
    # For a single recipient its own probe is the one cheap check; a list would be a second.
    lives: dict[str | None, frozenset[str] | None] = {}
    if len(heads) > 1:
        for head in heads:
            socket = head.placement.mux_socket
            if socket not in lives and drain.remote_host(head) is None:
                lives[socket] = _live_tmux_panes(backends, report, socket)

    def live(head: Any) -> bool | None:
        panes = lives.get(head.placement.mux_socket)
        if panes is None or head.placement.backend != "tmux":
            return None
        return head.placement.mux_pane_id in panes

    _drain_heads(
        drain,
        heads,
        live,
        attempted=attempted,
        report=report,
        workers=workers,
        by_age=False,
        gone_fails=True,
        on_recipient=on_recipient,
    )
    return report


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
    workers: int | None = None,
) -> DrainReport:
    """The drain of every recipient of ``fleet_id`` (docs/runtime.md §4.4), oldest first across
    the fleet, each recipient until its first failure, which adds it to ``blocked`` (updated in
    place, like ``attempted``; a blocked recipient is skipped untried).

    ``live_panes`` is the live pane set when the caller already listed it (the monitor tick);
    otherwise ``list_panes()`` runs once, and its failure, or tmux being unavailable, returns
    with ``not_attempted`` set and nothing attempted. A pane not live, or on another host, is
    skipped untried. One query takes every recipient's oldest pending message, and only a
    recipient that was just attempted is asked for its next one.
    """

    report = DrainReport()
    backends = _Backends(env)
    drain = _Drain(conn, backends, lock_timeout, before_attempt, keep_waiting, max_text_len)
    # A pane on another host is that host's loop's (docs/runtime.md §10.2): skipped untried.
    heads = [
        head
        for head in broker.oldest_pending_by_recipient(conn, fleet_id=fleet_id, exclude=attempted)
        if head.recipient.member_id not in blocked and drain.remote_host(head) is None
    ]
    if not heads:
        return report
    from cafleet.mux import holds

    live: frozenset[str] | set[str]
    if live_panes is not None:
        live = live_panes  # a mux `Listing` also tells a reused id (docs/runtime.md §1.8)
    else:
        # Listed once, and only when there is something to attempt (a quiet `message wait`
        # makes no tmux call at all).
        from cafleet.mux import MultiplexerError

        try:
            live = backends.get("tmux").list_panes()
        except MultiplexerError as exc:
            report.not_attempted = str(exc)
            return report
    _drain_heads(
        drain,
        heads,
        lambda head: holds(live, head.placement),
        attempted=attempted,
        report=report,
        workers=workers,
        fleet_id=fleet_id,
    )
    blocked.update(failure.recipient_id for failure in report.failures)
    return report


def drain_host(
    conn: Connection,
    host_id: str,
    *,
    attempted: set[int],
    blocked: set[int],
    lock_timeout: LockTimeout,
    before_attempt: Callable[[], object] | None = None,
    keep_waiting: Callable[[], bool] | None = None,
    max_text_len: int | None = None,
    env: Mapping[str, str] | None = None,
    workers: int | None = None,
) -> DrainReport:
    """A host delivery loop's drain (docs/runtime.md §10.4): every pending line for a pane
    recorded on ``host_id`` in a fleet whose root Director is on another host, across fleets,
    as `drain_fleet` drains one fleet. Each tmux server the placements record is listed once;
    a pane not live on its server is skipped untried, and so is every pane of a server that
    cannot be listed (``not_attempted`` then names the first such error)."""
    from cafleet.mux import MultiplexerError, holds

    report = DrainReport()
    backends = _Backends(env)
    drain = _Drain(conn, backends, lock_timeout, before_attempt, keep_waiting, max_text_len)
    drain.here = host_id
    heads = [
        head
        for head in broker.oldest_pending_by_recipient(conn, host_id=host_id, exclude=attempted)
        if head.recipient.member_id not in blocked
    ]
    lives: dict[tuple[str, str | None], frozenset[str] | None] = {}
    for head in heads:
        server = (head.placement.backend, head.placement.mux_socket)
        if server in lives:
            continue
        try:
            lives[server] = backends.get(*server).list_panes()
            report.tmux_usable = True
        except MultiplexerError as exc:
            lives[server] = None
            if report.not_attempted is None:
                report.not_attempted = str(exc)

    def live(head: Any) -> bool:
        panes = lives.get((head.placement.backend, head.placement.mux_socket))
        return panes is not None and holds(panes, head.placement)

    _drain_heads(drain, heads, live, attempted=attempted, report=report, workers=workers)
    blocked.update(failure.recipient_id for failure in report.failures)
    return report
