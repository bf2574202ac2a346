"""The monitor loop's wake lines reach a real Claude Code monitor exactly once each, whatever
its pane's size (docs/runtime.md §5.7): judged by Claude's own session record, not the screen.

One real Claude monitor (`cafleet member create --role monitor`, a window of its own) is woken
while its window is 80x14, then 40x8, then 160x40; a local stand-in for the API answers every
turn at once ("Done."), so each wake finds the monitor ready, as a monitor that answers its
wakes would be. Before wake lines carried their own id, every wake after the first in the
80x14 pane was typed again and again ("not verified"), each copy a model turn.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from tests.fleet_helpers import create_fleet, ok, start_loop, stop_loop
from tests.harness.fixtures import TmuxHarness
from tests.harness.mock_api import mock_anthropic
from tests.harness.real_agents import require_binary
from tests.harness.real_member import RealMember, arrivals
from tests.harness.util import retry_until

pytestmark = [pytest.mark.real_agent, pytest.mark.tmux]

PROMPT = "You are the monitor of cafleet fleet {fleet_id}. Wait for wake lines."
SIZES = ((80, 14), (40, 8), (160, 40))
WAKES_PER_SIZE = 2
INTERVAL = "6"  # s between wakes: Claude answers each (stand-in API) well within it
WAKE_LOG = re.compile(r" tick -> (?:forced )?wake monitor \d+ \(")
WAKE_ID = re.compile(r"\[wake ([0-9a-z]+)\]$")


@pytest.fixture
def api() -> Iterator[str]:
    with mock_anthropic("text") as url:
        yield url


def _wake_records(monitor: RealMember) -> list[tuple[str, bool]]:
    """(text, queued) of every wake line in Claude's own record."""
    return [(t, q) for t, _, q in arrivals(monitor) if t.startswith("[cafleet] tick: fleet ")]


def test_each_wake_reaches_a_real_claude_monitor_once_in_any_pane_size(
    tmux_db: TmuxHarness, api: str
) -> None:
    require_binary("claude")
    h = tmux_db
    ids = create_fleet(h)  # a fake monitor first: replaced by the real one below
    stop_loop(h, ids.fleet_id)
    ok(h.cli("member", "delete", str(ids.monitor_id)))
    monitor = RealMember(h, "claude", "real-monitor", extra_env={"ANTHROPIC_BASE_URL": api})
    loop = None
    try:
        monitor.create(ids.fleet_id, PROMPT, "--role", "monitor", "--window", "new")
        retry_until(  # its spawn prompt's turn is over
            lambda: any(t.startswith("You are the monitor") for t, _, _ in arrivals(monitor)),
            timeout=240,
            message=monitor.real.capture,
        )
        monitor.real.wait_state("ready", timeout=120)
        loop = start_loop(h, ids.fleet_id, "--tick", "1", "--interval", INTERVAL)

        def wakes() -> int:
            assert loop is not None
            return sum(1 for line in loop.lines() if WAKE_LOG.search(line))

        for width, height in SIZES:
            h.tmux("resize-window", "-t", monitor.pane, "-x", str(width), "-y", str(height))
            wanted = wakes() + WAKES_PER_SIZE
            retry_until(
                lambda wanted=wanted: wakes() >= wanted,  # type: ignore[misc]
                timeout=WAKES_PER_SIZE * int(INTERVAL) * 8,
                message=lambda: "\n".join(loop.lines()) + "\n" + monitor.real.capture(),
            )
        loop.stop()
        delivered = wakes()
        # Claude records a line when it takes it; give the last one its turn.
        retry_until(
            lambda: len({t for t, _ in _wake_records(monitor)}) >= delivered,
            timeout=60,
            message=lambda: _wake_records(monitor),
        )
        records = _wake_records(monitor)
        texts = [t for t, queued in records if not queued]
        wake_ids = [m.group(1) for t in texts if (m := WAKE_ID.search(t))]
        report = "\n".join(loop.lines()) + "\n--- records:\n" + "\n".join(map(str, records))
        # Every wake carries its own id; each id reached Claude exactly once, and the loop
        # logged each one it delivered (no wake typed again because its check missed it).
        assert len(wake_ids) == len(texts), report
        assert len(set(wake_ids)) == len(wake_ids) == delivered, report
        assert not any("not delivered" in line for line in loop.lines()), report
    finally:
        if loop is not None:
            loop.stop()
        monitor.stop()
