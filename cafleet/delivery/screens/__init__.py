"""What a coding agent's pane shows, from a plain-text capture of its visible screen.

``classify(agent, capture)`` -> ``starting | ready | working | awaiting_user | unknown``;
``composer_text(agent, capture)`` -> what the input box holds (``""`` when empty, None when no
input box is drawn); ``line_taken(agent, before, after, frame)`` -> whether a line typed and
submitted with Enter was taken (``submitted``), is still in the composer (``in_composer``:
Enter swallowed or folded into a paste), or is nowhere on screen (``missing``: dropped or
garbled). The per-agent cue tables are in each agent's package (`cafleet/agents/<name>/screens.py`);
docs/agent-screens.md has the agents' observed behaviour behind them.

Pure functions, standard library only: no tmux, no I/O. An agent name without a table, or any
capture no cue recognises, is ``unknown``.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Literal, NamedTuple

from cafleet.agents.registry import find_agent
from cafleet.delivery.screens.cues import AgentScreens, Cue, State
from cafleet.delivery.screens.layout import Layout, split

STATES: tuple[State, ...] = ("starting", "ready", "working", "awaiting_user", "unknown")
Taken = Literal["submitted", "in_composer", "missing"]
TAIL_LINES = 12
# Characters a TUI draws around or between the words of a line (borders, wrapping, the
# no-break space): ignored when looking for a frame on screen.
_NOISE = re.compile(r"[\s│┃╹▀─╭╮╰╯]+")


def table_of(agent: str | None) -> AgentScreens | None:
    """The agent's cue table (`cafleet/agents/<name>/screens.py`); None for a name cafleet
    does not know."""
    found = find_agent(agent)
    return found.screens if found is not None else None


def message_frame(message_id: int) -> str:
    """The start of every notification line for ``message_id`` (cafleet.delivery.drains)."""
    return f"[cafleet msg {message_id} from"


@lru_cache(maxsize=256)
def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.MULTILINE)


def _region(cue: Cue, capture: str, layout: Layout) -> str:
    if cue.region == "screen":
        return capture
    if cue.region == "composer":
        return "\n".join(layout.composer or ())
    if cue.region == "footer":
        return "\n".join(layout.footer)
    nonblank = [line for line in layout.above if line.strip()]
    return "\n".join(nonblank[-TAIL_LINES:])


def _classify(table: AgentScreens, capture: str, layout: Layout, spawned: bool = False) -> State:
    if not capture.strip():
        return "starting"
    for cue in table.first_turn if spawned else ():
        if _rx(cue.pattern).search(_region(cue, capture, layout)):
            return cue.state
    for cue in table.cues:
        if cue.state == "ready" and layout.composer is None:
            continue
        if _rx(cue.pattern).search(_region(cue, capture, layout)):
            return cue.state
    return "unknown"


class Why(NamedTuple):
    """Which cue decided a screen's state, and the first line it matched (`member explain`)."""

    state: State
    cue: str  # the cue's pattern; "" when none matched (or the screen was blank)
    line: str  # the first line the cue matched, stripped; ""


def classify_why(agent: str, capture: str, *, spawned: bool = False) -> Why:
    """`classify` with its reason: the cue that matched and on which line."""
    table = table_of(agent)
    if table is None or not capture.strip():
        return Why(classify(agent, capture, spawned=spawned), "", "")
    layout = split(table, capture)
    cues = [*(table.first_turn if spawned else ()), *table.cues]
    for index, cue in enumerate(cues):
        in_cues = index >= (len(table.first_turn) if spawned else 0)
        if in_cues and cue.state == "ready" and layout.composer is None:
            continue
        found = _rx(cue.pattern).search(_region(cue, capture, layout))
        if found:
            start = found.string.rfind("\n", 0, found.start()) + 1
            end = found.string.find("\n", found.end())
            line = found.string[start : end if end >= 0 else None].strip()
            return Why(cue.state, cue.pattern, line)
    return Why("unknown", "", "")


def classify(agent: str, capture: str, *, spawned: bool = False) -> State:
    """The pane's state (see the module docstring and `cafleet.delivery.screens.cues`).

    ``spawned``: the pane is a member cafleet spawned with its prompt on the agent's command
    line (every member and monitor; not a Director), so the table's ``first_turn`` cues apply.
    """
    table = table_of(agent)
    if table is None:
        return "unknown"
    return _classify(table, capture, split(table, capture), spawned)


def _composer(table: AgentScreens, capture: str, layout: Layout) -> str | None:
    if layout.text is None or _classify(table, capture, layout) not in ("ready", "working"):
        return None
    text = layout.text
    if any(re.fullmatch(p, text) for p in table.placeholders):
        return ""
    return text


def composer_text(agent: str, capture: str) -> str | None:
    """The composer's text, rows joined by one space; ``""`` when it is empty (a placeholder
    counts as empty); None when no composer is drawn (a dialog, start-up, unknown screen)."""
    table = table_of(agent)
    if table is None:
        return None
    return _composer(table, capture, split(table, capture))


def squash(text: str) -> str:
    """``text`` without whitespace and box-drawing characters: what survives any wrapping."""
    return _NOISE.sub("", text)


def _outside_count(layout: Layout, needle: str) -> int:
    return squash("\n".join(layout.above + layout.footer)).count(needle)


def line_taken(agent: str, before: str, after: str, frame: str) -> Taken:
    """Judge a submit from the capture ``before`` it (before typing, or typed before Enter) and
    the capture ``after`` Enter, for the line that starts with ``frame`` (`message_frame`).

    ``in_composer``: the composer still holds the frame, or a paste placeholder (Claude folds a
    long burst and its Enter into ``[Pasted text #N +1 lines]``): press Enter again.
    ``submitted``: the frame shows outside the composer (transcript, queue, title) more often
    than before, or it has left the composer it was in before.
    ``missing``: anything else (the line was dropped, or garbled so its frame is gone).
    """
    table = table_of(agent)
    needle = squash(frame)
    if table is None or not needle:
        return "missing"
    after_layout = split(table, after)
    held = _composer(table, after, after_layout)
    if held and (needle in squash(held) or any(re.fullmatch(p, held) for p in table.pastes)):
        return "in_composer"
    before_layout = split(table, before)
    after_count = _outside_count(after_layout, needle)
    if after_count > _outside_count(before_layout, needle):
        return "submitted"
    was_held = _composer(table, before, before_layout)
    if after_count and was_held and needle in squash(was_held):
        return "submitted"
    return "missing"


__all__ = [
    "STATES",
    "State",
    "Taken",
    "classify",
    "composer_text",
    "line_taken",
    "message_frame",
    "squash",
    "table_of",
]
