"""The stale-assets guard (docs/cli.md §3.2): which agents each command needs, the
exact refusals, what is never blocked, and the one indexed read it costs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.assets_helpers import AGENTS, VERSION, agent_dir
from tests.cli_helpers import assert_unchanged, run_cli, snapshot
from tests.factories import Db


def missing(agent: str) -> str:
    return f"no cafleet skills are installed for {agent} at {agent_dir(agent)}"


def remedy(*agents: str) -> str:
    return "run 'cafleet setup " + " ".join(f"--coding-agent {a}" for a in agents) + "'"


@pytest.fixture
def fleet_db(bare_head_db: Path) -> dict[str, Any]:
    """A fleet (Director and monitor on claude) with one placed member per agent; no assets."""
    with Db(bare_head_db) as db:
        boot = db.fleet()
        fid = boot.fleet.fleet_id
        members = {a: db.member(fid, f"on-{a}", agent=a).member_id for a in AGENTS}
        message = db.send(boot.director.member_id, members["codex"], "hello").message_id
    return {
        "db": bare_head_db,
        "fleet": fid,
        "director": boot.director.member_id,
        "monitor": boot.monitor.member_id,
        "members": members,
        "message": message,
    }


def record(db_path: Path, agent: str, version: str = VERSION, path: Path | None = None) -> None:
    from cafleet.broker.assets import record_asset_install

    with Db(db_path) as db:
        record_asset_install(
            db.conn,
            coding_agent=agent,
            path=str(path or agent_dir(agent)),
            cafleet_version=version,
        )


def refused(db: Path, args: tuple[str, ...], text: str, env: dict[str, str | None] | None = None):
    before = snapshot(db)
    code, out, err = run_cli(*args, env=env)
    assert (code, out, err) == (1, "", f"Error: {text}\n"), args
    assert_unchanged(before, db)


def test_send_needs_the_recipients_agent_only(fleet_db: dict[str, Any]) -> None:
    db, m = fleet_db["db"], fleet_db["members"]
    director = str(fleet_db["director"])
    send = ("message", "send", "--from-member-id", director, "--to-member-id")
    refused(db, (*send, str(m["codex"]), "x"), f"{missing('codex')}; {remedy('codex')}")
    record(db, "codex")
    code, out, _err = run_cli(*send, str(m["codex"]), "x")
    assert code == 0 and out.startswith("Message sent.\n")
    # claude's and opencode's assets are still missing: only the recipient's agent counts.
    refused(db, (*send, str(m["opencode"]), "x"), f"{missing('opencode')}; {remedy('opencode')}")


@pytest.mark.parametrize(
    "args",
    [
        ("message", "poll", "{codex}"),
        ("message", "show", "{message}"),
        ("message", "stream", "{codex}", "--timeout", "0"),
        ("message", "ack", "{message}"),
        ("fleet", "list"),
        ("fleet", "show", "{fleet}"),
        ("member", "list", "{fleet}"),
        ("member", "show", "{codex}"),
    ],
)
def test_reading_is_never_blocked(fleet_db: dict[str, Any], args: tuple[str, ...]) -> None:
    """No asset installed at all: reading an inbox (and listing) still works."""
    values = {"codex": fleet_db["members"]["codex"], **fleet_db}
    argv = [a.format(**values) for a in args]
    code, out, err = run_cli(*argv)
    assert (code, err) == (0, ""), (argv, err)


def test_fleet_wide_commands_need_every_agent_of_the_fleet(fleet_db: dict[str, Any]) -> None:
    db, fid = fleet_db["db"], str(fleet_db["fleet"])
    everyone = "; ".join(missing(a) for a in AGENTS) + "; " + remedy(*AGENTS)
    director = str(fleet_db["director"])
    refused(db, ("message", "broadcast", "--from-member-id", director, "hi"), everyone)
    refused(db, ("message", "wait", director, "--timeout", "0"), everyone)
    refused(db, ("monitor", fid, "--tick", "1"), everyone)
    record(db, "claude")
    record(db, "gemini")
    record(db, "opencode", version="0.0.9")
    text = (
        f"{missing('codex')}; the cafleet skills installed for opencode at "
        f"{agent_dir('opencode')} are from cafleet 0.0.9, not {VERSION}; "
        f"{remedy('codex', 'opencode')}"
    )
    refused(db, ("message", "broadcast", "--from-member-id", director, "hi"), text)
    # A row at another path is superseded, not current: still missing.
    record(db, "codex", path=Path("/elsewhere/.codex"))
    refused(db, ("message", "broadcast", "--from-member-id", director, "hi"), text)


def test_pane_commands_need_the_targets_agent(fleet_db: dict[str, Any]) -> None:
    db, m = fleet_db["db"], fleet_db["members"]
    for args in (
        ("member", "ping", str(m["opencode"])),
        ("member", "prompt", str(m["opencode"]), "hi"),
    ):
        refused(db, args, f"{missing('opencode')}; {remedy('opencode')}")
    record(db, "opencode")
    code, _out, err = run_cli("member", "ping", str(m["opencode"]))
    assert code == 1 and "tmux" in err  # past the guard: the pane is the problem now


def test_spawning_commands_need_the_spawned_agent(fleet_db: dict[str, Any], fake_bin: Path) -> None:
    db, fid = fleet_db["db"], str(fleet_db["fleet"])
    create = ("member", "create", "--fleet-id", fid, "--name", "n", "--description", "d")
    refused(db, (*create, "--coding-agent", "codex"), f"{missing('codex')}; {remedy('codex')}")
    # Without --coding-agent the member runs the Director's agent (claude here).
    refused(db, create, f"{missing('claude')}; {remedy('claude')}")
    refused(
        db,
        ("fleet", "create", "--name", "f", "--coding-agent", "opencode"),
        f"{missing('opencode')}; {remedy('opencode')}",
    )
    record(db, "codex")
    code, _out, err = run_cli(*create, "--coding-agent", "codex")
    assert code == 1 and err == "Error: not inside a tmux session (TMUX is not set)\n"


def test_an_unresolvable_path_is_refused_with_its_reason(fleet_db: dict[str, Any]) -> None:
    db, m = fleet_db["db"], fleet_db["members"]
    send = ("message", "send", "--from-member-id", str(fleet_db["director"]), "--to-member-id")
    refused(
        db,
        (*send, str(m["codex"]), "x"),
        "cannot resolve codex's configuration directory: HOME is not set (set CODEX_HOME); "
        + remedy("codex"),
        env={"HOME": None},
    )


def test_a_missing_opencode_preset_is_refused_with_the_remedy(
    head_db: Path, fake_bin: Path
) -> None:
    """The row is current, but the preset file was deleted: opencode spawns are refused."""
    with Db(head_db) as db:
        fid = db.fleet().fleet.fleet_id
    preset = agent_dir("opencode") / "agents" / "cafleet.md"
    preset.unlink()
    args = ("member", "create", "--fleet-id", str(fid), "--name", "n", "--description", "d")
    refused(
        head_db,
        (*args, "--coding-agent", "opencode"),
        f"the cafleet agent preset for opencode is not installed ({preset} is missing); "
        "run 'cafleet setup --coding-agent opencode'",
    )


def test_the_guard_is_one_indexed_read(fleet_db: dict[str, Any]) -> None:
    """One SELECT in one read transaction on the command's connection, answered by indexes."""
    from cafleet.assets.guard import AssetsNotCurrent, require_assets
    from cafleet.cli.guard import open_validated_connection
    from cafleet.db.runtime import close_connection, raw

    conn = open_validated_connection(str(fleet_db["db"]))
    statements: list[str] = []
    raw(conn).set_trace_callback(statements.append)
    try:
        for scope in (
            {"member_id": fleet_db["members"]["codex"]},
            {"fleet_of_member": fleet_db["director"]},
            {"fleet_id": fleet_db["fleet"]},
            {"agents": ["codex", "claude"]},
        ):
            statements.clear()
            with pytest.raises(AssetsNotCurrent):
                require_assets(conn, **scope)  # type: ignore[arg-type]
            selects = [s for s in statements if s.lstrip().upper().startswith("SELECT")]
            assert len(selects) == 1, (scope, statements)
            assert [s.split()[0].upper() for s in statements] == ["BEGIN", "SELECT", "COMMIT"]
            plan = raw(conn).execute("EXPLAIN QUERY PLAN " + selects[0]).fetchall()
            details = [row[-1] for row in plan]
            assert not any(d.startswith("SCAN") and "messages" in d for d in details), details
            assert all("USING" in d or not d.startswith(("SCAN", "SEARCH")) for d in details), (
                scope,
                details,
            )
    finally:
        raw(conn).set_trace_callback(None)
        close_connection(conn)
