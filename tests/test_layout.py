"""Member pane layout against a private tmux server (docs/runtime.md §1.11):
no member pane below the usable minimum; the Director's window first, then the fleet's own
windows, tiled; `--window new|current`; capture at 32 members."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fleet_helpers import create_fleet, create_member, ok, stop_loop
from tests.harness.fixtures import TmuxHarness
from tests.harness.util import start_record

pytestmark = pytest.mark.tmux

MIN_COLUMNS, MIN_ROWS = 40, 8


def _panes(h: TmuxHarness) -> dict[str, dict[str, str]]:
    fmt = "#{pane_id}|#{window_id}|#{window_name}|#{pane_width}|#{pane_height}|#{session_name}"
    out: dict[str, dict[str, str]] = {}
    for line in h.tmux("list-panes", "-a", "-F", fmt).splitlines():
        pane, window, name, width, height, session = line.split("|")
        out[pane] = {"window": window, "name": name, "w": width, "h": height, "session": session}
    return out


def _small(panes: dict[str, dict[str, str]], ids: list[str]) -> list[tuple[str, str, str]]:
    return [
        (p, panes[p]["w"], panes[p]["h"])
        for p in ids
        if int(panes[p]["w"]) < MIN_COLUMNS or int(panes[p]["h"]) < MIN_ROWS
    ]


@pytest.mark.parametrize("size", [(400, 200), (200, 50), (120, 40), (100, 30)])
def test_size_formulas_match_a_real_server(
    tmux_harness: TmuxHarness, size: tuple[int, int]
) -> None:
    """*(formulas)* `main_vertical_member` and `tiled_member` predict tmux 3.x's smallest pane
    after each split, for both layouts, at several window sizes."""
    from cafleet.mux.layout import main_vertical_member, tiled_member

    h = tmux_harness
    backend = h.backend()
    for layout, predict in (("main-vertical", main_vertical_member), ("tiled", tiled_member)):
        session = f"geo-{layout}-{size[0]}"
        window = h.tmux(
            "new-session", "-d", "-P", "-F", "#{window_id}", "-s", session,
            "-x", str(size[0]), "-y", str(size[1]), "sleep 600",
        ).strip()  # fmt: skip
        for _ in range(9):
            geometry = backend.window_geometry(window)
            predicted = predict(geometry, geometry.panes + 1)
            if predicted.rows < 3 or predicted.columns < 3:
                break
            h.tmux("split-window", "-d", "-t", window, "sleep 600", check=False)
            if backend.window_geometry(window).panes == geometry.panes:
                break  # the active pane had no room to split
            h.tmux("select-layout", "-t", window, layout)
            sizes = [
                tuple(int(x) for x in line.split())
                for line in h.tmux(
                    "list-panes", "-t", window, "-F", "#{pane_width} #{pane_height}"
                ).splitlines()
            ]
            members = sizes[1:] if layout == "main-vertical" else sizes
            assert (min(w for w, _ in members), min(r for _, r in members)) == (
                predicted.columns,
                predicted.rows,
            ), (layout, size, len(sizes), sizes)


def test_32_members_keep_usable_panes_and_capture(tmux_db: TmuxHarness) -> None:
    h = tmux_db
    # A terminal-sized Director window: 200x50 keeps 5 stacked panes, then the fleet's windows.
    h.tmux("set-option", "-g", "default-size", "200x50")
    h.tmux("resize-window", "-t", h.window_id, "-x", "200", "-y", "50")
    ids = create_fleet(h, name="crew")
    stop_loop(h, ids.fleet_id)  # nothing to deliver; keeps the CPU for the spawns
    agents = ("claude", "codex", "opencode")
    members: list[tuple[int, str, str]] = []
    for i in range(32):
        agent = agents[i % 3]
        member_id, pane = create_member(
            h, ids.fleet_id, f"m{i:02d}", "member {member_id}", "--coding-agent", agent
        )
        members.append((member_id, pane, agent))

    panes = _panes(h)
    member_panes = [ids.monitor_pane] + [p for _, p, _ in members]
    assert _small(panes, member_panes) == []
    windows = {panes[p]["window"] for p in member_panes}
    overflow = sorted(windows - {h.window_id})
    assert overflow, "32 members never fit one 200x50 window"
    for window in overflow:
        panes_here = [p for p in member_panes if panes[p]["window"] == window]
        assert {panes[p]["name"] for p in panes_here} == {"crew"}
        assert {panes[p]["session"] for p in panes_here} == {h.session_name}
    # The Director's window is still main-vertical: the Director spans its height.
    assert panes[h.director_pane]["h"] == h.pane_format(h.director_pane, "#{window_height}")
    in_director = [p for p in member_panes if panes[p]["window"] == h.window_id]
    assert len(in_director) == 5  # (50 - 4) // 5 = 9 rows; a sixth would get 7
    # Placements record the window each pane is in.
    rows = dict(h.sqlite("SELECT mux_pane_id, mux_window_id FROM member_placements"))
    assert all(rows[p] == panes[p]["window"] for p in member_panes)

    # Every agent started and every pane captures its prompt line (the monitor scan captures
    # them all; `member capture` of an opencode member in an overflow window too).
    for _, pane, _ in members:
        start_record(pane, timeout=30)
    scan = json.loads(ok(h.cli("monitor", "scan", str(ids.fleet_id), "--json")).stdout)
    by_pane = {e["pane_id"]: e for e in scan}
    for member_id, pane, agent in members:
        entry = by_pane[pane]
        assert entry["error"] is None, entry
        assert f"fake-{agent} ready ({pane})" in entry["content"], (member_id, entry["content"])
    opencode = next(
        (m, p) for m, p, a in members if a == "opencode" and panes[p]["window"] != h.window_id
    )
    captured = ok(h.cli("member", "capture", str(opencode[0]))).stdout
    assert f"fake-opencode ready ({opencode[1]})" in captured


def test_window_option_overrides_and_the_minimum_setting(tmux_db: TmuxHarness) -> None:
    h = tmux_db
    ids = create_fleet(h, name="crew")
    stop_loop(h, ids.fleet_id)
    f = ids.fleet_id
    # The 400x200 Director window has room, yet --window new opens a window of its own.
    a, a_pane = create_member(h, f, "alpha", "a", "--window", "new")
    panes = _panes(h)
    assert panes[a_pane]["window"] != h.window_id and panes[a_pane]["name"] == "crew"
    assert panes[a_pane]["session"] == h.session_name
    assert h.pane_format(a_pane, "#{window_panes}") == "1"
    # The focus stayed on the Director's window.
    assert h.pane_format(h.director_pane, "#{window_active}") == "1"
    # Auto fills the fleet's window next when the Director's window is "full" (its stacked
    # panes are 319 columns wide, below a minimum of 320); that window is tiled: 400x99 each.
    wide = {"CAFLEET_MIN_PANE_COLUMNS": "320"}
    b, b_pane = create_member(h, f, "beta", "b", env=wide)
    assert _panes(h)[b_pane]["window"] == panes[a_pane]["window"]
    # --window current splits the Director's window whatever the minimum says.
    c, c_pane = create_member(h, f, "gamma", "c", "--window", "current", env=wide)
    assert _panes(h)[c_pane]["window"] == h.window_id
    # A third pane would make that window's panes 199 columns wide: a second fleet window.
    d, d_pane = create_member(h, f, "delta", "d", env=wide)
    after = _panes(h)
    assert after[d_pane]["window"] not in (h.window_id, after[a_pane]["window"])
    assert after[d_pane]["name"] == "crew"

    # The settings are validated like every CAFLEET_* integer.
    r = h.cli("member", "list", str(f), env={"CAFLEET_MIN_PANE_COLUMNS": "wide"})
    assert (r.returncode, r.stderr) == (
        1,
        "Error: CAFLEET_MIN_PANE_COLUMNS must be a non-negative integer (got 'wide')\n",
    )
    r = h.cli("member", "create", "--fleet-id", str(f), "--name", "x", "--description", "x",
              "--window", "elsewhere", "p")  # fmt: skip
    assert r.returncode == 2 and "'elsewhere' is not one of 'new', 'current'" in r.stderr


def test_a_fleet_name_reaches_tmux_literally(tmux_db: TmuxHarness) -> None:
    """The window name is user text: `#(...)` and `#{...}` are not expanded and a final `;`
    does not end the tmux command."""
    h = tmux_db
    marker = Path(h.dir) / "expanded"
    name = f"#(touch {marker}) #{{session_name}} end;"
    # A minimum no pane beside the Director can meet: the monitor gets the fleet's window.
    result = h.cli(
        "fleet", "create", "--name", name, "--coding-agent", "claude",
        env={"CAFLEET_MIN_PANE_COLUMNS": "1000"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    monitor_pane = h.sqlite(
        "SELECT p.mux_pane_id FROM member_placements p JOIN members m USING (member_id) "
        "WHERE m.name = 'monitor'"
    )[0][0]
    panes = _panes(h)
    assert panes[monitor_pane]["window"] != h.window_id
    assert panes[monitor_pane]["name"] == name
    assert not marker.exists()
