"""The one typing path: every keystroke cafleet sends into a pane goes through
:func:`type_into_pane` (docs/runtime.md §3.2, §4.3 steps 4–9, §5.5 steps 9–11; docs/cli.md §2.12, §2.13).

A notification (`cafleet.delivery`), the monitor's wake line (`cafleet.monitor.tick`), `member
prompt` and `member ping` (`cafleet.workflows.members`) differ only in what they pass; the
sequence and its outcome texts are one:

    lock → recheck → backend → pane status → gate → type → verify → record → release

``gate`` and ``verify`` are where delivery learns what the agent really sees (issue 10): the gate
classifies the pane before anything is typed and may hold the line; verify captures the pane after
Enter and confirms the line was taken, else nothing is recorded. Both default to no-ops, so today
"typed" means every tmux call exited 0.

Nothing here imports the multiplexer or lock modules until an attempt runs (docs/cli.md §1.8).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from cafleet.errors import error_text

if TYPE_CHECKING:
    from cafleet.mux import Multiplexer, PaneKey

Kind = Literal[
    "typed",  # the line was typed (and verified and recorded, where asked)
    "abandoned",  # keep_waiting ended the lock wait: nothing happened, not a failure
    "busy",  # the pane lock stayed taken
    "stale",  # recheck: there is nothing to type any more (say, ACKed meanwhile)
    "changed",  # recheck: the target's placement changed while waiting for the lock
    "failed",  # the backend, the pane status or the typing failed: nothing was recorded
    "held",  # the gate held the line (issue 10): nothing was typed
    "unverified",  # typed, but verify could not confirm it was taken: nothing was recorded
    "unrecorded",  # typed (and verified), but the record step raised
]

RecheckState = Literal["pending", "stale", "changed"]
Recheck = Callable[[], RecheckState]
# gate(backend, pane_id) -> None to type now, or the pane state that holds the line.
Gate = Callable[["Multiplexer", str], "str | None"]
# verify(backend, pane_id, line) -> None when the pane took the line, or what went wrong.
Verify = Callable[["Multiplexer", str, str], "str | None"]


def no_gate(_backend: Multiplexer, _pane_id: str) -> str | None:
    return None


def no_verify(_backend: Multiplexer, _pane_id: str, _line: str) -> str | None:
    return None


@dataclass(frozen=True, slots=True)
class TypeOutcome:
    """What one attempt did. ``reason`` is the docs/cli.md §1.11 text of a refusal or failure."""

    kind: Kind
    pane_id: str
    detail: str | None = None  # "busy": the lock holder's purpose, when it recorded one
    error: Exception | None = None  # "unrecorded": what the record step raised

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
        if self.kind == "held":
            return f"pane {pane} is {self.detail}; the line is held"
        if self.kind == "unverified":
            return f"typed into pane {pane} but could not verify it: {self.detail}"
        if self.kind == "unrecorded":
            return (
                f"typed into pane {pane} but could not record it: {self.detail}; "
                "it may be typed again"
            )
        return None


def type_into_pane(
    key: PaneKey,
    line: str | Callable[[], str],
    *,
    backend: Callable[[], Multiplexer],
    db_dir: str,
    purpose: str,
    lock_timeout: float | None,
    keep_waiting: Callable[[], bool] | None = None,
    recheck: Recheck | None = None,
    record: Callable[[], object] | None = None,
    gate: Gate = no_gate,
    verify: Verify = no_verify,
) -> TypeOutcome:
    """Type ``line`` into ``key``'s pane under its pane-input lock; never raises for a refusal.

    ``lock_timeout`` is the longest lock wait in seconds (``keep_waiting`` returning False
    abandons it); None makes one try (`member ping`). Under the lock: ``recheck`` (None: no
    re-read), then ``backend()`` (a MultiplexerError fails the attempt), the pane status probe,
    ``gate``, the line (a callable is built only now, from a fresh read), the typing,
    ``verify`` and ``record``; an exception from ``record`` is the "unrecorded" outcome.
    Anything ``recheck`` or ``line`` raises propagates, with the lock released.
    """
    from cafleet.mux.locks import PaneLockAbandoned, PaneLockTimeout, acquire_pane_lock

    pane_id = key.pane_id
    if lock_timeout is None:
        from cafleet.mux.locks import try_pane_lock

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
        return _under_lock(pane_id, line, backend, recheck, record, gate, verify)
    finally:
        lock.release()


def _under_lock(
    pane_id: str,
    line: str | Callable[[], str],
    backend: Callable[[], Multiplexer],
    recheck: Recheck | None,
    record: Callable[[], object] | None,
    gate: Gate,
    verify: Verify,
) -> TypeOutcome:
    from cafleet.mux import MultiplexerError, probe_for_typing

    # Recheck: the target may have changed while we waited for the lock.
    if recheck is not None:
        state = recheck()
        if state != "pending":
            return TypeOutcome(state, pane_id)
    # Backend and pane status: nothing is typed when either fails.
    try:
        mux = backend()
    except MultiplexerError as exc:
        return TypeOutcome("failed", pane_id, str(exc))
    problem = probe_for_typing(mux, pane_id)
    if problem is not None:
        return TypeOutcome("failed", pane_id, problem)
    # Gate (issue 10): classify the pane before typing.
    state_holding = gate(mux, pane_id)
    if state_holding is not None:
        return TypeOutcome("held", pane_id, state_holding)
    # Type.
    text = line() if callable(line) else line
    try:
        mux.type_line(pane_id, text)
    except MultiplexerError as exc:
        return TypeOutcome("failed", pane_id, str(exc))
    # Verify (issue 10): only a line the pane took is recorded.
    problem = verify(mux, pane_id, text)
    if problem is not None:
        return TypeOutcome("unverified", pane_id, problem)
    # Record, still under the lock.
    if record is not None:
        try:
            record()
        except Exception as exc:  # any database error: the line was typed but not recorded
            return TypeOutcome("unrecorded", pane_id, error_text(exc), exc)
    return TypeOutcome("typed", pane_id)


__all__ = [
    "Gate",
    "Kind",
    "Recheck",
    "RecheckState",
    "TypeOutcome",
    "Verify",
    "no_gate",
    "no_verify",
    "type_into_pane",
]
