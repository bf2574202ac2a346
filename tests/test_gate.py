"""The delivery gate (cafleet.delivery.gate) on the real agents' captured screens, and the verified submit
(cafleet.delivery.submit) against a scripted multiplexer whose screens are real captures (unit: no tmux).

The scripted multiplexer records every key and text it is sent and answers `screen()` from a
list of captures, so each branch (clear, Enter again, dropped line, capture failing, pane gone)
is driven exactly, with an injected clock instead of sleeps.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cafleet.agents.registry import agent_names, load_agent
from cafleet.delivery.gate import decide, hold_note, holds
from cafleet.delivery.policy import ENTER_AGAIN_AFTER, MAX_ENTERS, VERIFY_TIMEOUT
from cafleet.delivery.screens import message_frame
from cafleet.delivery.submit import (
    Clock,
    clear_composer,
    frame_of,
    submit_verified,
    taken,
)
from cafleet.mux import MuxCommandFailed, PaneGone

POLICIES = {name: load_agent(name).policy for name in agent_names()}
TABLES = {name: load_agent(name).screens for name in agent_names()}

DATA = Path(__file__).resolve().parent / "data" / "screens"
INDEX: dict[str, dict[str, Any]] = json.loads((DATA / "index.json").read_text(encoding="utf-8"))


def screen(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


# --------------------------------------------------------------------------- the gate


@pytest.mark.parametrize("name", sorted(INDEX))
def test_each_real_screen_gets_its_states_verdict(name: str) -> None:
    agent, state = name.split("/", 1)[0], INDEX[name]["state"]
    spawned = INDEX[name].get("spawned", False)
    d = decide(agent, screen(name), waited=0, hold_timeout=300, spawned=spawned)
    assert d.state == state
    expected = "hold" if holds(agent, state) else "type"
    assert expected == ("hold" if state in ("starting", "awaiting_user") or (agent, state) == (
        "gemini", "working") else "type")  # fmt: skip
    assert (d.action, d.note) == (expected, None)


def test_every_agent_types_while_working_and_nothing_holds_ready_or_unknown() -> None:
    # docs/runtime.md §4.9: each agent queues (or steers in) a line submitted while it works,
    # but Gemini CLI, which once kept a queued line in its composer, never sending it.
    assert {a: p.while_working for a, p in POLICIES.items()} == {
        "claude": "type",
        "codex": "type",
        "opencode": "type",
        "gemini": "hold",
    }
    assert set(POLICIES) == set(TABLES)
    for agent in (*TABLES, "aider", None):
        assert not holds(agent, "ready") and not holds(agent, "unknown")
        assert holds(agent, "starting") and holds(agent, "awaiting_user")


def test_a_spawned_member_gets_nothing_before_its_agent_took_the_spawn_prompt() -> None:
    # opencode's home screen with the spawn prompt still in its composer: a Director's pane
    # there is ready (and its composer would be cleared); a spawned member's is held.
    home = screen("opencode/home-spawn-prompt-1.txt")
    assert decide("opencode", home, waited=0, hold_timeout=300).action == "type"
    held = decide("opencode", home, waited=0, hold_timeout=300, spawned=True)
    assert (held.action, held.state) == ("hold", "starting")
    late = decide("opencode", home, waited=301, hold_timeout=300, spawned=True)
    assert late.action == "type" and late.note == hold_note(301, "starting")


def test_a_screen_without_cues_is_unknown_and_typed() -> None:
    shell = "user@host:~$ ls\nfile.txt\nuser@host:~$ "
    assert decide("claude", shell, waited=0, hold_timeout=300).action == "type"
    assert decide(None, "", waited=0, hold_timeout=300).state == "unknown"
    assert decide("aider", "> ", waited=0, hold_timeout=300).state == "unknown"


def test_hold_timeout() -> None:
    starting = screen("opencode/starting-1.txt")
    prompt = screen("claude/dialog-api-key-1.txt")
    # Not yet: held.
    assert decide("opencode", starting, waited=299.9, hold_timeout=300).action == "hold"
    # Ran out: typed with a note; a prompt is dismissed first, once.
    late = decide("opencode", starting, waited=301.5, hold_timeout=300)
    assert (late.action, late.note) == ("type", hold_note(301.5, "starting"))
    assert late.note == " [cafleet: held 301 s while the pane was starting]"
    assert decide("claude", prompt, waited=400, hold_timeout=300).action == "dismiss"
    again = decide("claude", prompt, waited=400, hold_timeout=300, dismissed=True)
    assert again.action == "hold"
    # 0 = never hold: typed at once, no note (nothing was held).
    never = decide("opencode", starting, waited=0, hold_timeout=0)
    assert (never.action, never.note) == ("type", None)
    # An agent without a dismiss key never gets a prompt dismissed.
    assert decide(None, "", waited=400, hold_timeout=300).action == "type"


# --------------------------------------------------------------------------- scripted multiplexer


class Scripted:
    """A multiplexer whose screen() answers come from ``screens`` (the last one repeats);
    ``on_key`` may switch the screens when a key is pressed."""

    socket_path = None

    def __init__(self, screens: list[str], on_key: Callable[[str], None] | None = None) -> None:
        self.screens = list(screens)
        self.sent: list[tuple[str, str]] = []
        self.captures = 0
        self.on_key = on_key

    def screen(self, pane_id: str) -> str:
        self.captures += 1
        item: Any = self.screens.pop(0) if len(self.screens) > 1 else self.screens[0]
        if isinstance(item, Exception):
            raise item
        return str(item)

    def send_key(self, pane_id: str, key: str) -> None:
        self.sent.append(("key", key))
        if self.on_key is not None:
            self.on_key(key)

    def type_line(self, pane_id: str, line: str, **_typing: object) -> None:
        self.sent.append(("line", line))
        self.sent.append(("key", "Enter"))


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0
        self.slept: list[float] = []

    def sleep(self, s: float) -> None:
        self.slept.append(s)
        self.t += s

    def clock(self) -> Clock:
        return Clock(sleep=self.sleep, now=lambda: self.t)


LINE12 = "[cafleet msg 12 from Director (1)] hello — ack with: cafleet message ack 12"


def test_a_submitted_line_is_verified_at_the_first_capture_showing_it() -> None:
    # claude/working-1.txt is Claude right after msg 12 was submitted (it shows in the
    # transcript); ready-1.txt is the empty composer before it.
    mux = Scripted([screen("claude/working-1.txt")])
    t = FakeClock()
    before = screen("claude/ready-1.txt")
    problem = submit_verified(mux, "%1", "claude", LINE12, message_frame(12), before, t.clock())
    assert problem is None
    assert mux.sent == [("line", LINE12), ("key", "Enter")]
    assert mux.captures == 1


def test_a_line_left_in_the_composer_gets_enter_again_then_is_verified() -> None:
    held = screen("claude/composer-3.txt")  # msg 15 wrapped in the composer
    done = screen("claude/working-3.txt")  # msg 15 taken (narrow pane, working)
    assert INDEX["claude/working-3.txt"]["frames"] == ["[cafleet msg 15 from Director (1)]"]
    t = FakeClock()
    mux = Scripted([held])

    def on_key(key: str) -> None:
        if key == "Enter" and len([s for s in mux.sent if s == ("key", "Enter")]) == 2:
            mux.screens = [done]

    mux.on_key = on_key
    before = screen("claude/ready-1.txt")
    assert submit_verified(mux, "%1", "claude", "x", message_frame(15), before, t.clock()) is None
    assert mux.sent == [("line", "x"), ("key", "Enter"), ("key", "Enter")]
    assert t.t >= ENTER_AGAIN_AFTER  # Enter again only after giving the first one its time
    assert POLICIES["claude"].enter_again_after == ENTER_AGAIN_AFTER


def test_opencode_gets_its_second_enter_after_one_second() -> None:
    """opencode loses the first Enter at a freshly drawn screen and ignores an Enter on its
    empty composer: its re-Enter wait is 1 s (the verified send was 3.1 s with 3 s)."""
    held = screen("opencode/working-composer-1.txt")  # msg 13 typed, still in the composer
    done = screen("opencode/queued-1.txt")  # msg 13 listed QUEUED
    t = FakeClock()
    mux = Scripted([held])
    enters_at: list[float] = []

    def on_key(key: str) -> None:
        if key == "Enter":
            enters_at.append(t.t)
            mux.screens = [done]

    mux.on_key = on_key
    before = screen("opencode/working-1.txt")
    assert submit_verified(mux, "%1", "opencode", "x", message_frame(13), before, t.clock()) is None
    assert [s for s in mux.sent if s[0] == "key"] == [("key", "Enter")] * 2
    assert POLICIES["opencode"].enter_again_after == 1.0
    assert len(enters_at) == 1 and 1.0 <= enters_at[0] < 1.0 + 0.2  # the second Enter, at 1 s


def test_enter_is_pressed_at_most_three_times_then_not_verified() -> None:
    held = screen("codex/composer-3.txt")
    t = FakeClock()
    mux = Scripted([held])
    before = screen("codex/ready-1.txt")
    problem = submit_verified(mux, "%1", "codex", "x", message_frame(15), before, t.clock())
    assert problem == "the line is still in the composer after 3 Enter"
    assert [s for s in mux.sent if s == ("key", "Enter")] == [("key", "Enter")] * MAX_ENTERS
    assert t.t >= VERIFY_TIMEOUT


def test_a_line_that_never_shows_is_not_verified_and_enter_is_not_repeated() -> None:
    ready = screen("opencode/ready-1.txt")
    t = FakeClock()
    mux = Scripted([ready])
    problem = submit_verified(mux, "%1", "opencode", "x", message_frame(99), ready, t.clock())
    assert problem == "the line is not on the screen after Enter (dropped or garbled)"
    assert mux.sent == [("line", "x"), ("key", "Enter")]
    assert VERIFY_TIMEOUT <= t.t < VERIFY_TIMEOUT + 1


def test_a_garbled_frame_is_not_verified() -> None:
    # The `[c` loss: the line arrived without its first two characters.
    garbled = screen("claude/working-1.txt").replace("[cafleet msg 12", "afleet msg 12")
    mux = Scripted([garbled])
    before = screen("claude/ready-1.txt")
    problem = submit_verified(
        mux, "%1", "claude", LINE12, message_frame(12), before, FakeClock().clock()
    )
    assert problem is not None and "not on the screen" in problem


@pytest.mark.parametrize(
    ("error", "problem"),
    [
        (PaneGone("%1"), "the pane closed before the line showed"),
        (
            MuxCommandFailed("capture-pane", "boom"),
            "capture failed: tmux capture-pane failed: boom",
        ),
    ],
)
def test_a_capture_failing_after_enter_is_a_verification_problem(
    error: Exception, problem: str
) -> None:
    mux = Scripted([error])  # type: ignore[list-item]
    before = screen("claude/ready-1.txt")
    t = FakeClock()
    assert submit_verified(mux, "%1", "claude", "x", "x", before, t.clock()) == problem


def test_without_cues_the_frame_count_decides() -> None:
    before = "$ \n"
    assert taken(None, before, "$ hello there\nhello: not found\n$ ", "hello there") == (
        "submitted"
    )
    assert taken("aider", "> hello there", "> hello there", "hello there") == "missing"
    assert frame_of("x" * 100) == "x" * 48


# --------------------------------------------------------------------------- clearing


def test_a_leftover_is_cleared_with_the_agents_key_until_the_composer_is_empty() -> None:
    wrapped = screen("claude/composer-2.txt")  # three rows of a draft
    partial = screen("claude/composer-ctrl-u-1.txt")  # one Ctrl-U deleted only the last row
    empty = screen("claude/ready-1.txt")
    mux = Scripted([partial, partial, empty])
    t = FakeClock()
    last, problem = clear_composer(mux, "%1", "claude", wrapped, t.clock())
    assert problem is None and last == empty
    assert mux.sent == [("key", "C-u")] * 3
    assert "Escape" not in {k for _, k in mux.sent}


def test_an_empty_or_absent_composer_is_left_alone() -> None:
    for agent, name in [
        ("claude", "claude/ready-1.txt"),
        ("codex", "codex/queued-1.txt"),  # working, composer shows the placeholder
        ("opencode", "opencode/menu-1.txt"),  # no composer drawn
        (None, "claude/composer-1.txt"),  # no cues: not touched
    ]:
        mux = Scripted([screen(name)])
        last, problem = clear_composer(mux, "%1", agent, screen(name), FakeClock().clock())
        assert (last, problem, mux.sent) == (screen(name), None, []), name


def test_a_composer_that_will_not_clear_fails_after_the_bound() -> None:
    stuck = screen("opencode/composer-1.txt")
    mux = Scripted([stuck])
    last, problem = clear_composer(mux, "%1", "opencode", stuck, FakeClock().clock())
    bound = POLICIES["opencode"].max_clears
    assert problem == f"the composer still holds text after {bound} C-u"
    assert mux.sent == [("key", "C-u")] * bound


def test_a_line_waits_from_the_later_of_its_send_and_its_pane() -> None:
    """The hold timeout of a notification (docs/runtime.md §4.9): a member respawned onto a new
    pane (its placement's `created_at` renewed) is starting again and gets a hold of its own."""
    from datetime import timedelta

    from cafleet.db.timefmt import format_ts, utcnow
    from cafleet.delivery.drains import _waited

    now = utcnow()
    sent, respawned = format_ts(now - timedelta(seconds=600)), format_ts(now - timedelta(seconds=5))
    assert 600 <= _waited(sent) < 900
    assert 600 <= _waited(sent, None) < 900
    assert 5 <= _waited(sent, respawned) < 300
    assert 5 <= _waited(respawned, sent) < 300
    assert _waited("not a time", "neither") == 0.0
