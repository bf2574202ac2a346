"""`cafleet setup`'s assets half (docs/cli.md §3.2, docs/runtime.md §7.4): what it
writes and where, idempotence, what it never touches, upgrades, moved identity paths, failures,
and `asset_installs` bookkeeping."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cafleet.db.shapes import HEAD_VERSION
from tests.assets_helpers import (
    AGENTS,
    DEFAULTS,
    VERSION,
    agent_dir,
    asset_rows,
    expected_files,
    files_below,
    home,
    install_fake_agents,
    install_version,
    read_only,
    tree,
)
from tests.cli_helpers import (
    call_run,
    query,
    run_cli,
    setup_agent_summaries,
    setup_db_line,
    snapshot,
)


def all_trees() -> dict[str, dict[str, tuple[str, int]]]:
    return {agent: tree(agent_dir(agent)) for agent in AGENTS}


def test_setup_installs_every_file_where_each_agent_reads_it(db_path: Path) -> None:
    code, out, err = run_cli("setup")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == f"Created {db_path} and applied migrations to head ({HEAD_VERSION})."
    expected_out = [lines[0]]
    for agent in AGENTS:
        root = agent_dir(agent)
        files = expected_files(agent)
        # Exactly the bundle, byte for byte, and nothing else (the directories were empty).
        assert files_below(root) == files, agent
        for rel in files:
            assert (root / rel).stat().st_mode & 0o777 == 0o644, rel
        expected_out.append(
            f"{agent}: {root} (default {DEFAULTS[agent]}): installed cafleet {VERSION}"
        )
        expected_out += [f"  created {rel}" for rel in files]
    assert lines == expected_out
    # One row per agent, at the resolved identity path, with this version.
    assert asset_rows(db_path) == sorted((a, str(agent_dir(a)), VERSION) for a in AGENTS)
    assert set(expected_files("codex")) >= {"rules/cafleet.rules", "skills/cafleet/SKILL.md"}
    assert "agents/cafleet.md" in expected_files("opencode")
    assert set(expected_files("claude")) == {
        f"skills/cafleet/{n}"
        for n in ("SKILL.md", "director.md", "member.md", "monitor.md", "reference.md")
    }


def test_a_second_setup_changes_no_byte(db_path: Path) -> None:
    assert run_cli("setup")[0] == 0
    trees, db = all_trees(), snapshot(db_path)
    stamps = query(db_path, "SELECT installed_at FROM asset_installs ORDER BY coding_agent")
    code, out, err = run_cli("setup")
    assert (code, err) == (0, "")
    assert setup_db_line(out) == f"Already at head ({HEAD_VERSION}); nothing to do."
    assert setup_agent_summaries(out) == {a: f"up to date (cafleet {VERSION})" for a in AGENTS}
    assert len(out.splitlines()) == 1 + len(AGENTS)  # no file lines: nothing changed
    assert all_trees() == trees  # bytes and modification times
    assert snapshot(db_path) == db  # not even the timestamps were rewritten
    assert query(db_path, "SELECT installed_at FROM asset_installs ORDER BY coding_agent") == stamps


def test_the_agents_variables_move_the_identity_paths(
    db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each path is stored absolute exactly as resolved: a relative value is taken from the
    current directory (`..` folded), OPENCODE_CONFIG_DIR wins over XDG_CONFIG_HOME."""
    monkeypatch.chdir(tmp_path)
    env = {
        "CLAUDE_CONFIG_DIR": str(tmp_path / "cl"),
        "CODEX_HOME": "rel/../cx/",
        "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
        "GEMINI_CLI_HOME": str(tmp_path / "gm"),
    }
    result = call_run("setup", env=env)
    assert result.returncode == 0, result.stderr
    paths = {
        "claude": tmp_path / "cl",
        "codex": tmp_path / "cx",
        "opencode": tmp_path / "xdg" / "opencode",
        "gemini": tmp_path / "gm" / ".gemini",
    }
    assert asset_rows(db_path) == sorted((a, str(paths[a]), VERSION) for a in AGENTS)
    lines = result.stdout.splitlines()
    assert f"claude: {tmp_path / 'cl'} (CLAUDE_CONFIG_DIR): installed cafleet {VERSION}" in lines
    assert f"codex: {tmp_path / 'cx'} (CODEX_HOME): installed cafleet {VERSION}" in lines
    assert (
        f"opencode: {tmp_path / 'xdg' / 'opencode'} (XDG_CONFIG_HOME): installed cafleet {VERSION}"
        in lines
    )
    for agent in AGENTS:
        assert files_below(paths[agent]) == expected_files(agent)
        assert not agent_dir(agent).exists()  # nothing under HOME
    env["OPENCODE_CONFIG_DIR"] = str(tmp_path / "oc")
    result = call_run("setup", "--coding-agent", "opencode", env=env)
    assert result.returncode == 0, result.stderr
    assert files_below(tmp_path / "oc") == expected_files("opencode")
    assert ("opencode", str(tmp_path / "oc"), VERSION) in asset_rows(db_path)


@pytest.mark.parametrize(
    ("args", "agents"),
    [
        (["--coding-agent", "codex"], ["codex"]),
        (["--coding-agent", "opencode claude"], ["opencode", "claude"]),
        (["--coding-agent", "claude", "--coding-agent", "codex,claude"], ["claude", "codex"]),
    ],
)
def test_coding_agent_selects_what_is_installed(
    db_path: Path, args: list[str], agents: list[str]
) -> None:
    code, out, err = run_cli("setup", *args)
    assert (code, err) == (0, "")
    assert list(setup_agent_summaries(out)) == agents  # in the order given
    for agent in AGENTS:
        assert agent_dir(agent).exists() == (agent in agents), agent
    assert [r[0] for r in asset_rows(db_path)] == sorted(agents)


def test_setup_touches_nothing_but_its_own_files(db_path: Path) -> None:
    """Our skill folders are ours to replace; every other file keeps its bytes and mtime."""
    claude, codex, opencode = (agent_dir(a) for a in ("claude", "codex", "opencode"))
    theirs = {
        claude / "skills" / "my-skill" / "SKILL.md": "---\nname: my-skill\n---\nmine\n",
        claude / "skills" / "README": "notes\n",
        claude / "settings.json": "{}\n",
        codex / "rules" / "user.rules": 'prefix_rule(pattern=["git"], decision="allow")\n',
        codex / "config.toml": "model = 'x'\n",
        codex / "skills" / "cafleet-extra" / "SKILL.md": "---\nname: cafleet-extra\n---\n",
        opencode / "agents" / "reviewer.md": "---\ndescription: r\n---\nreview\n",
        opencode / "opencode.json": "{}\n",
    }
    for path, text in theirs.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    stray = claude / "skills" / "cafleet" / "notes.md"  # inside our folder: ours to replace
    stray.parent.mkdir(parents=True)
    stray.write_text("left by hand\n")
    before = {path: (path.read_bytes(), path.stat().st_mtime_ns) for path in theirs}

    code, out, err = run_cli("setup")
    assert (code, err) == (0, "")
    assert {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in theirs} == before
    assert not stray.exists()
    assert "  removed skills/cafleet/notes.md" in out.splitlines()
    for agent in AGENTS:
        ours = {
            rel: data
            for rel, data in files_below(agent_dir(agent)).items()
            if agent_dir(agent) / rel not in theirs
        }
        assert ours == expected_files(agent), agent
    # No temporary or set-aside leftovers next to the targets.
    leftovers = [p for p in home().rglob(".*") if p.name.endswith((".tmp", ".old"))]
    assert leftovers == []


def test_upgrade_replaces_the_files_and_updates_the_row(bare_head_db: Path) -> None:
    """Files and rows of an older cafleet: the guard refuses, setup replaces exactly the files
    that differ and updates each row; then the guard lets commands through."""
    from tests.factories import Db

    install_version("0.0.9")
    with Db(bare_head_db) as db:
        for agent in AGENTS:
            from cafleet.broker.assets import record_asset_install

            record_asset_install(
                db.conn, coding_agent=agent, path=str(agent_dir(agent)), cafleet_version="0.0.9"
            )
        fleet = db.fleet()
        worker = db.member(fleet.fleet.fleet_id, agent="codex")
    old_stamps = dict(query(bare_head_db, "SELECT coding_agent, installed_at FROM asset_installs"))
    send = ("message", "send", "--from-member-id", str(fleet.director.member_id),
            "--to-member-id", str(worker.member_id), "hi")  # fmt: skip
    before = snapshot(bare_head_db)
    code, out, err = run_cli(*send)
    assert (code, out) == (1, "")
    assert err == (
        f"Error: the cafleet skills installed for codex at {agent_dir('codex')} are from cafleet "
        f"0.0.9, not {VERSION}; run 'cafleet setup --coding-agent codex'\n"
    )
    assert snapshot(bare_head_db) == before

    code, out, err = run_cli("setup")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    changed = {
        "claude": ["skills/cafleet/SKILL.md"],
        "codex": ["skills/cafleet/SKILL.md", "rules/cafleet.rules"],
        "opencode": ["skills/cafleet/SKILL.md", "agents/cafleet.md"],
        "gemini": ["skills/cafleet/SKILL.md"]
        + [f"cafleet/{p}.toml" for p in ("workspace", "ask", "readonly")],
    }
    for agent in AGENTS:
        i = lines.index(
            f"{agent}: {agent_dir(agent)} (default {DEFAULTS[agent]}): installed cafleet {VERSION}"
        )
        assert lines[i + 1 : i + 1 + len(changed[agent])] == [
            f"  updated {rel}" for rel in changed[agent]
        ]
        assert files_below(agent_dir(agent)) == expected_files(agent)
    assert asset_rows(bare_head_db) == sorted((a, str(agent_dir(a)), VERSION) for a in AGENTS)
    new_stamps = dict(query(bare_head_db, "SELECT coding_agent, installed_at FROM asset_installs"))
    assert all(new_stamps[a] > old_stamps[a] for a in AGENTS)
    code, out, err = run_cli(*send)  # stored; outside tmux the notification waits (a warning)
    assert code == 0, err
    assert out.startswith("Message sent.\n")


def test_a_moved_identity_path_supersedes_the_old_row(
    db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agents = install_fake_agents(tmp_path / "agent-bin")  # doctor finds every agent
    monkeypatch.setenv("PATH", f"{agents}{os.pathsep}{os.environ['PATH']}")
    assert run_cli("setup")[0] == 0
    moved = tmp_path / "codex-elsewhere"
    env = {"CODEX_HOME": str(moved)}
    code, out, err = run_cli("setup", "--coding-agent", "codex", env=env)
    assert (code, err) == (0, "")
    assert asset_rows(db_path) == sorted(
        [(a, str(agent_dir(a)), VERSION) for a in AGENTS] + [("codex", str(moved), VERSION)]
    )
    code, out, _ = run_cli("doctor", "--json", env=env)
    codex = next(a for a in json.loads(out)["coding_agents"] if a["coding_agent"] == "codex")
    stamp = query(db_path, "SELECT installed_at FROM asset_installs WHERE path = ?",
                  (str(agent_dir("codex")),))[0][0]  # fmt: skip
    assert codex == {
        "coding_agent": "codex",
        "path": str(moved),
        "source": "CODEX_HOME",
        "installed_version": VERSION,
        "installed_at": codex["installed_at"],
        "state": "ok",
        "ok": True,
        "superseded": [
            {"path": str(agent_dir("codex")), "cafleet_version": VERSION, "installed_at": stamp}
        ],
        "error": None,
        "binary": {"path": str(agents / "codex"), "version": "fake-codex 0.0.0", "error": None},
    }
    code, out, _ = run_cli("doctor", env=env)
    assert (
        f"  note: codex install at {agent_dir('codex')} (cafleet {VERSION}, {stamp}) is superseded\n"
        in out
    )
    assert "✓ coding agents\n" in out  # a superseded row is a note, never an issue


def test_a_read_only_target_fails_the_assets_half_and_writes_nothing(db_path: Path) -> None:
    codex = agent_dir("codex")
    codex.mkdir(parents=True)
    with read_only(codex):
        code, out, err = run_cli("setup")
    assert code == 1
    assert err.startswith(
        f"assets half failed: codex: cannot create directory {codex / 'skills'}: "
    )
    assert err.endswith("\nError: assets half failed\n")
    assert len(err.splitlines()) == 2
    assert setup_agent_summaries(out)["codex"] == "failed"
    assert list(codex.iterdir()) == []
    # The other agents landed and are recorded; codex has no row.
    assert [r[0] for r in asset_rows(db_path)] == ["claude", "gemini", "opencode"]
    assert (
        setup_db_line(out) == f"Created {db_path} and applied migrations to head ({HEAD_VERSION})."
    )


def test_a_unit_that_cannot_be_staged_leaves_the_agent_as_it_was(db_path: Path) -> None:
    """codex's rules directory is read-only: its skill folder, which could be written, is not
    replaced either (both are staged before either takes its place)."""
    install_version("0.0.9", agents=("codex",))
    codex = agent_dir("codex")
    before = tree(codex, dir_mtimes=False)
    with read_only(codex / "rules"):
        code, out, err = run_cli("setup", "--coding-agent", "codex")
    assert code == 1
    assert err.startswith(
        f"assets half failed: codex: cannot write {codex / 'rules' / 'cafleet.rules'}: "
    )
    # The old skill folder is whole (bytes and mtimes), and no temporaries remain.
    assert tree(codex, dir_mtimes=False) == before
    assert files_below(codex) == expected_files("codex", "0.0.9")
    assert asset_rows(db_path) == []


def test_setup_json(db_path: Path) -> None:
    code, out, err = run_cli("setup", "--coding-agent", "codex", "--json")
    assert (code, err) == (0, "")
    data = json.loads(out)
    assert list(data) == ["database", "assets", "failed"]
    assert data["database"] == {
        "ok": True,
        "path": str(db_path),
        "result": f"Created {db_path} and applied migrations to head ({HEAD_VERSION}).",
        "error": None,
    }
    assert data["failed"] == []
    assert data["assets"] == [
        {
            "coding_agent": "codex",
            "path": str(agent_dir("codex")),
            "source": "default",
            "cafleet_version": VERSION,
            "changes": [{"path": rel, "change": "created"} for rel in expected_files("codex")],
            "recorded": True,
            "ok": True,
            "error": None,
        }
    ]
    code, out, err = run_cli("setup", "--coding-agent", "codex", "--json")
    again = json.loads(out)["assets"][0]
    assert (again["changes"], again["recorded"]) == ([], False)


def test_setup_json_reports_a_failed_half(db_path: Path) -> None:
    """With --json the report still comes (it says which half failed); stderr and the exit code
    say the same as in text mode."""
    db_path.parent.mkdir(parents=True)
    db_path.write_text("not a database at all, but long enough to be read as one" * 20)
    code, out, err = run_cli("setup", "--coding-agent", "claude", "--json")
    assert code == 1
    data = json.loads(out)
    assert data["failed"] == ["db", "assets"]
    assert data["database"]["ok"] is False and data["database"]["result"] is None
    assert data["assets"][0]["error"] == "installed but not recorded: the db half failed"
    assert json.loads(err.splitlines()[-1]) == {
        "error": {"code": "error", "message": "db and assets half failed"}
    }
    assert files_below(agent_dir("claude")) == expected_files("claude")


def test_home_unset_with_a_database_url(db_path: Path, tmp_path: Path) -> None:
    """Without HOME an agent's path resolves only from its own variable."""
    env: dict[str, str | None] = {"HOME": None, "CODEX_HOME": str(tmp_path / "cx")}
    code, out, err = run_cli("setup", env=env)
    assert code == 1
    assert err == (
        "assets half failed: claude: cannot resolve claude's configuration directory: HOME is "
        "not set (set CLAUDE_CONFIG_DIR)\n"
        "assets half failed: opencode: cannot resolve opencode's configuration directory: HOME "
        "is not set (set OPENCODE_CONFIG_DIR or XDG_CONFIG_HOME)\n"
        "assets half failed: gemini: cannot resolve gemini's configuration directory: HOME "
        "is not set (set GEMINI_CLI_HOME)\n"
        "Error: assets half failed\n"
    )
    assert asset_rows(db_path) == [("codex", str(tmp_path / "cx"), VERSION)]
    assert os.path.isfile(tmp_path / "cx" / "rules" / "cafleet.rules")
