"""`.ci/run` runs the static checks, then exactly README's test command (so neither drifts)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _commands(path: Path) -> list[str]:
    lines = (line.strip() for line in path.read_text(encoding="utf-8").splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def test_ci_checks_then_runs_readmes_test_command() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Run the tests", 1)[1]
    block = re.search(r"```sh\n(.*?)\n```", section, re.S)
    assert block is not None
    test_command = block.group(1).split("&&")[-1].strip()
    assert test_command == "python -m pytest -n 3 -q"

    commands = _commands(ROOT / ".ci" / "run")
    assert commands[-1] == test_command
    checks = ["python -m ruff check .", "python -m ruff format --check .", "python -m mypy"]
    positions = [commands.index(check) for check in checks]
    install = commands.index("python -m pip install --quiet -e '.[test]'")
    assert install < positions[0] < positions[1] < positions[2] < len(commands) - 1
