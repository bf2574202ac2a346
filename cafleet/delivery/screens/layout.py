"""Where each agent draws its composer, read from a plain-text capture.

`split` cuts a capture into the regions the cue tables name: the rows above the composer, the
composer's rows, the footer below it. Each agent's table finds its composer
(``AgentScreens.find_composer``, in `cafleet/agents/<name>/screens.py`); the cutting is here.
"""

from __future__ import annotations

from typing import NamedTuple

from cafleet.delivery.screens.cues import AgentScreens


class Layout(NamedTuple):
    above: list[str]
    composer: list[str] | None  # the composer's rows, or None when none is drawn
    footer: list[str]
    text: str | None  # the composer's text, rows joined by one space ("" when empty)


def lines_of(capture: str) -> list[str]:
    return [line.rstrip() for line in capture.replace("\r", "").split("\n")]


def split(table: AgentScreens, capture: str) -> Layout:
    lines = lines_of(capture)
    found = table.find_composer(table, lines) if table.find_composer is not None else None
    if found is None:
        return Layout(lines, None, [], None)
    start, end, rows = found
    text = " ".join(r for r in (row.strip() for row in rows) if r)
    return Layout(lines[:start], lines[start:end], lines[end:], text)


__all__ = ["Layout", "lines_of", "split"]
