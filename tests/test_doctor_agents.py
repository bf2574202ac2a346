"""`cafleet doctor`'s coding-agents and member-permissions sections (docs/cli.md §3.3):
states per agent, superseded notes, the rules that would block members, and that doctor
changes nothing."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from cafleet.agents.claude.rules import claude_rule_matches
from cafleet.agents.codex.rules import codex_decision, parse_rules
from cafleet.agents.opencode.rules import strip_jsonc
from tests.assets_helpers import AGENTS, VERSION, agent_dir, install_fake_agents, tree
from tests.cli_helpers import run_cli, snapshot, sql


@pytest.fixture(autouse=True)
def agent_bin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every agent installed (the fake agents first on PATH): the rows here are about assets."""
    bin_dir = install_fake_agents(tmp_path / "agent-bin")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return bin_dir


def doctor_json() -> dict[str, Any]:
    code, out, err = run_cli("doctor", "--json")
    assert err == ""
    data = json.loads(out)
    assert code == (0 if data["issues"] == 0 else 1)
    return data


def rows(data: dict[str, Any], section: str) -> dict[str, dict[str, Any]]:
    return {row["coding_agent"]: row for row in data[section]}


def test_a_set_up_home_has_no_agent_issues(head_db: Path) -> None:
    data = doctor_json()
    assert data["issues"] == 1  # the multiplexer: not inside tmux
    agents = rows(data, "coding_agents")
    assert [a["state"] for a in agents.values()] == ["ok"] * len(AGENTS)
    assert list(agents["codex"]) == [
        "coding_agent",
        "path",
        "source",
        "installed_version",
        "installed_at",
        "state",
        "ok",
        "superseded",
        "error",
        "binary",
    ]
    assert agents["codex"]["path"] == str(agent_dir("codex"))
    assert agents["codex"]["source"] == "default"
    assert agents["codex"]["installed_version"] == VERSION
    permissions = rows(data, "member_permissions")
    assert list(permissions["claude"]) == ["coding_agent", "ok", "checked", "blocking", "notes",
                                           "error"]  # fmt: skip
    assert all(p["ok"] for p in permissions.values())
    assert permissions["codex"]["checked"] == [str(agent_dir("codex") / "rules" / "cafleet.rules")]


def test_states_stale_and_missing_each_one_issue(head_db: Path, agent_bin: Path) -> None:
    sql(
        head_db, "UPDATE asset_installs SET cafleet_version = '0.0.9' WHERE coding_agent = 'claude'"
    )
    (agent_dir("codex") / "skills" / "cafleet" / "monitor.md").unlink()
    edited = agent_dir("opencode") / "skills" / "cafleet" / "SKILL.md"
    edited.write_text(edited.read_text() + "\nmy own line\n")
    trees = {a: tree(agent_dir(a)) for a in AGENTS}
    before = snapshot(head_db)
    data = doctor_json()
    agents = rows(data, "coding_agents")
    assert {a: r["state"] for a, r in agents.items()} == {
        "claude": "stale",
        "codex": "missing",
        "opencode": "stale",
        "gemini": "ok",
    }
    assert agents["claude"]["error"] == (
        "installed by cafleet 0.0.9; run 'cafleet setup --coding-agent claude'"
    )
    assert agents["codex"]["error"] == (
        "missing skills/cafleet/monitor.md; run 'cafleet setup --coding-agent codex'"
    )
    assert agents["opencode"]["error"] == (
        "differs from this version: skills/cafleet/SKILL.md; "
        "run 'cafleet setup --coding-agent opencode'"
    )
    assert data["issues"] == 1 + 3
    # doctor read and compared; it wrote nothing.
    assert snapshot(head_db) == before
    assert {a: tree(agent_dir(a)) for a in AGENTS} == trees
    code, out, _ = run_cli("doctor")
    assert "✗ coding agents\n" in out
    assert (
        f"  claude:    stale  {agent_bin / 'claude'} (fake-claude 0.0.0); assets "
        f"{agent_dir('claude')} (default ~/.claude), cafleet 0.0.9: "
        "installed by cafleet 0.0.9; run 'cafleet setup --coding-agent claude'\n" in out
    )
    assert out.endswith("4 issues found\n")


def test_claude_rules_that_block_members(head_db: Path, tmp_path: Path) -> None:
    user = agent_dir("claude") / "settings.json"
    user.write_text(json.dumps({"permissions": {
        "allow": ["Bash(cafleet *)"],
        "deny": ["Bash(rm -rf *)", "Bash(cafleet message send:*)"],
        "ask": ["Bash(cafleet monitor *)"],
    }}))  # fmt: skip
    data = doctor_json()
    claude = rows(data, "member_permissions")["claude"]
    assert claude["ok"] is False
    assert claude["blocking"] == [
        {
            "file": str(user),
            "rule": "deny Bash(cafleet message send:*)",
            "command": "cafleet message send --from-member-id 1 --to-member-id 2 done",
        },
        {"file": str(user), "rule": "ask Bash(cafleet monitor *)",
         "command": "cafleet monitor scan 1 --json"},
    ]  # fmt: skip
    user.write_text("{not json")
    claude = rows(doctor_json(), "member_permissions")["claude"]
    assert claude["ok"] is False and claude["error"].startswith(f"cannot read {user}: ")


def test_claude_rules_that_limit_a_profile_are_notes(head_db: Path) -> None:
    """docs/permissions.md §4: rules on Write/Edit/Bash that block no cafleet command still
    refuse or ask under the workspace and full profiles: reported, not failed."""
    user = agent_dir("claude") / "settings.json"
    user.write_text(json.dumps({"permissions": {
        "deny": ["Write", "Bash(rm -rf *)", "WebFetch"], "ask": ["Edit(src/**)"],
    }}))  # fmt: skip
    data = doctor_json()
    claude = rows(data, "member_permissions")["claude"]
    assert claude["ok"] is True and claude["blocking"] == []
    assert claude["notes"] == [
        f"{user}: deny Write refuses edits under the workspace and full profiles",
        f"{user}: deny Bash(rm -rf *) refuses commands under the workspace and full profiles",
        f"{user}: ask Edit(src/**) asks for edits under the workspace and full profiles",
    ]
    code, out, _ = run_cli("doctor")
    assert f"  note: claude: {user}: deny Write refuses edits under the workspace" in out


def test_claude_project_settings_are_read_from_the_current_directory(
    head_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.cli_helpers import call_run

    project = tmp_path / "project"
    (project / ".claude").mkdir(parents=True)
    local = project / ".claude" / "settings.local.json"
    local.write_text(json.dumps({"permissions": {"deny": ["Bash"]}}))
    monkeypatch.chdir(project)
    result = call_run("doctor", "--json")
    claude = rows(json.loads(result.stdout), "member_permissions")["claude"]
    assert [b["rule"] for b in claude["blocking"]] == ["deny Bash"]
    assert claude["checked"] == [str(local)]


def test_codex_rules_that_block_members(head_db: Path) -> None:
    user = agent_dir("codex") / "rules" / "user.rules"
    user.write_text(
        'prefix_rule(pattern=["git", "push"], decision="forbidden")\n'
        'prefix_rule(pattern=["cafleet", ["message", "member"]], decision="prompt")\n'
    )
    codex = rows(doctor_json(), "member_permissions")["codex"]
    assert codex["ok"] is False
    assert codex["blocking"] == [
        {
            "file": str(user),
            "rule": 'prefix_rule(pattern=["cafleet", ["message", "member"]], decision="prompt")',
            "command": "cafleet message poll 1",
        }
    ]
    user.write_text("prefix_rule(pattern=[")
    codex = rows(doctor_json(), "member_permissions")["codex"]
    assert codex["ok"] is False and codex["error"].startswith(f"cannot parse {user}: ")


def test_opencode_rules_are_overridden_by_the_preset(head_db: Path) -> None:
    config = agent_dir("opencode") / "opencode.jsonc"
    config.write_text(
        '{\n  // members must not run cafleet?\n  "permission": {"bash": {"cafleet *": "deny",},},\n}\n'
    )
    opencode = rows(doctor_json(), "member_permissions")["opencode"]
    assert opencode["ok"] is True
    assert opencode["notes"] == [
        f'{config}: bash "cafleet *": deny is overridden by the cafleet agent preset\'s '
        '"cafleet *": allow'
    ]
    (agent_dir("opencode") / "agents" / "cafleet.md").unlink()
    data = doctor_json()
    opencode = rows(data, "member_permissions")["opencode"]
    assert opencode["ok"] is False
    assert opencode["blocking"] == [
        {"file": str(config), "rule": 'bash "cafleet *": deny', "command": "cafleet message poll 1"}
    ]
    assert opencode["error"] == (
        "the cafleet agent preset is missing; run 'cafleet setup --coding-agent opencode'"
    )
    assert rows(data, "coding_agents")["opencode"]["state"] == "missing"


@pytest.mark.parametrize(
    ("rule", "command", "matches"),
    [
        ("Bash", "cafleet message poll 1", True),
        ("Bash(*)", "cafleet message poll 1", True),
        ("Bash(cafleet message *)", "cafleet message poll 1", True),
        ("Bash(cafleet message *)", "cafleet messages 1", False),
        ("Bash(cafleet:*)", "cafleet message poll 1", True),
        ("Bash(cafleetx:*)", "cafleet message poll 1", False),
        ("Bash(cafleet member ping *)", "cafleet member ping 1", True),
        ("Bash(cafleet member ping *)", "cafleet message poll 1", False),
        ("Read(*)", "cafleet message poll 1", False),
    ],
)
def test_claude_rule_matching(rule: str, command: str, matches: bool) -> None:
    assert claude_rule_matches(rule, command) is matches


def test_codex_strictest_decision_wins() -> None:
    rules = parse_rules(
        "r",
        'prefix_rule(pattern=["cafleet"], decision="allow")\n'
        'prefix_rule(pattern=["cafleet", "message", ["poll", "ack"]], decision="forbidden")\n'
        'prefix_rule(pattern=["cafleet", "member"])\n',
    )
    assert codex_decision(rules, "cafleet message poll 1")[0] == "forbidden"
    assert codex_decision(rules, "cafleet message send x")[0] == "allow"
    assert codex_decision(rules, "cafleet member ping 1")[0] == "allow"  # default decision
    assert codex_decision(rules, "git status")[0] is None


def test_strip_jsonc_keeps_strings() -> None:
    text = '{"a": "// not a comment", /* x */ "b": [1, 2,], // c\n "c": "/* s */",}'
    assert json.loads(strip_jsonc(text)) == {"a": "// not a comment", "b": [1, 2], "c": "/* s */"}


def test_doctor_without_home_reports_unresolved_agents(
    db_path: Path, tmp_path: Path, agent_bin: Path
) -> None:
    env = {"HOME": None, "CAFLEET_DATABASE_URL": f"sqlite:///{db_path}"}
    code, out, _ = run_cli("doctor", "--json", env=env)
    agents = rows(json.loads(out), "coding_agents")
    assert agents["claude"] == {
        "coding_agent": "claude",
        "path": None,
        "source": None,
        "installed_version": None,
        "installed_at": None,
        "state": "missing",
        "ok": False,
        "superseded": [],
        "error": "cannot resolve claude's configuration directory: HOME is not set "
        "(set CLAUDE_CONFIG_DIR)",
        "binary": {
            "path": str(agent_bin / "claude"),
            "version": "fake-claude 0.0.0",
            "error": None,
        },
    }
    assert not os.path.exists(db_path)
