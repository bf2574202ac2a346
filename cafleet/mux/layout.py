"""Pane sizes after a split, as tmux 3.x lays them out (docs/runtime.md §1.11).

Pure arithmetic, so the choice of a member pane's window can be made before anything is spawned:
the root Director's window keeps `main-vertical` (the Director on the left, members stacked on
the right); an overflow window is `tiled`. Both formulas were read off tmux 3.3a with real
servers at several window sizes (tests/test_layout.py checks them against a real server).
"""

from __future__ import annotations

import re
from typing import NamedTuple

DEFAULT_MAIN_PANE_WIDTH = 80  # tmux's default `main-pane-width`
_PERCENT = re.compile(r"([0-9]+)%")


class Size(NamedTuple):
    columns: int
    rows: int

    def at_least(self, minimum: Size) -> bool:
        return self.columns >= minimum.columns and self.rows >= minimum.rows


class WindowGeometry(NamedTuple):
    window_id: str
    columns: int
    rows: int
    panes: int
    main_pane_width: str  # the window's `main-pane-width` option as tmux prints it


def main_pane_columns(option: str, columns: int) -> int:
    """The main pane's width: the option (columns or a percentage), at most the window less 2."""
    text = option.strip()
    match = _PERCENT.fullmatch(text)
    if match is not None:
        wanted = columns * int(match.group(1)) // 100
    elif text.isdigit():
        wanted = int(text)
    else:
        wanted = DEFAULT_MAIN_PANE_WIDTH
    return max(1, min(wanted, columns - 2))


def main_vertical_member(window: WindowGeometry, panes: int) -> Size:
    """The smallest stacked pane of a `main-vertical` window holding ``panes`` panes."""
    others = max(1, panes - 1)
    columns = window.columns - main_pane_columns(window.main_pane_width, window.columns) - 1
    rows = (window.rows - (others - 1)) // others
    return Size(max(0, columns), max(0, rows))


def tiled_grid(panes: int) -> tuple[int, int]:
    """(rows, columns) of tmux's `tiled` layout for ``panes`` panes."""
    rows = columns = 1
    while rows * columns < panes:
        rows += 1
        if rows * columns < panes:
            columns += 1
    return rows, columns


def tiled_member(window: WindowGeometry, panes: int) -> Size:
    """The smallest pane of a `tiled` window holding ``panes`` panes."""
    rows, columns = tiled_grid(max(1, panes))
    return Size(
        max(0, (window.columns - (columns - 1)) // columns),
        max(0, (window.rows - (rows - 1)) // rows),
    )


__all__ = [
    "DEFAULT_MAIN_PANE_WIDTH",
    "Size",
    "WindowGeometry",
    "main_pane_columns",
    "main_vertical_member",
    "tiled_grid",
    "tiled_member",
]
