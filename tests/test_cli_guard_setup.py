"""The schema guard through the real CLI and `cafleet setup` (docs/cli.md §1.7, §2.1; acceptance
16–25, 80)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

import cafleet
from cafleet.db.shapes import HEAD_VERSION
from tests.cli_helpers import (
    assert_unchanged,
    db_half_failed_err,
    hold_flock,
    query,
    run_cli,
    setup_agent_summaries,
    setup_db_line,
    snapshot,
    sql,
    start_cli,
)
from tests.harness.util import retry_until


def _loop_registered() -> bool:
    from cafleet.cli.app import monitor_group

    return monitor_group.loop_command is not None  # type: ignore[attr-defined]


needs_monitor = pytest.mark.skipif(
    not _loop_registered(), reason="the monitor commands are built by a later issue"
)
MONITOR_FORMS = [
    pytest.param(("monitor", "1"), marks=needs_monitor),
    pytest.param(("monitor", "scan", "1"), marks=needs_monitor),
]
GUARDED = [
    ("fleet", "list"),
    ("fleet", "show", "1"),
    ("member", "list", "1"),
    ("member", "show", "1"),
    ("message", "poll", "1"),
    ("message", "ack", "1"),
    *MONITOR_FORMS,
]
ONE_PER_GROUP = [("fleet", "list"), ("member", "list", "1"), ("message", "poll", "1")]
MONITOR_CARD = json.dumps(
    {"name": "monitor", "description": "m", "skills": [], "cafleet": {"kind": "monitor"}},
    separators=(",", ":"),
)
TS = "2025-01-02T03:04:05.000000+00:00"
VERSION = cafleet.__version__


def already_at_head() -> str:
    return f"Already at head ({HEAD_VERSION}); nothing to do."


def schema1(path: Path) -> Path:
    from cafleet.db.migrate import upgrade_to

    path.parent.mkdir(parents=True, exist_ok=True)
    upgrade_to(str(path), "0001")
    return path


def head(path: Path) -> Path:
    from cafleet.db.migrate import run_setup

    run_setup(str(path))
    return path


def plain_sqlite(path: Path, *statements: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    sql(path, *statements)
    return path


def refuses(args: tuple[str, ...], db: Path, message: str) -> None:
    before = snapshot(db)
    code, out, err = run_cli(*args)
    if args[0] == "setup":  # its db half fails; the assets half installs but cannot record
        assert (code, err) == (1, db_half_failed_err(message)), args
        assert setup_db_line(out) not in (already_at_head(), f"Created {db}")
    else:
        assert (code, out, err) == (1, "", f"Error: {message}\n"), args
    assert_unchanged(before, db)


# --- 16. missing --------------------------------------------------------------------------------


@pytest.mark.parametrize("args", GUARDED)
def test_missing_database(args: tuple[str, ...], db_path: Path) -> None:
    code, out, err = run_cli(*args)
    assert (code, out, err) == (1, "", "Error: no cafleet database; run 'cafleet setup'\n")
    assert not db_path.parent.exists()


def test_zero_byte_file_is_missing(db_path: Path) -> None:
    db_path.parent.mkdir(parents=True)
    db_path.touch()
    refuses(("fleet", "list"), db_path, "no cafleet database; run 'cafleet setup'")


# --- 17–19. the refusal classes -----------------------------------------------------------------


def _ahead(p: Path) -> None:
    head(p)
    sql(
        p,
        f"UPDATE alembic_version SET version_num = '{HEAD_VERSION + 1:04d}'",
        "DROP INDEX idx_members_one_active_monitor_per_fleet",
    )


def _foreign_app_id(p: Path) -> None:
    plain_sqlite(p, "PRAGMA application_id = 7", "CREATE TABLE t (x)")


def _foreign_no_identity(p: Path) -> None:
    plain_sqlite(p, "CREATE TABLE t (x)")


def _foreign_no_ledger(p: Path) -> None:
    plain_sqlite(p, "PRAGMA application_id = 1128351288", "CREATE TABLE t (x)")


def _malformed_ledger(p: Path) -> None:
    head(p)
    sql(p, "INSERT INTO alembic_version VALUES ('0001')")


def _unreadable(p: Path) -> None:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(bytes(range(256)) * 64)


CASES: dict[str, tuple[Callable[[Path], object], Callable[[Path], str]]] = {
    "behind": (
        schema1,
        lambda p: (
            f"database schema is outdated (schema 1, head {HEAD_VERSION}); run 'cafleet setup'"
        ),
    ),
    "ahead": (
        _ahead,
        lambda p: (
            f"database schema {HEAD_VERSION + 1} is newer than this cafleet (head {HEAD_VERSION}); upgrade cafleet"
        ),
    ),
    "foreign-app-id": (
        _foreign_app_id,
        lambda p: (
            f"{p} is not a cafleet database (application_id is 7, not 1128351288); "
            "cafleet will not use or modify it"
        ),
    ),
    "foreign-no-identity": (
        _foreign_no_identity,
        lambda p: (
            f"{p} is not a cafleet database (it has tables but no cafleet identity); "
            "cafleet will not use or modify it"
        ),
    ),
    "foreign-no-ledger": (
        _foreign_no_ledger,
        lambda p: (
            f"{p} is not a cafleet database (it has the cafleet identity but no schema "
            "ledger); cafleet will not use or modify it"
        ),
    ),
    "damaged-ledger": (
        _malformed_ledger,
        lambda p: (
            f"{p} is damaged (schema unknown): alembic_version: holds 2 rows (expected 1); "
            "cafleet will not use or modify it"
        ),
    ),
    "unreadable": (
        _unreadable,
        lambda p: f"cannot read database {p}: file is not a database",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("args", ONE_PER_GROUP)
def test_guard_refusals(case: str, args: tuple[str, ...], db_path: Path) -> None:
    build, message = CASES[case]
    build(db_path)
    refuses(args, db_path, message(db_path))


@pytest.mark.parametrize("case", ["behind", "ahead", "unreadable"])
@pytest.mark.parametrize("args", MONITOR_FORMS)
def test_guard_refusals_monitor_forms(case: str, args: tuple[str, ...], db_path: Path) -> None:
    build, message = CASES[case]
    build(db_path)
    refuses(args, db_path, message(db_path))


def test_damaged_dropped_index(db_path: Path) -> None:
    head(db_path)
    sql(db_path, "DROP INDEX idx_messages_owner_type_state_ts")
    before = snapshot(db_path)
    code, out, err = run_cli("message", "poll", "1")
    assert (code, out) == (1, "")
    prefix = f"Error: {db_path} is damaged (schema {HEAD_VERSION}): "
    assert err.startswith(prefix)
    assert err.endswith("; cafleet will not use or modify it\n")
    differences = err[len(prefix) : -len("; cafleet will not use or modify it\n")]
    assert "idx_messages_owner_type_state_ts" in differences
    assert "missing" in differences
    assert_unchanged(before, db_path)


def test_extra_objects_pass_the_guard(db_path: Path) -> None:
    """20: unrelated extra table, index and trigger do not make a file damaged."""
    head(db_path)
    sql(
        db_path,
        "CREATE TABLE notes (x TEXT)",
        "CREATE INDEX idx_notes_x ON notes (x)",
        "CREATE TRIGGER trg_notes AFTER INSERT ON notes BEGIN SELECT 1; END",
    )
    assert run_cli("fleet", "list") == (0, "0 fleets.\n", "")


# --- 22–25. setup -------------------------------------------------------------------------------


def test_setup_creates_then_is_idempotent(db_path: Path) -> None:
    assert not db_path.parent.exists()
    code, out, err = run_cli("setup")
    assert (code, err) == (0, "")
    assert (
        setup_db_line(out) == f"Created {db_path} and applied migrations to head ({HEAD_VERSION})."
    )
    assert db_path.is_file()
    before = snapshot(db_path)
    mtime = db_path.stat().st_mtime_ns
    code, out, err = run_cli("setup")
    assert (code, err) == (0, "")
    assert setup_db_line(out) == already_at_head()
    assert set(setup_agent_summaries(out).values()) == {f"up to date (cafleet {VERSION})"}
    assert_unchanged(before, db_path)
    assert db_path.stat().st_mtime_ns == mtime


def test_setup_upgrades_schema1_keeping_rows(db_path: Path) -> None:
    schema1(db_path)
    sql(
        db_path,
        f"""
        INSERT INTO fleets (fleet_id, name, created_at, deleted_at, director_member_id)
            VALUES (1, 'live', '{TS}', NULL, NULL);
        INSERT INTO members VALUES
            (1, 1, 'Director', 'root', 'active', '{TS}', NULL, '{{"name":"Director"}}'),
            (2, 1, 'monitor', 'm', 'active', '{TS}', NULL, '{MONITOR_CARD}');
        UPDATE fleets SET director_member_id = 1;
        INSERT INTO messages (message_id, owner_member_id, from_member_id, to_member_id, type,
            created_at, status_state, status_timestamp, origin_message_id, text, notified_at)
            VALUES (1, 2, 1, 2, 'unicast', '{TS}', 'input_required', '{TS}', NULL, 'hi', NULL);
        """,
    )
    tables = ("fleets", "members", "messages")
    # Later revisions append columns (NULL in old rows): compare the columns schema 1 had.
    columns = {
        t: ", ".join(r[1] for r in query(db_path, f"PRAGMA table_info({t})")) for t in tables
    }
    rows = {t: query(db_path, f"SELECT {columns[t]} FROM {t} ORDER BY rowid") for t in tables}
    code, out, err = run_cli("setup")
    assert (code, setup_db_line(out), err) == (0, f"Upgraded from 1 to {HEAD_VERSION}.", "")
    after = {t: query(db_path, f"SELECT {columns[t]} FROM {t} ORDER BY rowid") for t in tables}
    assert after == rows
    assert run_cli("message", "poll", "2")[0] == 0


def test_setup_refuses_duplicate_monitors(db_path: Path) -> None:
    schema1(db_path)
    members = []
    for fleet_id, ids in ((3, (2, 8)), (20, (30, 90))):
        for member_id in ids:
            members.append(
                f"({member_id}, {fleet_id}, 'monitor', 'm', 'active', '{TS}', NULL, "
                f"'{MONITOR_CARD}')"
            )
    sql(
        db_path,
        f"""
        INSERT INTO fleets (fleet_id, name, created_at) VALUES (3, 'a', '{TS}'), (20, 'b', '{TS}');
        INSERT INTO members VALUES {", ".join(members)};
        """,
    )
    refuses(
        ("setup",),
        db_path,
        "active monitor duplicates prevent migration: fleet 3: members 2, 8; "
        "fleet 20: members 30, 90; deregister all but one active monitor per fleet, "
        "then run 'cafleet setup' again",
    )


@pytest.mark.parametrize(
    "case",
    [
        "ahead",
        "foreign-app-id",
        "foreign-no-identity",
        "foreign-no-ledger",
        "damaged-ledger",
        "unreadable",
    ],
)
def test_setup_refuses_with_guard_texts(case: str, db_path: Path) -> None:
    build, message = CASES[case]
    build(db_path)
    refuses(("setup",), db_path, message(db_path))


@pytest.mark.parametrize(
    "args",
    [("setup", "extra"), ("setup", "--coding-agent", "aider"), ("setup", "--coding-agent", "")],
)
def test_setup_usage_errors(args: tuple[str, ...], db_path: Path) -> None:
    code, out, err = run_cli(*args)
    assert (code, out) == (2, "")
    assert err.startswith("Usage: cafleet setup")
    assert not db_path.parent.exists()


def test_setup_cannot_create_directory(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    path = blocker / "sub" / "cafleet.db"
    code, out, err = run_cli("setup", env={"CAFLEET_DATABASE_URL": f"sqlite:///{path}"})
    assert code == 1
    first, rest = err.split("\n", 1)
    assert first.startswith(f"db half failed: cannot create directory {blocker / 'sub'}: ")
    assert rest == db_half_failed_err("x").split("\n", 1)[1]


def test_setup_reports_a_refused_wal_switch_and_leaves_the_file(db_path: Path) -> None:
    """SQLite refuses the switch to WAL while another connection reads the file (it needs the
    file to itself); setup says so with docs/cli.md's WAL-refused text and leaves the file as it was."""
    import sqlite3

    db_path.parent.mkdir(parents=True)
    db_path.write_bytes(b"")
    before = snapshot(db_path)
    reader = sqlite3.connect(str(db_path), isolation_level=None)
    try:
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM sqlite_master").fetchone()  # holds a SHARED lock
        code, out, err = run_cli("setup")  # waits out busy_timeout (5 s), then gives up
    finally:
        reader.close()
    assert code == 1
    assert err == db_half_failed_err(
        f"cannot enable WAL journal mode for {db_path} "
        "(SQLite reports 'database is locked'); use a local filesystem"
    )
    assert_unchanged(before, db_path)
    assert db_path.stat().st_size == 0
    # Nothing was half-done: once the reader is gone the same file initialises normally.
    code, out, err = run_cli("setup")
    assert (code, err) == (0, "")
    assert (
        setup_db_line(out) == f"Created {db_path} and applied migrations to head ({HEAD_VERSION})."
    )
    # The files were installed by the failed run; this run records them.
    assert set(setup_agent_summaries(out).values()) == {
        f"files up to date; recorded cafleet {VERSION}"
    }


# --- 80. the setup lock -------------------------------------------------------------------------


def test_setup_waits_for_the_setup_lock(db_path: Path) -> None:
    holder = hold_flock(db_path.parent / "locks" / "setup.lock", 30)
    try:
        proc = start_cli("setup")
        try:
            with pytest.raises(subprocess.TimeoutExpired):
                proc.wait(timeout=1.0)
            assert not db_path.exists()
        finally:
            holder.kill()
            holder.wait()
        out, err = proc.communicate(timeout=30)
    finally:
        if holder.poll() is None:
            holder.kill()
    assert proc.returncode == 0, err
    assert (
        setup_db_line(out.decode())
        == f"Created {db_path} and applied migrations to head ({HEAD_VERSION})."
    )


def test_eight_concurrent_setups(db_path: Path) -> None:
    procs = [start_cli("setup") for _ in range(8)]
    results = [(p.wait(timeout=120), *p.communicate()) for p in procs]
    assert all(code == 0 for code, _o, _e in results), results
    outs = [o.decode() for _c, o, _e in results]
    firsts = sorted(setup_db_line(o) for o in outs)
    created = f"Created {db_path} and applied migrations to head ({HEAD_VERSION})."
    assert firsts.count(created) == 1
    assert firsts.count(already_at_head()) == 7
    # The setup lock serialises the assets halves too: one run installs each agent's files,
    # the others find them up to date.
    for agent in ("claude", "codex", "opencode"):
        summaries = [setup_agent_summaries(o)[agent] for o in outs]
        assert summaries.count(f"installed cafleet {VERSION}") == 1, summaries
        assert summaries.count(f"up to date (cafleet {VERSION})") == 7, summaries


def test_setup_signal_while_waiting(db_path: Path) -> None:
    """A signal stops a waiting setup (130/143) with no database created."""
    import signal

    holder = hold_flock(db_path.parent / "locks" / "setup.lock", 30)
    try:
        proc = start_cli("setup")
        retry_until(lambda: os.path.exists(f"/proc/{proc.pid}"), timeout=5)
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(timeout=1.0)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=10)
    finally:
        holder.kill()
        holder.wait()
    assert proc.returncode == 143
    assert out == b""
    assert b"Traceback" not in err and b"Aborted" not in err
    assert not db_path.exists()
