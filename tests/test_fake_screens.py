"""The fake agents' screen mode in a real private tmux server, judged by the classifier.

The fakes draw the agents' screens from the cue tables' real texts (tests/harness/
fake_screens.py); these tests prove each behaviour the delivery gate must handle is drawn so
that `cafleet.delivery.screens` recognises it, and that the fake logs what really reached it.
"""

from __future__ import annotations

import pytest

from cafleet.delivery.screens import classify, composer_text, line_taken, message_frame
from tests.harness.fixtures import TmuxHarness
from tests.harness.util import fake_log, line_records, retry_until

AGENTS = ("claude", "codex", "opencode")


def spawn(h: TmuxHarness, agent: str, options: str) -> str:
    return h.spawn_fake(agent, env={"CAFLEET_FAKE_SCREEN": options})


def capture(h: TmuxHarness, pane: str) -> str:
    if pane not in h.live_panes():
        raise AssertionError(f"the fake in {pane} exited; its log ends {fake_log(pane)[-4:]}")
    return h.tmux("capture-pane", "-p", "-t", pane)


def wait_state(h: TmuxHarness, agent: str, pane: str, state: str, timeout: float = 10) -> str:
    last = {"text": ""}

    def check() -> tuple[str, ...]:
        last["text"] = capture(h, pane)
        return (last["text"],) if classify(agent, last["text"]) == state else ()

    return retry_until(
        check,
        timeout=timeout,
        message=lambda: f"{agent} not {state}:\n{last['text']}\nlog: {fake_log(pane)[-5:]}",
    )[0]


def wait_screen(h: TmuxHarness, pane: str, needle: str, timeout: float = 10) -> str:
    def check() -> tuple[str, ...]:
        text = capture(h, pane)
        return (text,) if needle in text else ()

    return retry_until(check, timeout=timeout, message=f"{needle!r} not in {pane}")[0]


def typed(h: TmuxHarness, pane: str, text: str, enter: bool = True) -> None:
    h.tmux("send-keys", "-t", pane, "-l", "--", text)
    if enter:
        h.tmux("send-keys", "-t", pane, "Enter")


def kinds(pane: str, kind: str) -> list[dict]:
    return [r for r in fake_log(pane) if r.get("kind") == kind]


def line(n: int) -> str:
    return f"[cafleet msg {n} from Director (1)] hi \u2014 ack with: cafleet message ack {n}"


@pytest.mark.parametrize("agent", AGENTS)
def test_starting_ready_working_ready(tmux_harness: TmuxHarness, agent: str) -> None:
    h = tmux_harness
    pane = spawn(h, agent, "start=1 work=1")
    assert classify(agent, capture(h, pane)) == "starting"
    ready = wait_state(h, agent, pane, "ready")
    assert composer_text(agent, ready) == ""
    typed(h, pane, line(5), enter=False)
    held = wait_screen(h, pane, message_frame(5))
    assert composer_text(agent, held) == line(5)
    h.tmux("send-keys", "-t", pane, "Enter")
    working = wait_state(h, agent, pane, "working")
    assert line_taken(agent, held, working, message_frame(5)) == "submitted"
    assert [r["text"] for r in line_records(pane)] == [line(5)]
    wait_state(h, agent, pane, "ready")


@pytest.mark.parametrize("agent", AGENTS)
def test_permission_prompt_is_awaiting_user(tmux_harness: TmuxHarness, agent: str) -> None:
    h = tmux_harness
    pane = spawn(h, agent, "permission work=30")
    wait_state(h, agent, pane, "ready")
    typed(h, pane, line(6))
    prompt = wait_state(h, agent, pane, "awaiting_user")
    assert composer_text(agent, prompt) is None
    assert line_records(pane) == []  # not submitted until the prompt is answered
    h.tmux("send-keys", "-t", pane, "Enter")  # a human answers
    wait_state(h, agent, pane, "working")
    assert [r["text"] for r in line_records(pane)] == [line(6)]
    assert [r["key"] for r in kinds(pane, "prompt-key")] == ["enter"]


@pytest.mark.parametrize("agent", AGENTS)
def test_swallowed_enter_stays_in_composer(tmux_harness: TmuxHarness, agent: str) -> None:
    h = tmux_harness
    pane = spawn(h, agent, "swallow-enter=1 work=30")
    before = wait_state(h, agent, pane, "ready")
    typed(h, pane, line(7))
    retry_until(lambda: kinds(pane, "swallowed"))
    after = capture(h, pane)
    assert line_taken(agent, before, after, message_frame(7)) == "in_composer"
    h.tmux("send-keys", "-t", pane, "Enter")
    after = wait_state(h, agent, pane, "working")
    assert line_taken(agent, before, after, message_frame(7)) == "submitted"
    assert [r["text"] for r in line_records(pane)] == [line(7)]


@pytest.mark.parametrize("agent", AGENTS)
def test_input_dropped_while_starting(tmux_harness: TmuxHarness, agent: str) -> None:
    h = tmux_harness
    pane = spawn(h, agent, "start=2 drop-while-starting")
    before = capture(h, pane)
    assert classify(agent, before) == "starting"
    typed(h, pane, line(8))
    retry_until(lambda: kinds(pane, "dropped"))
    after = wait_state(h, agent, pane, "ready")
    assert composer_text(agent, after) == ""
    assert line_taken(agent, before, after, message_frame(8)) == "missing"
    assert line_records(pane) == []


@pytest.mark.parametrize("agent", ["claude", "codex"])
def test_text_kept_but_enter_lost_while_starting(tmux_harness: TmuxHarness, agent: str) -> None:
    h = tmux_harness
    pane = spawn(h, agent, "start=1.5")
    typed(h, pane, line(9))
    retry_until(lambda: kinds(pane, "enter-lost"))
    after = wait_state(h, agent, pane, "ready")
    assert composer_text(agent, after) == line(9)  # leftovers the gate must clear first
    assert line_records(pane) == []


@pytest.mark.parametrize(("agent", "escapes"), [("claude", 1), ("codex", 1), ("opencode", 2)])
def test_escape_interrupts_a_working_turn(
    tmux_harness: TmuxHarness, agent: str, escapes: int
) -> None:
    h = tmux_harness
    pane = spawn(h, agent, "work=60")
    wait_state(h, agent, pane, "ready")
    typed(h, pane, line(10))
    wait_state(h, agent, pane, "working")
    if escapes == 2:
        h.tmux("send-keys", "-t", pane, "Escape")
        wait_screen(h, pane, "esc again to interrupt")
        assert classify(agent, capture(h, pane)) == "working"
        assert kinds(pane, "interrupted") == []
    h.tmux("send-keys", "-t", pane, "Escape")
    after = wait_state(h, agent, pane, "ready")
    assert len(kinds(pane, "interrupted")) == 1
    if agent == "claude":  # Claude puts the interrupted prompt back into its composer
        assert composer_text(agent, after) == line(10)


@pytest.mark.parametrize("agent", AGENTS)
def test_line_submitted_while_working_is_queued(tmux_harness: TmuxHarness, agent: str) -> None:
    h = tmux_harness
    pane = spawn(h, agent, "work=60")
    wait_state(h, agent, pane, "ready")
    typed(h, pane, line(11))
    before = wait_state(h, agent, pane, "working")
    typed(h, pane, line(12))
    retry_until(lambda: len(line_records(pane)) == 2)
    after = capture(h, pane)
    assert classify(agent, after) == "working"
    assert line_taken(agent, before, after, message_frame(12)) == "submitted"
    assert [(r["text"], r["queued"]) for r in line_records(pane)] == [
        (line(11), False),
        (line(12), True),
    ]


def test_escape_prefix_eats_the_frame(tmux_harness: TmuxHarness) -> None:
    """ESC then "[c..." is parsed as a CSI sequence, as a real TUI does: "[c" is lost and the
    frame with it, so line_taken sees the line as missing."""
    h = tmux_harness
    pane = spawn(h, "opencode", "work=60")
    before = wait_state(h, "opencode", pane, "ready")
    typed(h, pane, "\x1b" + line(13))
    retry_until(lambda: line_records(pane))
    assert line_records(pane)[0]["text"].startswith("afleet msg 13 from")
    after = capture(h, pane)
    assert line_taken("opencode", before, after, message_frame(13)) == "missing"


def test_plain_mode_is_unchanged(tmux_harness: TmuxHarness) -> None:
    """Without the opt-in the fake prints its plain prompt and logs every CR-ended line."""
    h = tmux_harness
    pane = h.spawn_fake("claude")
    wait_screen(h, pane, "fake-claude ready")
    typed(h, pane, "\x1bplain")
    retry_until(lambda: line_records(pane))
    assert line_records(pane)[0]["text"] == "\x1bplain"
    assert kinds(pane, "screen") == []
