"""Unit tests: wake_due (docs/runtime.md §5.6), the wake line and its sanitiser (§5.7), is_live (§5.2)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from cafleet.monitor.cadence import wake_due
from cafleet.monitor.runtime import is_live
from cafleet.monitor.wakeline import WakeEntry, build_wake_line
from cafleet.text import sanitize_wake_field as sanitize

NOW = datetime(2026, 11, 29, 15, 2, 11, 500000, tzinfo=UTC)


def ts(moment: datetime) -> str:
    return moment.isoformat(timespec="microseconds")


# --- wake_due -----------------------------------------------------------------------------------


def test_interval_zero_is_never_due() -> None:
    assert not wake_due(NOW, 0, None, None)
    assert not wake_due(NOW, 0, ts(NOW - timedelta(days=9)), None)


def test_baseline_is_last_wake_then_started() -> None:
    old = ts(NOW - timedelta(seconds=100))
    fresh = ts(NOW - timedelta(seconds=5))
    assert not wake_due(NOW, 10, fresh, old)  # last_wake_at wins over started_at
    assert wake_due(NOW, 10, old, fresh)
    assert wake_due(NOW, 10, None, old)  # started_at when last_wake_at is absent
    assert not wake_due(NOW, 10, None, fresh)


def test_missing_or_unparsable_baseline_is_due() -> None:
    assert wake_due(NOW, 600, None, None)
    assert wake_due(NOW, 600, "garbage", None)
    assert wake_due(NOW, 600, None, "not a time")


def test_floor_of_elapsed_seconds() -> None:
    assert not wake_due(NOW, 3, ts(NOW - timedelta(seconds=2.999)), None)
    assert wake_due(NOW, 3, ts(NOW - timedelta(seconds=3)), None)
    assert wake_due(NOW, 3, ts(NOW - timedelta(seconds=3.2)), None)


def test_future_baseline_is_not_due() -> None:
    assert not wake_due(NOW, 1, ts(NOW + timedelta(seconds=30)), None)
    assert not wake_due(NOW, 1, None, ts(NOW + timedelta(hours=1)))


def test_naive_baseline_counts_as_utc() -> None:
    naive = (NOW - timedelta(seconds=20)).replace(tzinfo=None).isoformat()
    assert wake_due(NOW, 10, naive, None)
    assert not wake_due(NOW, 30, naive, None)


# --- wake line ----------------------------------------------------------------------------------


def test_wake_line_example_exact() -> None:
    line = build_wake_line(
        3,
        [WakeEntry(12, "builder", "claude", 0), WakeEntry(14, "tester", "codex", 2)],
        WakeEntry(10, "Director", "claude", 1),
    )
    assert line == (
        "[cafleet] tick: fleet 3 \u2014 health-check your 2 members: "
        "12 (builder; coding_agent=claude; unacked=0), 14 (tester; coding_agent=codex; unacked=2). "
        "Director: 10 (Director; coding_agent=claude; unacked=1). Follow your monitor role "
        "protocol. Resume your work if something was still running."
    )


def test_every_wake_line_ends_with_its_own_id() -> None:
    """docs/runtime.md §5.7: ` [wake <id>]` ends the line; each wake gets a fresh id, and that
    tag (not the line's first characters, the same for every wake) is what the screen check
    looks for."""
    from cafleet.text import LINE_ID_LEN, id_tag, line_id

    director = WakeEntry(1, "Director", "claude", 0)
    line = build_wake_line(5, [], director, "k3f9")
    assert line.endswith("Resume your work if something was still running. [wake k3f9]")
    ids = {line_id() for _ in range(50)}
    assert len(ids) > 45 and all(re.fullmatch(f"[0-9a-z]{{{LINE_ID_LEN}}}", i) for i in ids)
    assert id_tag("ping", "0a1b") == "[ping 0a1b]"


def test_wake_line_singular_and_empty() -> None:
    director = WakeEntry(1, "Director", "codex", 0)
    one = build_wake_line(5, [WakeEntry(4, "a", "opencode", 7)], director)
    assert (
        " \u2014 health-check your 1 member: 4 (a; coding_agent=opencode; unacked=7). Director: "
        in one
    )
    none = build_wake_line(5, [], director)
    assert none == (
        "[cafleet] tick: fleet 5 \u2014 no members to health-check. Director: 1 (Director; "
        "coding_agent=codex; unacked=0). Follow your monitor role protocol. Resume your work if "
        "something was still running."
    )


def test_sanitizer_steps_in_order() -> None:
    assert sanitize("x`$(y)") == "x\u02cb$\ufe59y)"
    assert sanitize("a\r\nb\rc\nd\te\u2028f\u2029g") == "a⏎b⏎c⏎d⏎e⏎f⏎g"
    assert sanitize("a\x1b[31mb\x07\x7f\x85c") == "a[31mbc"
    assert sanitize("s\ud800t") == "s\ufffdt"
    assert sanitize("plain name é 😀") == "plain name é 😀"
    # a removed control never glues `$` and `(` back into a subshell
    assert sanitize("$\x01(") == "$\ufe59"
    line = build_wake_line(
        1, [WakeEntry(2, "x`$(y)", "claude", 0)], WakeEntry(1, "D\nx", "c\tl", 0)
    )
    assert "2 (xˋ$﹙y); coding_agent=claude; unacked=0)" in line
    assert "Director: 1 (D⏎x; coding_agent=c⏎l; unacked=0)." in line
    assert "\n" not in line and "\r" not in line


# --- is_live ------------------------------------------------------------------------------------


@dataclass
class Row:
    pid: int | None
    last_tick_at: str | None
    tick_seconds: int = 5


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_is_live_fresh_heartbeat_and_existing_pid() -> None:
    assert is_live(Row(os.getpid(), ts(NOW - timedelta(seconds=1))), NOW)


def test_is_live_null_fields_and_none() -> None:
    assert not is_live(None, NOW)
    assert not is_live(Row(None, ts(NOW)), NOW)
    assert not is_live(Row(os.getpid(), None), NOW)
    assert not is_live(Row(os.getpid(), "garbage"), NOW)


def test_is_live_staleness_bound_is_max_of_three_ticks_and_15() -> None:
    pid = os.getpid()
    assert is_live(Row(pid, ts(NOW - timedelta(seconds=15)), 1), NOW)
    assert not is_live(Row(pid, ts(NOW - timedelta(seconds=15.5)), 1), NOW)
    assert is_live(Row(pid, ts(NOW - timedelta(seconds=29)), 10), NOW)
    assert not is_live(Row(pid, ts(NOW - timedelta(seconds=31)), 10), NOW)


def test_is_live_dead_pid_is_not_live() -> None:
    assert not is_live(Row(dead_pid(), ts(NOW)), NOW)


def test_is_live_permission_error_counts_as_alive(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(_pid: int, _sig: int) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "kill", refuse)
    assert is_live(Row(4242, ts(NOW)), NOW)
