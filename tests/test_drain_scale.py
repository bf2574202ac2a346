"""docs/runtime.md §4.3, §4.4: drains cost one query per recipient, never one per skipped message; a dead pane costs
one cheap check (one `list-panes -a` per drain or scan); the wake line has a bounded length.

Counting runs without tmux: pane ids are made up and, where a drain must type, a stand-in
backend registered as `tmux` answers in place of the real one. Timing is the benchmark
harness's job (`python -m benchmarks --only drains`, docs/performance.md §9)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from cafleet.mux import PaneStatus
from tests.delivery_helpers import sql_write, warning
from tests.factories import build_world, connect
from tests.harness import util
from tests.harness.fixtures import TmuxHarness
from tests.storage_helpers import recording_statements
from tests.test_delivery_send import occupy_loop_slot


@contextmanager
def pending_selections(conn: Any) -> Iterator[list[str]]:
    """The statements that select pending notifications (they search the pending index)."""
    seen: list[str] = []

    def record(statement: str, _parameters: Any) -> None:
        if "idx_messages_pending_notification" in statement:
            seen.append(statement)

    with recording_statements(conn, record):
        yield seen


class StandIn:
    """A `tmux` backend that types into a list: every pane is alive, idle and in no mode. Its
    screen is a shell prompt and the lines typed so far, so the delivery gate reads `unknown`
    (it types) and the verified submit sees each line arrive (docs/runtime.md §4.9)."""

    name = "tmux"

    def __init__(self, live: set[str], typed: list[tuple[str, str]]) -> None:
        self.live = live
        self.typed = typed

    def ensure_available(self) -> None:
        return None

    def list_panes(self) -> frozenset[str]:
        return frozenset(self.live)

    def pane_status(self, pane_id: str) -> PaneStatus:
        return PaneStatus(pane_id=pane_id, mode=None, dead=False)

    def type_line(self, pane_id: str, line: str, **_typing: object) -> None:
        self.typed.append((pane_id, line))

    def screen(self, pane_id: str) -> str:
        return "\n".join(["$ ", *(line for pane, line in self.typed if pane == pane_id)])


@pytest.fixture
def stand_in(monkeypatch: pytest.MonkeyPatch) -> tuple[set[str], list[tuple[str, str]]]:
    from cafleet import mux

    live: set[str] = set()
    typed: list[tuple[str, str]] = []
    monkeypatch.setitem(mux._REGISTRY, "tmux", lambda **_kw: StandIn(live, typed))
    return live, typed


def _world(db: Path, members: int) -> Any:
    return build_world(db, members=[f"m{i}" for i in range(members)])


def _put(conn: Any, frm: int, to: int, text: str) -> int:
    from cafleet import broker

    return broker.send_message(conn, from_member_id=frm, to_member_id=to, text=text).message_id


@pytest.mark.parametrize("members", [5, 60])
def test_undeliverable_fleet_drain_is_one_query_whatever_the_backlog(
    head_db: Path, members: int
) -> None:
    from cafleet.delivery.drains import drain_fleet

    w = _world(head_db, members)
    with connect(head_db) as conn:
        for name, member_id in w.members.items():
            for i in range(3):
                _put(conn, w.director, member_id, f"{name} {i}")
        blocked = {w.members["m0"]}
        with pending_selections(conn) as seen:
            attempted: set[int] = set()
            report = drain_fleet(
                conn, w.fleet_id, attempted=attempted, blocked=blocked, lock_timeout=1,
                live_panes=frozenset({w.director_pane}),
            )  # fmt: skip
        assert (report.notified, report.failures, attempted) == ([], [], set())
        assert len(seen) == 1


def test_fleet_drain_selects_once_plus_once_per_attempt_oldest_first(
    head_db: Path, stand_in: tuple[set[str], list[tuple[str, str]]]
) -> None:
    from cafleet.delivery.drains import drain_fleet

    live, typed = stand_in
    w = _world(head_db, 4)
    ids = [w.members[f"m{i}"] for i in range(4)]
    live.update(w.pane(i) for i in ids[:3])  # m3's pane is gone
    with connect(head_db) as conn:
        sent = [_put(conn, w.director, ids[i % 4], f"n{i}") for i in range(12)]
        attempted = {sent[4]}  # attempted earlier in this invocation: never again
        with pending_selections(conn) as seen:
            report = drain_fleet(
                conn, w.fleet_id, attempted=attempted, blocked=set(), lock_timeout=1,
                max_text_len=200, workers=1,
            )  # fmt: skip
    expected = [m for i, m in enumerate(sent) if i % 4 != 3 and m != sent[4]]
    assert [m for m, _r in report.notified] == expected  # oldest first across recipients
    assert [line.split()[2] for _p, line in typed] == [str(m) for m in expected]
    # one selection for every recipient's oldest, then one per attempt for its next one
    assert len(seen) == 1 + len(expected)
    assert attempted == {sent[4], *expected}


def test_monitor_tick_over_an_undeliverable_backlog_is_one_selection(head_db: Path) -> None:
    from cafleet import broker
    from cafleet.monitor.state import LoopState
    from cafleet.monitor.tick import run_tick

    w = _world(head_db, 40)
    with connect(head_db) as conn:
        for member_id in w.members.values():
            _put(conn, w.director, member_id, "gone")
        assert broker.claim_monitor(
            conn, fleet_id=w.fleet_id, pid=os.getpid(), tick_seconds=5, wake_interval_seconds=0
        )
        logged: list[str] = []
        state = LoopState(
            conn=conn, fleet_id=w.fleet_id, pid=os.getpid(), tick_seconds=5, pane_lock_timeout=5,
            env_wake_interval=None, backend=StandIn({w.director_pane}, []), log=logged.append,
            stop_requested=lambda: False,
        )  # fmt: skip
        with pending_selections(conn) as seen:
            run_tick(state)
        broker.clear_monitor(conn, fleet_id=w.fleet_id, pid=os.getpid())
    # The stand-in lists no member pane, so the tick also reports them lost (one report).
    assert [x for x in logged if " -> pane lost: " not in x] == []
    assert len(seen) == 1


# --------------------------------------------------------------------------- dead panes (tmux)


def _dead_world(h: TmuxHarness, dead: int) -> tuple[Any, list[int], int]:
    """A fleet with one live member (`live`) and ``dead`` members whose panes do not exist."""
    w = build_world(h.db_path, harness=h, members=("live", *[f"d{i}" for i in range(dead)]))
    gone = [w.members[f"d{i}"] for i in range(dead)]
    for i, member_id in enumerate(gone):
        sql_write(
            h.db_path,
            "UPDATE member_placements SET mux_pane_id = ? WHERE member_id = ?",
            f"%{90000 + i}",
            member_id,
        )
        w.panes[member_id] = f"%{90000 + i}"
    return w, gone, w.members["live"]


@pytest.mark.tmux
def test_broadcast_to_dead_panes_lists_panes_once(tmux_db: TmuxHarness) -> None:
    h = tmux_db
    w, gone, live = _dead_world(h, 12)
    occupy_loop_slot(h, w)
    calls = len(h.shim_calls())
    result = h.cli("message", "broadcast", "--from-member-id", str(w.director), "hello", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["notified"] == 2  # the live member and the monitor
    delivered = dict(
        h.sqlite("SELECT owner_member_id, message_id FROM messages WHERE type = 'unicast'")
    )
    assert result.stderr.splitlines() == [
        warning(delivered[m], m, f"typing into pane {w.pane(m)} failed: pane not found")
        for m in gone
    ]
    new = h.shim_calls()[calls:]
    assert [c["command"] for c in new].count("list-panes") == 1
    probed = {c["target"] for c in new if c["command"] == "display-message"}
    assert probed == {w.pane(live), w.monitor_pane}
    assert not {c["target"] for c in new} & {w.pane(m) for m in gone}
    util.wait_records(w.pane(live), 1)


@pytest.mark.tmux
def test_monitor_scan_of_dead_panes_captures_only_live_ones(tmux_db: TmuxHarness) -> None:
    h = tmux_db
    w, gone, live = _dead_world(h, 12)
    calls = len(h.shim_calls())
    result = h.cli("monitor", "scan", str(w.fleet_id), "--json")
    assert result.returncode == 0, result.stderr
    entries = {e["member_id"]: e for e in json.loads(result.stdout)}
    for member_id in gone:
        assert entries[member_id]["error"] == "capture failed: pane not found"
        assert entries[member_id]["pane_id"] == w.pane(member_id)
    assert entries[live]["error"] is None and "fake-claude ready" in entries[live]["content"]
    new = h.shim_calls()[calls:]
    assert [c["command"] for c in new].count("list-panes") == 1
    captured = {c["target"] for c in new if c["command"] == "capture-pane"}
    assert captured == {w.director_pane, w.monitor_pane, w.pane(live)}


# --------------------------------------------------------------------------- the wake line


def test_wake_line_is_bounded_and_counts_the_rest() -> None:
    from cafleet.monitor.wakeline import ROSTER_LIMIT, WakeEntry, build_wake_line, render_entry

    director = WakeEntry(1, "Director", "claude", 0)
    roster = [WakeEntry(10 + i, "😀" * 75 + "a" * 25, "claude", i % 3) for i in range(5000)]
    line = build_wake_line(7, roster, director)
    head = "[cafleet] tick: fleet 7 \u2014 health-check your 5000 members: "
    tail = (
        f" Director: {render_entry(director)}. Follow your monitor role protocol. "
        "Resume your work if something was still running."
    )
    assert line.startswith(head) and line.endswith(tail)
    listed = line[len(head) : -len(tail)]
    shown = [render_entry(e) for e in roster]
    count = next(n for n in range(len(shown), 0, -1) if len(", ".join(shown[:n])) <= ROSTER_LIMIT)
    assert listed == ", ".join(shown[:count]) + f", \u2026 and {5000 - count} more."
    assert len(line) <= ROSTER_LIMIT + len(head) + len(tail) + 30
    assert "\n" not in line

    small = build_wake_line(7, roster[:2], director)
    assert small == head.replace("5000", "2") + ", ".join(shown[:2]) + "." + tail
