"""The one rule that picks a member's state from its two witnesses, its own hooks and its
screen (docs/runtime.md §4.12), used by `member explain` and every pane report
(`cafleet.workflows.supervision`).

With no hook report, or a screen that cannot be read, the other decides. When they agree the
source is `hook` (the exact one). When they disagree, a hook report newer than the screen's last
change wins; the screen's last change is unknown to a one-shot command, where a report counts as
newer for `HOOK_FRESH` seconds. A prompt on the screen outranks a `working` report (the tool's
hook fires before its prompt is drawn). A screen that contradicts an older report wins, and the
disagreement is reported (`Choice.disagreement`).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, NamedTuple

from cafleet.broker.hooks import HOOK_FRESH
from cafleet.db.timefmt import parse_ts

if TYPE_CHECKING:
    from cafleet.broker import HookSignal

SCREEN_UNREAD = ("unknown", "starting")


class Choice(NamedTuple):
    state: str | None
    source: str | None  # "hook", "screen"; None: neither knows
    disagreement: bool = False


def choose(
    hook: HookSignal | None,
    screen: str | None,
    *,
    screen_changed_at: datetime | None = None,
    now: datetime | None = None,
) -> Choice:
    """The freshest trustworthy signal (the module docstring's rule)."""
    screen_known = screen is not None and screen not in SCREEN_UNREAD
    if hook is None:
        return Choice(screen, "screen" if screen is not None else None)
    if not screen_known:
        return Choice(hook.state, "hook")
    if hook.state == screen:
        return Choice(hook.state, "hook")
    if screen == "awaiting_user" and hook.state == "working":
        # A tool's hook fires before its permission prompt is drawn: the prompt is newer.
        return Choice(screen, "screen")
    if screen_changed_at is not None:
        at = parse_ts(hook.at)
        if at is not None and at >= screen_changed_at:
            return Choice(hook.state, "hook")
    elif hook.fresh(now):
        return Choice(hook.state, "hook")
    return Choice(screen, "screen", True)


__all__ = ["HOOK_FRESH", "SCREEN_UNREAD", "Choice", "choose"]
