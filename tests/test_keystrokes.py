"""The one typing path (cafleet.delivery.keys): lock → recheck → backend → pane status → gate →
type → verify → record → release, against a fake agent in a private tmux server. The plain fake
draws no agent screen (the gate's ``unknown``: typed, verified by its echo); the screen-mode
cases are in tests/test_gate_delivery.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from cafleet.delivery.keys import Target, TypeOutcome, type_into_pane
from tests.delivery_helpers import shorten_verification
from tests.harness import util

pytestmark = pytest.mark.tmux


def _key(h, pane: str):
    from cafleet.mux import PaneKey

    return PaneKey("tmux", h.session_name, pane)


PLAIN = Target(agent="claude")


def _typed_to(pane: str) -> list[list[str]]:
    """The send-keys calls that reached ``pane`` through the shim."""
    return [
        c["argv"]
        for c in util.shim_calls()
        if c.get("command") == "send-keys" and c.get("target") == pane
    ]


def test_a_typed_line_is_recorded_after_the_whole_line_with_the_lock_held(
    tmux_harness, tmp_path: Path
) -> None:
    """Breaks if the record step runs before the line reached the pane, or after the release."""
    from cafleet.mux.locks import try_pane_lock

    h = tmux_harness
    pane = h.spawn_fake()
    key = _key(h, pane)
    seen: list[tuple[list[bytes], bool]] = []

    def record() -> None:
        lines = [util.record_bytes(r) for r in util.wait_records(pane, 1, timeout=15)]
        other = try_pane_lock(str(tmp_path), key, purpose="probe")
        if other is not None:
            other.release()
        seen.append((lines, other is None))

    outcome = type_into_pane(
        key,
        lambda: "hello there",
        backend=h.backend,
        db_dir=str(tmp_path),
        purpose="test",
        lock_timeout=5,
        target=PLAIN,
        recheck=lambda: "pending",
        record=record,
    )
    assert outcome == TypeOutcome("typed", pane, state="unknown")
    assert outcome.typed and outcome.reason is None
    assert seen == [([b"hello there"], True)]  # no Escape before the line
    after = try_pane_lock(str(tmp_path), key, purpose="after")
    assert after is not None  # released once the attempt ended
    after.release()


def test_refusals_type_nothing_and_record_nothing(tmux_harness, tmp_path: Path) -> None:
    """Every outcome but "typed" leaves the pane and the record step alone, with its text."""
    from cafleet.mux import MultiplexerUnavailable

    h = tmux_harness
    pane = h.spawn_fake()
    key = _key(h, pane)
    recorded: list[str] = []
    built: list[str] = []

    def attempt(**kwargs) -> TypeOutcome:
        def line() -> str:
            built.append("line")
            return "never typed"

        base = {
            "backend": h.backend,
            "db_dir": str(tmp_path),
            "purpose": "test",
            "lock_timeout": 0.3,
            "target": PLAIN,
            "record": lambda: recorded.append("record"),
        }
        return type_into_pane(key, line, **{**base, **kwargs})

    stale = attempt(recheck=lambda: "stale")
    assert (stale.kind, stale.reason) == ("stale", None)
    changed = attempt(recheck=lambda: "changed")
    assert changed.reason == "placement changed during delivery"

    def unavailable():
        raise MultiplexerUnavailable("tmux binary not found on PATH")

    failed = attempt(backend=unavailable)
    assert failed.reason == f"typing into pane {pane} failed: tmux binary not found on PATH"
    starting = h.spawn_fake(env={"CAFLEET_FAKE_SCREEN": "start=120"})
    held = type_into_pane(
        _key(h, starting),
        "never typed",
        backend=h.backend,
        db_dir=str(tmp_path),
        purpose="test",
        lock_timeout=0.3,
        target=PLAIN,
        record=lambda: recorded.append("record"),
    )
    assert (held.kind, held.detail) == ("held", "starting")
    assert held.reason == f"pane {starting} is starting; the line is held"
    assert _typed_to(starting) == []

    with util.hold_pane_lock(tmp_path, key):
        busy = attempt()
        one_try = attempt(lock_timeout=None)
        abandoned = attempt(lock_timeout=30, keep_waiting=lambda: False)
    assert busy.reason == one_try.reason == f"pane {pane} is receiving another keystroke"
    assert (abandoned.kind, abandoned.reason) == ("abandoned", None)

    h.tmux("copy-mode", "-t", pane)
    in_mode = attempt()
    assert in_mode.reason == f"typing into pane {pane} failed: pane is in copy-mode"
    h.tmux("send-keys", "-t", pane, "-X", "cancel")

    assert built == [] and recorded == []
    assert _typed_to(pane) == []
    assert util.line_records(pane) == []


def test_a_line_the_pane_never_shows_is_unverified_and_not_recorded(
    tmux_harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fake stops reading its terminal: the line and Enter reach tmux but nothing shows."""
    h = tmux_harness
    shorten_verification(monkeypatch, verify=2.0)  # the stall below outlasts it by far
    pane = h.spawn_fake()
    recorded: list[str] = []
    util.fake_stall(pane, 6)
    outcome = type_into_pane(
        _key(h, pane),
        "check me",
        backend=h.backend,
        db_dir=str(tmp_path),
        purpose="test",
        lock_timeout=5,
        target=PLAIN,
        record=lambda: recorded.append("record"),
    )
    assert outcome.kind == "unverified"
    assert outcome.reason == (
        f"typed into pane {pane} but not verified: the line is not on the screen after Enter "
        "(dropped or garbled)"
    )
    assert recorded == []
    # The keys were sent: once the fake reads again it logs the line (at least once).
    assert [util.record_bytes(r) for r in util.wait_records(pane, 1, timeout=30)] == [b"check me"]


def test_a_record_step_that_raises_is_unrecorded_and_carries_the_error(
    tmux_harness, tmp_path: Path
) -> None:
    h = tmux_harness
    pane = h.spawn_fake()
    boom = RuntimeError("database is locked")

    def record() -> None:
        raise boom

    outcome = type_into_pane(
        _key(h, pane),
        "typed anyway",
        backend=h.backend,
        db_dir=str(tmp_path),
        purpose="test",
        lock_timeout=5,
        target=PLAIN,
        record=record,
    )
    assert outcome.kind == "unrecorded" and outcome.error is boom
    assert outcome.reason == (
        f"typed into pane {pane} but could not record it: database is locked; it may be typed again"
    )
    util.wait_records(pane, 1, timeout=15)
    assert util.line_bytes(pane) == [b"typed anyway"]
