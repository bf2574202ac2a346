"""Diagnosis classes, guard texts and byte preservation (docs/storage.md §5; §9 items 21–30,
65, 66). Every refusal is checked under the guard, `setup` and doctor-style diagnosis, each
time with the file's SHA-256 (+ -wal) and its directory listing compared with no connection
open."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from cafleet.cli.guard import GuardRefused, guard_text, open_validated_connection
from cafleet.db import tx
from cafleet.db.diagnosis import Diagnosis, diagnose, diagnose_path, render_differences
from cafleet.db.errors import SetupFailed
from cafleet.db.migrate import run_setup
from cafleet.db.runtime import close_connection, open_connection, raw
from cafleet.db.shapes import HEAD_REVISION, HEAD_VERSION
from tests.storage_helpers import (
    TS,
    Templates,
    assert_unchanged,
    companions,
    leave_wal_frames,
    query,
    rebuild_table,
    run_python,
    snapshot,
    sql,
    templates_fixture,  # noqa: F401
)

NEWER = HEAD_VERSION + 1  # a schema version this cafleet does not know


def refuse_everywhere(db: Path, expected: str) -> Diagnosis:
    """Guard, setup and doctor all refuse with `expected`; the file is preserved by each."""
    before = snapshot(db)
    with pytest.raises(GuardRefused) as guard:
        open_validated_connection(str(db))
    assert str(guard.value) == expected
    assert_unchanged(before, db)

    with pytest.raises(SetupFailed) as setup:
        run_setup(str(db))
    assert str(setup.value) == expected
    assert_unchanged(before, db)

    d = diagnose_path(str(db), for_doctor=True)
    assert guard_text(d) == expected
    assert not d.ok
    assert_unchanged(before, db)
    return d


def doctor_json(d: Diagnosis) -> dict[str, object]:
    """The fields doctor --json takes from a Diagnosis (docs/storage.md §5.4)."""
    return {
        "ok": d.ok,
        "path": d.path,
        "state": d.state,
        "schema_version": d.schema_version,
        "head_version": d.head_version,
        "error": guard_text(d),
    }


# --- §9 item 21 missing ---------------------------------------------------------------------------


def _zero_byte(db: Path) -> None:
    db.parent.mkdir(parents=True, exist_ok=True)
    db.write_bytes(b"")


def _identity0_no_objects(db: Path) -> None:
    db.parent.mkdir(parents=True, exist_ok=True)
    sql(db, "PRAGMA user_version = 7")
    assert db.stat().st_size > 0


def _only_sqlite_sequence(db: Path) -> None:
    db.parent.mkdir(parents=True, exist_ok=True)
    sql(
        db,
        "CREATE TABLE t (id INTEGER PRIMARY KEY AUTOINCREMENT, v TEXT); "
        "INSERT INTO t (v) VALUES ('x'); DROP TABLE t;",
    )
    assert query(db, "SELECT name FROM sqlite_master") == [("sqlite_sequence",)]


@pytest.mark.parametrize(
    "build",
    [None, _zero_byte, _identity0_no_objects, _only_sqlite_sequence],
    ids=["absent", "zero-byte", "identity-0-no-objects", "only-sqlite_sequence"],
)
def test_missing(db_path: Path, build: Callable[[Path], None] | None) -> None:
    if build is not None:
        build(db_path)
    before = snapshot(db_path)
    with pytest.raises(GuardRefused) as e:
        open_validated_connection(str(db_path))
    assert str(e.value) == "no cafleet database; run 'cafleet setup'"
    assert_unchanged(before, db_path)
    d = diagnose_path(str(db_path), for_doctor=True)
    assert_unchanged(before, db_path)
    assert doctor_json(d) == {
        "ok": False,
        "path": str(db_path),
        "state": "missing",
        "schema_version": None,
        "head_version": HEAD_VERSION,
        "error": "no cafleet database; run 'cafleet setup'",
    }
    # setup initialises every missing file
    assert (
        run_setup(str(db_path))
        == f"Created {db_path} and applied migrations to head ({HEAD_VERSION})."
    )
    assert diagnose_path(str(db_path)).state == "current"


def test_missing_on_a_connection_holding_temp_tables(db_path: Path) -> None:
    _identity0_no_objects(db_path)
    conn = open_connection(str(db_path), mode="rw", purpose="command")
    try:
        raw(conn).execute("CREATE TEMP TABLE scratch (a)")
        raw(conn).execute("CREATE TEMP VIEW scratch_v AS SELECT 1")
        assert diagnose(str(db_path), conn).state == "missing"
    finally:
        close_connection(conn, guarded=True)


def test_temp_tables_do_not_shadow_the_main_schema(db_path: Path, templates: Templates) -> None:
    templates.copy(HEAD_REVISION, db_path)
    conn = open_connection(str(db_path), mode="rw", purpose="command")
    try:
        raw(conn).execute("CREATE TEMP TABLE members (x)")
        raw(conn).execute("CREATE TEMP TABLE alembic_version (nope)")
        assert diagnose(str(db_path), conn).state == "current"
    finally:
        close_connection(conn)


# --- §9 item 22 current ---------------------------------------------------------------------------


def test_current(db_path: Path, templates: Templates) -> None:
    templates.copy(HEAD_REVISION, db_path)
    before = snapshot(db_path)
    conn = open_validated_connection(str(db_path))
    close_connection(conn)
    assert_unchanged(before, db_path)
    d = diagnose_path(str(db_path), for_doctor=True)
    assert guard_text(d) is None
    assert doctor_json(d) == {
        "ok": True,
        "path": str(db_path),
        "state": "current",
        "schema_version": HEAD_VERSION,
        "head_version": HEAD_VERSION,
        "error": None,
    }
    assert_unchanged(before, db_path)


# --- §9 item 23 behind ----------------------------------------------------------------------------


def test_behind(db_path: Path, templates: Templates) -> None:
    templates.copy("0001", db_path)
    sql(db_path, f"INSERT INTO asset_installs VALUES ('claude', '/p', '0.0.1', '{TS}')")
    before = snapshot(db_path)
    text = f"database schema is outdated (schema 1, head {HEAD_VERSION}); run 'cafleet setup'"
    with pytest.raises(GuardRefused) as e:
        open_validated_connection(str(db_path))
    assert str(e.value) == text
    assert_unchanged(before, db_path)
    d = diagnose_path(str(db_path), for_doctor=True)
    assert_unchanged(before, db_path)
    assert doctor_json(d) == {
        "ok": False,
        "path": str(db_path),
        "state": "behind",
        "schema_version": 1,
        "head_version": HEAD_VERSION,
        "error": text,
    }
    assert d.revision == "0001"


# --- §9 item 24 ahead -----------------------------------------------------------------------------


def test_ahead_is_decided_before_any_shape_comparison(db_path: Path, templates: Templates) -> None:
    templates.copy(HEAD_REVISION, db_path)
    sql(db_path, f"UPDATE alembic_version SET version_num = '{NEWER:04d}'; DROP TABLE members;")
    d = refuse_everywhere(
        db_path,
        f"database schema {NEWER} is newer than this cafleet (head {HEAD_VERSION}); "
        "upgrade cafleet",
    )
    assert (d.state, d.revision, d.schema_version, d.differences) == (
        "ahead",
        f"{NEWER:04d}",
        NEWER,
        (),
    )


# --- §9 item 25 foreign ---------------------------------------------------------------------------


def _identity(db: Path, value: int) -> None:
    db.parent.mkdir(parents=True, exist_ok=True)
    sql(db, f"PRAGMA application_id = {value}; CREATE TABLE things (a TEXT);")


def test_foreign_identity_42(db_path: Path) -> None:
    _identity(db_path, 42)
    d = refuse_everywhere(
        db_path,
        f"{db_path} is not a cafleet database (application_id is 42, not 1128351288); "
        "cafleet will not use or modify it",
    )
    assert doctor_json(d)["schema_version"] is None and d.state == "foreign"


@pytest.mark.parametrize("older_cafleet", [False, True])
def test_foreign_identity_0_with_tables(db_path: Path, older_cafleet: bool) -> None:
    db_path.parent.mkdir(parents=True)
    if older_cafleet:
        sql(
            db_path,
            "CREATE TABLE agents (agent_id TEXT PRIMARY KEY, name TEXT); "
            "CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL PRIMARY KEY); "
            "INSERT INTO alembic_version VALUES ('a1b2c3d4e5f6');",
        )
    else:
        sql(db_path, "CREATE TABLE notes (a TEXT)")
    refuse_everywhere(
        db_path,
        f"{db_path} is not a cafleet database (it has tables but no cafleet identity); "
        "cafleet will not use or modify it",
    )


def test_foreign_identity_without_ledger(db_path: Path, templates: Templates) -> None:
    templates.copy(HEAD_REVISION, db_path)
    sql(db_path, "DROP TABLE alembic_version")
    refuse_everywhere(
        db_path,
        f"{db_path} is not a cafleet database (it has the cafleet identity but no schema "
        "ledger); cafleet will not use or modify it",
    )


def test_identity_beats_a_perfect_schema(db_path: Path, templates: Templates) -> None:
    templates.copy(HEAD_REVISION, db_path)
    sql(db_path, "PRAGMA application_id = 7")
    refuse_everywhere(
        db_path,
        f"{db_path} is not a cafleet database (application_id is 7, not 1128351288); "
        "cafleet will not use or modify it",
    )


# --- §9 item 26 damaged: every difference kind ----------------------------------------------------

DAMAGE: dict[str, tuple[Callable[[Path], None], str]] = {
    "table missing": (
        lambda db: sql(db, "DROP TABLE asset_installs"),
        "missing table asset_installs",
    ),
    "table is a view": (
        lambda db: sql(db, "DROP TABLE asset_installs; CREATE VIEW asset_installs AS SELECT 1;"),
        "missing table asset_installs (a view has that name)",
    ),
    "column missing": (
        lambda db: rebuild_table(db, "messages", "text TEXT NOT NULL, ", ""),
        "missing column messages.text",
    ),
    "column extra": (
        lambda db: sql(db, "ALTER TABLE fleets ADD COLUMN color TEXT"),
        "unexpected column fleets.color",
    ),
    "generated column extra": (
        lambda db: sql(
            db, "ALTER TABLE fleets ADD COLUMN upper_name TEXT GENERATED ALWAYS AS (upper(name))"
        ),
        "unexpected column fleets.upper_name",
    ),
    "type": (
        lambda db: rebuild_table(db, "members", "status TEXT NOT NULL", "status INT NOT NULL"),
        "members.status: type INT (expected TEXT)",
    ),
    "nullability": (
        lambda db: rebuild_table(db, "members", "\tname TEXT NOT NULL", "\tname TEXT"),
        "members.name: nullable (expected NOT NULL)",
    ),
    "default": (
        lambda db: rebuild_table(db, "member_placements", "DEFAULT 'tmux'", "DEFAULT 'herdr'"),
        "member_placements.backend: default 'herdr' (expected 'tmux')",
    ),
    "primary key": (
        lambda db: rebuild_table(
            db,
            "asset_installs",
            "PRIMARY KEY (coding_agent, path)",
            "PRIMARY KEY (path, coding_agent)",
        ),
        "asset_installs: primary key (path, coding_agent) (expected (coding_agent, path))",
    ),
    "autoincrement": (
        lambda db: rebuild_table(db, "messages", " AUTOINCREMENT", ""),
        "messages: AUTOINCREMENT absent (expected present)",
    ),
    "foreign key changed": (
        lambda db: rebuild_table(
            db, "member_placements", "ON DELETE CASCADE", "ON DELETE RESTRICT"
        ),
        "member_placements.member_id: foreign key members(member_id) ON DELETE RESTRICT "
        "(expected members(member_id) ON DELETE CASCADE)",
    ),
    "foreign key missing": (
        lambda db: rebuild_table(
            db,
            "monitor_runtime",
            ", \n\tFOREIGN KEY(fleet_id) REFERENCES fleets (fleet_id) ON DELETE RESTRICT",
            "",
        ),
        "missing foreign key monitor_runtime.fleet_id -> fleets(fleet_id) ON DELETE RESTRICT",
    ),
    "foreign key extra": (
        lambda db: rebuild_table(
            db,
            "messages",
            "FOREIGN KEY(owner_member_id)",
            "FOREIGN KEY(from_member_id) REFERENCES members (member_id), "
            "FOREIGN KEY(owner_member_id)",
        ),
        "unexpected foreign key messages.from_member_id -> members(member_id) ON DELETE NO ACTION",
    ),
    "index missing": (
        lambda db: sql(db, "DROP INDEX idx_messages_from_created"),
        "missing index idx_messages_from_created",
    ),
    "index not unique": (
        lambda db: sql(
            db,
            "DROP INDEX idx_members_one_active_monitor_per_fleet; "
            "CREATE INDEX idx_members_one_active_monitor_per_fleet ON members (fleet_id) "
            "WHERE status = 'active' AND json_extract(member_card_json, '$.cafleet.kind') = 'monitor';",
        ),
        "index idx_members_one_active_monitor_per_fleet: not unique (expected unique)",
    ),
    "index unexpectedly unique": (
        lambda db: sql(
            db,
            "DROP INDEX idx_messages_from_created; "
            "CREATE UNIQUE INDEX idx_messages_from_created ON messages (from_member_id, created_at);",
        ),
        "index idx_messages_from_created: unique (expected not unique)",
    ),
    "index predicate": (
        lambda db: sql(
            db,
            "DROP INDEX idx_messages_pending_notification; "
            "CREATE INDEX idx_messages_pending_notification "
            "ON messages (owner_member_id, created_at, message_id) WHERE notified_at IS NULL;",
        ),
        "index idx_messages_pending_notification: other predicate",
    ),
    "index predicate missing": (
        lambda db: sql(
            db,
            "DROP INDEX idx_messages_pending_notification; "
            "CREATE INDEX idx_messages_pending_notification "
            "ON messages (owner_member_id, created_at, message_id);",
        ),
        "index idx_messages_pending_notification: no predicate (expected one)",
    ),
    "index predicate unexpected": (
        lambda db: sql(
            db,
            "DROP INDEX idx_members_fleet_status; "
            "CREATE INDEX idx_members_fleet_status ON members (fleet_id, status) "
            "WHERE status = 'active';",
        ),
        "index idx_members_fleet_status: unexpected predicate",
    ),
    "index key columns": (
        lambda db: sql(
            db,
            "DROP INDEX idx_members_fleet_status; "
            "CREATE INDEX idx_members_fleet_status ON members (status, fleet_id);",
        ),
        "index idx_members_fleet_status: key columns (status, fleet_id) (expected (fleet_id, status))",
    ),
    "index on another table": (
        lambda db: sql(
            db,
            "DROP INDEX idx_members_fleet_status; "
            "CREATE INDEX idx_members_fleet_status ON fleets (name);",
        ),
        "index idx_members_fleet_status: on table fleets (expected members)",
    ),
}


@pytest.mark.parametrize("kind", sorted(DAMAGE))
def test_damaged_difference_kinds(db_path: Path, templates: Templates, kind: str) -> None:
    damage, difference = DAMAGE[kind]
    templates.copy(HEAD_REVISION, db_path)
    damage(db_path)
    expected = (
        f"{db_path} is damaged (schema {HEAD_VERSION}): {difference}; cafleet will not use or "
        "modify it"
    )
    d = refuse_everywhere(db_path, expected)
    assert d.state == "damaged" and d.differences == (difference,)
    assert doctor_json(d)["schema_version"] == HEAD_VERSION
    assert diagnose_path(str(db_path)).differences == d.differences  # stable


def test_many_differences_render_first_three_and_ellipsis(
    db_path: Path, templates: Templates
) -> None:
    templates.copy(HEAD_REVISION, db_path)
    sql(
        db_path,
        "DROP INDEX idx_messages_from_created; DROP INDEX idx_members_fleet_status; "
        "ALTER TABLE fleets ADD COLUMN color TEXT; DROP TABLE asset_installs; "
        "ALTER TABLE members ADD COLUMN extra INTEGER;",
    )
    first = diagnose_path(str(db_path))
    second = diagnose_path(str(db_path))
    assert first.differences == second.differences
    assert first.differences == (
        "unexpected column fleets.color",
        "unexpected column members.extra",
        "missing table asset_installs",
        "missing index idx_members_fleet_status",
        "missing index idx_messages_from_created",
    )
    assert render_differences(first.differences) == (
        "unexpected column fleets.color; unexpected column members.extra; "
        "missing table asset_installs; …"
    )
    refuse_everywhere(
        db_path,
        f"{db_path} is damaged (schema {HEAD_VERSION}): unexpected column fleets.color; unexpected column "
        "members.extra; missing table asset_installs; …; cafleet will not use or modify it",
    )


def test_exactly_three_differences_have_no_ellipsis() -> None:
    assert render_differences(("a", "b", "c")) == "a; b; c"
    assert render_differences(("a",)) == "a"


# --- §9 item 27 malformed ledgers -----------------------------------------------------------------

LEDGERS = {
    "no row": ("DELETE FROM alembic_version", "alembic_version: holds 0 rows (expected 1)"),
    "two rows": (
        "INSERT INTO alembic_version VALUES ('0001')",
        "alembic_version: holds 2 rows (expected 1)",
    ),
    "abc": (
        "UPDATE alembic_version SET version_num = 'abc'",
        "alembic_version: 'abc' is not a cafleet revision",
    ),
    "0000": (
        "UPDATE alembic_version SET version_num = '0000'",
        "alembic_version: '0000' is not a cafleet revision",
    ),
    "2": (
        "UPDATE alembic_version SET version_num = '2'",
        "alembic_version: '2' is not a cafleet revision",
    ),
    "00002": (
        "UPDATE alembic_version SET version_num = '00002'",
        "alembic_version: '00002' is not a cafleet revision",
    ),
    "no version_num": (
        "DROP TABLE alembic_version; CREATE TABLE alembic_version (revision TEXT); "
        "INSERT INTO alembic_version VALUES ('0002');",
        "alembic_version: no version_num column",
    ),
}


@pytest.mark.parametrize("case", sorted(LEDGERS))
def test_malformed_ledger_is_damaged_with_unknown_schema(
    db_path: Path, templates: Templates, case: str
) -> None:
    statement, difference = LEDGERS[case]
    templates.copy(HEAD_REVISION, db_path)
    sql(db_path, statement)
    d = refuse_everywhere(
        db_path,
        f"{db_path} is damaged (schema unknown): {difference}; cafleet will not use or modify it",
    )
    assert d.state == "damaged" and d.schema_version is None
    assert doctor_json(d)["schema_version"] is None


# --- §9 item 28 a known older revision uses its own shape -----------------------------------------


def test_altered_0001_file_is_damaged_by_its_own_shape(db_path: Path, templates: Templates) -> None:
    templates.copy("0001", db_path)
    sql(db_path, "DROP INDEX idx_members_fleet_status")
    d = refuse_everywhere(
        db_path,
        f"{db_path} is damaged (schema 1): missing index idx_members_fleet_status; "
        "cafleet will not use or modify it",
    )
    assert d.differences == ("missing index idx_members_fleet_status",)  # no monitor index


# --- §9 item 29 tolerated extras ------------------------------------------------------------------


def test_auxiliary_objects_keep_a_head_file_current(db_path: Path, templates: Templates) -> None:
    templates.copy(HEAD_REVISION, db_path)
    sql(
        db_path,
        "CREATE TABLE aux_notes (a TEXT); "
        "CREATE VIEW aux_view AS SELECT member_id FROM members; "
        "CREATE INDEX aux_messages_text ON messages (text); "
        "CREATE TRIGGER aux_trigger AFTER INSERT ON members BEGIN SELECT 1; END; "
        "CREATE TABLE _alembic_tmp_members (x); "
        "ANALYZE;",
    )
    # whitespace and case of a predicate are normalised
    sql(
        db_path,
        "DROP INDEX idx_messages_pending_notification; "
        "CREATE INDEX idx_messages_pending_notification ON messages "
        "(owner_member_id, created_at, message_id)\n  where   notified_at IS NULL\n"
        "  AND status_state = 'input_required'   AND type = 'unicast';",
    )
    assert query(db_path, "SELECT count(*) FROM sqlite_master WHERE name LIKE 'sqlite_stat%'")[0][0]
    before = snapshot(db_path)
    conn = open_validated_connection(str(db_path))
    close_connection(conn)
    assert_unchanged(before, db_path)
    assert run_setup(str(db_path)) == f"Already at head ({HEAD_VERSION}); nothing to do."
    assert_unchanged(before, db_path)
    assert diagnose_path(str(db_path), for_doctor=True).state == "current"
    assert_unchanged(before, db_path)


# --- §9 item 30 unreadable ------------------------------------------------------------------------


def test_unreadable_text_file(db_path: Path) -> None:
    db_path.parent.mkdir(parents=True)
    db_path.write_text("this is a text file, not a database\n" * 20)
    refuse_everywhere(db_path, f"cannot read database {db_path}: file is not a database")


def test_unreadable_directory(db_path: Path) -> None:
    db_path.mkdir(parents=True)
    (db_path / "inside").write_text("x")
    refuse_everywhere(db_path, f"cannot read database {db_path}: unable to open database file")


def test_unreadable_corrupted_header(db_path: Path, templates: Templates) -> None:
    templates.copy(HEAD_REVISION, db_path)
    data = bytearray(db_path.read_bytes())
    data[0:16] = b"NOT SQLITE AT AL"
    db_path.write_bytes(bytes(data))
    d = refuse_everywhere(db_path, f"cannot read database {db_path}: file is not a database")
    assert d.reason == "file is not a database"


# --- §9 item 65 WAL companions --------------------------------------------------------------------

WAL_CASES: dict[str, tuple[list[str], bool, str]] = {
    # statements, start from a head copy?, expected text (P substituted)
    "identity 42": (
        ["PRAGMA application_id = 42", "CREATE TABLE things (a)", "INSERT INTO things VALUES (1)"],
        False,
        "{P} is not a cafleet database (application_id is 42, not 1128351288); "
        "cafleet will not use or modify it",
    ),
    "identity 0 with a table": (
        ["CREATE TABLE notes (a)", "INSERT INTO notes VALUES ('x')"],
        False,
        "{P} is not a cafleet database (it has tables but no cafleet identity); "
        "cafleet will not use or modify it",
    ),
    "cafleet ledger newer than head": (
        [f"UPDATE alembic_version SET version_num = '{NEWER:04d}'"],
        True,
        f"database schema {NEWER} is newer than this cafleet (head {HEAD_VERSION}); "
        "upgrade cafleet",
    ),
}


@pytest.mark.parametrize("case", sorted(WAL_CASES))
def test_wal_with_committed_frames_is_refused_and_preserved(
    db_path: Path, templates: Templates, case: str
) -> None:
    statements, from_head, text = WAL_CASES[case]
    db_path.parent.mkdir(parents=True)
    if from_head:
        templates.copy(HEAD_REVISION, db_path)
    leave_wal_frames(db_path, *statements)
    assert companions(db_path) == ["-wal", "-shm"]
    refuse_everywhere(db_path, text.format(P=db_path))
    assert companions(db_path) == ["-wal", "-shm"]


@pytest.mark.parametrize("case", sorted(WAL_CASES))
def test_cleanly_closed_wal_file_is_refused_and_leaves_no_companions(
    db_path: Path, templates: Templates, case: str
) -> None:
    statements, from_head, text = WAL_CASES[case]
    db_path.parent.mkdir(parents=True)
    if from_head:
        templates.copy(HEAD_REVISION, db_path)
    sql(db_path, "PRAGMA journal_mode = WAL", *[s + ";" for s in statements])
    assert query(db_path, "PRAGMA journal_mode") == [("wal",)]
    assert companions(db_path) == []
    refuse_everywhere(db_path, text.format(P=db_path))
    assert companions(db_path) == []


def test_doctor_on_current_file_with_wal_frames_keeps_p_and_wal(
    db_path: Path, templates: Templates
) -> None:
    templates.copy(HEAD_REVISION, db_path)
    leave_wal_frames(
        db_path, f"INSERT INTO asset_installs VALUES ('claude', '/p', '0.1.0', '{TS}')"
    )
    before = snapshot(db_path)
    d = diagnose_path(str(db_path), for_doctor=True)
    assert d.state == "current"
    assert_unchanged(before, db_path)
    assert companions(db_path) == ["-wal", "-shm"]


# --- §9 item 66 header older than its WAL ---------------------------------------------------------


def test_setup_committed_only_in_wal_is_current_and_writable(db_path: Path) -> None:
    result = run_python(
        f"""
        import os
        import cafleet.db.migrate as m
        m._close_connection = lambda conn, guarded: None  # exit without closing
        print(m.run_setup({str(db_path)!r}), flush=True)
        os._exit(0)
        """
    )
    assert result.returncode == 0, result.stderr
    assert (
        result.stdout.strip()
        == f"Created {db_path} and applied migrations to head ({HEAD_VERSION})."
    )
    header = db_path.read_bytes()[:100]
    assert len(header) < 72 or header[68:72] == b"\x00\x00\x00\x00"  # identity 0 on disk
    assert os.path.getsize(str(db_path) + "-wal") > 0

    conn = open_validated_connection(str(db_path))
    try:
        with tx.write(conn):
            conn.exec_driver_sql(
                "INSERT INTO asset_installs VALUES ('codex', '/x', '0.1.0', ?)", (TS,)
            )
    finally:
        close_connection(conn)
    assert query(db_path, "SELECT coding_agent, path FROM asset_installs") == [("codex", "/x")]
    con = sqlite3.connect(db_path)
    try:
        assert con.execute("PRAGMA application_id").fetchone() == (1128351288,)
    finally:
        con.close()
