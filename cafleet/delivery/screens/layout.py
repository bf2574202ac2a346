"""Where each agent draws its composer, read from a plain-text capture.

`split` cuts a capture into the regions the cue tables name: the rows above the composer, the
composer's rows, the footer below it. The patterns it uses live in the tables
(`cafleet.delivery.screens.cues`, ``AgentScreens.composer``); only the walking is here.
"""

from __future__ import annotations

import re
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
    finder = {"claude": _claude, "codex": _codex, "opencode": _opencode}[table.agent]
    found = finder(table, lines)
    if found is None:
        return Layout(lines, None, [], None)
    start, end, rows = found
    text = " ".join(r for r in (row.strip() for row in rows) if r)
    return Layout(lines[:start], lines[start:end], lines[end:], text)


def _claude(table: AgentScreens, lines: list[str]) -> tuple[int, int, list[str]] | None:
    """Rows between the last two rules, the first starting with the ❯ prompt."""
    rule = re.compile(table.composer["rule"])
    prompt = re.compile(table.composer["prompt"])
    rules = [i for i, line in enumerate(lines) if rule.match(line.strip())]
    if len(rules) < 2 or rules[-1] - rules[-2] < 2:
        return None
    top, bottom = rules[-2], rules[-1]
    rows = lines[top + 1 : bottom]
    if not prompt.match(rows[0]):
        return None
    first = prompt.sub("", rows[0], count=1)
    return top, bottom + 1, [first, *rows[1:]]


def _codex(table: AgentScreens, lines: list[str]) -> tuple[int, int, list[str]] | None:
    """The last block starting with › at column 0, up to the next blank row."""
    prompt = re.compile(table.composer["prompt"])
    starts = [i for i, line in enumerate(lines) if prompt.match(line)]
    if not starts:
        return None
    start = starts[-1]
    end = start + 1
    while end < len(lines) and lines[end].startswith("  ") and lines[end].strip():
        end += 1
    if end < len(lines) and lines[end].strip():
        return None  # not ended by a blank row: a menu's selection, not the composer
    rows = [prompt.sub("", lines[start], count=1), *lines[start + 1 : end]]
    return start, end, rows


def _opencode(table: AgentScreens, lines: list[str]) -> tuple[int, int, list[str]] | None:
    """The ┃ rows above the last ╹▀▀▀ border, minus the agent/model row and popup rows."""
    border = re.compile(table.composer["border"])
    side = table.composer["side"]
    bottoms = [i for i, line in enumerate(lines) if border.match(line)]
    if not bottoms:
        return None
    bottom = bottoms[-1]
    col = lines[bottom].index("╹")
    width = len(lines[bottom]) - col
    top = bottom
    while top > 0 and len(lines[top - 1]) > col and lines[top - 1][col] == side:
        top -= 1
    box = lines[top:bottom]
    if not box:
        return None
    rows = []
    for line in box[:-1]:  # the last row names the agent and model
        inner = line[col + 1 : col + width]
        if side in inner:
            continue  # a popup (command list) drawn over the box
        rows.append(inner)
    return top, bottom + 1, rows


__all__ = ["Layout", "lines_of", "split"]
