"""What Codex CLI's screen shows (docs/agent-screens.md): its cue table, where its composer is
drawn and how its prompts are read; the rules are in `cafleet.delivery.screens.cues`."""

from __future__ import annotations

import re

from cafleet.delivery.screens.choice import Choice
from cafleet.delivery.screens.cues import AgentScreens, ComposerRows, Cue, PromptParts
from cafleet.delivery.screens.prompts import clean, numbered

_TITLE = re.compile(
    r"Would you like to (run the following command|make the following edits"
    r"|grant these permissions|send input to)"
)
_SHORTCUT = re.compile(r"^(.*\S)\s+\((\w+)\)$")


def _find_composer(table: AgentScreens, lines: list[str]) -> ComposerRows | None:
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


def _read_prompt(lines: list[str]) -> PromptParts | None:
    """From the approval title (`Would you like to …?`) down: details, then numbered choices,
    each with its shortcut key in parentheses (`(y)`; `(esc)` is the Escape key)."""
    titles = [i for i, line in enumerate(lines) if _TITLE.search(line)]
    if not titles:
        return None
    body = [clean(x) for x in lines[titles[-1] :] if x.strip()]
    run = numbered(body)
    if run is None:
        return None
    start, found = run
    choices = []
    for n, text in found:
        keys: tuple[str, ...] = (str(n),)
        m = _SHORTCUT.match(text)
        if m:
            text = m.group(1)
            key = m.group(2)
            keys = ("Escape",) if key.lower() == "esc" else (key,) if len(key) == 1 else keys
        choices.append(Choice(n, text.strip(), keys))
    return body[0], body[1:start], choices


SCREENS = AgentScreens(
    agent="codex",
    # The input box: the last block of rows starting with › at column 0 (wrapped rows are
    # indented by two spaces), ended by a blank row; the footer follows.
    composer={"prompt": r"^›(\s|$)"},
    placeholders=(r"Ask Codex to do anything", r"Ask a follow-up question"),
    cues=(
        Cue(
            "awaiting_user",
            r"Would you like to (run the following command|make the following edits"
            r"|grant these permissions|send input to)",
            "screen",
            "  Would you like to run the following command?",
            "permission-1.txt",
            "Title of the approval prompts (exec, patch, permissions, terminal input); all four "
            "strings are in the 0.171.0 binary; the command one captured (a command the model "
            "asked to run outside the read-only sandbox, approval policy on-request).",
        ),
        Cue(
            "awaiting_user",
            r"^\s*(›\s*)?\d+\. (Yes, (proceed|just this once|and don't ask again)"
            r"|No, and tell Codex what to do differently)",
            "screen",
            "› 1. Yes, proceed (y)",
            "permission-1.txt",
            "Options of the approval prompt (captured; 'Yes, just this once' is the 0.171.0 "
            "binary's string for other prompts).",
        ),
        Cue(
            "awaiting_user",
            r"^\s*(enter select · esc back|Press enter to (continue|confirm)\b)",
            "tail",
            "  Press enter to continue",
            "dialog-sign-in-1.txt",
            "Key hint of Codex's pickers (/model: 'enter select · esc back') and of the sign-in "
            "screen.",
        ),
        Cue(
            "awaiting_user",
            r"^\s*Browsing transcript\b",
            "screen",
            "  Browsing transcript · ↑↓/jk scroll · ←→/hl prompts · ^t details · ↵ rewind · esc back",
            "overlay-backtrack-1.txt",
            "Escape twice on an empty composer opens the transcript browser, where Enter "
            "rewinds the conversation: never type into it.",
        ),
        Cue(
            "working",
            r"esc to interrupt\)",
            "tail",
            "• Reconnecting... 2/5 (0s • esc to interrupt)",
            "working-2.txt",
            "The status line of a running turn ('Working (8s • esc to interrupt)', "
            "'Reconnecting... 3/5 (...)').",
        ),
        Cue(
            "ready",
            r"^\s+\S[^·\n]* · (/|~)",
            "footer",
            "  GPT-6.2-Sol default · /tmp/cftxxxxxxxx/agents/real-codex/project",
            "interrupted-1.txt",
            "The input box plus the footer's model line ('<model> <effort> · <cwd>'): Codex "
            "draws that line when its start-up has completed. Before it, the box and "
            "'? for shortcuts' are already drawn but an Enter is lost (docs/agent-screens.md).",
            confidence="high for this version; medium for other models' names (any text, then "
            "' · ' and a path)",
        ),
        Cue(
            "starting",
            r"^›(\s|$)",
            "composer",
            "› Ask Codex to do anything",
            "starting-4.txt",
            "The input box without the footer's model line: start-up has not completed "
            "(the header may still say 'loading').",
        ),
        Cue(
            "starting",
            r"^WARNING: proceeding, even though we could not create PATH aliases|OpenAI Codex \(v",
            "screen",
            "WARNING: proceeding, even though we could not create PATH aliases: Refusing to create helper binaries under temporary di",
            "starting-2.txt",
            "Start-up output before the TUI draws its composer (the warning is harmless).",
        ),
    ),
    find_composer=_find_composer,
    read_prompt=_read_prompt,
    question_first=True,
)


__all__ = ["SCREENS"]
