"""One registry of coding agents (docs/maintaining.md §2): every list of agents derives from
`cafleet.agents.registry`, so an agent is its package plus one registry line."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import cafleet
from cafleet.agents import registry
from tests.cli_helpers import REPO_ROOT, cli_env

PACKAGE_DIR = Path(cafleet.__file__).parent
# Generated from the registry (python -m cafleet.db.catalog --write), so exempt.
GENERATED = (PACKAGE_DIR / "db" / "catalog",)
MAX_MODULES = 2


def modules_spelling_agent_names(package_dir: Path, names: tuple[str, ...]) -> dict[str, int]:
    """Modules outside `cafleet/agents/` (and the generated catalogs) with a string literal that
    is an agent's name, and how many each has."""
    found: dict[str, int] = {}
    for path in sorted(package_dir.rglob("*.py")):
        rel = path.relative_to(package_dir)
        if rel.parts[0] == "agents" or any(path.is_relative_to(g) for g in GENERATED):
            continue
        text = path.read_text(encoding="utf-8")
        if not any(f"{q}{name}{q}" in text for name in names for q in "'\""):
            continue  # no literal can be a name: skip the parse
        tree = ast.parse(text, filename=str(path))
        hits = sum(
            1
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and node.value in names
        )  # fmt: skip
        if hits:
            found[str(rel)] = hits
    return found


def test_agent_names_are_spelled_only_in_their_packages() -> None:
    found = modules_spelling_agent_names(PACKAGE_DIR, registry.agent_names())
    assert len(found) <= MAX_MODULES, found


def run_with_testbot(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`cafleet <args>` in a process that registered the test-only agent first."""
    code = (
        "import sys; from cafleet.agents.registry import register; "
        "register('tests.extra_agent'); from cafleet.cli import main; main(sys.argv[1:])"
    )
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        env=cli_env(env),
        cwd=str(REPO_ROOT),
        timeout=60,
    )


def test_a_registered_agent_is_offered_set_up_and_checked(tmp_path: Path) -> None:
    """The test-only agent (tests/extra_agent.py, no other module touched) is a `--coding-agent`
    choice, `setup` installs its skills and its own file, and doctor has its rows."""
    env = {"TESTBOT_HOME": str(tmp_path / "tb")}
    assert "testbot" not in registry.agent_names()  # only the child processes register it

    helped = run_with_testbot("member", "create", "--help", env=env)
    assert helped.returncode == 0, helped.stderr
    assert "claude|codex|opencode|gemini|testbot" in helped.stdout

    refused = run_with_testbot("setup", "--coding-agent", "nobot", env=env)
    assert refused.returncode == 2
    assert "choose from claude, codex, opencode, gemini, testbot" in refused.stderr

    setup = run_with_testbot("setup", "--coding-agent", "testbot", "--json", env=env)
    assert setup.returncode == 0, setup.stderr
    assets = json.loads(setup.stdout)["assets"]
    assert [(a["coding_agent"], a["source"], a["ok"]) for a in assets] == [
        ("testbot", "TESTBOT_HOME", True)
    ]
    assert (tmp_path / "tb" / "skills" / "cafleet" / "SKILL.md").is_file()
    rules = (tmp_path / "tb" / "testbot-rules.txt").read_text(encoding="utf-8")
    assert rules == f"testbot rules of cafleet {cafleet.__version__}\n"

    doctor = run_with_testbot("doctor", "--json", env=env)
    data = json.loads(doctor.stdout)
    agents = {row["coding_agent"]: row for row in data["coding_agents"]}
    assert list(agents) == ["claude", "codex", "opencode", "gemini", "testbot"]
    assert agents["testbot"]["state"] == "ok"
    assert agents["testbot"]["path"] == str(tmp_path / "tb")
    assert "npm install -g testbot-cli" in agents["testbot"]["binary"]["error"]
    permissions = {row["coding_agent"]: row for row in data["member_permissions"]}
    assert permissions["testbot"]["ok"] is True


def test_the_agents_table_is_generated_from_the_registry() -> None:
    from cafleet.agents.reference import DOC, documented, render

    assert documented(DOC.read_text(encoding="utf-8")) == render(), (
        "docs/maintaining.md is stale; run: python -m cafleet.agents.reference --write"
    )
