"""The benchmark harness runs end to end at smoke size, so it never rots (docs/performance.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.tmux
def test_benchmark_smoke_run_produces_every_section(tmp_path: Path) -> None:
    out = tmp_path / "smoke.json"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--smoke", "--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    results = json.loads(out.read_text())
    assert results["mode"] == "smoke"
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
    assert escalation["latency_s"]["n"] == 2 and escalation["latency_s"]["max"] > 0
    assert [row["prompts_seen"] for row in escalation["tick_step"]] == [1]
    # docs/performance.md §11: what healing and the wait deadline cost
    supervision = results["supervision"]
    assert set(supervision["heal_call_us"]) == {"TMUX set", "TMUX unset"}
    assert supervision["wait_inprocess_overrun_ms"]["max"] >= 0
    gate = results["delivery"]
    assert gate["classifier"]["captures"] >= 40 and gate["classifier"]["classify_us"] > 0
    assert set(gate["send_to_verified_fake_s"]) == {"claude", "codex", "opencode"}
    assert all(s["n"] == 2 and s["median"] > 1.0 for s in gate["send_to_verified_fake_s"].values())
    assert "delivery_real" not in results  # opt-in only: it runs real agents for many minutes
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
        assert heading in proc.stdout
