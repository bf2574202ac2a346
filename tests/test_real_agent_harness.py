"""The real-agent harness's own parts, without the agents: installation lookup, the readers of
each agent's record (on trimmed real records in tests/data/records) and the process cleanup."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness import real_agents as ra
from tests.harness.util import pid_alive

RECORDS = Path(__file__).resolve().parent / "data" / "records"


def test_pins_name_every_agent_package(monkeypatch: pytest.MonkeyPatch) -> None:
    pins = ra.pins()
    assert set(pins) == set(ra.PACKAGES.values())
    assert all(v and v[0].isdigit() for v in pins.values())


def test_cache_dir_and_binary_lookup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAFLEET_AGENT_CACHE", str(tmp_path))
    assert ra.cache_dir() == tmp_path
    assert ra.binary("claude") is None and ra.installed_version("claude") is None
    bin_dir = tmp_path / "node_modules" / ".bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "claude").write_text("#!/bin/sh\n")
    (bin_dir / "claude").chmod(0o755)
    pkg = tmp_path / "node_modules" / "@anthropic-ai" / "claude-code"
    pkg.mkdir(parents=True)
    (pkg / "package.json").write_text(json.dumps({"version": "9.9.9"}))
    assert ra.binary("claude") == bin_dir / "claude"
    assert ra.installed_version("claude") == "9.9.9"
    # Independent of the tests' redirected HOME: the default is the real user's cache.
    monkeypatch.delenv("CAFLEET_AGENT_CACHE")
    assert ra.cache_dir() != Path(os.environ["HOME"]) / ".cache" / "cafleet-agents"


def test_both_cache_lookups_default_to_the_real_users_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/operations.md §1: unset, CAFLEET_AGENT_CACHE is `.cache/cafleet-agents` in the
    password database's home for the user, whatever `$HOME` says (each test replaces it)."""
    import pwd

    from tests import real_agent_cli

    monkeypatch.delenv("CAFLEET_AGENT_CACHE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    expected = Path(pwd.getpwuid(os.getuid()).pw_dir) / ".cache" / "cafleet-agents"
    assert ra.cache_dir() == real_agent_cli.cache_dir() == expected
    monkeypatch.setenv("CAFLEET_AGENT_CACHE", str(tmp_path / "agents"))
    assert ra.cache_dir() == real_agent_cli.cache_dir() == tmp_path / "agents"


def test_missing_binary_skips_locally_and_fails_in_ci(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CAFLEET_AGENT_CACHE", str(tmp_path))
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("CAFLEET_REQUIRE_REAL_AGENTS", raising=False)
    with pytest.raises(pytest.skip.Exception):
        ra.require_binary("codex")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="required in CI"):
        ra.require_binary("codex")
    monkeypatch.delenv("CI")
    monkeypatch.setenv("CAFLEET_REQUIRE_REAL_AGENTS", "1")
    with pytest.raises(pytest.fail.Exception):
        ra.require_binary("codex")


def test_claude_record_reader(tmp_path: Path) -> None:
    project = tmp_path / "projects" / "-tmp-x-project"
    project.mkdir(parents=True)
    shutil.copy(RECORDS / "claude-session.jsonl", project / "s.jsonl")
    got = ra.claude_records(tmp_path)
    texts = [r.text for r in got if not r.queued]
    queued = [r.text for r in got if r.queued]
    assert texts[0] == (
        "hello one [cafleet msg 12 from Director (1)] hi \u2014 ack with: cafleet message ack 12"
    )
    assert queued[0] == "queued two [cafleet msg 13 from Director (1)] q"
    assert texts.count("[Request interrupted by user]") >= 1
    # A queued line is recorded at once (enqueue) and again when its turn runs.
    assert texts.count(queued[0]) == 1


def test_codex_record_reader(tmp_path: Path) -> None:
    day = tmp_path / "sessions" / "2026" / "12" / "01"
    day.mkdir(parents=True)
    shutil.copy(RECORDS / "codex-rollout.jsonl", day / "rollout-x.jsonl")
    got = [r.text for r in ra.codex_records(tmp_path)]
    # Exactly the typed lines: the injected <environment_context> user item is not one.
    assert got == [
        "[cafleet msg 12 from Director (1)] hello codex \u2014 ack with: cafleet message ack 12",
        "[cafleet msg 13 from Director (1)] queued codex",
    ]
    assert ra.codex_interruptions(tmp_path) == 1


def test_opencode_record_reader() -> None:
    export = json.loads((RECORDS / "opencode-export.json").read_text(encoding="utf-8"))
    got = [r.text for r in ra.opencode_records(export["messages"])]
    assert got == [
        "[cafleet msg 12 from Director (1)] hello oc \u2014 ack with: cafleet message ack 12",
        "[cafleet msg 13 from Director (1)] queued oc",
    ]
    aborted = [
        *export["messages"],
        {"info": {"role": "assistant", "error": {"name": "MessageAbortedError"}}, "parts": []},
    ]
    assert ra.opencode_interruptions(export["messages"]) == 0
    assert ra.opencode_interruptions(aborted) == 1
    assert ra._json_after_noise('Exporting session: x\n{"a": 1}') == {"a": 1}


def test_pids_of_finds_marker_and_path_processes_and_kill_pids_ends_them(tmp_path: Path) -> None:
    root = tmp_path / "agent-root"
    root.mkdir()
    env = dict(os.environ, **{ra.MARKER_VAR: str(root)})
    by_marker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env=env)
    # Like Codex's daemon: no marker in its environment, but a binary under the agent's home.
    by_path = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", str(root / "codex" / "bin")]
    )
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        found = set(ra.pids_of(root))
        assert {by_marker.pid, by_path.pid} <= found and other.pid not in found
        assert ra.kill_pids(sorted(found), grace=2) == []
        by_marker.wait(5)
        by_path.wait(5)
        assert ra.pids_of(root) == []
        assert pid_alive(other.pid)
    finally:
        for proc in (by_marker, by_path, other):
            proc.kill()
            proc.wait(5)
