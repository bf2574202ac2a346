"""The cue tables: what each agent's screen shows in each state. Edit a cue here, not the logic.

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

from dataclasses import dataclass, field
from typing import Literal

State = Literal["starting", "ready", "working", "awaiting_user", "unknown"]
Region = Literal["screen", "tail", "composer", "footer"]


@dataclass(frozen=True)
class Cue:
    state: State
    pattern: str
    region: Region
    example: str
    source: str  # a capture under tests/data/screens/<agent>/, or "docs"
    why: str
    confidence: str = "high"


@dataclass(frozen=True)
class AgentScreens:
    """One agent's cue table plus the few layout patterns the composer reader needs."""

    agent: str
    cues: tuple[Cue, ...]
    # How the composer is drawn (read by cafleet.delivery.screens.layout), see each table's comment.
    composer: dict[str, str] = field(default_factory=dict)
    # Texts the composer shows when it is empty (dim in the real TUI, plain in a capture).
    placeholders: tuple[str, ...] = ()
    # Texts that stand for a paste held in the composer (the line is there, folded).
    pastes: tuple[str, ...] = ()
    # Screens on which a member cafleet spawned (its spawn prompt on the agent's command line,
    # submitted by the agent itself) has not taken that prompt yet: tried first, and only for
    # such a pane (``classify(..., spawned=True)``); the same screen in a Director's pane is
    # whatever the cues say.
    first_turn: tuple[Cue, ...] = ()


NBSP = "\u00a0"

# --------------------------------------------------------------------------- Claude Code

CLAUDE = AgentScreens(
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
)

# --------------------------------------------------------------------------- Codex CLI

CODEX = AgentScreens(
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
)

# --------------------------------------------------------------------------- opencode

OPENCODE = AgentScreens(
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
)

TABLES: dict[str, AgentScreens] = {t.agent: t for t in (CLAUDE, CODEX, OPENCODE)}

__all__ = ["CLAUDE", "CODEX", "OPENCODE", "TABLES", "AgentScreens", "Cue", "Region", "State"]
