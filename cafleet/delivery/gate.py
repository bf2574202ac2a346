"""The delivery gate (docs/runtime.md §4.9): whether a line may be typed into a pane now, from what
the pane's screen shows (`cafleet.delivery.screens.classify`). Pure: no tmux, no clock.

Per state:

``ready``
    type.
``working``
    never Escape. Each agent's ``while_working`` says whether a line typed (and submitted) now
    is queued by the agent (``type``) or must wait (``hold``); docs/runtime.md §4.9 and
    docs/agent-screens.md give the observations behind each choice.
``starting``
    hold: a freshly spawned agent gets nothing until its input is live and it has taken its
    spawn prompt (opencode submits it from its home screen a moment after drawing it).
``awaiting_user``
    hold: never type into a permission prompt, a dialog or a menu.
``unknown``
    type (`UNKNOWN_TYPES`): a screen no cue recognises is a shell, a program without a cue
    table, or an agent version whose screens changed; holding it would starve it for good,
    and the verified submit (`cafleet.delivery.submit`) still refuses to count a line it cannot see.

A held line waits at most the hold timeout (``CAFLEET_DELIVERY_HOLD_TIMEOUT``, default 300 s;
0 = never hold). Past it the line is typed anyway with `hold_note` appended, except into a
permission prompt or menu: that is first dismissed once with the agent's dismiss key
(``dismiss``), and stays held if it is still there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from cafleet.delivery.policy import UNKNOWN_TYPES, policy_of
from cafleet.delivery.screens import State, classify

Action = Literal["type", "hold", "dismiss"]


@dataclass(frozen=True, slots=True)
class Decision:
    action: Action
    state: State
    note: str | None = None  # appended to the line: typed after its hold ran out


def holds(agent: str | None, state: State) -> bool:
    """Whether ``state`` holds a line for ``agent`` (before any timeout)."""
    if state in ("starting", "awaiting_user"):
        return True
    if state == "working":
        policy = policy_of(agent)
        return policy is not None and policy.while_working == "hold"
    return state == "unknown" and not UNKNOWN_TYPES


def hold_note(waited: float, state: State) -> str:
    """What a line typed after its hold ran out says about it (short, after the line)."""
    return f" [cafleet: held {int(waited)} s while the pane was {state}]"


def decide(
    agent: str | None,
    capture: str,
    *,
    waited: float,
    hold_timeout: float,
    dismissed: bool = False,
    spawned: bool = False,
) -> Decision:
    """The gate's verdict for one attempt.

    ``waited``: seconds the line has been waiting already (a message: since it was sent);
    ``hold_timeout``: `CAFLEET_DELIVERY_HOLD_TIMEOUT` (0 = never hold); ``dismissed``: the
    dismiss key was already pressed in this attempt (a prompt still showing stays held);
    ``spawned``: the pane is a member cafleet spawned, whose agent submits its spawn prompt
    itself (`cafleet.delivery.screens.classify`): until it has, the member is ``starting``.
    """
    state = classify(agent, capture, spawned=spawned) if agent else "unknown"
    if not holds(agent, state):
        return Decision("type", state)
    expired = hold_timeout <= 0 or waited >= hold_timeout
    if not expired:
        return Decision("hold", state)
    if state == "awaiting_user":
        if dismissed or policy_of(agent) is None:
            return Decision("hold", state)
        return Decision("dismiss", state)
    note = hold_note(waited, state) if hold_timeout > 0 else None
    return Decision("type", state, note)


__all__ = [
    "Action",
    "Decision",
    "decide",
    "hold_note",
    "holds",
]
