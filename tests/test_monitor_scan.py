"""`cafleet monitor scan` (docs/cli.md §2.22, §4 item 74; docs/runtime.md §5.10, §8 item 67)."""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3

import pytest

from tests.factories import connect
from tests.fleet_helpers import TS, create_fleet, create_member, inproc, ok, stop_loop
from tests.harness.fixtures import TmuxHarness
from tests.harness.util import fake_print, start_record

pytestmark = pytest.mark.tmux


def test_monitor_scan(tmux_db: TmuxHarness) -> None:
    h = tmux_db
    ids = create_fleet(h)
    stop_loop(h, ids.fleet_id)
    f = ids.fleet_id
    alive, alive_pane = create_member(h, f, "x\u00e9", "p", "--coding-agent", "codex")
    killed, killed_pane = create_member(h, f, "gone")
    from cafleet.broker.members import register_member
    from cafleet.records import PlacementSpec

    with connect(h.db_path) as conn:
        pending = register_member(
            conn, fleet_id=f, name="pe\tnd", description="d", role="member",
            placement=PlacementSpec("fleet test", h.window_id, "opencode"), require_monitor=True,
        ).member_id  # fmt: skip
    start_record(alive_pane)
    fake_print(alive_pane, "\r\nline one\r\n\x1b[32mgreen\x1b[0m\r\n")
    h.tmux("kill-pane", "-t", killed_pane)

    # Read-only: the data version seen by another connection does not move.
    watcher = sqlite3.connect(str(h.db_path))
    version = watcher.execute("PRAGMA data_version").fetchone()[0]
    calls = len(h.shim_calls())

    r = ok(h.cli("monitor", "scan", str(f), "--lines", "3"))
    sections = r.stdout.rstrip("\n").split("\n\n")
    headers = [s.split("\n", 1)[0] for s in sections]
    assert len(sections) == 5, r.stdout
    assert re.fullmatch(
        rf"=== {ids.director_id} \(Director; kind=director; coding_agent=claude; "
        rf"pane={re.escape(h.director_pane)}; captured_at={TS}\) ===",
        headers[0],
    )
    assert re.fullmatch(
        rf"=== {ids.monitor_id} \(monitor; kind=monitor; coding_agent=claude; "
        rf"pane={re.escape(ids.monitor_pane)}; captured_at={TS}\) ===",
        headers[1],
    )
    assert re.fullmatch(
        rf"=== {alive} \(x\u00e9; kind=member; coding_agent=codex; "
        rf"pane={re.escape(alive_pane)}; captured_at={TS}\) ===",
        headers[2],
    )
    assert sections[2].split("\n", 1)[1] == ">\nline one\ngreen"
    assert sections[3] == (
        f"=== {killed} (gone; kind=member; coding_agent=claude; pane={killed_pane}) ===\n"
        "capture failed: pane not found"
    )
    assert sections[4] == (
        f"=== {pending} (pe\u2409nd; kind=member; coding_agent=opencode; pane=\u2014) ===\n"
        "pane not available (pending placement)"
    )

    r = ok(h.cli("monitor", "scan", str(f), "--json", "--ansi"))
    entries = json.loads(r.stdout)
    keys = [
        "member_id",
        "name",
        "kind",
        "coding_agent",
        "pane_id",
        "lines",
        "content",
        "captured_at",
        "content_sha256",
        "error",
    ]
    assert all(list(e) == keys for e in entries)
    assert [e["member_id"] for e in entries] == [
        ids.director_id,
        ids.monitor_id,
        alive,
        killed,
        pending,
    ]
    for e in entries[:3]:
        assert e["error"] is None and e["lines"] == 20
        assert e["content_sha256"] == hashlib.sha256(e["content"].encode()).hexdigest()
    assert entries[4]["name"] == "pe\tnd"
    assert "\x1b[32mgreen" in entries[2]["content"]
    assert entries[3] | {"captured_at": 0} == {
        "member_id": killed, "name": "gone", "kind": "member", "coding_agent": "claude",
        "pane_id": killed_pane, "lines": 20, "content": None, "captured_at": 0,
        "content_sha256": None, "error": "capture failed: pane not found",
    }  # fmt: skip
    assert entries[3]["captured_at"] is None
    assert entries[4]["pane_id"] is None and entries[4]["content"] is None
    assert entries[4]["error"] == "pane not available (pending placement)"

    assert watcher.execute("PRAGMA data_version").fetchone()[0] == version
    watcher.close()
    new_calls = h.shim_calls()[calls:]
    assert new_calls and not any(c["command"] == "send-keys" for c in new_calls)

    # Refusals: outside tmux, unknown and deleted fleets.
    r = inproc("monitor", "scan", str(f))
    assert (r.returncode, r.stderr) == (1, "Error: not inside a tmux session (TMUX is not set)\n")
    r = inproc("monitor", "scan", "99")
    assert (r.returncode, r.stderr) == (1, "Error: fleet 99 not found\n")
    r = inproc("monitor", "scan", str(f), "--lines", "0")
    assert r.returncode == 2
    ok(inproc("fleet", "delete", str(f), "--keep-panes"))
    r = inproc("monitor", "scan", str(f))
    assert (r.returncode, r.stderr) == (1, f"Error: fleet {f} is deleted\n")
