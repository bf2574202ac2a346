"""`cafleet doctor` (docs/cli.md §2.2; §4 items 26, 27)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import cafleet
from cafleet.db.shapes import HEAD_VERSION
from tests.assets_helpers import AGENTS, DEFAULTS, agent_dir, install_fake_agents
from tests.cli_helpers import assert_unchanged, run_cli, snapshot, sql

MULTIPLEXER_KEYS = [
    "ok",
    "backend",
    "session",
    "window_id",
    "pane_id",
    "presence_var",
    "presence_value",
    "error",
]
DATABASE_KEYS = ["ok", "path", "state", "schema_version", "head_version", "error"]


def agent_dirs(home: Path) -> dict[str, Path]:
    """Each agent's default identity path under ``home`` (the test's agent variables are unset)."""
    return {a: agent_dir(a, home) for a in AGENTS}


@pytest.fixture(autouse=True)
def agent_bin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The fake agents first on PATH: doctor finds each binary and its version there (the
    tmux harness puts its own copies before these)."""
    bin_dir = install_fake_agents(tmp_path / "agent-bin")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return bin_dir


def binary_text(bin_dir: Path, agent: str) -> str:
    return f"{bin_dir / agent} (fake-{agent} 0.0.0)"


def agents_ok_lines(home: Path, bin_dir: Path) -> str:
    """The coding-agents and member-permissions sections of a fully set-up HOME with every
    agent installed in ``bin_dir``."""
    dirs = agent_dirs(home)
    defaults = DEFAULTS
    version = cafleet.__version__
    lines = ["✓ coding agents"]
    for agent in AGENTS:
        label = f"{agent}:".ljust(11)
        lines.append(
            f"  {label}ok  {binary_text(bin_dir, agent)}; assets {dirs[agent]} "
            f"(default {defaults[agent]}), cafleet {version}"
        )
    lines.append("✓ member permissions")
    read = {"claude": "0 files", "codex": "1 file", "opencode": "0 files", "gemini": "0 files"}
    lines += [f"  {(a + ':').ljust(11)}ok ({read[a]} read)" for a in AGENTS]
    return "\n".join(lines) + "\n"


def missing_agent_lines(home: Path, bin_dir: Path) -> list[str]:
    dirs = agent_dirs(home)
    defaults = DEFAULTS
    return [
        f"  {(a + ':').ljust(11)}missing  {binary_text(bin_dir, a)}; assets {dirs[a]} "
        f"(default {defaults[a]}): no install recorded here; run 'cafleet setup --coding-agent {a}'"
        for a in AGENTS
    ]


def test_outside_tmux_without_database(db_path: Path, agent_bin: Path) -> None:
    code, out, err = run_cli("doctor")
    assert (code, err) == (1, "")
    assert out == (
        f"cafleet {cafleet.__version__}\n"
        "✗ multiplexer\n"
        "  not inside a tmux session (TMUX is not set)\n"
        "✗ database\n"
        f"  path:      {db_path}\n"
        "  no cafleet database; run 'cafleet setup'\n"
        "✗ coding agents\n"
        + "".join(line + "\n" for line in missing_agent_lines(Path(os.environ["HOME"]), agent_bin))
        + "✗ member permissions\n"
        "  claude:    ok (0 files read)\n"
        "  codex:     ok (0 files read)\n"
        "  opencode:  blocked: the cafleet agent preset is missing; run 'cafleet setup "
        "--coding-agent opencode'\n"
        "  gemini:    blocked: the cafleet policy files are missing; run 'cafleet setup "
        "--coding-agent gemini'\n"
        "✓ fleets\n"
        "  skipped: the database is not usable\n"
        "8 issues found\n"
    )
    assert not db_path.parent.exists()

    code, out, err = run_cli("doctor", "--json")
    assert (code, err) == (1, "")
    data = json.loads(out)
    assert list(data) == [
        "cafleet_version",
        "multiplexer",
        "database",
        "coding_agents",
        "member_permissions",
        "fleets",
        "issues",
    ]
    assert data["fleets"] == {
        "ok": True,
        "skipped": True,
        "fleets": [],
        "left_worktrees": [],
        "error": None,
    }
    assert data["cafleet_version"] == cafleet.__version__
    assert list(data["multiplexer"]) == MULTIPLEXER_KEYS
    assert data["multiplexer"] == {
        "ok": False,
        "backend": None,
        "session": None,
        "window_id": None,
        "pane_id": None,
        "presence_var": None,
        "presence_value": None,
        "error": "not inside a tmux session (TMUX is not set)",
    }
    assert data["database"] == {
        "ok": False,
        "path": str(db_path),
        "state": "missing",
        "schema_version": None,
        "head_version": HEAD_VERSION,
        "error": "no cafleet database; run 'cafleet setup'",
    }
    assert list(data["database"]) == DATABASE_KEYS
    assert [(a["coding_agent"], a["state"], a["ok"]) for a in data["coding_agents"]] == [
        (agent, "missing", False) for agent in AGENTS
    ]
    assert [p["ok"] for p in data["member_permissions"]] == [True, True, False, False]
    assert data["issues"] == 8
    assert not db_path.parent.exists()


def test_bad_url_shows_in_database_section() -> None:
    code, out, _ = run_cli("doctor", "--json", env={"CAFLEET_DATABASE_URL": "sqlite:///rel.db"})
    assert code == 1
    database = json.loads(out)["database"]
    assert database == {
        "ok": False,
        "path": None,
        "state": None,
        "schema_version": None,
        "head_version": HEAD_VERSION,
        "error": "database URL must name an absolute file path; got 'sqlite:///rel.db'",
    }
    code, out, _ = run_cli("doctor", env={"CAFLEET_DATABASE_URL": "sqlite:///rel.db"})
    lines = out.splitlines()
    i = lines.index("✗ database")
    assert lines[i + 1] == (
        "  database URL must name an absolute file path; got 'sqlite:///rel.db'"
    )
    assert not any("path:" in line for line in lines)


def test_bad_integer_aborts_doctor() -> None:
    code, out, err = run_cli("doctor", env={"CAFLEET_PANE_LOCK_TIMEOUT": "soon"})
    assert (code, out) == (1, "")
    assert err == "Error: CAFLEET_PANE_LOCK_TIMEOUT must be a non-negative integer (got 'soon')\n"


def test_schema_versions_per_class(db_path: Path) -> None:
    from cafleet.db.migrate import upgrade_to

    db_path.parent.mkdir(parents=True)
    upgrade_to(str(db_path), "0001")
    before = snapshot(db_path)
    code, out, _ = run_cli("doctor", "--json")
    assert code == 1
    database = json.loads(out)["database"]
    assert database["state"] == "behind"
    assert database["schema_version"] == 1
    assert database["error"] == (
        f"database schema is outdated (schema 1, head {HEAD_VERSION}); run 'cafleet setup'"
    )
    assert_unchanged(before, db_path)


def test_foreign_file_unchanged(db_path: Path) -> None:
    db_path.parent.mkdir(parents=True)
    sql(db_path, "PRAGMA application_id = 9", "CREATE TABLE t (x)")
    before = snapshot(db_path)
    code, out, _ = run_cli("doctor")
    assert code == 1
    assert (
        f"  {db_path} is not a cafleet database (application_id is 9, not 1128351288); "
        "cafleet will not use or modify it\n" in out
    )
    # The asset rows cannot be read: each agent's row is `unknown`, one issue each.
    assert out.count(": the database cannot be read\n") == len(AGENTS)
    assert out.endswith("8 issues found\n")
    assert_unchanged(before, db_path)


def test_current_database_outside_tmux(head_db: Path, agent_bin: Path) -> None:
    before = snapshot(head_db)
    code, out, _ = run_cli("doctor")
    assert code == 1
    home = Path(os.environ["HOME"])
    assert (
        f"✓ database\n  path:      {head_db}\n  schema {HEAD_VERSION} (head)\n"
        + agents_ok_lines(home, agent_bin)
        + "✓ fleets\n  no live fleets\n"
        + "1 issue found\n"
    ) in out
    assert_unchanged(before, head_db)


@pytest.mark.tmux
def test_in_tmux_with_current_database(tmux_db) -> None:
    h = tmux_db
    before = snapshot(h.db_path)
    result = h.cli("doctor")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert result.stdout == (
        f"cafleet {cafleet.__version__}\n"
        "✓ multiplexer\n"
        "  backend:   tmux\n"
        f"  session:   {h.session_name}\n"
        f"  window_id: {h.window_id}\n"
        f"  pane_id:   {h.director_pane}\n"
        f"  presence:  TMUX={h.env['TMUX']}\n"
        "✓ database\n"
        f"  path:      {h.db_path}\n"
        f"  schema {HEAD_VERSION} (head)\n"
        + agents_ok_lines(Path(h.env["HOME"]), h.bin_dir)
        + "✓ fleets\n  no live fleets\n"
        + "no issues found\n"
    )
    result = h.cli("doctor", "--json")
    assert result.returncode == 0
    data = json.loads(result.stdout)
    assert data["issues"] == 0
    assert data["multiplexer"] == {
        "ok": True,
        "backend": "tmux",
        "session": h.session_name,
        "window_id": h.window_id,
        "pane_id": h.director_pane,
        "presence_var": "TMUX",
        "presence_value": h.env["TMUX"],
        "error": None,
    }
    assert data["database"] == {
        "ok": True,
        "path": str(h.db_path),
        "state": "current",
        "schema_version": HEAD_VERSION,
        "head_version": HEAD_VERSION,
        "error": None,
    }
    assert_unchanged(before, h.db_path)


@pytest.mark.tmux
def test_in_tmux_bad_url_is_one_issue(tmux_db) -> None:
    result = tmux_db.cli("doctor", env={"CAFLEET_DATABASE_URL": "mysql://x"})
    code, out, err = result.returncode, result.stdout, result.stderr
    assert (code, err) == (1, "")
    assert "✓ multiplexer\n" in out
    assert (
        "✗ database\n  database URL must use the sqlite scheme (sqlite:///<absolute path>) or "
        "postgresql (postgresql://<host>/<database>); got 'mysql://x'\n✗ coding agents\n" in out
    )
    # The database is the one broken thing; the three asset rows cannot be read because of it.
    assert out.count(": the database cannot be read\n") == len(AGENTS)
    assert out.endswith("\n5 issues found\n")


@pytest.mark.tmux
def test_in_tmux_without_pane(tmux_db) -> None:
    result = tmux_db.cli("doctor", unset=("TMUX_PANE",))
    out = result.stdout
    assert result.returncode == 1
    assert "✗ multiplexer\n  not inside a tmux pane (TMUX_PANE is not set)\n" in out
    assert out.endswith("1 issue found\n")


# --- each agent's binary (docs/cli.md §3.3) ------------------------------------------------------


def test_an_agent_not_on_path_is_not_installed_not_ok(head_db: Path, tmp_path: Path) -> None:
    """Only Claude installed: codex and opencode say `not installed` with the remedy, never
    `ok`; not an issue while another agent is installed."""
    only_claude = install_fake_agents(tmp_path / "only-claude", ("claude",))
    code, out, _ = run_cli("doctor", env={"PATH": str(only_claude)})
    assert code == 1  # the multiplexer only: outside tmux
    home = Path(os.environ["HOME"])
    dirs = agent_dirs(home)
    version = cafleet.__version__
    assert (
        "✓ coding agents\n"
        f"  claude:    ok  {binary_text(only_claude, 'claude')}; assets {dirs['claude']} "
        f"(default ~/.claude), cafleet {version}\n"
        "  codex:     not installed  no 'codex' on PATH: install it (npm install -g @openai/codex) "
        f"to run codex members; assets {dirs['codex']} (default ~/.codex), cafleet {version}\n"
        "  opencode:  not installed  no 'opencode' on PATH: install it (npm install -g "
        f"opencode-ai) to run opencode members; assets {dirs['opencode']} "
        f"(default ~/.config/opencode), cafleet {version}\n"
    ) in out
    assert out.endswith("1 issue found\n")

    code, out, _ = run_cli("doctor", "--json", env={"PATH": str(only_claude)})
    agents = {a["coding_agent"]: a for a in json.loads(out)["coding_agents"]}
    assert agents["claude"]["binary"] == {
        "path": str(only_claude / "claude"),
        "version": "fake-claude 0.0.0",
        "error": None,
    }
    assert agents["codex"]["binary"] == {
        "path": None,
        "version": None,
        "error": "no 'codex' on PATH: install it (npm install -g @openai/codex) to run codex "
        "members",
    }


def test_no_agent_installed_is_an_issue(head_db: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    code, out, _ = run_cli("doctor", env={"PATH": str(empty)})
    assert code == 1
    assert "✗ coding agents\n" in out
    assert out.count(" not installed  no '") == len(AGENTS)
    assert "  no coding agent is installed: install at least one of them\n" in out
    assert out.endswith("2 issues found\n")  # the multiplexer and the agents


def test_an_npm_install_gives_its_version_without_running(head_db: Path, tmp_path: Path) -> None:
    """npm's layout (`.bin/codex` -> `../@openai/codex/bin/codex.js`): the version is read from
    the package's package.json; the binary itself is never run."""
    package = tmp_path / "node_modules" / "@openai" / "codex"
    (package / "bin").mkdir(parents=True)
    (package / "package.json").write_text(
        json.dumps({"name": "@openai/codex", "version": "9.8.7"}), encoding="utf-8"
    )
    ran = tmp_path / "ran"
    script = package / "bin" / "codex.js"
    script.write_text(f"#!/bin/sh\ntouch {ran}\necho wrong 0.0\n", encoding="utf-8")
    script.chmod(0o755)
    dot_bin = tmp_path / "node_modules" / ".bin"
    dot_bin.mkdir()
    (dot_bin / "codex").symlink_to("../@openai/codex/bin/codex.js")
    code, out, _ = run_cli("doctor", "--json", env={"PATH": str(dot_bin)})
    codex = next(a for a in json.loads(out)["coding_agents"] if a["coding_agent"] == "codex")
    assert codex["binary"] == {"path": str(dot_bin / "codex"), "version": "9.8.7", "error": None}
    assert not ran.exists()


@pytest.mark.tmux
def test_doctor_shows_each_members_hooks_and_a_failing_channel(tmux_db) -> None:
    """A live hooked member's line (none yet, then its last report; never an issue) and a
    notification channel that keeps failing (an issue, with the command that checks it)."""
    from tests.fleet_helpers import create_fleet, create_member, ok, sql_write

    h = tmux_db
    f = create_fleet(h).fleet_id
    member, _pane = create_member(h, f, "coder")
    out = h.cli("doctor").stdout
    assert f"    hooks: member {member} (coder): no hook has reported yet" in out
    assert f"'cafleet member respawn {member}'" in out
    ok(h.cli("hook", "stop", "--member-id", str(member)))
    data = json.loads(h.cli("doctor", "--json").stdout)
    (fleet,) = data["fleets"]["fleets"]
    ((hook),) = fleet["hooks"]
    assert (hook["member_id"], hook["state"], hook["event"]) == (member, "ready", "stop")
    assert fleet["ok"] is True  # a hooks line is information, never an issue

    ok(h.cli("notify", "add", "--fleet-id", str(f), "webhook", "http://user:pw@127.0.0.1:9/h"))
    sql_write(
        h,
        "UPDATE notify_channels SET failures = 5, failing_since = created_at, "
        "last_error = 'connection refused'",
    )
    result = h.cli("doctor")
    assert result.returncode == 1
    assert (
        "notification channel 1 (webhook http://***@127.0.0.1:9/h) keeps failing (connection "
        "refused): its events are not reaching anyone" in result.stdout
    ), result.stdout
    assert f"cafleet notify test --fleet-id {f}" in result.stdout
    assert "pw" not in result.stdout
