"""What opencode's screen shows (docs/agent-screens.md): its cue table, where its composer is
drawn and how its prompts are read; the rules are in `cafleet.delivery.screens.cues`."""

from __future__ import annotations

import re

from cafleet.delivery.screens.choice import Choice
from cafleet.delivery.screens.cues import AgentScreens, ComposerRows, Cue, PromptParts
from cafleet.delivery.screens.prompts import clean

_TITLE = re.compile(r"Permission required|△ Always allow")
_SIDE = "┃"
# The button rows of opencode's two dialogs: the permission dialog, and the confirmation its
# "Allow always" opens ("This will allow … until OpenCode is restarted").
_ROWS = (("Allow once", "Allow always", "Reject"), ("Confirm", "Cancel"))
_CONFIRM = ("Always allow", "Confirm")
# Text this far right of the dialog's left edge is the session sidebar of a wide pane.
_INDENT = 12


def _find_composer(table: AgentScreens, lines: list[str]) -> ComposerRows | None:
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


def _dialog_line(line: str) -> str:
    """One row of an opencode dialog: its side bar dropped, the sidebar text that a wide pane
    draws at its right cut off; "" for a row that holds only sidebar text."""
    text = line.replace(_SIDE, " ")
    indent = len(text) - len(text.lstrip())
    if indent > _INDENT:
        return ""
    return clean(re.split(r"\s{8,}", text.strip())[0])


def _read_prompt(lines: list[str]) -> PromptParts | None:
    """The permission dialog (`△ Permission required`), its details, and the row of three
    buttons; or the confirmation "Allow always" opens (`△ Always allow`, Confirm / Cancel).
    The first button is selected when a dialog opens, → moves right, Enter confirms."""
    titles = [i for i, line in enumerate(lines) if _TITLE.search(line)]
    if not titles:
        return None
    body = [x for x in (_dialog_line(x) for x in lines[titles[-1] :]) if x]
    for labels in _ROWS:
        row = next((i for i, x in enumerate(body) if x.startswith(labels[0])), None)
        if row is None:
            continue
        buttons = re.split(r"\s{2,}", body[row])[: len(labels)]
        if tuple(buttons) != labels:
            return None
        choices = [
            Choice(
                i + 1,
                label,
                ("Right",) * i + ("Enter",),
                _CONFIRM if label == "Allow always" else None,
            )
            for i, label in enumerate(buttons)
        ]
        question = body[0].lstrip("△ ").strip()
        return question, body[1:row], choices
    return None


SCREENS = AgentScreens(
    agent="opencode",
    # The input box: the rows drawn with ┃ at one column above a bottom border ╹▀▀▀; its
    # last row names the agent and model ("Build · ..."); rows with a second ┃ belong to a
    # popup drawn over it. Text is cut at the border's width (a sidebar may follow).
    composer={"border": r"^\s*╹▀+", "side": "┃"},
    placeholders=(r'Ask anything… "[^"]*"', r'Run a command… "[^"]*"', r"Ask anything…"),
    cues=(
        Cue(
            "awaiting_user",
            r"Permission required|Allow once\s+Allow always\s+Reject",
            "screen",
            "  ┃  △ Permission required",
            "permission-1.txt",
            "The permission dialog, drawn in place of the input box: '△ Permission required', "
            "the command, and the options row 'Allow once   Allow always   Reject' (captured: "
            "a bash call from the local mock API with permission.bash = ask).",
        ),
        Cue(
            "awaiting_user",
            r"△ Always allow",
            "screen",
            "  ┃  △ Always allow",
            "permission-always-1.txt",
            "The confirmation 'Allow always' opens ('This will allow edit until OpenCode is "
            "restarted.', buttons 'Confirm   Cancel'), drawn in place of the input box "
            "(captured: an edit under the cafleet-ask preset, the scripted model).",
        ),
        Cue(
            "awaiting_user",
            r"^\s{2,}(Commands|Select model|Select agent|Switch session|Select session|Themes?)"
            r"\s{2,}esc\s*$",
            "screen",
            "                                  Commands                                         esc",
            "menu-1.txt",
            "Title row of a dialog (command palette, model or agent picker): title, then 'esc' "
            "at its right edge. Other titles than the palette's: medium confidence.",
        ),
        Cue(
            "working",
            r"^\s*[⬝■]{4,}",
            "footer",
            "   ■■⬝⬝⬝⬝⬝⬝  esc interrupt                                                                 tab agents  ctrl+p commands",
            "working-1.txt",
            "The progress bar that opens the status line while a turn runs (long retry texts "
            "can squeeze the 'esc interrupt' hint into a column, the bar stays).",
        ),
        Cue(
            "working",
            r"esc (again to )?interrupt|\[retrying\b",
            "footer",
            "   ■■■■⬝⬝⬝⬝  esc again to interrupt                                                        tab agents  ctrl+p commands",
            "escape-once-1.txt",
            "The interrupt hint (after one Escape: 'esc again to interrupt') and the retry note.",
        ),
        Cue(
            "ready",
            r"\(\d+%\) · \$\d+\.\d+\s+ctrl\+p commands",
            "footer",
            "                                           324 (0%) · $0.00  ctrl+p commands    • OpenCode 1.18.33",
            "ready-session-1.txt",
            "After a turn the footer shows the session's context use and cost where 'tab agents' "
            "was (a spawned member's session screen, idle after its first turn, scripted model).",
        ),
        Cue(
            "ready",
            r"tab agents\s+ctrl\+p commands",
            "screen",
            "                                                                       tab agents  ctrl+p commands",
            "ready-1.txt",
            "The key hints next to the input box once the TUI is drawn (with the box itself: "
            "see the layout).",
        ),
        Cue(
            "starting",
            r"█▀▀█ █▀▀█ █▀▀█",
            "screen",
            "                                         █▀▀█ █▀▀█ █▀▀█ █▀▀▄ █▀▀▀ █▀▀█ █▀▀█ █▀▀█",
            "ready-1.txt",
            "The logo without the input box and hints (the TUI is still being drawn).",
            confidence="medium: such a partial screen was not caught on this machine",
        ),
    ),
    first_turn=(
        Cue(
            "starting",
            r"█▀▀█ █▀▀█ █▀▀█",
            "screen",
            "                                    █▀▀█ █▀▀█ █▀▀█ █▀▀▄ █▀▀▀ █▀▀█ █▀▀█ █▀▀█",
            "home-spawn-prompt-1.txt",
            "The home screen's logo. opencode started with --prompt draws its home screen with "
            "the prompt in the composer and submits it itself a moment later (0.2 s here, "
            "seconds under load), then replaces the home screen with the session's. Until then "
            "a delivery would clear the spawn prompt with Ctrl-U or race its submit, so a "
            "spawned member on its home screen is still starting.",
        ),
    ),
    find_composer=_find_composer,
    read_prompt=_read_prompt,
    question_first=True,
)


__all__ = ["SCREENS"]
