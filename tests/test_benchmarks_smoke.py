"""The benchmark harness runs end to end at smoke size, so it never rots (docs/performance.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks.__main__ import SMOKE
from benchmarks.startup import FLOORS

REPO = Path(__file__).resolve().parent.parent


# The two longest sections run in a test of their own, so that the suite's two workers share
# the smoke run (together the two tests run every section that is not opt-in).
APART = ("parallel", "postgres")


def smoke(tmp_path: Path, *selection: str) -> tuple[dict[str, Any], str]:
    out = tmp_path / "smoke.json"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--smoke", "--out", str(out), *selection],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    results: dict[str, Any] = json.loads(out.read_text())
    assert results["mode"] == "smoke"
    assert "delivery_real" not in results  # opt-in only: it runs real agents for many minutes
    return results, proc.stdout


@pytest.mark.tmux
def test_benchmark_smoke_run_produces_every_section(tmp_path: Path) -> None:
    bytecode = sorted((REPO / "cafleet").rglob("__pycache__"))
    results, stdout = smoke(tmp_path, *(f"--skip={name}" for name in APART))
    # The no-bytecode condition runs a copy: the run's other processes keep the checkout's
    # bytecode (tests/conftest.py writes it), so none of them recompiles cafleet meanwhile.
    assert bytecode and all(d.is_dir() for d in bytecode)
    assert "a copy of the checkout" in results["startup"]["cafleet_bytecode"]["nocache"]
    assert not set(APART) & set(results)
    # A few short commands at smoke size (each runs in its own tests), the floors beside them.
    assert set(results["startup"]["conditions"]["cached"]) == {
        *FLOORS,
        *SMOKE["startup_commands"],
    }
    startup = results["startup"]["conditions"]
    assert set(startup) == {"cached", "nocache"}
    for table in startup.values():
        assert {
            "floor: import sqlite3",
            "floor: import sqlalchemy, click",
            "message poll (10 pending)",
        } <= set(table)
        assert all(row["median_s"] > 0 and row["peak_rss_kb"] > 0 for row in table.values())
    assert results["throughput"]["sends_per_s"] > 0
    assert results["tasks"]["release"]["released"] == 5
    assert results["tasks"]["search"]["sqlite"]["queries"]["parser"]["hits"] > 0
    assert results["concurrency"]["errors"] == 0
    assert results["concurrency"]["lost"] == 0
    assert results["concurrency"]["integrity_check"] == "ok"
    assert results["wait"]["p50_ms"] > 0
    assert results["scale"]["poll_rows"] > 0
    assert results["notify"]["notified"] == results["notify"]["runs"]
    paths = results["send_paths"]
    assert set(paths["sends_per_s"]) == {"raw_sqlite3", "repository"}
    assert all(rate > 0 for rates in paths["sends_per_s"].values() for rate in rates)
    assert paths["rows"] == paths["count"] * paths["rounds"] * 2
    drains = results["drains"]
    for row in drains["in_process"]:
        # docs/performance.md §9: an undeliverable backlog costs one selection, and the wake line stays short
        assert row["pending"] == row["members"] + 1
        assert row["drain_queries"] == 1
        assert row["wake_line_bytes"] < 3000
    assert all(r["broadcast_rc"] == 0 and r["scan_rc"] == 0 for r in drains["whole_process"])
    guard = results["assets_guard"]
    assert set(guard["calls"]) >= {"member (send, ping, prompt)", "reference: send_message"}
    assert all(row["median_us"] > 0 for row in guard["calls"].values())
    # docs/performance.md: a blocked member's report reaches the Director
    escalation = results["escalation"]
    assert escalation["latency_s"]["n"] == 1 and escalation["latency_s"]["max"] > 0
    assert [row["prompts_seen"] for row in escalation["tick_step"]] == [1]
    # docs/performance.md §11: what healing and the wait deadline cost
    supervision = results["supervision"]
    assert set(supervision["heal_call_us"]) == {"TMUX set", "TMUX unset"}
    assert supervision["wait_inprocess_overrun_ms"]["max"] >= 0
    gate = results["delivery"]
    assert gate["classifier"]["captures"] >= 40 and gate["classifier"]["classify_us"] > 0
    assert set(gate["send_to_verified_fake_s"]) == {"claude", "codex", "opencode"}
    # the agents' settle (0.1 s after a paste, docs/agent-screens.md §6.1) is part of it
    assert all(s["n"] == 2 and s["median"] > 0.1 for s in gate["send_to_verified_fake_s"].values())
    # The printed table names every section.
    for heading in (
        "## 1.",
        "## 2.",
        "## 3.",
        "## 4.",
        "## 5.",
        "## 6.",
        "## 7.",
        "## 8.",
        "## 9.",
        "## 10.",
        "## 11.",
        "## 12.",
    ):
        assert heading in stdout


@pytest.mark.tmux
def test_benchmark_smoke_runs_the_parallel_and_postgres_sections(tmp_path: Path) -> None:
    results, stdout = smoke(tmp_path, *(f"--only={name}" for name in APART))
    # docs/performance.md §17: every line of the parallel broadcast and drain verified
    par = results["parallel"]
    assert [r["workers"] for r in par["broadcast"]] == [1, 3]
    for row in par["broadcast"]:
        assert row["rc"] == 0 and row["warnings"] == 0 and row["still_pending"] == 0
        assert row["stdout"].endswith(f"notified={row['recipients']}")
    for row in par["drain"]:
        assert row["notified"] == row["pending_lines"] == par["members"] + 1
        assert row["failures"] == []
    assert par["member_list"]["x_floor"] > 0
    # docs/performance.md §19: PostgreSQL beside SQLite on the section's own server
    pg = results["postgres"]
    if "skipped" in pg:
        assert os.environ.get("CAFLEET_REQUIRE_POSTGRES") != "1", pg["skipped"]
    else:
        for label in ("sqlite", "postgresql", "postgresql, fsync=off"):
            assert pg["sends"][label]["sends_per_s"] > 0 and pg["sends"][label]["floor_per_s"] > 0
        for dialect in ("sqlite", "postgresql"):
            pairs = pg["pairs"][dialect]
            assert (pairs["errors"], pairs["lost"]) == (0, 0)
            assert pairs["acked"] == pairs["rows"] == pairs["processes"] * pairs["per_process"]
            assert pg["wait"][dialect]["p50_ms"] > 0
        assert pg["pairs"]["sqlite"]["integrity_check"] == "ok"
        commands = pg["short_commands"]["commands"]
        assert {"floor", "fleet list", "message poll (10 pending)", "message ack"} <= set(commands)
        assert all(row["sqlite_ms"] > 0 and row["postgresql_ms"] > 0 for row in commands.values())
    assert "## 17." in stdout and "## 19." in stdout


@pytest.mark.tmux
@pytest.mark.real_agent
def test_fleet_roundtrip_smoke(tmp_path: Path) -> None:
    """Section 15 at smoke size: one real Claude Code member, two tasks (skipped without the
    binary; required in CI)."""
    from tests.harness.real_agents import require_binary

    require_binary("claude")
    out = tmp_path / "fleet.json"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--smoke", "--only", "fleet_roundtrip",
         "--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.read_text())["fleet_roundtrip"]
    assert result["skipped"] == []
    (row,) = result["rows"]
    assert row["mix"] == "claude" and row["tasks"] == 2
    assert row["files_written"] == 2
    assert row["per_task_s"]["n"] == 2 and row["agent_turn_s"]["n"] == 2
    # The round trip contains each task's own round trip; a task's delivery and agent turn are
    # each part of it.
    assert row["first_send_to_last_reply_s"] >= row["per_task_s"]["max"] > 0
    assert row["per_task_s"]["max"] >= row["agent_turn_s"]["min"] > 0
    assert row["model_requests"] > 0 and row["output_tokens"] > 0
    assert "## 15. fleet round trip" in proc.stdout


def test_merge_benchmark_smoke(tmp_path: Path) -> None:
    """`python -m benchmarks.merge` (docs/performance.md §23) at smoke size: every merge lands
    and the collision check finds the one collision the benchmark makes."""
    out = tmp_path / "merge.json"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.merge", "--files", "20", "--worktrees", "3",
         "--runs", "1", "--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.read_text())
    merge, found = result["merge"], result["collisions"]
    assert merge["merge_s"] > 0 and merge["floor_s"] > 0 and len(merge["merge_runs_s"]) == 1
    assert merge["in_process"]["git_s"]["worktree add"] > 0
    assert found["worktrees"] == 3 and len(found["found"]) == 1
    assert found["fleet_show_s"] > 0 and found["tick_s"] > 0
    assert "task merge" in proc.stdout and "collision check" in proc.stdout
