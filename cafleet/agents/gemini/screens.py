"""What Gemini CLI's screen shows (docs/agent-screens.md): its cue table, where its composer is
drawn and how its prompts are read; the rules are in `cafleet.delivery.screens.cues`."""

from __future__ import annotations

import re

from cafleet.delivery.screens.choice import Choice
from cafleet.delivery.screens.cues import AgentScreens, ComposerRows, Cue, PromptParts
from cafleet.delivery.screens.prompts import clean, numbered

_RULE = re.compile(r"^─{20,}$")
# Its dialogs are boxes (│ … │); the permission prompt nests the command in a second box.
_BOX = re.compile(r"^\s*[│╭╰]\s?[│╭╰]?\s*|\s*[│╮╯]\s*[│╮╯]?\s*$")
_TITLE = re.compile(r"Allow execution of \[|Apply this change\?")
_SHORTCUT = re.compile(r"^(.*\S)\s+\((esc)\)$")


def _find_composer(table: AgentScreens, lines: list[str]) -> ComposerRows | None:
    """Below the last full-width rule: the mode line (`Shift+Tab to accept edits`, `YOLO
    Ctrl+Y`), then the rows from the one starting ` > ` (` * ` in YOLO mode) up to a blank
    row; wrapped rows are indented by three spaces. The footer follows."""
    prompt = re.compile(table.composer["prompt"])
    rules = [i for i, line in enumerate(lines) if _RULE.match(line)]
    if not rules:
        return None
    start = next(
        (i for i in range(rules[-1] + 1, min(rules[-1] + 4, len(lines))) if prompt.match(lines[i])),
        None,
    )
    if start is None:
        return None
    end = start + 1
    while end < len(lines) and lines[end].startswith("   ") and lines[end].strip():
        end += 1
    rows = [prompt.sub("", lines[start], count=1), *lines[start + 1 : end]]
    return start, end, rows


def _read_prompt(lines: list[str]) -> PromptParts | None:
    """From the box's title (`? Shell  <command>`) down: the command box, the question
    (`Allow execution of [Shell]?`), then the numbered choices. A number key picks a choice;
    `(esc)` marks the one Escape picks."""
    titles = [i for i, line in enumerate(lines) if _TITLE.search(line)]
    if not titles:
        return None
    top = titles[-1]
    while top > 0 and not lines[top].lstrip().startswith("╭"):
        top -= 1
    body = [clean(_BOX.sub("", x)) for x in lines[top:]]
    body = [x for x in body if x.strip()]
    run = numbered([x.lstrip("● ") for x in body])
    if run is None:
        return None
    start, found = run
    question = next((i for i in range(start - 1, -1, -1) if _TITLE.search(body[i])), None)
    if question is None:
        return None
    choices = []
    for n, text in found:
        keys: tuple[str, ...] = (str(n),)
        m = _SHORTCUT.match(text)
        if m:
            text, keys = m.group(1), ("Escape",)
        choices.append(Choice(n, text.strip(), keys))
    return body[question], [x for i, x in enumerate(body[:start]) if i != question], choices


SCREENS = AgentScreens(
    agent="gemini",
    # The input box: below the last full-width rule (─) and its mode line, the rows from the
    # one starting ` > ` (` * ` in YOLO mode, ` ! ` in shell mode) to a blank row.
    composer={"prompt": r"^ [>*!] {1,3}"},
    placeholders=(r"Type your message or @path/to/file",),
    cues=(
        Cue(
            "awaiting_user",
            r"Allow execution of \[",
            "screen",
            "│ Allow execution of [Shell]?                                                                                          │",
            "permission-1.txt",
            "The question of its tool-confirmation box for a command (captured: a shell command "
            "the scripted model asked for under --approval-mode default).",
        ),
        Cue(
            "awaiting_user",
            r"│ Apply this change\?",
            "screen",
            "│ Apply this change?                                                                                                   │",
            "permission-write-1.txt",
            "The question of the box for a file write or edit (captured).",
        ),
        Cue(
            "awaiting_user",
            r"\d\. (Allow once|Allow for this session|No, suggest changes)",
            "screen",
            "│ ● 1. Allow once                                                                                                      │",
            "permission-1.txt",
            "Its choices (captured).",
        ),
        Cue(
            "awaiting_user",
            r"Do you trust the files in this folder\?",
            "screen",
            " │ Do you trust the files in this folder?                                                                             │",
            "dialog-trust-1.txt",
            "The folder-trust dialog (captured with folder trust enabled).",
        ),
        Cue(
            "awaiting_user",
            r"How would you like to authenticate|\(Use Enter to select\)",
            "screen",
            "│   How would you like to authenticate for this project?                                                               │",
            "dialog-sign-in-1.txt",
            "The authentication picker (captured without an auth type in its settings).",
        ),
        Cue(
            "working",
            r"\(esc to cancel, \d",
            "tail",
            " ⠋ Thinking... (esc to cancel, 0s)                                                                      ? for shortcuts",
            "working-1.txt",
            "The spinner line above the input box while a turn runs (its verb changes; the "
            "'esc to cancel, <time>' hint stays).",
        ),
        Cue(
            "ready",
            r"^ workspace \(/directory\)",
            "footer",
            " workspace (/directory)                                                   sandbox                                /model",
            "ready-1.txt",
            "The input box and its footer: no turn runs and it takes typed input (a line "
            "submitted before its start-up finished is queued: 'Initializing... Prompts will "
            "be queued.').",
        ),
        Cue(
            "starting",
            r"Gemini CLI v\d",
            "screen",
            " ▝▜▄     Gemini CLI v0.61.0",
            "working-1.txt",
            "The banner (drawn once the input box is, or a moment later) without an input box.",
        ),
    ),
    find_composer=_find_composer,
    read_prompt=_read_prompt,
)


__all__ = ["SCREENS"]
