"""The pane-state classifier and its helpers on the real agents' captured screens.

tests/data/screens/<agent>/*.txt are ``capture-pane -p`` screens of the real Claude Code, Codex
CLI and opencode (re-capture: ``python -m tests.harness.capture_screens``); index.json says,
from what the capture script did, which state each screen is in, what its composer holds and
which message frames it shows outside the composer.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from cafleet.agents.registry import agent_names, load_agent
from cafleet.delivery.screens import (
    STATES,
    classify,
    composer_text,
    line_taken,
    message_frame,
    squash,
)
from cafleet.delivery.screens.cues import Cue
from cafleet.delivery.screens.layout import split

TABLES = {name: load_agent(name).screens for name in agent_names()}

DATA = Path(__file__).resolve().parent / "data" / "screens"
INDEX: dict[str, dict[str, Any]] = json.loads((DATA / "index.json").read_text(encoding="utf-8"))


def screen(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def agent_of(name: str) -> str:
    return name.split("/", 1)[0]


# --------------------------------------------------------------------------- the captures


def test_every_capture_is_indexed_and_every_agent_state_is_covered() -> None:
    files = {f"{p.parent.name}/{p.name}" for p in DATA.glob("*/*.txt")}
    assert files == set(INDEX)
    for agent in TABLES:
        states = {v["state"] for k, v in INDEX.items() if agent_of(k) == agent}
        # awaiting_user: every agent has at least a menu captured for real.
        assert {"starting", "ready", "working", "awaiting_user"} <= states, agent


@pytest.mark.parametrize("name", sorted(INDEX))
def test_classify_real_capture(name: str) -> None:
    spawned = INDEX[name].get("spawned", False)
    assert classify(agent_of(name), screen(name), spawned=spawned) == INDEX[name]["state"]


def test_a_spawned_opencode_on_its_home_screen_has_not_taken_its_prompt_yet() -> None:
    """opencode started with --prompt submits the prompt itself from its home screen: until the
    session screen replaces it, a spawned member is starting; a Director there is ready."""
    for name in ("home-spawn-prompt-1.txt", "home-spawn-submitted-1.txt", "ready-1.txt"):
        capture = screen(f"opencode/{name}")
        assert classify("opencode", capture, spawned=True) == "starting", name
        assert classify("opencode", capture) == "ready", name
    # The session screen after the submit is ready whoever the pane belongs to.
    session = screen("opencode/session-first-1.txt")
    assert classify("opencode", session, spawned=True) == "ready"
    # Only the first-turn cues depend on it: every other capture reads the same spawned or not.
    for name in INDEX:
        if agent_of(name) != "opencode" or INDEX[name]["state"] == "starting":
            continue
        if "█▀▀█ █▀▀█ █▀▀█" not in screen(name):
            got = classify(agent_of(name), screen(name), spawned=True)
            assert got == INDEX[name]["state"], name


@pytest.mark.parametrize("name", sorted(k for k, v in INDEX.items() if "composer" in v))
def test_composer_text_real_capture(name: str) -> None:
    expected = INDEX[name]["composer"]
    got = composer_text(agent_of(name), screen(name))
    if expected is None:
        assert got is None
    else:
        # Rows are joined by one space: compare what survives any wrapping exactly.
        assert got is not None and squash(got) == squash(expected), got


@pytest.mark.parametrize("name", sorted(k for k, v in INDEX.items() if v["frames"]))
def test_frames_of_real_capture_are_outside_the_composer(name: str) -> None:
    """The index's frames are on screen, outside the composer (line_taken's premise)."""
    layout = split(TABLES[agent_of(name)], screen(name))
    outside = squash("\n".join(layout.above + layout.footer))
    for frame in INDEX[name]["frames"]:
        assert squash(frame) in outside, frame


def test_a_partly_cleared_composer_is_read_as_what_is_left() -> None:
    # One Ctrl-U in Claude deletes only the cursor's row of a wrapped draft.
    got = composer_text("claude", screen("claude/composer-ctrl-u-1.txt"))
    assert got is not None and got.startswith("a wrapped draft w0") and got.endswith("w55")
    # Codex and opencode cleared the whole draft with one Ctrl-U.
    assert composer_text("codex", screen("codex/composer-ctrl-u-1.txt")) == ""
    assert composer_text("opencode", screen("opencode/composer-ctrl-u-1.txt")) == ""


def test_placeholders_read_as_empty() -> None:
    assert "Ask anything" in screen("opencode/ready-1.txt")
    assert composer_text("opencode", screen("opencode/ready-1.txt")) == ""
    assert "Press up to edit queued messages" in screen("claude/queued-1.txt")
    assert composer_text("claude", screen("claude/queued-1.txt")) == ""
    assert "› Ask Codex to do anything" in screen("codex/ready-1.txt")
    assert composer_text("codex", screen("codex/ready-1.txt")) == ""


# --------------------------------------------------------------------------- the cue tables


ALL_CUES = [
    (agent, i, cue) for agent, t in TABLES.items() for i, cue in enumerate(t.cues + t.first_turn)
]


@pytest.mark.parametrize(
    ("agent", "cue"), [(a, c) for a, _, c in ALL_CUES], ids=[f"{a}-{i}" for a, i, _ in ALL_CUES]
)
def test_cue_is_documented_and_matches_its_real_example(agent: str, cue: Cue) -> None:
    assert cue.state in STATES and cue.state != "unknown"
    assert cue.why and cue.confidence and cue.example
    assert re.compile(cue.pattern, re.M).search(cue.example), (cue.pattern, cue.example)
    if cue.source == "docs":
        assert cue.state == "awaiting_user", "only prompts that need a model may come from docs"
        assert not cue.confidence.startswith("high") or "layout" in cue.confidence
    else:
        assert cue.example in screen(f"{agent}/{cue.source}"), "example not in its capture"


@pytest.mark.parametrize(("agent", "cue"), [(a, c) for a, _, c in ALL_CUES if c.source == "docs"])
def test_docs_cue_classifies_a_screen_built_from_its_text(agent: str, cue: Cue) -> None:
    """A docs-only prompt drawn on top of the agent's real ready screen (its composer gone, as
    dialogs replace it) is awaiting_user."""
    ready = next(k for k, v in INDEX.items() if agent_of(k) == agent and v["state"] == "ready")
    lines = screen(ready).splitlines()
    keep = [ln for ln in lines if ln.strip()][:6]
    prompt = ["", cue.example, ""]
    assert classify(agent, "\n".join(keep + prompt)) == "awaiting_user"


def test_unknown_agents_and_screens() -> None:
    assert classify("vim", screen("claude/ready-1.txt")) == "unknown"
    assert composer_text("vim", "anything") is None
    assert classify("claude", "root@host:~# ls\nfile\nroot@host:~# ") == "unknown"
    assert classify("codex", "bash-5.2$ ") == "unknown"
    assert classify("opencode", "Segmentation fault (core dumped)") == "unknown"
    for agent in TABLES:
        assert classify(agent, "") == "starting"
        assert classify(agent, "\n \n\n") == "starting"
        assert composer_text(agent, "") is None


def test_transcript_text_does_not_fake_a_state() -> None:
    """Words of the cues in the agent's own reply, right above the composer, do not change its
    state: the cues want the status line's or the dialog's own shape."""
    ready = screen("claude/ready-1.txt").splitlines()
    rule = next(i for i, ln in enumerate(ready) if ln.startswith("─"))
    prose = [
        "⏺ The status line said Retrying in 3s · attempt 3/10, then esc to interrupt.",
        "  Do you want to proceed? I can also run it for you.",
        "  Enter to confirm is what the dialog would say.",
    ]
    assert classify("claude", "\n".join(ready[:rule] + prose + ready[rule:])) == "ready"
    codex = screen("codex/ready-1.txt").splitlines()
    at = next(i for i, ln in enumerate(codex) if ln.startswith("› Ask Codex"))
    prose = ["• I would ask: Would you like to run the following command", ""]
    assert classify("codex", "\n".join(codex[:at] + prose + codex[at:])) != "working"


# --------------------------------------------------------------------------- line_taken


F12, F13 = message_frame(12), message_frame(13)


def test_message_frame_matches_the_notification_line() -> None:
    from cafleet.delivery.drains import notification_line

    rendered = notification_line(
        message_id=12, sender_name="Director", from_member_id=1, body="hi", max_text_len=200
    )
    assert rendered.startswith(F12)


@pytest.mark.parametrize("agent", sorted(TABLES))
def test_line_taken_submitted_from_ready(agent: str) -> None:
    # ready (nothing of msg 12 on screen) -> working (msg 12 in the transcript).
    before, after = screen(f"{agent}/ready-1.txt"), screen(f"{agent}/working-1.txt")
    if agent == "codex":
        before = screen("codex/ready-1.txt")
    assert line_taken(agent, before, after, F12) == "submitted"


@pytest.mark.parametrize("agent", sorted(TABLES))
def test_line_taken_queued_while_working(agent: str) -> None:
    # Typed but not submitted while working, then Enter: queued (Claude, opencode) or taken
    # into the running turn (Codex). Either way it left the composer and shows outside it.
    before = screen(f"{agent}/working-composer-1.txt")
    after = screen(f"{agent}/queued-1.txt")
    assert line_taken(agent, before, after, F13) == "submitted"
    # Judged from a capture taken before typing, too.
    assert line_taken(agent, screen(f"{agent}/working-2.txt"), after, F13) == "submitted"


@pytest.mark.parametrize("agent", sorted(TABLES))
def test_line_taken_still_in_composer(agent: str) -> None:
    # Enter swallowed: the line is still in the composer after it.
    before = screen(f"{agent}/working-2.txt")
    held = screen(f"{agent}/working-composer-1.txt")
    assert line_taken(agent, before, held, F13) == "in_composer"


def test_line_taken_claude_paste_placeholder_is_in_composer() -> None:
    # A long burst folded into "[Pasted text #2 +1 lines]" (its Enter with it).
    before = screen("claude/paste-1.txt")
    after = screen("claude/paste-2.txt")
    assert line_taken("claude", before, after, message_frame(14)) == "in_composer"


@pytest.mark.parametrize("agent", sorted(TABLES))
def test_line_taken_missing(agent: str) -> None:
    ready = screen(f"{agent}/ready-1.txt" if agent != "codex" else "codex/ready-1.txt")
    # Nothing happened at all (the line was dropped).
    assert line_taken(agent, ready, ready, F12) == "missing"
    # The screen moved on but shows another message, not ours.
    assert line_taken(agent, ready, screen(f"{agent}/working-1.txt"), F13) == "missing"
    # Garbled: "[c" eaten, as the Escape-prefixed typing did to opencode.
    garbled = screen(f"{agent}/working-1.txt").replace("[cafleet msg 12", "afleet msg 12")
    assert line_taken(agent, ready, garbled, F12) == "missing"


def test_line_taken_a_frame_already_on_screen_needs_a_new_copy() -> None:
    # msg 12 was in the transcript before and after: that alone does not prove a new submit.
    before = screen("claude/working-2.txt")
    assert line_taken("claude", before, before, F12) == "missing"
    # msg 13 typed (composer) then gone from the composer and into the queue: submitted.
    assert (
        line_taken(
            "claude",
            screen("claude/working-composer-1.txt"),
            screen("claude/queued-1.txt"),
            F13,
        )
        == "submitted"
    )


def test_line_taken_survives_wrapping() -> None:
    # In a 70-column pane the line wraps in the composer and in the transcript.
    held = screen("claude/composer-3.txt")
    after = screen("claude/working-3.txt")
    f15 = message_frame(15)
    assert line_taken("claude", screen("claude/ready-1.txt"), held, f15) == "in_composer"
    assert line_taken("claude", held, after, f15) == "submitted"
    wrapped = "[cafleet msg 15\n  from Director"
    assert squash(f15) in squash(wrapped)


def test_line_taken_unknown_agent_or_empty_frame() -> None:
    text = screen("claude/working-1.txt")
    assert line_taken("vim", text, text, F12) == "missing"
    assert line_taken("claude", text, text, "  ") == "missing"


# --------------------------------------------------------------------------- cost


def test_classifier_is_pure_and_deterministic() -> None:
    text = screen("opencode/queued-1.txt")
    assert {classify("opencode", text) for _ in range(3)} == {"working"}
    assert composer_text("opencode", text) == composer_text("opencode", text)


def test_a_named_claude_member_reads_ready_with_its_banner_still_on_screen() -> None:
    """A Claude member cafleet spawns shows its name in the composer's top rule and its
    welcome banner stays on a tall screen: the composer is still found, so the screen reads
    `ready` (not `starting` from the banner, which held every wake to a 160x40 monitor)."""
    screen = (
        "╭─── Claude Code v2.1.197 ──────────────╮\n"
        "│   Welcome back!                       │\n"
        "╰───────────────────────────────────────╯\n"
        "❯ You are the monitor of cafleet fleet 1. Wait for wake lines.\n"
        "● Done.\n"
        "✻ Churned for 0s\n"
        "──────────────────────────────────────────────────── monitor ──\n"
        "❯\u00a0\n"
        "────────────────────────────────────────────────────────────────\n"
        "  ⏵⏵ don't ask on (shift+tab to cycle) · ← for agents"
    )
    assert classify("claude", screen, spawned=True) == "ready"
    assert composer_text("claude", screen) == ""
