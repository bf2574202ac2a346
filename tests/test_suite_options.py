"""How the suite itself is run (README.md "Run the tests"): without xdist, distributed by group
under `-n N`, and with the other agents' cases of a real-agent matrix only when asked for."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MATRIX_FILE = "tests/test_real_agents.py"  # a real-agent matrix: one default case, two opt-in


def collect(*args: str, env: dict[str, str] | None = None) -> list[str]:
    """The test ids `pytest --collect-only` lists for ``args``, run from the checkout."""
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return [line for line in proc.stdout.splitlines() if "::" in line]


def test_the_suite_collects_without_xdist_and_leaves_the_matrix_out() -> None:
    env = {"CAFLEET_AGENT_MATRIX": ""}
    ids = collect("-p", "no:xdist", MATRIX_FILE, env=env)
    assert [i.rsplit("::", 1)[1] for i in ids] == [
        "test_typed_line_arrives_once_intact_and_queues_while_working[codex]"
    ]


@pytest.mark.parametrize(
    ("args", "env"),
    [(("--agent-matrix",), {"CAFLEET_AGENT_MATRIX": ""}), ((), {"CAFLEET_AGENT_MATRIX": "1"})],
    ids=["option", "env"],
)
def test_the_agent_matrix_runs_when_asked_for(args: tuple[str, ...], env: dict[str, str]) -> None:
    ids = collect(*args, MATRIX_FILE, env=env)
    assert sorted(i.rsplit("[", 1)[1] for i in ids) == ["claude]", "codex]", "opencode]"]


def test_xdist_distributes_by_group(pytestconfig: pytest.Config) -> None:
    # The real-agent tests share one worker only under `--dist loadgroup` (tests/conftest.py);
    # the default run (`-n 2`) runs this in a worker.
    if hasattr(pytestconfig, "workerinput"):  # an xdist worker: `loadgroup` is what it was told
        assert getattr(pytestconfig.option, "loadgroup", False) is True
    else:
        assert getattr(pytestconfig.option, "dist", "no") == "no"
