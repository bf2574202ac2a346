"""Measure the facts docs/agent-screens.md records about the real agents, on this machine.

    python -m tests.harness.agent_facts [claude] [codex] [opencode] [--trials N] [--only NAME...]

Each experiment spawns the real agent in a private tmux server (tests/harness/real_agents.py),
drives it with ``tmux send-keys`` only (never Escape unless the experiment is about Escape) and
reads the agent's own record of received messages. Prints one JSON object per experiment
result, then a summary. CPU-heavy: one agent at a time.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from cafleet.delivery.screens import classify, composer_text, line_taken, message_frame
from tests.harness.fixtures import TmuxHarness, private_tmux
from tests.harness.mock_api import mock_anthropic
from tests.harness.real_agents import AGENTS, RealAgent, installed_version

RESULTS: list[dict[str, Any]] = []


def emit(agent: str, experiment: str, **data: Any) -> None:
    row = {"agent": agent, "experiment": experiment, **data}
    RESULTS.append(row)
    print(json.dumps(row, ensure_ascii=False), flush=True)


def line(n: int, body: str = "hello") -> str:
    return f"[cafleet msg {n} from Director (1)] {body} \u2014 ack with: cafleet message ack {n}"


@contextmanager
def spawned(h: TmuxHarness, agent: str, name: str) -> Iterator[RealAgent]:
    """The agent; opencode talks to a stalling local API (tests/harness/mock_api.py), since
    it gives up on an unreachable one within seconds and so would not stay working."""
    with contextlib.ExitStack() as stack:
        kwargs: dict[str, Any] = {}
        if agent == "opencode":
            url = stack.enter_context(mock_anthropic("stall"))
            kwargs["opencode_config"] = {
                "provider": {"anthropic": {"options": {"baseURL": url + "/v1"}}}
            }
        a = RealAgent(h, agent, name=name, **kwargs)
        try:
            yield a.start()
        finally:
            a.stop()


def judge(a: RealAgent, before: str, n: int, timeout: float = 20) -> tuple[str, float]:
    """Poll `line_taken` until it says submitted (opencode redraws late); the last verdict and
    the seconds it took."""
    start = time.monotonic()
    verdict = "missing"
    while time.monotonic() - start < timeout:
        verdict = line_taken(a.agent, before, a.capture(), message_frame(n))
        if verdict == "submitted":
            break
        time.sleep(0.2)
    return verdict, round(time.monotonic() - start, 1)


def wait_ready(a: RealAgent, timeout: float = 180) -> float:
    """Seconds from spawn until the classifier first says ready."""
    a.wait_state("ready", timeout=timeout)
    return time.monotonic() - a.spawned_at


def settle_records(a: RealAgent, seconds: float = 2.0) -> list[str]:
    time.sleep(seconds)  # the record is written asynchronously; give it a moment
    return a.received()


def count(texts: list[str], text: str) -> int:
    return sum(t == text for t in texts)


# --------------------------------------------------------------------------- experiments


def startup(h: TmuxHarness, agent: str, trials: int) -> None:
    """Spawn-to-ready, and a line typed (with Enter) at fixed times during start-up."""
    offsets = {"claude": (0.0, 0.5, 1.5), "codex": (0.0, 0.5, 1.5), "opencode": (0.0, 2.0, 8.0)}[
        agent
    ]
    for trial in range(trials):
        for k, offset in enumerate(offsets):
            n = 100 + trial * 10 + k
            with spawned(h, agent, f"{agent}-start-{trial}-{k}") as a:
                time.sleep(offset)
                state_at_type = classify(agent, a.capture())
                a.submit(line(n, f"typed {offset}s after spawn"))
                # A late-honoured Enter leaves the agent working on the line, never ready.
                a.wait_state("ready", "working", timeout=180)
                ready_s = time.monotonic() - a.spawned_at
                time.sleep(3)
                screen = a.capture()
                got = settle_records(a)
                emit(agent, "typed-while-starting", offset_s=offset, state_when_typed=state_at_type,
                     state_after=classify(agent, screen),
                     ready_s=round(ready_s, 1), received=count(got, line(n, f"typed {offset}s after spawn")),
                     on_screen=message_frame(n) in screen,
                     composer=composer_text(agent, screen), records=len(got))  # fmt: skip


def codex_loading(h: TmuxHarness, agent: str, trials: int) -> None:
    """Codex draws its composer while its header still says 'loading': is that input live?"""
    for trial in range(trials):
        n = 200 + trial
        with spawned(h, agent, f"codex-loading-{trial}") as a:
            text = a.wait_screen(r"› Ask Codex to do anything", timeout=120)
            loading = "loading" in text
            a.submit(line(n, "typed at the first composer"))
            wait_ready(a)
            time.sleep(3)
            screen = a.capture()
            got = settle_records(a)
            emit(agent, "typed-at-first-composer", header_loading=loading,
                 received=count(got, line(n, "typed at the first composer")),
                 on_screen=message_frame(n) in screen, composer=composer_text(agent, screen))  # fmt: skip


def enter(h: TmuxHarness, agent: str, trials: int) -> None:
    """Fresh spawn per trial: a line typed at ready (at once, or 2 s later), Enter after a
    settle of 0 s (same tmux call), 0.1 s or 1.0 s (cafleet's SUBMIT_SETTLE). Is the first
    Enter taken?"""
    n = 400
    for delay in (0.0, 2.0):
        for settle in (0.0, 0.1, 1.0):
            for _ in range(trials):
                n += 1
                with spawned(h, agent, f"{agent}-enter-{n}") as a:
                    ready_s = wait_ready(a)
                    time.sleep(delay)
                    before = a.capture()
                    text = line(n)
                    if settle:
                        a.type_text(text)
                        time.sleep(settle)
                        a.keys("Enter")
                    else:
                        a.harness.tmux("send-keys", "-t", a.pane, "-l", "--", text, ";",
                                       "send-keys", "-t", a.pane, "Enter")  # fmt: skip
                    time.sleep(1.5)
                    after = a.capture()
                    first = line_taken(agent, before, after, message_frame(n))
                    extra = 0
                    verdict = first
                    while verdict == "in_composer" and extra < 3:
                        extra += 1
                        a.keys("Enter")
                        time.sleep(1.0)
                        verdict = line_taken(agent, before, a.capture(), message_frame(n))
                    got = settle_records(a, 1.5)
                    emit(agent, "enter-at-ready", ready_s=round(ready_s, 1), delay_s=delay,
                         settle_s=settle, first_verdict=first, extra_enters=extra,
                         verdict=verdict, received=count(got, text))  # fmt: skip


def working(h: TmuxHarness, agent: str, trials: int) -> None:
    """One spawn: submit, then behaviour while working and on a ready composer."""
    with spawned(h, agent, f"{agent}-working") as a:
        emit(agent, "spawn-to-ready", seconds=round(wait_ready(a), 1))
        n = 300
        a.submit(line(n), settle=1.0)
        a.wait_state("working", timeout=30)
        got = settle_records(a, 1.0)
        emit(agent, "first-submit", received=count(got, line(n)))

        # While working: submit without any Escape; is it queued, recorded once, no interrupt?
        a.wait_state("working", timeout=30)
        interrupts = a.interruptions()
        n += 1
        before = a.capture()
        a.submit(line(n, "sent while working"), settle=1.0)
        verdict, took = judge(a, before, n)
        after = a.capture()
        got = settle_records(a)
        emit(agent, "submit-while-working", verdict=verdict, verdict_after_s=took,
             state_after=classify(agent, after), received=count(got, line(n, "sent while working")),
             new_interruptions=a.interruptions() - interrupts)  # fmt: skip

        # Clearing leftovers while working with Ctrl-U: still working, nothing submitted?
        a.type_text("leftover while working")
        a.wait_screen(r"leftover while working", timeout=10)
        presses = 0
        while composer_text(agent, a.capture()) not in ("", None) and presses < 6:
            a.keys("C-u")
            presses += 1
            time.sleep(0.5)
        screen = a.capture()
        got = settle_records(a)
        emit(agent, "ctrl-u-while-working", presses=presses, composer=composer_text(agent, screen),
             state=classify(agent, screen), submitted=any("leftover" in t for t in got),
             new_interruptions=a.interruptions() - interrupts)  # fmt: skip

        # One Escape while working: interrupted?
        a.wait_state("working", timeout=30)
        before_int = a.interruptions()
        a.keys("Escape")
        time.sleep(2.0)
        screen = a.capture()
        emit(agent, "one-escape-while-working", state=classify(agent, screen),
             new_interruptions=a.interruptions() - before_int)  # fmt: skip
        if classify(agent, screen) == "working":
            a.keys("Escape")
            time.sleep(0.2)
            a.keys("Escape")
            time.sleep(2.0)
            screen = a.capture()
            emit(agent, "two-escapes-while-working", state=classify(agent, screen),
                 new_interruptions=a.interruptions() - before_int)  # fmt: skip

        # Clearing leftovers on a ready composer: Ctrl-U (multi-row text).
        a.wait_state("ready", timeout=120)
        for _ in range(6):
            if composer_text(agent, a.capture()) == "":
                break
            a.keys("C-u")
            time.sleep(0.4)
        draft = "leftover " + " ".join(f"w{i}" for i in range(70)) + " end"
        a.type_text(draft)
        a.wait_screen(r"w69 end", timeout=10)
        presses = 0
        while composer_text(agent, a.capture()) not in ("", None) and presses < 8:
            a.keys("C-u")
            presses += 1
            time.sleep(0.5)
        screen = a.capture()
        got = settle_records(a, 1.0)
        emit(agent, "ctrl-u-on-ready", chars=len(draft), presses=presses,
             composer=composer_text(agent, screen), state=classify(agent, screen),
             submitted=any(t.startswith("leftover") for t in got))  # fmt: skip

        # Escape on a ready composer holding text: cleared? submitted? (and twice)
        a.type_text("esc leftover")
        a.wait_screen(r"esc leftover", timeout=10)
        a.keys("Escape")
        time.sleep(1.0)
        one = composer_text(agent, a.capture())
        a.keys("Escape")
        time.sleep(1.0)
        screen = a.capture()
        emit(agent, "escape-on-ready-composer", after_one=one, after_two=composer_text(agent, screen),
             state=classify(agent, screen))  # fmt: skip
        for _ in range(3):
            a.keys("Escape")
            time.sleep(0.5)
            if classify(agent, a.capture()) == "ready":
                break
        for _ in range(6):
            if composer_text(agent, a.capture()) == "":
                break
            a.keys("C-u")
            time.sleep(0.4)

        # Long bursts (Claude folds pastes): which sizes arrive intact with one Enter?
        for size in (300, 600, 800, 1000, 1400):
            a.wait_state("ready", "working", timeout=60)
            n += 1
            body = ("x" * 7 + " ") * ((size - 80) // 8)
            text = line(n, body)
            before = a.capture()
            a.harness.tmux("send-keys", "-t", a.pane, "-l", "--", text, ";",
                           "send-keys", "-t", a.pane, "Enter")  # fmt: skip
            time.sleep(1.5)
            after = a.capture()
            verdict = line_taken(agent, before, after, message_frame(n))
            held = composer_text(agent, after)
            if verdict == "in_composer":
                a.keys("Enter")
                time.sleep(1.5)
            got = settle_records(a, 1.0)
            emit(agent, "burst-with-enter", chars=len(text), first_verdict=verdict,
                 composer_after_first_enter=held, received_intact=count(got, text),
                 received_any=sum(message_frame(n) in t for t in got))  # fmt: skip


EXPERIMENTS = {
    "startup": startup,
    "codex-loading": codex_loading,
    "enter": enter,
    "working": working,
}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("agents", nargs="*", default=list(AGENTS))
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--only", nargs="*", default=list(EXPERIMENTS))
    args = parser.parse_args(argv)
    for agent in args.agents:
        print(f"# {agent} {installed_version(agent)}", flush=True)
        for name in args.only:
            if name == "codex-loading" and agent != "codex":
                continue
            with pytest.MonkeyPatch.context() as mp, private_tmux(mp) as h:
                EXPERIMENTS[name](h, agent, args.trials)
    for agent in args.agents:
        mine = [r for r in RESULTS if r["agent"] == agent]
        ready = [r["seconds"] for r in mine if r["experiment"] == "spawn-to-ready"]
        ready += [r["ready_s"] for r in mine if r["experiment"] == "typed-while-starting"]
        if ready:
            print(f"# {agent} spawn-to-ready: n={len(ready)} median "
                  f"{statistics.median(ready):.1f} s, min {min(ready):.1f} s, max {max(ready):.1f} s")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
