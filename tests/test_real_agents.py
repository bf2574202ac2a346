"""The real agents in a private tmux server: a typed line arrives exactly once, intact.

One test per agent (kept few: each costs seconds of CPU; Codex's runs by default, the others
with `--agent-matrix`). The agent is spawned with a private
HOME (tests/harness/real_agents.py), the classifier waits for ``ready``, a notification line is
typed with ``tmux send-keys -l`` and submitted with Enter (never Escape), verified with
`line_taken` the way the delivery gate will (Enter again while it is still in the composer,
bounded), and the agent's own record of received messages is the proof. A second line is then
submitted while the agent works (no Escape): recorded once, and no interruption recorded.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

import pytest

from cafleet.delivery.screens import classify, composer_text, line_taken, message_frame
from tests.harness.mock_api import mock_anthropic
from tests.harness.real_agents import RealAgent, agent_cases, pids_of
from tests.harness.scripted_model import Action, Conversation, scripted_model, shell
from tests.harness.util import retry_until

pytestmark = pytest.mark.real_agent

SETTLE = 1.0  # cafleet's SUBMIT_SETTLE; Claude merges an Enter sent 0-0.1 s after the text


def notification(n: int, body: str) -> str:
    return f"[cafleet msg {n} from Director (1)] {body} \u2014 ack with: cafleet message ack {n}"


def submit_verified(a: RealAgent, text: str, n: int, tries: int = 3) -> str:
    """Type ``text``, Enter after SETTLE, then judge captures with `line_taken` until it says
    ``submitted`` (up to 30 s: opencode redraws seconds late under load). Enter again only when
    the line has sat in the composer for 3 s (a swallowed Enter, not a slow redraw); at most
    ``tries`` Enters in all. Returns the last verdict."""
    before = a.capture()
    a.type_text(text)
    time.sleep(SETTLE)  # the settle cafleet itself waits: not a wait for an outcome
    a.keys("Enter")
    enters, held_since, verdict = 1, None, "missing"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        verdict = line_taken(a.agent, before, a.capture(), message_frame(n))
        if verdict == "submitted":
            return verdict
        now = time.monotonic()
        if verdict != "in_composer":
            held_since = None
        elif held_since is None:
            held_since = now
        elif now - held_since >= 3 and enters < tries:
            a.keys("Enter")
            enters, held_since = enters + 1, None
        time.sleep(0.2)
    return verdict


def received_count(a: RealAgent, text: str, want: int, timeout: float = 60) -> list[str]:
    """Poll the agent's own record until ``text`` is in it ``want`` times; return the record."""
    state: dict[str, list[str]] = {"got": []}

    def enough() -> bool:
        state["got"] = a.received()
        return state["got"].count(text) >= want

    retry_until(enough, timeout=timeout, interval=1.0, message=lambda: f"record: {state['got']}")
    return state["got"]


@pytest.mark.parametrize("agent", agent_cases("codex"))
def test_typed_line_arrives_once_intact_and_queues_while_working(real_agent, agent: str) -> None:
    with contextlib.ExitStack() as stack:
        kwargs: dict[str, Any] = {}
        if agent == "opencode":
            # opencode gives up on an unreachable API within seconds; a stalling local one
            # keeps its turn running (Claude and Codex retry the dead URL for minutes).
            url = stack.enter_context(mock_anthropic("stall"))
            kwargs["opencode_config"] = {
                "provider": {"anthropic": {"options": {"baseURL": url + "/v1"}}}
            }
        if agent == "gemini":
            # Gemini records a line when its model request goes out, and keeps a line queued
            # while it works in memory until its turn: a model that answers each line with a
            # slow command keeps turns running, and ending.
            model = stack.enter_context(scripted_model(slow_turns))
            kwargs.update(model_url=model.base_url("gemini"), args=["--approval-mode", "yolo"])
        check_agent(real_agent(agent, **kwargs))


def slow_turns(conv: Conversation, cwd: str) -> Action | None:
    """Each user line's turn runs `sleep 8` first, then the scripted model ends it."""
    return shell("sleep 8") if not conv.calls else None


def check_agent(a: RealAgent) -> None:
    agent = a.agent
    a.wait_state("ready", timeout=240)
    assert composer_text(agent, a.capture()) == ""

    first = notification(12, f"hello {agent}, one line")
    assert submit_verified(a, first, 12) == "submitted"
    got = received_count(a, first, 1)
    assert got.count(first) == 1, got
    assert [t for t in got if message_frame(12) in t] == [first]  # intact, its own message

    # Offline every agent keeps working on that line (API retries): a line now must be taken
    # without any Escape, queued or steered in, and interrupt nothing.
    a.wait_state("working", timeout=60)
    second = notification(13, "sent while you work")
    assert submit_verified(a, second, 13) == "submitted"
    got = received_count(a, second, 1)
    assert got.count(first) == 1 and got.count(second) == 1, got
    assert a.interruptions() == 0
    assert classify(agent, a.capture()) == "working"

    if agent == "codex":
        # The TUI's app-server daemon outlives it: stop() must find it and kill it by pid.
        daemons = [p for p in pids_of(a.root) if b"app-server" in _cmdline(p)]
        assert daemons, "codex started no app-server daemon"
    a.stop()
    assert pids_of(a.root) == []


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read()
    except OSError:
        return b""
