"""What Claude Code's screen shows (docs/agent-screens.md): its cue table, where its composer is
drawn and how its prompts are read; the rules are in `cafleet.delivery.screens.cues`."""

from __future__ import annotations

import re

from cafleet.delivery.screens.choice import Choice
from cafleet.delivery.screens.cues import NBSP, AgentScreens, ComposerRows, Cue, PromptParts
from cafleet.delivery.screens.prompts import clean, numbered, question_before

_RULE = re.compile(r"^\s*─{8,}( \S.* ─+)?\s*$")  # the rule may end with a session name


def _find_composer(table: AgentScreens, lines: list[str]) -> ComposerRows | None:
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


def _read_prompt(lines: list[str]) -> PromptParts | None:
    """The box below the last full-width rule: details, the question (ends with `?`), the
    numbered choices, a key hint. A number key picks a choice."""
    rules = [i for i, line in enumerate(lines) if _RULE.match(line)]
    region = lines[rules[-1] + 1 :] if rules else lines
    body = [clean(x) for x in region if x.strip()]
    run = numbered(body)
    if run is None:
        return None
    start, found = run
    q = question_before(body, start)
    if q is None:
        return None
    choices = [Choice(n, text.strip(), (str(n),)) for n, text in found]
    return body[q], body[:q], choices


SCREENS = AgentScreens(
    agent="claude",
    # The input box: a row starting with ❯ between two full-width rules (─); wrapped rows
    # are indented by two spaces. Everything below the second rule is the footer. A session
    # started with --name (every member: docs/runtime.md §2.2) has its name at the right end
    # of the top rule: `──── coder ──` (ready-named-1.txt).
    composer={"rule": r"^─{8,}( \S.* ─+)?$", "prompt": r"^❯(\s|$)"},
    placeholders=(r"Press up to edit queued messages", r'Try "[^"]*"'),
    pastes=(r"\[Pasted text #\d+( \+\d+ lines?)?\]",),
    cues=(
        Cue(
            "awaiting_user",
            r"^\s*Do you want to (proceed|make this edit to|create|delete|use this API key|allow)\b.*\?\s*$",
            "tail",
            " Do you want to proceed?",
            "permission-1.txt",
            "The question of the permission prompt (captured: a Bash call from the local mock "
            "API) and of the API-key dialog (captured). The edit/create variants are from the "
            "docs and the binary's strings ('Do you want to make this edit to').",
            confidence="high (captured); medium for the edit/create wording",
        ),
        Cue(
            "awaiting_user",
            r"^\s*(Enter to [^\n]*· )?Esc to (cancel|exit)\b",
            "tail",
            "  Enter to set as default · s to use this session only · Esc to cancel",
            "menu-1.txt",
            "The key hint line of Claude's dialogs and pickers (/model, trust, API key); the docs "
            "show 'Esc to cancel · Tab to amend' under a permission prompt.",
        ),
        Cue(
            "awaiting_user",
            r"^\s*(❯\s+)?\d+\. No, and tell Claude what to do differently",
            "tail",
            "   3. No, and tell Claude what to do differently (esc)",
            "docs",
            "The last option of a permission prompt (issue reports quote it; in the binary 4x).",
            confidence="medium: text from docs/issues/binary, not seen on this machine",
        ),
        Cue(
            "working",
            r"^[·✢✳✶✻✽*]\s+\S.*…",
            "tail",
            "· Contemplating…",
            "working-4.txt",
            "The spinner line above the input box while a turn runs (a glyph, a verb, an "
            "ellipsis). A finished turn leaves '✻ Worked for 3s' (no ellipsis).",
        ),
        Cue(
            "working",
            r"^[·✢✳✶✻✽*]\s.*Retrying in \d+s · attempt \d+/\d+",
            "tail",
            "✻ Unable to connect to API (ConnectionRefused) · Retrying in 3s · attempt 3/10",
            "working-2.txt",
            "Offline the status line shows the API retries; the turn is still running.",
        ),
        Cue(
            "working",
            r"^\s*esc to interrupt\b",
            "footer",
            "  esc to interrupt · ← for agents                                                         Ctrl+Y to paste deleted text",
            "working-2.txt",
            "Footer hint while a turn runs (hidden while the composer holds text).",
        ),
        Cue(
            "ready",
            r"^❯(\s|$)",
            "composer",
            "❯" + NBSP,
            "ready-1.txt",
            "The input box is drawn and no turn runs: Claude takes typed input.",
        ),
        Cue(
            "starting",
            r"Claude Code v\d",
            "screen",
            "╭─── Claude Code v2.1.197 ───────────────────────────────────────────────────────────────────────────────╮",
            "ready-1.txt",
            "The welcome banner without an input box yet (start-up, or a dialog being drawn).",
        ),
    ),
    find_composer=_find_composer,
    read_prompt=_read_prompt,
)


__all__ = ["SCREENS"]
