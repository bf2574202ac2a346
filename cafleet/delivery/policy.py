"""The input-policy type, the lookup of an agent's policy, and every delivery constant, defined once (docs/runtime.md §4.9,
docs/agent-screens.md).

The gate (`cafleet.delivery.gate`), the verified submit (`cafleet.delivery.submit`), the typing
path (`cafleet.delivery.keys`), the settings (`cafleet.config`) and the monitor tick read these.
Standard library only, no I/O: any layer may import it at no start-up cost.
"""

from typing import Literal, NamedTuple

# CAFLEET_DELIVERY_HOLD_TIMEOUT's default: seconds a held line waits; 0 = never hold.
DEFAULT_HOLD_TIMEOUT = 300
# An `unknown` screen is typed into: holding it would starve a shell, a program without cues, or
# an agent whose screens changed, for good; the verified submit still refuses an unseen line.
UNKNOWN_TYPES = True

# Between a line's text and its Enter, for a screen no cue table reads (a shell, an unknown
# program, an agent whose screens changed) and the default of every policy: an Enter that
# follows the text too closely is folded into it as pasted input (docs/agent-screens.md §6).
SUBMIT_SETTLE = 1.0
DISMISS_SETTLE = 0.5  # after the dismiss key, before reading the screen again
CLEAR_SETTLE = 0.15  # after a clear key, before reading the composer again
VERIFY_POLL = 0.1  # between captures after Enter
# A taken line may still show in the composer for a while after Enter (opencode redraws seconds
# late under load: docs/agent-screens.md, "Judging a submit"), so by default Enter is pressed
# again only after it stayed there this long. An agent's InputPolicy.enter_again_after overrides
# it: opencode's 1 s is safe because an Enter on its empty composer does nothing (cafleet.delivery.gate).
ENTER_AGAIN_AFTER = 3.0
VERIFY_TIMEOUT = 15.0  # after the last Enter, the screen must show the line taken by then
MAX_ENTERS = 3
# While the screen does not show a line taken, the agent's own record is read this often (the
# second witness, cafleet.sessions.witness): a few reads of a file's tail or one SQLite query.
WITNESS_EVERY = 0.3
FRAME_CHARS = 48  # a line without a message id is recognised by its first characters
# History lines read after Enter for a line whose frame is its own id tag (a wake, a ping): a
# short pane scrolls the transcript, so the tag may have left the visible screen already.
SCROLLBACK_LINES = 200


class InputPolicy(NamedTuple):
    """How cafleet types into one agent's composer (docs/agent-screens.md has the why). A
    NamedTuple, not a dataclass: `cafleet.config` imports this module on every command."""

    agent: str
    while_working: Literal["type", "hold"]
    clear_key: str  # the key that deletes the composer's text (pressed until it is empty)
    max_clears: int  # presses before giving up (Claude's Ctrl-U deletes one visual row)
    dismiss_key: str  # closes a prompt or menu (only once a hold has run out)
    why: str
    # Seconds a line may sit in the composer after Enter before Enter is pressed again
    # (cafleet.delivery.submit): long where a taken line can still be drawn there for a while.
    enter_again_after: float = ENTER_AGAIN_AFTER
    # How the line reaches the composer when the screen is the agent's (ready, working): typed
    # keys, or one bracketed paste (`paste-buffer -p`), which the agent reads as a whole so its
    # Enter may follow sooner; then ``settle`` seconds before Enter. The shortest gap taken every
    # time, measured per agent (docs/agent-screens.md §6.1).
    paste: bool = False
    settle: float = SUBMIT_SETTLE


def policy_of(agent: str | None) -> InputPolicy | None:
    """The agent's input policy (in its package, `cafleet/agents/<name>/`); None for a name
    cafleet does not know."""
    # Imported here: `cafleet.config` imports this module on every command, most of which type
    # into no pane.
    from cafleet.agents.registry import find_agent

    found = find_agent(agent)
    return found.policy if found is not None else None


__all__ = [
    "CLEAR_SETTLE",
    "DEFAULT_HOLD_TIMEOUT",
    "DISMISS_SETTLE",
    "ENTER_AGAIN_AFTER",
    "FRAME_CHARS",
    "SCROLLBACK_LINES",
    "MAX_ENTERS",
    "SUBMIT_SETTLE",
    "UNKNOWN_TYPES",
    "VERIFY_POLL",
    "VERIFY_TIMEOUT",
    "WITNESS_EVERY",
    "InputPolicy",
    "policy_of",
]
