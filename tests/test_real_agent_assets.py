"""The installed assets as the real agents see them (docs/runtime.md §7.4; real-clients.md): opencode
lists our skill at our path and resolves our agent preset, Codex shows our skill in its
model-visible prompt and its policy checker allows cafleet commands under our rules, and Claude
Code's `/skills` lists the skill. Each agent reads the files `cafleet setup` wrote under the
test's HOME (or the agent's own variable), so these prove the install targets."""

from __future__ import annotations

from pathlib import Path

import pytest

from cafleet.agents.codex.rules import codex_decision, parse_rules
from cafleet.assets.bundle import skill_files
from cafleet.assets.permissions import NEEDED_COMMANDS
from tests.assets_helpers import VERSION, agent_dir, home
from tests.cli_helpers import run_cli
from tests.harness.util import retry_until
from tests.real_agent_cli import (
    CLAUDE_KEY,
    agent_env,
    capture,
    claude_ready_home,
    json_from,
    private_tmux,
    require_binary,
    run_agent,
    send_keys,
)
from tests.test_skills import split_front_matter

pytestmark = pytest.mark.real_agent


def setup_for(agent: str, env: dict[str, str] | None = None) -> None:
    code, out, err = run_cli("setup", "--coding-agent", agent, env=env)
    assert code == 0, err


def our_skill() -> tuple[dict, str]:
    return split_front_matter(skill_files("cafleet", VERSION)["SKILL.md"].decode("utf-8"))


@pytest.mark.parametrize("own_dir", [False, True], ids=["default", "OPENCODE_CONFIG_DIR"])
def test_opencode_lists_our_skill_and_resolves_our_preset(
    db_path: Path, tmp_path: Path, own_dir: bool
) -> None:
    opencode = require_binary("opencode")
    env = {"OPENCODE_CONFIG_DIR": str(tmp_path / "oc")} if own_dir else {}
    root = tmp_path / "oc" if own_dir else agent_dir("opencode")
    # Every agent's assets: opencode also reads ~/.claude/skills; with the pane variables
    # cafleet gives an opencode member it reads only its own copy (a duplicate name is otherwise
    # resolved at random), so the location is always ours.
    code, _out, err = run_cli("setup", env=env)
    assert code == 0, err
    from cafleet.agents import get_agent

    env.update(get_agent("opencode").pane_env())
    project = tmp_path / "project"

    result = run_agent(opencode, "debug", "skill", home=home(), cwd=project, env=env)
    assert result.returncode == 0, result.stderr
    skills = {s["name"]: s for s in json_from(result.stdout)}
    meta, body = our_skill()
    assert skills["cafleet"]["location"] == str(root / "skills" / "cafleet" / "SKILL.md")
    assert skills["cafleet"]["description"] == meta["description"]
    assert skills["cafleet"]["content"].strip() == body.strip()

    result = run_agent(opencode, "debug", "agent", "cafleet", home=home(), cwd=project, env=env)
    assert result.returncode == 0, result.stderr
    agent = json_from(result.stdout)
    assert (agent["name"], agent["mode"]) == ("cafleet", "primary")
    member = skill_files("cafleet", VERSION)["member.md"].decode("utf-8")
    assert agent["prompt"].strip() == member.strip()
    bash = [r for r in agent["permission"] if r["permission"] == "bash"]
    assert bash[-1] == {"permission": "bash", "pattern": "cafleet *", "action": "allow"}


def _codex_skills_section(stdout: str) -> str:
    items = json_from(stdout)
    for item in items:
        for part in item.get("content") or []:
            text = part.get("text", "")
            if "<skills_instructions>" in text:
                return text
    raise AssertionError("no skills section in codex's prompt input")


@pytest.mark.parametrize("own_dir", [False, True], ids=["default", "CODEX_HOME"])
def test_codex_shows_our_skill_in_its_prompt(db_path: Path, tmp_path: Path, own_dir: bool) -> None:
    codex = require_binary("codex")
    env = {"CODEX_HOME": str(tmp_path / "cx")} if own_dir else {}
    root = tmp_path / "cx" if own_dir else agent_dir("codex")
    setup_for("codex", env)
    result = run_agent(codex, "debug", "prompt-input", home=home(), cwd=tmp_path / "p", env=env)
    assert result.returncode == 0, result.stderr
    section = _codex_skills_section(result.stdout)
    roots = dict(
        line.removeprefix("- ").replace("`", "").split(" = ")
        for line in section.splitlines()
        if line.startswith("- `r")
    )
    meta, _body = our_skill()
    entry = next(line for line in section.splitlines() if line.startswith("- cafleet: "))
    assert entry.startswith(f"- cafleet: {meta['description']} (file: r")
    alias = entry.rsplit("(file: ", 1)[1].split("/", 1)[0]
    assert roots[alias] == str(root / "skills")
    assert entry.endswith(f"(file: {alias}/cafleet/SKILL.md)")


def test_codex_policy_allows_cafleet_under_our_rules(db_path: Path, tmp_path: Path) -> None:
    """The real checker allows every command members need under our rules, and agrees with
    doctor's own evaluation once a user rule forbids or prompts some of them."""
    codex = require_binary("codex")
    setup_for("codex")
    ours = agent_dir("codex") / "rules" / "cafleet.rules"
    user = tmp_path / "user.rules"
    user.write_text(
        'prefix_rule(pattern=["cafleet", "monitor"], decision="prompt")\n'
        'prefix_rule(pattern=["cafleet", "message", ["send", "ack"]], decision="forbidden")\n'
    )
    rules = parse_rules(str(ours), ours.read_text()) + parse_rules(str(user), user.read_text())
    for command in NEEDED_COMMANDS:
        argv = command.split()
        only_ours = run_agent(codex, "execpolicy", "check", "--rules", str(ours), *argv,
                              home=home(), cwd=tmp_path / "p")  # fmt: skip
        assert only_ours.returncode == 0, only_ours.stderr
        assert json_from(only_ours.stdout)["decision"] == "allow", command
        both = run_agent(codex, "execpolicy", "check", "--rules", str(ours), "--rules",
                         str(user), *argv, home=home(), cwd=tmp_path / "p")  # fmt: skip
        assert both.returncode == 0, both.stderr
        assert json_from(both.stdout)["decision"] == codex_decision(rules, command)[0], command


def test_claude_code_lists_our_skill(db_path: Path, tmp_path: Path) -> None:
    """`/skills` typed into the real Claude Code TUI lists `cafleet · user`."""
    claude = require_binary("claude")
    setup_for("claude")
    project = tmp_path / "project"
    claude_ready_home(home(), project)
    env = agent_env(home(), {"ANTHROPIC_API_KEY": CLAUDE_KEY, "DISABLE_AUTOUPDATER": "1"})
    with private_tmux([str(claude)], env=env, cwd=project) as (tmux, socket):
        retry_until(lambda: "? for shortcuts" in capture(tmux, socket), timeout=90,
                    message=lambda: capture(tmux, socket))  # fmt: skip
        send_keys(tmux, socket, "-l", "/skills")
        # The composer holds the text once its command menu offers it.
        retry_until(lambda: "List available skills" in capture(tmux, socket), timeout=30,
                    message=lambda: capture(tmux, socket))  # fmt: skip
        send_keys(tmux, socket, "Enter")

        def listed() -> str | None:
            screen = capture(tmux, socket)
            return screen if "cafleet · user" in screen else None

        screen = retry_until(listed, timeout=60, message=lambda: capture(tmux, socket))
    assert "Skills" in screen
    assert (agent_dir("claude") / "skills" / "cafleet" / "SKILL.md").is_file()
