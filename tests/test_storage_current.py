"""The guard's fast check of a database at head (docs/storage.md §5.4, §10.2), on both dialects:
a file or a PostgreSQL database brought to head by setup is recognised at a glance
(`cafleet.db.current`: the file's catalogue text; `cafleet.db.pg.current`: one statement whose
fingerprint of the schema's shape equals head's); anything else, a compatible extra index
included, goes to the full diagnosis, which alone decides a refusal, with its own text, and the
database is left as it was."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cafleet.cli.guard import GuardRefused, open_validated_connection
from cafleet.db import tx
from cafleet.db.current import is_current
from cafleet.db.diagnosis import diagnose_path, guard_text
from cafleet.db.runtime import close_connection, open_connection
from cafleet.db.shapes import HEAD_REVISION, HEAD_VERSION
from tests.broker_helpers import raw_connect
from tests.pg_server import PgDb, PgServer
from tests.storage_helpers import snapshot, sql

ROOT = Path(__file__).resolve().parent.parent
NEWER = f"{HEAD_VERSION + 1:04d}"  # a revision this cafleet does not have


@pytest.fixture
def head_db(bare_head_db: Path) -> Path:
    return bare_head_db


def _fast(db: Path) -> bool:
    """The fast check alone: SQLite's inside a read transaction, PostgreSQL's outside any."""
    conn = open_connection(str(db))
    try:
        if isinstance(db, PgDb):
            from cafleet.db.pg.current import current_schema_version

            return current_schema_version(conn) is not None  # type: ignore[arg-type]
        with tx.read(conn):
            return is_current(conn)
    finally:
        close_connection(conn)


def test_a_database_set_up_to_head_is_current_at_a_glance(head_db: Path) -> None:
    assert _fast(head_db)


# (SQLite, PostgreSQL) forms of one change to a database at head
CHANGES = {
    # compatible: still current, the long way
    "extra index": ("CREATE INDEX aux_names ON members (name)",) * 2,
    "older ledger": ("UPDATE alembic_version SET version_num = '0001'",) * 2,
    "newer ledger": (f"UPDATE alembic_version SET version_num = '{NEWER}'",) * 2,
    "two ledger rows": (f"INSERT INTO alembic_version VALUES ('{HEAD_REVISION}x')",) * 2,
    "another identity": (
        "PRAGMA application_id = 7",
        "COMMENT ON SCHEMA public IS 'cafleet application_id 7'",
    ),
    "no identity": ("PRAGMA application_id = 0", "COMMENT ON SCHEMA public IS NULL"),
    "dropped index": ("DROP INDEX idx_members_fleet_status",) * 2,
    "no ledger table": ("DROP TABLE alembic_version",) * 2,
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_any_other_database_goes_to_the_full_diagnosis(
    head_db: Path, dialect: str, change: str
) -> None:
    """The fast check passes nothing but head; the guard's verdict is then the full
    diagnosis', word for word, and a refused database is left as it was."""
    sql(head_db, CHANGES[change][dialect == "postgresql"])
    assert not _fast(head_db)
    d = diagnose_path(str(head_db))
    before = snapshot(head_db)
    if d.ok:
        close_connection(open_validated_connection(str(head_db)))
    else:
        with pytest.raises(GuardRefused) as refused:
            open_validated_connection(str(head_db))
        assert str(refused.value) == guard_text(d)
    assert snapshot(head_db) == before
    assert (change == "extra index") == d.ok


def test_a_drifted_index_is_refused_by_the_full_diagnosis(head_db: Path) -> None:
    sql(
        head_db,
        "DROP INDEX idx_members_fleet_status",
        "CREATE INDEX idx_members_fleet_status ON members (fleet_id)",
    )
    with pytest.raises(GuardRefused, match="is damaged"):
        open_validated_connection(str(head_db))


def test_the_guard_on_a_current_database_loads_no_recorded_shapes(head_db: Path) -> None:
    before = snapshot(head_db)
    code = (
        "import sys\n"
        "from cafleet.db.guard import open_validated_connection\n"
        "from cafleet.db.runtime import close_connection\n"
        f"close_connection(open_validated_connection({str(head_db)!r}))\n"
        "print(sorted(m for m in ('cafleet.db.shapes', 'cafleet.db.diagnosis', "
        "'cafleet.db.classify', 'cafleet.db.pg.diagnosis', 'sqlalchemy') if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, "[]", "")
    assert snapshot(head_db) == before  # read, not changed
    if not isinstance(head_db, PgDb):
        db = sqlite3.connect(head_db)
        try:
            assert db.execute("SELECT version_num FROM alembic_version").fetchall() == [
                (HEAD_REVISION,)
            ]
        finally:
            db.close()


@pytest.mark.sqlite_only
@given(st.text(st.characters(blacklist_categories=("Cs",)), min_size=1))
def test_uri_path_quotes_as_urllib_does(path: str) -> None:
    """The runtime's own percent-encoding (urllib.parse costs ~5 ms of imports per command)."""
    import urllib.parse

    from cafleet.db.runtime import uri_path

    assert uri_path(path) == urllib.parse.quote(path)


# --- PostgreSQL: the shape behind the ledger, the recorded fingerprints ---------------------------

# Each changes the shape of a head database and leaves its identity and ledger alone.
SHAPE_CHANGES = {
    "column type": "ALTER TABLE messages ALTER COLUMN text TYPE varchar(4000)",
    "NOT NULL dropped": "ALTER TABLE members ALTER COLUMN status DROP NOT NULL",
    "default changed": "ALTER TABLE member_placements ALTER COLUMN backend SET DEFAULT 'screen'",
    "default dropped": "ALTER TABLE host_loops ALTER COLUMN tick_seconds DROP DEFAULT",
    "column added": "ALTER TABLE messages ADD COLUMN extra text",
    "column renamed": "ALTER TABLE fleets RENAME COLUMN name TO title",
    "key not generated": "ALTER TABLE fleets ALTER COLUMN fleet_id DROP DEFAULT",
    "foreign key action": (
        "ALTER TABLE members DROP CONSTRAINT members_fleet_id_fkey; "
        "ALTER TABLE members ADD CONSTRAINT members_fleet_id_fkey FOREIGN KEY (fleet_id) "
        "REFERENCES fleets (fleet_id) ON DELETE CASCADE"
    ),
    "foreign key dropped": "ALTER TABLE messages DROP CONSTRAINT messages_owner_member_id_fkey",
    "index not unique": (
        "DROP INDEX idx_members_one_active_monitor_per_fleet; "
        "CREATE INDEX idx_members_one_active_monitor_per_fleet ON members (fleet_id) "
        "WHERE status = 'active' AND json_extract(member_card_json, '$.cafleet.kind') = 'monitor'"
    ),
    "index predicate": (
        "DROP INDEX idx_messages_pending_notification; "
        "CREATE INDEX idx_messages_pending_notification ON messages "
        "(owner_member_id, created_at, message_id) WHERE notified_at IS NULL"
    ),
    "index columns": (
        "DROP INDEX idx_messages_from_created; "
        "CREATE INDEX idx_messages_from_created ON messages (created_at, from_member_id)"
    ),
    "function dropped": "DROP FUNCTION json_valid(text)",
    "table replaced by a view": (
        "DROP TABLE host_loops; CREATE VIEW host_loops AS SELECT 'h'::text AS host_id"
    ),
    "primary key dropped": "ALTER TABLE asset_installs DROP CONSTRAINT asset_installs_pkey",
}


def _fk_name(db: PgDb, table: str, column: str) -> str:
    raw = raw_connect(db)
    try:
        row = raw.execute(
            "SELECT conname FROM pg_constraint WHERE contype = 'f' AND conrelid = ?::regclass "
            "AND conkey = ARRAY[(SELECT attnum FROM pg_attribute WHERE attrelid = ?::regclass "
            "AND attname = ?)]::int2[]",
            (table, table, column),
        ).fetchone()  # type: ignore[attr-defined]
    finally:
        raw.close()
    return str(row[0])


@pytest.mark.parametrize("change", list(SHAPE_CHANGES))
def test_a_changed_shape_behind_an_unchanged_ledger_is_refused(
    pg_server: PgServer, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    """On PostgreSQL a database whose identity and ledger say head but whose shape differs is
    not current at a glance: the guard refuses it as damaged, with the full diagnosis' text, and
    leaves it as it was."""
    db = PgDb(pg_server, pg_server.new_database("cafleet_head"))
    monkeypatch.setenv("CAFLEET_DATABASE_URL", db.url)
    statement = SHAPE_CHANGES[change]
    for table, column in (("members", "fleet_id"), ("messages", "owner_member_id")):
        statement = statement.replace(f"{table}_{column}_fkey", _fk_name(db, table, column))
    sql(db, *statement.split("; "))
    assert not _fast(db)
    d = diagnose_path(str(db))
    assert d.state == "damaged", d
    before = snapshot(db)
    with pytest.raises(GuardRefused) as refused:
        open_validated_connection(str(db))
    assert str(refused.value) == guard_text(d)
    assert snapshot(db) == before


def test_the_fast_check_remembers_the_schema_fingerprint_the_recheck_compares(
    pg_server: PgServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A connection the fast check validated holds the same schema fingerprint as the full
    diagnosis would have stored, so `recheck_schema` re-diagnoses only after a change."""
    from cafleet.cli.guard import recheck_schema
    from cafleet.db.guard import SCHEMA_VERSION_KEY
    from cafleet.db.pg.diagnosis import schema_fingerprint

    db = PgDb(pg_server, pg_server.new_database("cafleet_head"))
    monkeypatch.setenv("CAFLEET_DATABASE_URL", db.url)
    conn = open_validated_connection(str(db))
    try:
        with tx.read(conn):
            assert conn.info[SCHEMA_VERSION_KEY] == schema_fingerprint(conn)  # type: ignore[arg-type]
        recheck_schema(conn)  # unchanged
        sql(db, "ALTER TABLE members ALTER COLUMN status DROP NOT NULL")
        sql(db, "ALTER TABLE members ADD COLUMN touched text")  # the relation changes too
        with pytest.raises(GuardRefused, match="is damaged"):
            recheck_schema(conn)
    finally:
        close_connection(conn)


def test_the_recorded_postgresql_fingerprints_are_current(pg_server: PgServer) -> None:
    """`cafleet/db/catalog/postgresql/heads.py` holds this server's fingerprint of a database
    brought to head by every path, for the statement the fast check sends."""
    from tests.pg_heads import head_fingerprints, stale

    found = head_fingerprints(pg_server)
    assert stale(found) == [], "run: python -m tests.pg_heads"
