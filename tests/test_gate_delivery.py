"""The delivery gate and the verified submit through the one typing path (cafleet.delivery.keys),
against screen-mode fakes in a real private tmux server (docs/runtime.md §4.9).

The fakes draw Claude Code / Codex / opencode screens from the cue tables' real texts and log
what really reached them (tests/harness/fake_screens.py): a submitted ``line`` (``queued`` when
the agent was working), ``interrupted``, ``dropped``, ``swallowed``, ``prompt-key``. Every
send-keys call goes through the tmux shim, so each test also checks which keys were pressed:
never Escape, except to dismiss a prompt once its hold ran out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cafleet.delivery.keys import Target, TypeOutcome, type_into_pane
from cafleet.delivery.screens import message_frame
from tests.delivery_helpers import shorten_verification
from tests.harness import util
from tests.harness.fixtures import TmuxHarness
from tests.harness.util import line_records, retry_until, shim_calls
from tests.test_fake_screens import kinds, typed, wait_screen, wait_state

pytestmark = pytest.mark.tmux
AGENTS = ("claude", "codex", "opencode")


def line(n: int, body: str = "hi") -> str:
    return f"[cafleet msg {n} from Director (1)] {body} \u2014 ack with: cafleet message ack {n}"


def spawn(h: TmuxHarness, agent: str, options: str = "") -> str:
    pane = h.spawn_fake(agent, env={"CAFLEET_FAKE_SCREEN": options})
    retry_until(lambda: kinds(pane, "screen"), timeout=10)
    if "start=" not in options:  # its first screen drawn, not only logged
        util.wait_drawn(pane, h.env, agent)
    return pane


def keys_to(pane: str) -> list[str]:
    """What each send-keys call to ``pane`` pressed: a key name, or "text" for literal text
    (typed keys, or the bracketed paste an agent's policy asks for)."""
    out = []
    for call in shim_calls():
        if call.get("target") != pane:
            continue
        if call.get("command") == "send-keys":
            out.append("text" if "-l" in call["argv"] else call["argv"][-1])
        elif call.get("command") == "paste-buffer":
            out.append("text")
    return out


def attempt(
    h: TmuxHarness, tmp_path: Path, pane: str, agent: str, text: str, n: int, **target: Any
) -> TypeOutcome:
    from cafleet.mux import PaneKey

    return type_into_pane(
        PaneKey("tmux", h.session_name, pane),
        text,
        backend=h.backend,
        db_dir=str(tmp_path),
        purpose="test",
        lock_timeout=5,
        target=Target(agent=agent, frame=message_frame(n), **target),
    )


def texts(pane: str) -> list[str]:
    return [r["text"] for r in line_records(pane)]


@pytest.mark.parametrize("agent", AGENTS)
def test_a_ready_agent_gets_the_line_whole_without_escape(
    tmux_harness: TmuxHarness, tmp_path: Path, agent: str
) -> None:
    """A line starting with `[c` reaches the composer as text: nothing before it (the fake
    parses `ESC [ c` as a control sequence and would eat the `[c`, as the real TUIs did)."""
    h = tmux_harness
    pane = spawn(h, agent)
    outcome = attempt(h, tmp_path, pane, agent, line(7), 7)
    assert (outcome.kind, outcome.state) == ("typed", "ready")
    assert texts(pane) == [line(7)]
    assert keys_to(pane) == ["text", "Enter"]


@pytest.mark.parametrize("agent", AGENTS)
def test_a_working_agent_queues_the_line_and_is_not_interrupted(
    tmux_harness: TmuxHarness, tmp_path: Path, agent: str
) -> None:
    h = tmux_harness
    pane = spawn(h, agent, "work=60")
    typed(h, pane, "the spawn prompt")
    wait_state(h, agent, pane, "working")
    outcome = attempt(h, tmp_path, pane, agent, line(8), 8)
    assert (outcome.kind, outcome.state) == ("typed", "working")
    records = line_records(pane)
    assert [(r["text"], r["queued"]) for r in records] == [
        ("the spawn prompt", False),
        (line(8), True),
    ]
    assert kinds(pane, "interrupted") == []
    assert "Escape" not in keys_to(pane)
    wait_state(h, agent, pane, "working")  # still on its own turn


@pytest.mark.parametrize("agent", AGENTS)
def test_a_half_typed_leftover_is_cleared_so_the_retry_is_one_clean_line(
    tmux_harness: TmuxHarness, tmp_path: Path, agent: str
) -> None:
    """A sender killed while typing leaves text in the composer (docs/runtime.md §4.9)."""
    h = tmux_harness
    pane = spawn(h, agent)
    stranded = line(9)[:50] + " " + "x" * 200  # wraps over rows
    typed(h, pane, stranded, enter=False)
    wait_screen(h, pane, "xxxxxxxxxx")
    outcome = attempt(h, tmp_path, pane, agent, line(9), 9)
    assert outcome.kind == "typed", outcome
    assert texts(pane) == [line(9)]
    pressed = keys_to(pane)  # (the test typed the leftover itself, past the shim)
    assert pressed[-2:] == ["text", "Enter"]
    assert set(pressed[:-2]) == {"C-u"}  # the agent's clear key, however many rows it took


def test_a_swallowed_enter_is_pressed_again_and_the_line_counts_once(
    tmux_harness: TmuxHarness, tmp_path: Path
) -> None:
    h = tmux_harness
    pane = spawn(h, "claude", "swallow-enter=1")
    outcome = attempt(h, tmp_path, pane, "claude", line(10), 10)
    assert outcome.kind == "typed"
    assert texts(pane) == [line(10)]
    assert len(kinds(pane, "swallowed")) == 1
    assert keys_to(pane) == ["text", "Enter", "Enter"]


def test_a_line_still_in_the_composer_after_three_enters_is_not_verified(
    tmux_harness: TmuxHarness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = tmux_harness
    shorten_verification(monkeypatch, verify=2.0, agents=("codex",))  # the fake swallows 9
    pane = spawn(h, "codex", "swallow-enter=9")
    outcome = attempt(h, tmp_path, pane, "codex", line(11), 11)
    assert outcome.kind == "unverified"
    assert outcome.reason == (
        f"typed into pane {pane} but not verified: the line is still in the composer after 3 Enter"
    )
    assert texts(pane) == [] and len(kinds(pane, "swallowed")) == 3
    assert keys_to(pane) == ["text", "Enter", "Enter", "Enter"]


def test_a_starting_agent_holds_the_line_until_its_input_is_live(
    tmux_harness: TmuxHarness, tmp_path: Path
) -> None:
    h = tmux_harness
    pane = spawn(h, "opencode", "start=4 drop-while-starting")
    held = attempt(h, tmp_path, pane, "opencode", line(12), 12)
    assert (held.kind, held.detail, held.state) == ("held", "starting", "starting")
    assert held.reason == f"pane {pane} is starting; the line is held"
    assert keys_to(pane) == []

    def delivered() -> TypeOutcome | None:
        outcome = attempt(h, tmp_path, pane, "opencode", line(12), 12)
        return outcome if outcome.kind != "held" else None

    assert retry_until(delivered, timeout=30, interval=0.5).kind == "typed"
    assert texts(pane) == [line(12)] and kinds(pane, "dropped") == []


def test_a_spawned_member_gets_nothing_until_its_agent_submitted_the_spawn_prompt(
    tmux_harness: TmuxHarness, tmp_path: Path
) -> None:
    """opencode started with --prompt shows the prompt in its home screen's composer and submits
    it itself a moment later: a delivery then would Ctrl-U the spawn prompt away. A spawned
    member's line waits for the session screen; the spawn prompt and the line arrive whole."""
    h = tmux_harness
    pane = spawn(h, "opencode", "auto-submit=3 work=0")
    wait_state(h, "opencode", pane, "ready")
    held = attempt(h, tmp_path, pane, "opencode", line(15), 15, spawned=True)
    assert (held.kind, held.state) == ("held", "starting")
    assert keys_to(pane) == []

    def delivered() -> TypeOutcome | None:
        outcome = attempt(h, tmp_path, pane, "opencode", line(15), 15, spawned=True)
        return outcome if outcome.kind != "held" else None

    assert retry_until(delivered, timeout=30, interval=0.5).kind == "typed"
    from tests.harness.fake_screens import SPAWN_PROMPT

    assert [r["text"] for r in kinds(pane, "auto-submit")] == [SPAWN_PROMPT]
    assert texts(pane) == [SPAWN_PROMPT, line(15)]


def test_a_line_typed_into_a_starting_agent_that_drops_it_is_not_verified(
    tmux_harness: TmuxHarness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CAFLEET_DELIVERY_HOLD_TIMEOUT=0 (never hold) types at once; the verification sees the
    line nowhere and nothing counts it."""
    h = tmux_harness
    shorten_verification(monkeypatch, verify=2.0)  # the fake starts for 60 s
    pane = spawn(h, "claude", "start=60 drop-while-starting")
    outcome = attempt(h, tmp_path, pane, "claude", line(13), 13, hold_timeout=0)
    assert outcome.kind == "unverified", outcome
    assert "not on the screen after Enter" in str(outcome.reason)
    assert texts(pane) == [] and kinds(pane, "dropped")


def test_a_permission_prompt_holds_then_is_dismissed_once_the_hold_runs_out(
    tmux_harness: TmuxHarness, tmp_path: Path
) -> None:
    h = tmux_harness
    pane = spawn(h, "claude", "permission")
    typed(h, pane, "run the ack command")
    wait_state(h, "claude", pane, "awaiting_user")
    held = attempt(h, tmp_path, pane, "claude", line(14), 14, waited=10, hold_timeout=300)
    assert (held.kind, held.detail) == ("held", "awaiting_user")
    assert kinds(pane, "prompt-key") == [] and keys_to(pane) == []

    late = attempt(h, tmp_path, pane, "claude", line(14), 14, waited=301, hold_timeout=300)
    assert late.kind == "typed", late
    assert [k["key"] for k in kinds(pane, "prompt-key")] == ["escape"]  # only the dismissal
    assert keys_to(pane) == ["Escape", "text", "Enter"]
    # The fake asks again for the new turn (our line); answering it submits the line: whole,
    # with the note that says why it comes late.
    wait_state(h, "claude", pane, "awaiting_user")
    h.tmux("send-keys", "-t", pane, "-l", "1")
    retry_until(lambda: texts(pane), timeout=10)
    assert texts(pane) == [line(14) + " [cafleet: held 301 s while the pane was awaiting_user]"]


def test_a_pane_of_another_window_or_server_is_not_ours_and_untouched(
    tmux_harness: TmuxHarness, tmp_path: Path
) -> None:
    from cafleet.mux import PaneOwner

    h = tmux_harness
    pane = spawn(h, "claude")
    before = len(shim_calls())  # the spawn's own wait read the screen
    other_window = PaneOwner(None, h.session_name, "@999")
    other_session = PaneOwner(None, "elsewhere", h.window_id)
    other_server = PaneOwner("/tmp/no-such-tmux-server/default", h.session_name, h.window_id)
    for owner in (other_window, other_session, other_server):
        outcome = attempt(h, tmp_path, pane, "claude", line(15), 15, owner=owner)
        assert outcome.kind == "not_ours"
        assert outcome.reason == f"pane {pane} belongs to another tmux server or was reused"
    assert keys_to(pane) == [] and texts(pane) == []
    assert not [c for c in shim_calls()[before:] if c.get("command") == "capture-pane"]
    ours = PaneOwner(h.socket_path, h.session_name, h.window_id)
    assert attempt(h, tmp_path, pane, "claude", line(15), 15, owner=ours).kind == "typed"
