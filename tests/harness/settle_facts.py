"""Measure the shortest gap between a line's text and its Enter that each real agent takes every
time (docs/agent-screens.md §6, "The settle"), typed with ``send-keys -l`` or pasted with a
bracketed paste (``set-buffer`` + ``paste-buffer -p``).

    python -m tests.harness.settle_facts [claude] [codex] [opencode] [--trials N]
        [--gaps 0 0.1 0.2 0.3 0.5] [--paste-gaps 0 0.1 0.2] [--working-gaps 0.1 0.2 0.3 0.5]
        [--working-paste-gaps 0 0.1] [--out FILE]

One agent at a time, one spawn per agent and state, in a private tmux server
(tests/harness/real_agents.py). ``ready`` trials type each line the moment the classifier says
``ready`` (right after the previous turn ended: the case where an early Enter is most often
folded into a paste); Claude Code answers every prompt at once from the local stand-in API (tests/harness/mock_api.py, ``text``); Codex (offline) and opencode (the stalling stand-in) are
interrupted back to ready with Escape.
``working`` trials type into an agent that is working (the stalling stand-in API; Codex offline
reconnects for minutes). Gaps are tried round-robin, so a drift of the machine's load touches
every gap alike.

A trial's first Enter counts as *taken* when `line_taken` says ``submitted`` within 6 s of it; a
line still in the composer then gets more Enters (so the next trial starts empty). At the end the
agent's own record is read: a line counts as *received* when it is there exactly once. Prints one
JSON object per trial and a summary per (mode, state, gap); ``--out`` also writes them all.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from cafleet.delivery.screens import classify, composer_text, line_taken, message_frame
from tests.harness.fixtures import TmuxHarness, private_tmux
from tests.harness.mock_api import mock_anthropic
from tests.harness.real_agents import AGENTS, RealAgent, installed_version

JUDGE_SECONDS = 6.0
ROWS: list[dict[str, Any]] = []


def line(n: int, note: str) -> str:
    return (
        f"[cafleet msg {n} from Director (1)] settle trial {note} "
        f"\u2014 ack with: cafleet message ack {n}"
    )


@contextmanager
def agent_in(h: TmuxHarness, agent: str, state: str) -> Iterator[RealAgent]:
    """The agent, wired so it can be held in ``state`` (see the module doc)."""
    with contextlib.ExitStack() as stack:
        kwargs: dict[str, Any] = {}
        if agent != "codex":
            # opencode does not end its turn on the stand-in's text reply: it is interrupted
            # back to ready, like Codex.
            mode = "text" if state == "ready" and agent == "claude" else "stall"
            url = stack.enter_context(mock_anthropic(mode))
            if agent == "claude":
                kwargs["extra_env"] = {"ANTHROPIC_BASE_URL": url}
            else:
                kwargs["opencode_config"] = {
                    "provider": {"anthropic": {"options": {"baseURL": url + "/v1"}}}
                }
        a = RealAgent(h, agent, name=f"{agent}-settle-{state}", **kwargs)
        try:
            yield a.start()
        finally:
            a.stop()


def send(a: RealAgent, text: str, gap: float, paste: bool) -> None:
    """The text, ``gap`` seconds, Enter; gap 0 is one tmux call (no gap at all)."""
    assert a.pane is not None
    if paste:
        typed = ["set-buffer", "-b", "settle", "--", text, ";"]
        typed += ["paste-buffer", "-p", "-d", "-b", "settle", "-t", a.pane]
    else:
        typed = ["send-keys", "-t", a.pane, "-l", "--", text]
    if gap <= 0:
        a.harness.tmux(*typed, ";", "send-keys", "-t", a.pane, "Enter")
        return
    a.harness.tmux(*typed)
    time.sleep(gap)
    a.keys("Enter")


def judge(a: RealAgent, before: str, n: int, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    verdict = "missing"
    while time.monotonic() < deadline:
        verdict = line_taken(a.agent, before, a.capture(), message_frame(n))
        if verdict == "submitted":
            return verdict
        time.sleep(0.1)
    return verdict


def to_ready(a: RealAgent) -> None:
    """Back to a ready, empty composer after a trial."""
    if a.agent != "claude":
        # Offline Codex works (reconnects) on every line, opencode on the stalling stand-in:
        # Escape interrupts them (one press for Codex, two for opencode).
        with contextlib.suppress(AssertionError):
            a.wait_state("working", timeout=10)
        if classify(a.agent, a.capture()) == "working":
            a.keys("Escape")
            if a.agent == "opencode":
                time.sleep(0.3)
                a.keys("Escape")
    a.wait_state("ready", timeout=60)
    clear(a)


def clear(a: RealAgent) -> None:
    for _ in range(8):
        if not composer_text(a.agent, a.capture()):
            return
        a.keys("C-u")
        time.sleep(0.2)


def warm_up(a: RealAgent, state: str, n: int) -> None:
    """One line with a long settle and Enters until taken: opencode leaves its home screen, a
    working agent starts its (stalling) turn."""
    a.wait_state("ready", timeout=240)
    before = a.capture()
    a.submit(line(n, "warm-up"), settle=1.0)
    for _ in range(3):
        if judge(a, before, n, JUDGE_SECONDS) != "in_composer":
            break
        a.keys("Enter")
    if state == "working":
        a.wait_state("working", timeout=60)
    else:
        to_ready(a)


def run_state(
    h: TmuxHarness, agent: str, state: str, plan: list[tuple[str, float]], trials: int
) -> None:
    with agent_in(h, agent, state) as a:
        n = 9000
        warm_up(a, state, n)
        sent: list[tuple[int, str, str, float, str]] = []
        for trial in range(trials):
            for mode, gap in plan:
                n += 1
                if state == "ready":
                    to_ready(a)
                else:
                    clear(a)
                text = line(n, f"{mode} {gap}s #{trial}")
                before = a.capture()
                seen = classify(agent, before)
                send(a, text, gap, mode == "paste")
                first = judge(a, before, n, JUDGE_SECONDS)
                enters = 1
                verdict = first
                while verdict == "in_composer" and enters < 4:
                    a.keys("Enter")
                    enters += 1
                    verdict = judge(a, before, n, JUDGE_SECONDS)
                row = {"agent": agent, "state": state, "state_seen": seen, "mode": mode,
                       "gap": gap, "n": n, "first_enter": first, "enters": enters,
                       "verdict": verdict}  # fmt: skip
                ROWS.append(row)
                print(json.dumps(row), flush=True)
                sent.append((n, text, mode, gap, first))
        time.sleep(3.0)  # Codex writes its record up to 2 s late
        got = a.received()
        for n, text, _mode, _gap, _first in sent:
            for row in ROWS:
                if row["agent"] == agent and row["state"] == state and row["n"] == n:
                    row["received"] = sum(t == text for t in got)


def summary(version: dict[str, str | None]) -> list[dict[str, Any]]:
    groups: dict[tuple[str, str, str, float], list[dict[str, Any]]] = {}
    for row in ROWS:
        groups.setdefault((row["agent"], row["state"], row["mode"], row["gap"]), []).append(row)
    out = []
    for (agent, state, mode, gap), rows in sorted(groups.items()):
        out.append(
            {
                "agent": agent,
                "version": version.get(agent),
                "state": state,
                "mode": mode,
                "gap": gap,
                "trials": len(rows),
                "first_enter_taken": sum(r["first_enter"] == "submitted" for r in rows),
                "received_once": sum(r.get("received") == 1 for r in rows),
                "duplicated": sum((r.get("received") or 0) > 1 for r in rows),
            }
        )
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("agents", nargs="*", default=list(AGENTS))
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--gaps", type=float, nargs="*", default=[0, 0.1, 0.2, 0.3, 0.5])
    parser.add_argument("--paste-gaps", type=float, nargs="*", default=[0, 0.1, 0.2])
    parser.add_argument("--working-gaps", type=float, nargs="*", default=[0.1, 0.2, 0.3, 0.5])
    parser.add_argument("--working-paste-gaps", type=float, nargs="*", default=[0, 0.1])
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    versions = {agent: installed_version(agent) for agent in args.agents}
    for agent in args.agents:
        print(f"# {agent} {versions[agent]}", flush=True)
        ready = [("keys", g) for g in args.gaps] + [("paste", g) for g in args.paste_gaps]
        working = [("keys", g) for g in args.working_gaps]
        working += [("paste", g) for g in args.working_paste_gaps]
        for state, plan in (("ready", ready), ("working", working)):
            if not plan:
                continue
            with pytest.MonkeyPatch.context() as mp, private_tmux(mp) as h:
                run_state(h, agent, state, plan, args.trials)
            if args.out:
                Path(args.out).write_text(
                    json.dumps({"summary": summary(versions), "trials": ROWS}, indent=1) + "\n"
                )
    for row in summary(versions):
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
