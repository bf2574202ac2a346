"""Permission profiles through the CLI with fake agents (docs/permissions.md §1, §2): the flags,
the fleet default, what is stored, shown and passed to the agent, the `full` warning, an
unknown name refused with nothing written, and `member respawn` keeping the profile."""

from __future__ import annotations

import json
import re

import pytest

from cafleet.agents.claude import profile_args, with_hook_settings
from cafleet.agents.permissions import FULL_WARNING
from tests.fleet_helpers import create_fleet, create_member, ok, table_dump
from tests.harness.fixtures import TmuxHarness
from tests.harness.util import start_record

pytestmark = [pytest.mark.tmux]
PROMPT = "You are {member_id}."


def hooked(profile: str, member_id: int) -> list[str]:
    """The profile's flags as a member gets them: its hooks merged in (docs/runtime.md §4.12)."""
    return with_hook_settings(["claude", *profile_args(profile), "--name", "n"], member_id)[1:-2]


def _spawned_profile(h: TmuxHarness, member_id: int) -> str | None:
    return h.sqlite("SELECT permissions FROM member_spawns WHERE member_id = ?", member_id)[0][0]


def test_cli_choices_are_the_profiles() -> None:
    from cafleet.agents.permissions import PROFILES
    from cafleet.cli.params import PERMISSION_PROFILES

    assert PERMISSION_PROFILES == PROFILES


def test_unknown_profile_is_a_usage_error_and_writes_nothing(tmux_db: TmuxHarness) -> None:
    h = tmux_db
    ids = create_fleet(h)
    before = table_dump(h)
    spawns = h.sqlite("SELECT * FROM member_spawns")
    r = h.cli(
        "member", "create", "--fleet-id", str(ids.fleet_id), "--name", "x", "--description", "d",
        "--permissions", "yolo", PROMPT,
    )  # fmt: skip
    assert r.returncode == 2 and r.stdout == ""
    assert "Error: Invalid value for '--permissions': 'yolo' is not one of" in r.stderr
    assert table_dump(h) == before and h.sqlite("SELECT * FROM member_spawns") == spawns
    r = h.cli("fleet", "create", "--name", "f2", "--coding-agent", "claude", "--permissions", "")
    assert r.returncode == 2 and "Invalid value for '--permissions'" in r.stderr
    assert table_dump(h) == before


def test_default_is_workspace_and_each_profile_reaches_the_agent(tmux_db: TmuxHarness) -> None:
    h = tmux_db
    ids = create_fleet(h)
    assert h.sqlite("SELECT member_defaults_json FROM fleets WHERE fleet_id = ?", ids.fleet_id) == [
        (None,)
    ]
    plain, pane = create_member(h, ids.fleet_id, "plain", PROMPT)
    assert _spawned_profile(h, plain) == "workspace"
    assert start_record(pane)["argv"][1:-3] == hooked("workspace", plain)
    for profile in ("ask", "readonly"):
        member, pane = create_member(h, ids.fleet_id, profile, PROMPT, "--permissions", profile)
        assert _spawned_profile(h, member) == profile
        assert start_record(pane)["argv"][1:-3] == hooked(profile, member)
        shown = ok(h.cli("member", "show", str(member))).stdout
        assert f"\npermissions:     {profile}\n" in shown
        assert (
            json.loads(ok(h.cli("member", "show", str(member), "--json")).stdout)["permissions"]
            == profile
        )
    roster = json.loads(ok(h.cli("member", "list", str(ids.fleet_id), "--json")).stdout)
    assert {r["name"]: r["permissions"] for r in roster} == {
        "Director": None, "monitor": None, "plain": "workspace", "ask": "ask",
        "readonly": "readonly",
    }  # fmt: skip
    # The monitor keeps its own rules, whatever the fleet's default.
    assert h.sqlite(
        "SELECT permissions FROM member_spawns WHERE member_id = ?", ids.monitor_id
    ) == [(None,)]


def test_full_warns_and_the_fleet_default_applies(tmux_db: TmuxHarness) -> None:
    h = tmux_db
    r = ok(h.cli("fleet", "create", "--name", "f", "--coding-agent", "claude",
                 "--permissions", "readonly"))  # fmt: skip
    fleet_id = int(r.stdout.split()[0])
    assert FULL_WARNING not in r.stderr
    assert h.sqlite("SELECT member_defaults_json FROM fleets WHERE fleet_id = ?", fleet_id) == [
        ('{"permissions": "readonly"}',)
    ]
    by_default, _ = create_member(h, fleet_id, "a", PROMPT)
    assert _spawned_profile(h, by_default) == "readonly"
    r = ok(
        h.cli(
            "member",
            "create",
            "--fleet-id",
            str(fleet_id),
            "--name",
            "b",
            "--description",
            "d",
            "--permissions",
            "full",
            PROMPT,
            "--json",
        )  # fmt: skip
    )
    assert r.stderr.splitlines() == [FULL_WARNING]
    record = json.loads(r.stdout)
    assert record["permissions"] == "full"
    argv = start_record(record["placement"]["mux_pane_id"])["argv"]
    assert argv[1:3] == ["--permission-mode", "bypassPermissions"]
    # A fleet whose default is full warns at fleet create too (run from another pane).
    other = h.split(["sh"])
    r = h.cli("fleet", "create", "--name", "g", "--coding-agent", "claude", "--permissions",
              "full", env={"TMUX_PANE": other})  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert FULL_WARNING in r.stderr.splitlines()


def test_respawn_keeps_the_profile(tmux_db: TmuxHarness) -> None:
    h = tmux_db
    ids = create_fleet(h)
    member, pane = create_member(h, ids.fleet_id, "m", PROMPT, "--permissions", "ask")
    first = start_record(pane)["argv"]
    h.tmux("kill-pane", "-t", pane)
    result = ok(h.cli("member", "respawn", str(member)))
    new_pane = re.search(r"in pane (%\d+)", result.stdout)
    assert new_pane, result.stdout
    again = start_record(new_pane.group(1))["argv"]
    assert again == first and again[1:-3] == hooked("ask", member)
    # A member recorded before profiles existed (NULL) respawns with what it ran then.
    from tests.fleet_helpers import sql_write

    sql_write(h, "UPDATE member_spawns SET permissions = NULL WHERE member_id = ?", member)
    h.tmux("kill-pane", "-t", new_pane.group(1))
    result = ok(h.cli("member", "respawn", str(member)))
    legacy = re.search(r"in pane (%\d+)", result.stdout)
    assert legacy, result.stdout
    assert start_record(legacy.group(1))["argv"][1:-3] == hooked("readonly", member)
