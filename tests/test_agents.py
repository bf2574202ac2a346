"""Coding agents: argv builders, validation messages, availability, prompt templates (unit)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cafleet.agents import (
    AgentUnavailable,
    AgentUsageError,
    CodingAgent,
    agent_names,
    get_agent,
)
from cafleet.agents.claude import WORKSPACE_SETTINGS
from cafleet.agents.permissions import PROFILES, shown_profile, validate_profile
from cafleet.agents.prompt import (
    PromptTemplateError,
    load_default_member_prompt,
    load_default_monitor_prompt,
    render_template,
    validate_template,
)

BIN = "/opt/bin/agent"


def build(name: str, **kw: object) -> list[str]:
    args: dict[str, object] = {
        "binary_path": BIN,
        "prompt": "PROMPT",
        "display_name": "worker 1",
        "model": None,
        "effort": None,
        "monitor": False,
    }
    args.update(kw)
    return get_agent(name).build_argv(**args)  # type: ignore[arg-type]


def test_registry() -> None:
    assert agent_names() == ("claude", "codex", "opencode", "gemini")
    for name in agent_names():
        agent = get_agent(name)
        assert isinstance(agent, CodingAgent)
        assert agent.name == name and agent.binary == name


# --------------------------------------------------------------------------- claude


def test_claude_member_argv_per_profile() -> None:
    """docs/permissions.md §2: the default profile is workspace."""
    ask_rules = json.loads(WORKSPACE_SETTINGS)["permissions"]["ask"]
    assert "Bash(curl *)" in ask_rules and "WebFetch" in ask_rules
    assert build("claude") == build("claude", permissions="workspace") == [
        BIN, "--permission-mode", "acceptEdits", "--settings", WORKSPACE_SETTINGS,
        "--allowedTools", "Bash", "--name", "worker 1", "PROMPT",
    ]  # fmt: skip
    assert build("claude", permissions="readonly") == [
        BIN, "--permission-mode", "dontAsk", "--allowedTools", "Bash(cafleet message *)",
        "Bash(cafleet task *)", "--name", "worker 1", "PROMPT",
    ]  # fmt: skip
    assert build("claude", permissions="ask") == [
        BIN, "--permission-mode", "default", "--allowedTools", "Bash(cafleet message *)",
        "Bash(cafleet task *)", "--name", "worker 1", "PROMPT",
    ]  # fmt: skip
    assert build("claude", permissions="full") == [
        BIN, "--permission-mode", "bypassPermissions", "--name", "worker 1", "PROMPT",
    ]  # fmt: skip


def test_claude_monitor_argv_with_model_and_effort() -> None:
    assert build("claude", monitor=True, model="opus", effort="high") == [
        BIN, "--permission-mode", "dontAsk", "--allowedTools",
        "Bash(cafleet message *)", "Bash(cafleet monitor scan *)", "Bash(cafleet member ping *)",
        "--name", "monitor", "--model", "opus", "--effort", "high", "PROMPT",
    ]  # fmt: skip


def test_claude_model_only() -> None:
    argv = build("claude", model="sonnet")
    assert argv[-3:] == ["--model", "sonnet", "PROMPT"]
    assert "--effort" not in argv


# --------------------------------------------------------------------------- codex


def test_codex_argv(tmp_path: Path) -> None:
    argv = build("codex", db_dir=str(tmp_path), model="gpt-5", effort="high", monitor=True)
    assert argv == [
        BIN, "--ask-for-approval", "never", "--sandbox", "workspace-write",
        "--add-dir", str(tmp_path), "--model", "gpt-5",
        "--config=model_reasoning_effort=high", "PROMPT",
    ]  # fmt: skip


def test_codex_db_dir_defaults_to_resolved_database(db_path: Path) -> None:
    argv = build("codex")
    assert argv == [
        BIN, "--ask-for-approval", "on-request", "--sandbox", "workspace-write",
        "--add-dir", str(db_path.parent), "PROMPT",
    ]  # fmt: skip
    assert os.path.isabs(argv[6])


def test_codex_member_argv_per_profile(tmp_path: Path) -> None:
    """docs/permissions.md §2; the monitor ignores the profile."""
    d = str(tmp_path)
    assert build("codex", db_dir=d, permissions="ask") == [
        BIN, "--ask-for-approval", "on-request", "--sandbox", "read-only", "PROMPT",
    ]  # fmt: skip
    assert build("codex", db_dir=d, permissions="readonly") == [
        BIN, "--ask-for-approval", "never", "--sandbox", "read-only", "PROMPT",
    ]  # fmt: skip
    assert build("codex", db_dir=d, permissions="full") == [
        BIN, "--dangerously-bypass-approvals-and-sandbox", "PROMPT",
    ]  # fmt: skip
    assert build("codex", db_dir=d, permissions="full", monitor=True) == [
        BIN, "--ask-for-approval", "never", "--sandbox", "workspace-write", "--add-dir", d,
        "PROMPT",
    ]  # fmt: skip


# --------------------------------------------------------------------------- opencode


def test_opencode_argv() -> None:
    agent = ["--agent", "cafleet"]  # the preset `cafleet setup` installs (docs/runtime.md §7.4)
    assert build("opencode", model="p/m") == [BIN, *agent, "--model", "p/m", "--prompt", "PROMPT"]
    assert build("opencode") == [BIN, *agent, "--prompt", "PROMPT"]
    for profile in ("ask", "readonly", "full"):
        argv = build("opencode", permissions=profile)
        assert argv == [BIN, "--agent", f"cafleet-{profile}", "--prompt", "PROMPT"]
        assert build("opencode", permissions=profile, monitor=True)[1:3] == agent


def test_claude_monitor_ignores_the_profile() -> None:
    assert build("claude", monitor=True, permissions="full") == build("claude", monitor=True)


def test_profile_names() -> None:
    assert PROFILES == ("workspace", "ask", "readonly", "full")
    validate_profile("ask")
    with pytest.raises(AgentUsageError, match="must be one of workspace, ask, readonly, full"):
        validate_profile("yolo")
    assert shown_profile("member", None) == "readonly"  # recorded before profiles existed
    assert shown_profile("member", "ask") == "ask"
    assert shown_profile("monitor", None) is None and shown_profile("director", None) is None


def test_pane_env() -> None:
    """Only opencode's panes get a variable of their own: it then loads its own copy of the
    cafleet skill, never Claude Code's (it reads ~/.claude/skills too)."""
    assert get_agent("opencode").pane_env() == {"OPENCODE_DISABLE_CLAUDE_CODE_SKILLS": "1"}
    assert get_agent("claude").pane_env() == {} and get_agent("codex").pane_env() == {}


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize("name", agent_names())
@pytest.mark.parametrize("flag", ["--model", "--monitor-model"])
def test_empty_model(name: str, flag: str) -> None:
    with pytest.raises(AgentUsageError) as exc:
        get_agent(name).validate_model("", flag=flag)
    assert str(exc.value) == f"{flag} may not be empty"


@pytest.mark.parametrize("model", ["m", "/m", "p/", "/"])
def test_opencode_model_shape(model: str) -> None:
    with pytest.raises(AgentUsageError) as exc:
        get_agent("opencode").validate_model(model, flag="--model")
    assert str(exc.value) == (
        f"--model for the opencode coding agent must be '<provider-id>/<model-id>' (got '{model}')"
    )


def test_valid_models() -> None:
    get_agent("opencode").validate_model("p/m/x", flag="--model")
    get_agent("claude").validate_model("m", flag="--model")
    get_agent("codex").validate_model("any/thing", flag="--model")
    for name in agent_names():
        get_agent(name).validate_model(None, flag="--model")
        get_agent(name).validate_effort(None, flag="--effort")


@pytest.mark.parametrize("effort", ["low", "medium", "high", "xhigh", "max"])
def test_claude_efforts_ok(effort: str) -> None:
    get_agent("claude").validate_effort(effort, flag="--effort")


@pytest.mark.parametrize("effort", ["minimal", "low", "medium", "high", "xhigh"])
def test_codex_efforts_ok(effort: str) -> None:
    get_agent("codex").validate_effort(effort, flag="--effort")


@pytest.mark.parametrize(
    ("name", "value", "levels"),
    [
        ("claude", "minimal", "low, medium, high, xhigh, max"),
        ("claude", "", "low, medium, high, xhigh, max"),
        ("codex", "max", "minimal, low, medium, high, xhigh"),
        ("codex", "HIGH", "minimal, low, medium, high, xhigh"),
    ],
)
def test_bad_effort(name: str, value: str, levels: str) -> None:
    with pytest.raises(AgentUsageError) as exc:
        get_agent(name).validate_effort(value, flag="--monitor-effort")
    assert str(exc.value) == (
        f"--monitor-effort for the {name} coding agent must be one of {levels} (got '{value}')"
    )


@pytest.mark.parametrize("effort", ["high", ""])
def test_opencode_rejects_any_effort(effort: str) -> None:
    with pytest.raises(AgentUsageError) as exc:
        get_agent("opencode").validate_effort(effort, flag="--effort")
    assert str(exc.value) == "the opencode coding agent does not support --effort"


# --------------------------------------------------------------------------- availability


def test_ensure_available(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    binary = tmp_path / "codex"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert get_agent("codex").ensure_available() == str(binary)
    with pytest.raises(AgentUnavailable) as exc:
        get_agent("claude").ensure_available()
    assert str(exc.value) == "binary claude not found on PATH"
    assert not isinstance(exc.value, AgentUsageError)


# --------------------------------------------------------------------------- templates

UNKNOWN = (
    "unknown placeholder '{field}' in the spawn prompt; supported placeholders are "
    "{{fleet_id}}, {{member_id}}, {{director_member_id}}, {{coding_agent}}; "
    "write {{{{ and }}}} for literal braces"
)
MALFORMED = "malformed spawn prompt: {detail}; write {{{{ and }}}} for literal braces"


@pytest.mark.parametrize(
    ("template", "field"),
    [
        ("hi {name}", "name"),
        ("{0}", "0"),
        ("{}", ""),
        ("{fleet_id.x}", "fleet_id.x"),
        ("{fleet_id[0]}", "fleet_id[0]"),
        ("{member_id} then {other} then {bad", "other"),
        ("{a}}", "a"),
        ("{name!r}", "name!r"),
    ],
)
def test_unknown_placeholder(template: str, field: str) -> None:
    with pytest.raises(PromptTemplateError) as exc:
        validate_template(template)
    assert str(exc.value) == UNKNOWN.format(field=field)
    assert isinstance(exc.value, AgentUsageError)


@pytest.mark.parametrize(
    ("template", "detail"),
    [
        ("{fleet_id!r}", "format specs and conversions are not supported"),
        ("{member_id:>5}", "format specs and conversions are not supported"),
        ("{fleet_id:{member_id}}", "format specs and conversions are not supported"),
        ("a } b", "unmatched '}'"),
        ("{fleet_id}}", "unmatched '}'"),
        ("a { b", "unmatched '{'"),
        ("{fleet_id", "unmatched '{'"),
        ("{", "unmatched '{'"),
        ("{fleet_id!}", "unmatched '{'"),
    ],
)
def test_malformed(template: str, detail: str) -> None:
    with pytest.raises(PromptTemplateError) as exc:
        validate_template(template)
    assert str(exc.value) == MALFORMED.format(detail=detail)


@pytest.mark.parametrize("template", ["-x", "- list item {fleet_id}", "--help"])
def test_leading_dash(template: str) -> None:
    with pytest.raises(PromptTemplateError) as exc:
        validate_template(template)
    assert str(exc.value) == (
        "spawn prompt may not start with '-' (the coding agent would read it as an option)"
    )


def test_render() -> None:
    template = (
        "F={fleet_id} M={member_id} D={director_member_id} A={coding_agent} {{x}} }}{{\n"
        "#fake run cafleet member show {member_id}\n x-"
    )
    validate_template(template)
    rendered = render_template(
        template, fleet_id=3, member_id=12, director_member_id=10, coding_agent="codex"
    )
    assert rendered == "F=3 M=12 D=10 A=codex {x} }{\n#fake run cafleet member show 12\n x-"


def test_plain_and_indented_dash_templates_are_fine() -> None:
    for template in ("", "plain", " - item", "a - b", "{{}}"):
        validate_template(template)


def test_default_monitor_prompt() -> None:
    text = load_default_monitor_prompt()
    validate_template(text)
    rendered = render_template(
        text, fleet_id=3, member_id=11, director_member_id=10, coding_agent="claude"
    )
    assert rendered.startswith(
        "You are the monitor of cafleet fleet 3. You watch the fleet; you never edit files and "
        "never do the members' work.\n\nFLEET ID: 3\nYOUR MEMBER ID: 11\n"
        "DIRECTOR MEMBER ID: 10\nCODING AGENT: claude\n\n"
        "Load the `cafleet` skill now and follow its monitor role (monitor.md).\n\n"
    )
    assert '  cafleet message send --from-member-id 11 --to-member-id 10 "ready"\n' in rendered
    assert "  cafleet message poll 11\n" in rendered
    assert "1. Run `cafleet monitor scan 3 --json` once.\n" in rendered
    assert "   cafleet member ping <member id>\n" in rendered
    assert 'A line starting "[cafleet] tick: fleet 3" is your wake-up.' in rendered
    assert rendered.endswith(
        "If a typed line interrupted something you were doing, finish handling the line and "
        "then resume.\n"
    )
    assert "{" not in rendered and "}" not in rendered
    # Only commands on the monitor's claude allow-list are used.
    for line in rendered.splitlines():
        stripped = line.strip().strip("`").removeprefix("1. Run `")
        if stripped.startswith("cafleet "):
            assert stripped.split()[1] in ("message", "monitor", "member")
            if stripped.split()[1] == "member":
                assert stripped.split()[2] == "ping"
            if stripped.split()[1] == "monitor":
                assert stripped.split()[2] == "scan"


def test_default_member_prompt() -> None:
    """`member create` without PROMPT: the member's ids and the skill to load (docs/runtime.md §7.4)."""
    text = load_default_member_prompt()
    validate_template(text)
    rendered = render_template(
        text, fleet_id=3, member_id=12, director_member_id=10, coding_agent="codex"
    )
    assert rendered.startswith(
        "You are a member of cafleet fleet 3. The Director gives you your work as cafleet "
        "messages; you do it and report back the same way.\n\nFLEET ID: 3\n"
        "YOUR MEMBER ID: 12\nDIRECTOR MEMBER ID: 10\nCODING AGENT: codex\n\n"
        "Load the `cafleet` skill now and follow its member role (member.md).\n"
    )
    assert '  cafleet message send --from-member-id 12 --to-member-id 10 "ready"\n' in rendered
    assert "  cafleet message poll 12\n" in rendered
    assert "  cafleet message ack <id>\n" in rendered
    assert "{" not in rendered and "}" not in rendered
    # Only `cafleet message …`: what a member's claude allow-list permits (docs/runtime.md §2.2).
    commands = [line.strip() for line in rendered.splitlines() if "cafleet " in line]
    assert commands and all(
        c.startswith("cafleet message ") for c in commands if c.startswith("cafleet ")
    )


def test_fake_bin_fixture_provides_every_agent(fake_bin: Path) -> None:
    """claude and codex need only their binary; opencode also needs the installed preset."""
    from cafleet.assets.bundle import units_for
    from cafleet.assets.install import install_units
    from cafleet.assets.targets import resolve_target

    for name in ("claude", "codex"):
        assert get_agent(name).ensure_available() == str(fake_bin / name)
    preset = Path(os.environ["HOME"]) / ".config" / "opencode" / "agents" / "cafleet.md"
    with pytest.raises(AgentUnavailable) as exc:
        get_agent("opencode").ensure_available()
    assert str(exc.value) == (
        f"the cafleet agent preset for opencode is not installed ({preset} is missing); "
        "run 'cafleet setup --coding-agent opencode'"
    )
    install_units(resolve_target("opencode").path, units_for("opencode", "0.1.0"))
    assert preset.is_file()
    assert get_agent("opencode").ensure_available() == str(fake_bin / "opencode")


# --------------------------------------------------------------------------- resuming


def resume(name: str, **kw: object) -> list[str]:
    args: dict[str, object] = {
        "binary_path": BIN,
        "session_id": "SID",
        "display_name": "worker 1",
        "model": None,
        "effort": None,
        "monitor": False,
        "db_dir": "/db",
    }
    args.update(kw)
    return get_agent(name).build_resume_argv(**args)  # type: ignore[arg-type]


def test_resume_argv_of_each_agent() -> None:
    """docs/runtime.md §9.7: the spawn command with the agent's resume form instead of the
    prompt (Claude Code `--resume <id>`, Codex `resume … <id>`, opencode `--session <id>`)."""
    assert resume("claude", model="opus", effort="high", permissions="readonly") == [
        BIN, "--permission-mode", "dontAsk", "--allowedTools", "Bash(cafleet message *)",
        "Bash(cafleet task *)", "--name", "worker 1", "--model", "opus", "--effort", "high", "--resume", "SID",
    ]  # fmt: skip
    assert resume("codex", effort="low", permissions="workspace") == [
        BIN, "resume", "--ask-for-approval", "on-request", "--sandbox", "workspace-write",
        "--add-dir", "/db", "--config=model_reasoning_effort=low", "SID",
    ]  # fmt: skip
    assert resume("opencode", model="anthropic/claude-sonnet-4-5") == [
        BIN, "--agent", "cafleet", "--model", "anthropic/claude-sonnet-4-5", "--session", "SID",
    ]  # fmt: skip


@pytest.mark.parametrize("name", ["claude", "codex", "opencode"])
@pytest.mark.parametrize("profile", ["workspace", "ask", "readonly", "full"])
def test_resume_keeps_the_members_permission_profile(name: str, profile: str) -> None:
    """A resumed member runs with the same profile flags as its spawn (docs/permissions.md):
    the spawn argv's words before the prompt all appear, in order, in the resume argv."""
    agent = get_agent(name)
    spawn = agent.build_argv(
        binary_path=BIN, prompt="PROMPT", display_name="worker 1", model=None, effort=None,
        monitor=False, db_dir="/db", permissions=profile,
    )  # fmt: skip
    leading = spawn[1 : len(spawn) - len(agent.prompt_args("PROMPT"))]
    resumed = resume(name, permissions=profile)
    words = iter(resumed)
    assert all(word in words for word in leading), (leading, resumed)
    assert resumed[-1] == "SID"
