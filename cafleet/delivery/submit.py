"""Verified submit (docs/runtime.md §4.9): empty the composer, type the line, Enter, and count
the line as submitted only when a capture shows the agent took it.

`clear_composer` presses the agent's clear key (its `InputPolicy`) until the composer
reads empty, so a retry never merges with a half-typed leftover. `submit_verified` types the
line and Enter (`Multiplexer.type_line`), then reads the screen until
`cafleet.delivery.screens.line_taken` says ``submitted``; while the line is still in the composer
(Enter swallowed) it presses Enter again, at most `MAX_ENTERS` in all; a line that shows
nowhere (dropped, or garbled so its frame is gone) is not verified.

A screen without cues (an agent without a table, a shell) is judged by the frame alone: the
attempt counts when the frame shows on screen more often after Enter than before it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cafleet.delivery.policy import (
    CLEAR_SETTLE,
    ENTER_AGAIN_AFTER,
    FRAME_CHARS,
    MAX_ENTERS,
    VERIFY_POLL,
    VERIFY_TIMEOUT,
    WITNESS_EVERY,
    policy_of,
)
from cafleet.delivery.screens import Taken, composer_text, line_taken, squash, table_of
from cafleet.mux import MultiplexerError, PaneGone

if TYPE_CHECKING:
    from cafleet.mux import Multiplexer


@dataclass(frozen=True, slots=True)
class Clock:
    """Injectable time for unit tests."""

    sleep: Callable[[float], object] = time.sleep
    now: Callable[[], float] = time.monotonic


def frame_of(line: str) -> str:
    """The frame of a line that carries no message id (a wake, a ping, a prompt)."""
    return line[:FRAME_CHARS]


def taken(agent: str | None, before: str, after: str, frame: str) -> Taken:
    """`line_taken` for an agent with cues; for any other screen, the frame count."""
    if agent is not None and table_of(agent) is not None:
        return line_taken(agent, before, after, frame)
    needle = squash(frame)
    if needle and squash(after).count(needle) > squash(before).count(needle):
        return "submitted"
    return "missing"


def clear_composer(
    mux: Multiplexer, pane_id: str, agent: str | None, screen: str, clock: Clock
) -> tuple[str, str | None]:
    """Empty the composer ``screen`` shows; return the last capture and None, or the problem.

    A screen without a composer (or without cues) is left alone. MultiplexerError propagates.
    """
    policy = policy_of(agent)
    if policy is None:
        return screen, None
    for _ in range(policy.max_clears):
        if not composer_text(policy.agent, screen):  # "" empty, None no composer drawn
            return screen, None
        mux.send_key(pane_id, policy.clear_key)
        clock.sleep(CLEAR_SETTLE)
        screen = mux.screen(pane_id)
    if composer_text(policy.agent, screen):
        return screen, (
            f"the composer still holds text after {policy.max_clears} {policy.clear_key}"
        )
    return screen, None


def submit_verified(
    mux: Multiplexer,
    pane_id: str,
    agent: str | None,
    line: str,
    frame: str,
    before: str,
    clock: Clock,
    scrollback: int = 0,
    *,
    state: str | None = None,
    witness: Callable[[], bool] | None = None,
) -> str | None:
    """Type ``line`` and Enter, then verify; None when taken, else why it is not verified.

    ``before`` is the screen just before typing (composer empty); ``state`` what the gate saw
    on it. Only a screen the agent's cues read (not ``unknown``, not None) gets the agent's
    way of typing (`InputPolicy.paste`, `.settle`); any other keeps typed keys and the
    1.0 s settle. A failing type or Enter raises MultiplexerError (the attempt failed); a
    capture failing afterwards is a verification problem. ``scrollback`` > 0 (the frame is
    this attempt's own id tag, never on screen before): each check reads that many lines of
    history with the screen, so the line counts as taken wherever it scrolled (the composer,
    at the bottom, is still told apart). ``witness`` (the agent's own record holds the line,
    `cafleet.sessions.witness`) is asked every `WITNESS_EVERY` seconds while the screen does
    not show the line taken: a yes verifies it (an agent may draw a taken line late, or where
    the screen no longer shows it).
    """

    policy = policy_of(agent)
    again_after = ENTER_AGAIN_AFTER if policy is None else policy.enter_again_after
    if policy is not None and state not in (None, "unknown"):
        mux.type_line(pane_id, line, settle=policy.settle, paste=policy.paste)
    else:
        mux.type_line(pane_id, line)
    enters = 1
    last_enter = clock.now()
    asked = last_enter
    while True:
        clock.sleep(VERIFY_POLL)
        try:
            after = mux.capture(pane_id, scrollback) if scrollback else mux.screen(pane_id)
        except PaneGone:
            return "the pane closed before the line showed"
        except MultiplexerError as exc:
            return f"capture failed: {exc}"
        verdict = taken(agent, before, after, frame)
        if verdict == "submitted":
            return None
        now = clock.now()
        if witness is not None and now - asked >= WITNESS_EVERY:
            asked = now
            if witness():
                return None
        if verdict == "in_composer" and enters < MAX_ENTERS and now - last_enter >= again_after:
            mux.send_key(pane_id, "Enter")
            enters += 1
            last_enter = now
            continue
        if now - last_enter >= VERIFY_TIMEOUT:
            if verdict == "in_composer":
                return f"the line is still in the composer after {enters} Enter"
            return "the line is not on the screen after Enter (dropped or garbled)"


__all__ = [
    "Clock",
    "clear_composer",
    "frame_of",
    "submit_verified",
    "taken",
]
