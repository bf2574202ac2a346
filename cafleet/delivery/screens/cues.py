"""The cue-table types: what an agent's screen shows in each state. Each agent's table is in its
package (`cafleet/agents/<name>/screens.py`); edit a cue there, not the logic.

Every cue is a regular expression (Python ``re``, MULTILINE: ``^``/``$`` match at each line)
searched in one *region* of a plain-text capture (``tmux capture-pane -p``, the visible screen):

``screen``
    the whole capture;
``tail``
    the last 12 non-blank lines that are not the composer or below it (the status line, a
    dialog, a menu: what sits just above the input box or replaces it);
``composer``
    the composer's rows (see ``composer`` in `AgentScreens`);
``footer``
    the lines below the composer.

`cafleet.delivery.screens.classify` tries a spawned member's ``first_turn`` cues first, then the cues in table order and the first match decides the state
(so the order is the priority: dialogs before "working" before "ready"); a ``ready`` cue counts
only when the composer was found; a blank screen is ``starting``; nothing matching is
``unknown``.

``example`` is a real line the cue matches, copied from tests/data/screens/<agent>/<file>
(``source``); the unit tests check that every cue matches its example and that every example is
in its capture. Cues with ``source="docs"`` could not be produced offline (a permission prompt
needs a model reply): their texts come from the agents' documentation, issue reports quoting the
screens, and the agent binaries' own strings, and ``confidence`` says how sure we are.

Versions the cues were read from: Claude Code 2.1.197, Codex CLI 0.171.0, opencode 1.18.33.
Claude writes a NO-BREAK SPACE (U+00A0) after its ``❯`` prompt glyph; ``\\s`` matches it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Literal, NamedTuple

if TYPE_CHECKING:
    from cafleet.delivery.screens.choice import Choice

State = Literal["starting", "ready", "working", "awaiting_user", "unknown"]
Region = Literal["screen", "tail", "composer", "footer"]
ComposerRows = tuple[int, int, list[str]]
PromptParts = tuple[str, list[str], list["Choice"]]


class Cue(NamedTuple):
    state: State
    pattern: str
    region: Region
    example: str
    source: str  # a capture under tests/data/screens/<agent>/, or "docs"
    why: str
    confidence: str = "high"


class AgentScreens(NamedTuple):
    """One agent's cue table plus the few layout patterns the composer reader needs.

    These and `Cue` are NamedTuples, not dataclasses: every command that reads a screen builds
    the tables, and a dataclass costs its class several exec'd methods at import."""

    agent: str
    cues: tuple[Cue, ...]
    # How the composer is drawn (read by cafleet.delivery.screens.layout), see each table's comment.
    composer: Mapping[str, str] = MappingProxyType({})
    # Texts the composer shows when it is empty (dim in the real TUI, plain in a capture).
    placeholders: tuple[str, ...] = ()
    # Texts that stand for a paste held in the composer (the line is there, folded).
    pastes: tuple[str, ...] = ()
    # Screens on which a member cafleet spawned (its spawn prompt on the agent's command line,
    # submitted by the agent itself) has not taken that prompt yet: tried first, and only for
    # such a pane (``classify(..., spawned=True)``); the same screen in a Director's pane is
    # whatever the cues say.
    first_turn: tuple[Cue, ...] = ()
    # Where the composer sits in a capture's lines: (its first row, the row after it, its rows
    # with the prompt glyph removed), or None when none is drawn (read by `layout.split`).
    find_composer: Callable[[AgentScreens, list[str]], ComposerRows | None] | None = None
    # What an awaiting_user screen asks: (question, details, choices), or None when it cannot
    # be taken apart (read by `prompts.read_prompt`).
    read_prompt: Callable[[list[str]], PromptParts | None] | None = None
    question_first: bool = False  # the question is drawn above its details, not below


NBSP = "\u00a0"

__all__ = ["NBSP", "AgentScreens", "ComposerRows", "Cue", "PromptParts", "Region", "State"]
