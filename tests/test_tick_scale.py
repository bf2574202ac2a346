"""A tick stays short whatever the fleet's size (docs/runtime.md §5.5, §5.11): a fleet whose
members' panes are all gone gets one report to the Director per tick, for at most `LOSS_BATCH`
of them, and the loop beats between any two ticks' reports."""

from __future__ import annotations

import math
import re
import sqlite3

import pytest

from cafleet.monitor.losses import LOSS_BATCH, NAMES_SHOWN
from tests.fleet_helpers import create_fleet, create_member, start_loop, stop_loop
from tests.harness.fixtures import TmuxHarness
from tests.harness.util import retry_until

pytestmark = pytest.mark.tmux

LOST = 1_250  # seven ticks' batches


def _clone_lost_members(h: TmuxHarness, seed: int, count: int) -> None:
    """``count`` copies of member ``seed`` (its row and its placement), written straight into
    the database, each placed in a pane tmux never had."""
    conn = sqlite3.connect(str(h.db_path), isolation_level=None, timeout=10)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) "
            "INSERT INTO members (fleet_id, name, description, status, registered_at, "
            "member_card_json) SELECT m.fleet_id, 'lost' || n.i, m.description, m.status, "
            "m.registered_at, m.member_card_json FROM n, members m WHERE m.member_id = ?",
            (count, seed),
        )
        conn.execute(
            "INSERT INTO member_placements (member_id, mux_session, mux_window_id, mux_pane_id,"
            " backend, coding_agent, created_at, mux_socket, host_id) SELECT m.member_id, "
            "p.mux_session, p.mux_window_id, '%' || (900000 + m.member_id), p.backend, "
            "p.coding_agent, p.created_at, p.mux_socket, p.host_id FROM members m, "
            "member_placements p WHERE p.member_id = ? AND m.member_id > ?",
            (seed, seed),
        )
        conn.execute("COMMIT")
    finally:
        conn.close()


def _observe(h: TmuxHarness, fleet_id: int, director: int) -> tuple[int, str, int]:
    """One consistent read: the Director's reports, the loop's heartbeat, the panes marked lost."""
    rows = h.sqlite(
        "SELECT (SELECT count(*) FROM messages WHERE owner_member_id = ?), "
        "(SELECT last_tick_at FROM monitor_runtime WHERE fleet_id = ?), "
        "(SELECT count(*) FROM member_placements WHERE lost_at IS NOT NULL)",
        director,
        fleet_id,
    )
    return int(rows[0][0]), str(rows[0][1]), int(rows[0][2])


def test_thousands_of_lost_panes_are_reported_in_batches_between_heartbeats(
    tmux_db: TmuxHarness,
) -> None:
    h = tmux_db
    ids = create_fleet(h)
    f, d = ids.fleet_id, ids.director_id
    stop_loop(h, f)
    seed, seed_pane = create_member(h, f, "seed")
    h.tmux("kill-pane", "-t", seed_pane)
    _clone_lost_members(h, seed, LOST - 1)
    loop = start_loop(h, f, "--tick", "1", "--interval", "0")

    # The loop beats between any two ticks' reports: wherever two or more reports appeared
    # between two reads, the heartbeat changed too (checked as the reads come in).
    seen: list[tuple[int, str, int]] = []

    def all_marked() -> bool:
        now = _observe(h, f, d)
        for reports, beat, _ in seen:
            if now[0] - reports >= 2:
                assert now[1] != beat, f"{now[0] - reports} reports without a heartbeat: {now}"
        seen.append(now)
        return now[2] >= LOST

    retry_until(all_marked, timeout=120, interval=0.05, message=lambda: str(seen[-1]))
    loop.stop()

    # One report per tick's batch: the count, the first names, and how many more.
    texts = [
        r[0]
        for r in h.sqlite(
            "SELECT text FROM messages WHERE owner_member_id = ? ORDER BY message_id", d
        )
    ]
    assert len(texts) == math.ceil(LOST / LOSS_BATCH)
    counted = 0
    for text in texts:
        m = re.match(
            r"\[cafleet\] (\d+) members lost their panes: (.*?)(?: and (\d+) more)?\. ", text
        )
        assert m, text
        n = int(m.group(1))
        assert n <= LOSS_BATCH
        named = m.group(2).split(", ")
        assert len(named) == min(n, NAMES_SHOWN)
        assert all(re.fullmatch(r"\d+ \((seed|lost\d+)\) pane %\d+", x) for x in named), named
        assert int(m.group(3) or 0) == n - len(named)
        counted += n
    assert counted == LOST
    assert loop.count(r"tick -> pane lost: member ") == LOST


def test_the_lost_panes_benchmark_runs_at_smoke_size() -> None:
    """`python -m benchmarks.loop_outage --only lost` at 20 lost panes: one tick, one report
    (docs/performance.md §20)."""
    from benchmarks.loop_outage import lost_panes

    result = lost_panes(20)
    assert (result["ticks"], result["reports"]) == (1, 1), result
    assert result["heartbeats"] >= 2 and result["first_tick_s"] > 0
