"""The one typing path: every keystroke cafleet sends into a pane goes through
:func:`type_into_pane` (docs/runtime.md §3.2, §4.3 steps 4–9, §4.9, §5.5 steps 9–11; docs/cli.md
§2.12, §2.13).

A notification (`cafleet.delivery.drains`), the monitor's wake line (`cafleet.monitor.tick`), `member
prompt` and `member ping` (`cafleet.workflows.members`) differ only in what they pass; the
sequence and its outcome texts are one:

    lock → recheck → backend → pane status → gate → type → verify → record → release

The pane status probe also checks the pane is the placement's (§1.8). The gate
(`cafleet.delivery.gate`) classifies the pane's screen and may hold the line; typing empties the composer
first and never starts with Escape; verify (`cafleet.delivery.submit`) reads the screen after Enter and
only a line the agent took is recorded (docs/runtime.md §4.9).

Nothing here imports the multiplexer or lock modules until an attempt runs (docs/cli.md §1.8).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from cafleet.delivery.gate import decide, hold_note
from cafleet.delivery.policy import DEFAULT_HOLD_TIMEOUT, DISMISS_SETTLE, policy_of
from cafleet.delivery.submit import Clock, clear_composer, frame_of, submit_verified, taken
from cafleet.errors import error_text
from cafleet.mux import MSG_NOT_OURS, MultiplexerError, probe_for_typing
from cafleet.mux.locks import PaneLockAbandoned, PaneLockTimeout, acquire_pane_lock, try_pane_lock

if TYPE_CHECKING:
    from cafleet.delivery.gate import Decision
    from cafleet.delivery.submit import Clock
    from cafleet.mux import Multiplexer, PaneKey, PaneOwner

Kind = Literal[
    "typed",  # the line was typed (and verified and recorded, where asked)
    "abandoned",  # keep_waiting ended the lock wait: nothing happened, not a failure
    "busy",  # the pane lock stayed taken
    "stale",  # recheck: there is nothing to type any more (say, ACKed meanwhile)
    "changed",  # recheck: the target's placement changed while waiting for the lock
    "failed",  # the backend, the pane status or the typing failed: nothing was recorded
    "not_ours",  # the pane is another server's, or a reused id (docs/runtime.md §1.8): untouched
    "held",  # the gate held the line (docs/runtime.md §4.9): nothing was typed
    "unverified",  # typed, but verify could not confirm it was taken: nothing was recorded
    "unrecorded",  # typed (and verified), but the record step raised
]

RecheckState = Literal["pending", "stale", "changed"]
SEEN = "seen"  # TypeOutcome.detail of a "typed" line found taken before typing (Target.look_back)
Recheck = Callable[[], RecheckState]


@dataclass(frozen=True, slots=True)
class Target:
    """What the screen-aware steps need to know about one line and its pane.

    ``agent``: the placement's coding agent (whose cues read the screen; None or an agent
    without cues: the screen is ``unknown``). ``frame``: what identifies the line on screen
    (`cafleet.delivery.screens.message_frame` for a notification; None: the line's first characters).
    ``waited``: seconds the line has waited already (the hold timeout counts from there).
    ``owner``: where the placement's pane must be (None: not checked). ``spawned``: the pane is
    a member's or the monitor's, spawned by cafleet with its prompt (not a Director's): its
    agent's first-turn screens hold the line (`cafleet.delivery.screens.classify`).
    """

    agent: str | None
    frame: str | None = None
    waited: float = 0.0
    hold_timeout: float = DEFAULT_HOLD_TIMEOUT
    owner: PaneOwner | None = None
    spawned: bool = False
    # The frame is this attempt's own (a wake's or ping's id tag): the check after Enter also
    # reads this many lines of history, so a short pane whose transcript scrolled the line up
    # still shows it taken (cafleet.delivery.policy.SCROLLBACK_LINES). 0: the visible screen only.
    scrollback: int = 0
    # The frame is the line's own for good (a notification's `[cafleet msg <id> from`): before
    # typing into a ready or working screen, this many lines of screen and history are read,
    # and a frame found taken there (an earlier attempt's line, taken after its verification
    # gave up) is recorded without typing it again (docs/runtime.md §4.9). 0: never looked for.
    look_back: int = 0
    # The second witness (docs/runtime.md §4.9): True when the agent's own record holds the
    # line (cafleet.sessions.witness). Asked only where the screen does not show it taken.
    witness: Callable[[], bool] | None = None


@dataclass(frozen=True, slots=True)
class TypeOutcome:
    """What one attempt did. ``reason`` is the docs/cli.md §1.11 text of a refusal or failure."""

    kind: Kind
    pane_id: str
    # "busy": the lock holder's purpose, when it recorded one; "typed": SEEN when the line was
    # not typed again because an earlier attempt's was found taken (Target.look_back)
    detail: str | None = None
    error: Exception | None = None  # "unrecorded": what the record step raised
    state: str | None = None  # the pane state the gate saw (None: the gate did not run)
    # "unrecorded": the typing is kept (``on_typed``), so the next attempt records it untyped
    kept: bool = False

    @property
    def typed(self) -> bool:
        return self.kind == "typed"

    @property
    def reason(self) -> str | None:
        pane = self.pane_id
        if self.kind == "busy":
            return f"pane {pane} is receiving another keystroke"
        if self.kind == "changed":
            return "placement changed during delivery"
        if self.kind == "failed":
            return f"typing into pane {pane} failed: {self.detail}"
        if self.kind == "not_ours":
            return str(self.detail)
        if self.kind == "held":
            return f"pane {pane} is {self.detail}; the line is held"
        if self.kind == "unverified":
            return f"typed into pane {pane} but not verified: {self.detail}"
        if self.kind == "unrecorded":
            then = (
                "the next attempt records it without typing it again"
                if self.kept
                else "it may be typed again"
            )
            return f"typed into pane {pane} but could not record it: {self.detail}; {then}"
        return None


def type_into_pane(
    key: PaneKey,
    line: str | Callable[[], str],
    *,
    backend: Callable[[], Multiplexer],
    db_dir: str,
    purpose: str,
    lock_timeout: float | None,
    target: Target,
    keep_waiting: Callable[[], bool] | None = None,
    recheck: Recheck | None = None,
    record: Callable[[], object] | None = None,
    clock: Clock | None = None,
    typed_before: Callable[[], bool] | None = None,
    on_typed: Callable[[], bool] | None = None,
) -> TypeOutcome:
    """Type ``line`` into ``key``'s pane under its pane-input lock; never raises for a refusal.

    ``lock_timeout`` is the longest lock wait in seconds (``keep_waiting`` returning False
    abandons it); None makes one try (`member ping`). Under the lock: ``recheck`` (None: no
    re-read), then ``backend()`` (a MultiplexerError fails the attempt), the pane status probe
    (with ``target.owner``), the gate on the pane's screen, emptying the composer, the line (a
    callable is built only now, from a fresh read), typing it with Enter, verifying it was
    taken, and ``record``; an exception from ``record`` is the "unrecorded" outcome. Anything
    ``recheck`` or ``line`` raises propagates, with the lock released.

    ``on_typed`` runs once the line is taken, before ``record``, and returns whether it kept
    that fact where ``typed_before`` (asked after ``recheck``) finds it: an earlier attempt
    whose record step failed, or was killed, is then recorded without typing the line again
    (docs/runtime.md §4.3 step 8).
    """

    pane_id = key.pane_id
    if lock_timeout is None:
        lock = try_pane_lock(db_dir, key, purpose=purpose)
        if lock is None:
            return TypeOutcome("busy", pane_id)
    else:
        try:
            lock = acquire_pane_lock(
                db_dir, key, timeout=lock_timeout, purpose=purpose, keep_waiting=keep_waiting
            )
        except PaneLockAbandoned:
            return TypeOutcome("abandoned", pane_id)
        except PaneLockTimeout as exc:
            # detail: the holder's purpose (`notify msg 36`), so a caller can tell a pane that
            # another drain is already typing into from one taken by a prompt or a wake.
            return TypeOutcome("busy", pane_id, exc.holder.purpose if exc.holder else None)

    try:
        hooks = _Hooks(recheck, record, typed_before, on_typed)
        return _under_lock(pane_id, line, backend, hooks, target, clock or Clock())
    finally:
        lock.release()


@dataclass(frozen=True, slots=True)
class _Hooks:
    recheck: Recheck | None
    record: Callable[[], object] | None
    typed_before: Callable[[], bool] | None
    on_typed: Callable[[], bool] | None

    def record_now(
        self, pane_id: str, detail: str | None, state: str | None, kept: bool
    ) -> TypeOutcome:
        if self.record is not None:
            try:
                self.record()
            except Exception as exc:  # any database error: the line was typed but not recorded
                return TypeOutcome("unrecorded", pane_id, error_text(exc), exc, state, kept)
        return TypeOutcome("typed", pane_id, detail, state=state)


def _under_lock(
    pane_id: str,
    line: str | Callable[[], str],
    backend: Callable[[], Multiplexer],
    hooks: _Hooks,
    target: Target,
    clock: Clock,
) -> TypeOutcome:
    from cafleet.mux import MultiplexerError, OwnedPane

    # Recheck: the target may have changed while we waited for the lock.
    if hooks.recheck is not None:
        rechecked = hooks.recheck()
        if rechecked != "pending":
            return TypeOutcome(rechecked, pane_id)
    # Typed by an earlier attempt that could not record it: record it, type nothing.
    if hooks.typed_before is not None and hooks.typed_before():
        return hooks.record_now(pane_id, SEEN, None, True)
    # Backend and pane status: nothing is typed when either fails.
    try:
        mux = backend()
    except MultiplexerError as exc:
        return TypeOutcome("failed", pane_id, str(exc))
    problem = probe_for_typing(mux, pane_id, target.owner)
    if problem == MSG_NOT_OURS.format(pane_id=pane_id):
        return TypeOutcome("not_ours", pane_id, problem)
    if problem is not None:
        return TypeOutcome("failed", pane_id, problem)
    # Every key from here on is pressed only while the pane is still ours (docs/runtime.md §1.8).
    mux = OwnedPane(mux, target.owner)
    # Gate, then type and verify: a tmux failure before Enter fails the attempt; after it, the
    # verification says what it could not see.
    try:
        passed = _gate(mux, pane_id, target, clock)
        if isinstance(passed, TypeOutcome):
            return passed
        state = passed.state
        text = line() if callable(line) else line
        if passed.note is not None:
            text += passed.note

        frame = target.frame or frame_of(text)
        problem = None
        if not passed.seen:
            problem = submit_verified(
                mux,
                pane_id,
                target.agent,
                text,
                frame,
                passed.screen,
                clock,
                target.scrollback,
                state=state,
                witness=target.witness,
            )
    except MultiplexerError as exc:
        if str(exc) == MSG_NOT_OURS.format(pane_id=pane_id):
            return TypeOutcome("not_ours", pane_id, str(exc))
        return TypeOutcome("failed", pane_id, str(exc))
    if problem is not None:
        return TypeOutcome("unverified", pane_id, problem, state=state)
    # Keep the fact, then record, still under the lock.
    kept = hooks.on_typed() if hooks.on_typed is not None else False
    return hooks.record_now(pane_id, SEEN if passed.seen else None, state, kept)


@dataclass(frozen=True, slots=True)
class _Passed:
    screen: str  # the screen just before typing (composer empty)
    state: str  # what the gate saw
    note: str | None  # appended to the line (typed after its hold ran out)
    seen: bool = False  # the frame is already taken on screen or in history: type nothing


def _gate(mux: Multiplexer, pane_id: str, target: Target, clock: Clock) -> TypeOutcome | _Passed:
    """Classify the screen and decide (cafleet.delivery.gate); past a hold timeout dismiss a prompt once;
    empty the composer. Returns the outcome that ends the attempt, or what typing needs."""

    def capture() -> str:
        try:
            return mux.screen(pane_id)
        except MultiplexerError as exc:
            raise MultiplexerError(f"capture failed: {exc}") from exc

    def verdict(screen: str, dismissed: bool = False) -> Decision:
        return decide(
            target.agent,
            screen,
            waited=target.waited,
            hold_timeout=target.hold_timeout,
            dismissed=dismissed,
            spawned=target.spawned,
        )

    screen = capture()
    decision = verdict(screen)
    if target.look_back and decision.state in ("ready", "working") and _seen(mux, pane_id, target):
        return _Passed(screen, decision.state, None, seen=True)
    note = decision.note
    if decision.action == "dismiss":
        # Only once a hold ran out, and only for a prompt or menu (never a composer): one
        # press, then a settle, so nothing typed next can join it into a control sequence.
        policy = policy_of(target.agent)
        assert policy is not None  # the gate dismisses only for an agent with a policy
        mux.send_key(pane_id, policy.dismiss_key)
        clock.sleep(DISMISS_SETTLE)
        screen = capture()
        held_state = decision.state
        decision = verdict(screen, dismissed=True)
        note = decision.note or hold_note(target.waited, held_state)
    if decision.action != "type":
        return TypeOutcome("held", pane_id, decision.state, state=decision.state)
    screen, problem = clear_composer(mux, pane_id, target.agent, screen, clock)
    if problem is not None:
        return TypeOutcome("failed", pane_id, problem, state=decision.state)
    return _Passed(screen, decision.state, note)


def _seen(mux: Multiplexer, pane_id: str, target: Target) -> bool:
    """An earlier attempt's line already taken: its frame outside the composer in the pane's
    last ``target.look_back`` lines (screen and history), or in the agent's own record
    (``target.witness``). Only for a ready or working screen, where the agent's cues tell the
    composer apart (a line stranded there is not taken)."""

    if target.frame is None:
        return False
    try:
        history = mux.capture(pane_id, target.look_back)
    except MultiplexerError as exc:
        raise MultiplexerError(f"capture failed: {exc}") from exc
    if taken(target.agent, "", history, target.frame) == "submitted":
        return True
    return target.witness is not None and target.witness()


__all__ = [
    "SEEN",
    "Kind",
    "Recheck",
    "RecheckState",
    "Target",
    "TypeOutcome",
    "type_into_pane",
]
