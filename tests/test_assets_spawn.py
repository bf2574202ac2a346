"""Spawning with the installed assets (docs/runtime.md §7.4), in a private tmux server with fake
agents: the bundled default member prompt, the monitor prompt's pointer to the skill, opencode's
`--agent cafleet`, and the agent's own configuration variable reaching its pane."""

from __future__ import annotations

from pathlib import Path

import pytest

from cafleet.agents.prompt import (
    load_default_member_prompt,
    load_default_monitor_prompt,
    render_template,
)
from tests.fleet_helpers import FleetIds, create_fleet, ok, stop_loop
from tests.harness.fixtures import TmuxHarness
from tests.harness.util import start_record


@pytest.fixture
def fleet(tmux_db: TmuxHarness) -> FleetIds:
    ids = create_fleet(tmux_db)
    stop_loop(tmux_db, ids.fleet_id)  # nothing types into the panes under test
    return ids


def _create(h: TmuxHarness, fleet: FleetIds, *extra: str, env: dict[str, str] | None = None):
    result = ok(
        h.cli(
            "member", "create", "--fleet-id", str(fleet.fleet_id), "--name", "builder",
            "--description", "builds", *extra, env=env,
        )
    )  # fmt: skip
    member_id = int(result.stdout.split()[0])
    pane = result.stdout.strip().rsplit("pane=", 1)[1]
    return member_id, pane, start_record(pane)


def test_member_create_without_prompt_uses_the_bundled_member_prompt(
    tmux_db: TmuxHarness, fleet: FleetIds
) -> None:
    member_id, _pane, rec = _create(tmux_db, fleet)
    expected = render_template(
        load_default_member_prompt(),
        fleet_id=fleet.fleet_id,
        member_id=member_id,
        director_member_id=fleet.director_id,
        coding_agent="claude",
    )
    assert rec["argv"][-1] == expected
    assert f"YOUR MEMBER ID: {member_id}\n" in expected
    assert "Load the `cafleet` skill now" in expected


def test_the_monitor_prompt_points_at_the_skill(tmux_db: TmuxHarness, fleet: FleetIds) -> None:
    rec = start_record(fleet.monitor_pane)
    expected = render_template(
        load_default_monitor_prompt(),
        fleet_id=fleet.fleet_id,
        member_id=fleet.monitor_id,
        director_member_id=fleet.director_id,
        coding_agent="claude",
    )
    assert rec["argv"][-1] == expected
    assert "Load the `cafleet` skill now and follow its monitor role (monitor.md)." in expected


def test_a_replacement_monitor_without_prompt_gets_the_monitor_prompt(
    tmux_db: TmuxHarness, fleet: FleetIds
) -> None:
    h = tmux_db
    ok(h.cli("member", "delete", str(fleet.monitor_id)))
    member_id, _pane, rec = _create(h, fleet, "--role", "monitor")
    assert rec["argv"][-1] == render_template(
        load_default_monitor_prompt(),
        fleet_id=fleet.fleet_id,
        member_id=member_id,
        director_member_id=fleet.director_id,
        coding_agent="claude",
    )


def test_opencode_runs_with_the_preset_and_its_config_dir(
    tmux_db: TmuxHarness, fleet: FleetIds, tmp_path: Path
) -> None:
    """With OPENCODE_CONFIG_DIR set, setup installs there, the guard checks there, and the
    variable reaches the pane so opencode reads the preset it was checked against."""
    h = tmux_db
    config = tmp_path / "oc-config"
    env = {"OPENCODE_CONFIG_DIR": str(config)}
    ok(h.cli("setup", "--coding-agent", "opencode", env=env))
    assert (config / "agents" / "cafleet.md").is_file()
    _member_id, pane, rec = _create(h, fleet, "--coding-agent", "opencode", "hi", env=env)
    assert rec["argv"][:3] == [str(h.bin_dir / "opencode"), "--agent", "cafleet"]
    assert rec["argv"][-2:] == ["--prompt", "hi"]
    splits = [c["argv"] for c in h.shim_calls() if c.get("command") == "split-window"]
    assert any(f"OPENCODE_CONFIG_DIR={config}" in argv for argv in splits), splits
    # opencode reads only its own copy of the skill, not Claude Code's (see agents/opencode.py).
    assert any("OPENCODE_DISABLE_CLAUDE_CODE_SKILLS=1" in argv for argv in splits), splits
    env_line = h.tmux("show-environment", "-t", pane, "OPENCODE_CONFIG_DIR", check=False)
    # The pane's own environment (what opencode reads) holds it; the server's global one not.
    pid = h.pane_format(pane, "#{pane_pid}")
    with open(f"/proc/{pid}/environ", "rb") as fh:
        assert f"OPENCODE_CONFIG_DIR={config}".encode() in fh.read().split(b"\0")
    assert "OPENCODE_CONFIG_DIR=" not in env_line
