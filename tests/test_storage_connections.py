"""Connections, transactions, the writer lock and the guard's connection (docs/storage.md §4;
§9 items 9–13, 17, 44, 62)."""

from __future__ import annotations

import fcntl
import os
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from cafleet.cli.guard import GuardRefused, open_validated_connection, recheck_schema
from cafleet.config import SettingsError, resolve_database_path
from cafleet.db import tx
from cafleet.db.diagnosis import diagnose, diagnose_path
from cafleet.db.errors import DatabaseBusy, SchemaChanged, StorageUsageError
from cafleet.db.runtime import Connection, close_connection, open_connection, raw
from cafleet.db.shapes import HEAD_REVISION, HEAD_VERSION
from cafleet.db.writelock import writer_lock_path
from tests.storage_helpers import TS, hold_lock, query, run_python, sql, start_python, wait_line

ASSET_INSERT = "INSERT INTO asset_installs VALUES ('claude', ?, '0.1.0', ?)"


@pytest.fixture
def head_db(bare_head_db: Path) -> Path:
    """These tests write asset_installs rows as their probe: the db half only, no asset rows."""
    return bare_head_db


def _asset_count(db: Path) -> int:
    return query(db, "SELECT count(*) FROM asset_installs")[0][0]


def _lock_is_free(db: Path) -> bool:
    fd = os.open(writer_lock_path(str(db)), os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return True
    finally:
        os.close(fd)


# --- §9 item 9 ------------------------------------------------------------------------------------


def test_factory_connection_pragmas(head_db: Path) -> None:
    conn = open_connection(str(head_db), mode="rw", purpose="command")
    try:
        assert not conn.in_transaction()
        assert not raw(conn).in_transaction
        with tx.read(conn):
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
            assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 5000
            assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 2
        assert not conn.in_transaction()
        assert not raw(conn).in_transaction
        assert conn.info["cafleet.purpose"] == "command"
        assert conn.info["cafleet.companions_at_open"] is False
    finally:
        close_connection(conn)


# --- §9 item 10 -----------------------------------------------------------------------------------


def test_database_url_rules() -> None:
    assert resolve_database_path({"CAFLEET_DATABASE_URL": "sqlite:////abs/x.db"}) == "/abs/x.db"
    assert (
        resolve_database_path({"CAFLEET_DATABASE_URL": "", "HOME": "/h"})
        == "/h/.local/share/cafleet/cafleet.db"
    )
    for url in ("mysql://h/db", "sqlite://", "sqlite+pysqlite:////x.db"):
        with pytest.raises(SettingsError) as e:
            resolve_database_path({"CAFLEET_DATABASE_URL": url})
        assert str(e.value) == (
            "database URL must use the sqlite scheme (sqlite:///<absolute path>) or postgresql "
            f"(postgresql://<host>/<database>); got '{url}'"
        )
    # a PostgreSQL URL is P without its password (docs/storage.md §10.1); a refused one too
    assert (
        resolve_database_path(
            {"CAFLEET_DATABASE_URL": "postgresql://u:pw@h:5432/db?sslmode=require"}
        )
        == "postgresql://u@h:5432/db?sslmode=require"
    )
    with pytest.raises(SettingsError) as e:
        resolve_database_path({"CAFLEET_DATABASE_URL": "mysql://u:pw@h/db"})
    assert "pw" not in str(e.value) and "mysql://u:***@h/db" in str(e.value)
    with pytest.raises(SettingsError) as e:
        resolve_database_path({"CAFLEET_DATABASE_URL": "sqlite:///"})
    assert str(e.value) == "database URL has no file path"
    for url in ("sqlite:///rel.db", "sqlite:///~/x.db", "sqlite:///:memory:"):
        with pytest.raises(SettingsError) as e:
            resolve_database_path({"CAFLEET_DATABASE_URL": url})
        assert str(e.value) == f"database URL must name an absolute file path; got '{url}'"
    for env in ({}, {"HOME": ""}):
        with pytest.raises(SettingsError) as e:
            resolve_database_path(env)
        assert str(e.value) == "HOME is not set; cannot derive the default database path"


# --- §9 item 11 -----------------------------------------------------------------------------------


def test_guard_and_doctor_diagnosis_create_nothing_on_absent_path(tmp_path: Path) -> None:
    db = tmp_path / "absent-dir" / "cafleet.db"
    with pytest.raises(GuardRefused) as e:
        open_validated_connection(str(db))
    assert str(e.value) == "no cafleet database; run 'cafleet setup'"
    d = diagnose_path(str(db), for_doctor=True)
    assert (d.state, d.path, d.schema_version, d.head_version) == (
        "missing",
        str(db),
        None,
        HEAD_VERSION,
    )
    assert not db.parent.exists()
    assert sorted(os.listdir(tmp_path)) == ["home"]


# --- §9 item 12 -----------------------------------------------------------------------------------


def test_statement_outside_a_transaction_is_refused(head_db: Path) -> None:
    conn = open_connection(str(head_db), mode="rw", purpose="command")
    try:
        with pytest.raises(StorageUsageError):
            conn.exec_driver_sql("SELECT 1")
        with pytest.raises(StorageUsageError), tx.write(conn):
            pass  # pragma: no cover
        assert not conn.in_transaction()
    finally:
        close_connection(conn)


def test_catalog_statement_runs_only_inside_a_transaction(conn: Connection) -> None:
    from cafleet.db.catalog import messages as q

    with pytest.raises(StorageUsageError, match="outside tx.read"):
        conn.execute(q.MEMBER_STATUS, {"member_id": 1})
    assert not conn.in_transaction()
    with tx.read(conn):
        assert conn.execute(q.MEMBER_STATUS, {"member_id": 1}).all() == []
        assert conn.exec_driver_sql("SELECT ? + 1", (1,)).scalar() == 2


def test_nested_transactions_are_refused(conn: Connection) -> None:
    with tx.read(conn), pytest.raises(StorageUsageError), tx.write(conn):
        pass  # pragma: no cover
    assert not conn.in_transaction()


# --- §9 item 13 (storage half) --------------------------------------------------------------------


def test_reads_and_diagnosis_do_not_wait_for_an_open_write(conn: Connection, head_db: Path) -> None:
    other = sqlite3.connect(head_db, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        other.execute(ASSET_INSERT, ("/uncommitted", TS))
        start = time.monotonic()
        d = diagnose_path(str(head_db))
        with tx.read(conn):
            count = conn.exec_driver_sql("SELECT count(*) FROM asset_installs").scalar()
        d2 = diagnose(str(head_db), conn)
        elapsed = time.monotonic() - start
        assert d.state == "current" and d2.state == "current"
        assert count == 0
        assert elapsed < 1.0
    finally:
        other.execute("ROLLBACK")
        other.close()


# --- §9 item 17 and the long-running re-check -----------------------------------------------------


def test_schema_changed_after_validation(conn: Connection, head_db: Path) -> None:
    sql(head_db, f"UPDATE alembic_version SET version_num = '{HEAD_VERSION + 1:04d}'")
    with pytest.raises(SchemaChanged) as e, tx.write(conn):
        conn.exec_driver_sql(ASSET_INSERT, ("/never", TS))  # pragma: no cover
    assert str(e.value) == (
        "the database schema changed while this command was running "
        f"(validated schema {HEAD_VERSION}, now schema {HEAD_VERSION + 1}); re-run the command"
    )
    assert not conn.in_transaction()
    assert _asset_count(head_db) == 0
    assert _lock_is_free(head_db)

    sql(head_db, "DELETE FROM alembic_version")
    with pytest.raises(SchemaChanged) as e, tx.write(conn):
        conn.exec_driver_sql(ASSET_INSERT, ("/never", TS))  # pragma: no cover
    assert str(e.value) == (
        "the database schema changed while this command was running "
        f"(validated schema {HEAD_VERSION}, now unreadable); re-run the command"
    )
    assert _asset_count(head_db) == 0


def test_recheck_schema_tolerates_compatible_changes_and_stops_on_damage(
    conn: Connection, head_db: Path
) -> None:
    recheck_schema(conn)  # unchanged
    sql(head_db, "CREATE TABLE aux_notes (x TEXT)")
    recheck_schema(conn)  # schema_version changed, still current
    sql(head_db, "DROP INDEX idx_members_one_active_monitor_per_fleet")
    with pytest.raises(GuardRefused) as e:
        recheck_schema(conn)
    assert str(e.value) == (
        f"{head_db} is damaged (schema {HEAD_VERSION}): missing index "
        "idx_members_one_active_monitor_per_fleet; cafleet will not use or modify it"
    )


def test_validated_connection_writes_land_in_the_file(conn: Connection, head_db: Path) -> None:
    assert conn.info["cafleet.purpose"] == "validated"
    assert conn.info["cafleet.revision"] == HEAD_REVISION
    with tx.write(conn):
        conn.exec_driver_sql(ASSET_INSERT, ("/a", TS))
    assert _asset_count(head_db) == 1
    with pytest.raises(RuntimeError), tx.write(conn):
        conn.exec_driver_sql(ASSET_INSERT, ("/b", TS))
        raise RuntimeError("boom")
    assert _asset_count(head_db) == 1
    assert not conn.in_transaction() and not raw(conn).in_transaction


# --- §9 item 62 the writer lock -------------------------------------------------------------------


def test_writer_waits_for_the_writer_lock_then_succeeds(conn: Connection, head_db: Path) -> None:
    holder = hold_lock(writer_lock_path(str(head_db)), 1.0)
    try:
        start = time.monotonic()
        with tx.write(conn):
            conn.exec_driver_sql(ASSET_INSERT, ("/after-wait", TS))
        elapsed = time.monotonic() - start
    finally:
        holder.wait(timeout=10)
    assert 0.5 <= elapsed < 4.0, elapsed
    assert _asset_count(head_db) == 1
    assert _lock_is_free(head_db)


def test_writer_lock_held_too_long_raises_database_busy(conn: Connection, head_db: Path) -> None:
    holder = hold_lock(writer_lock_path(str(head_db)), 6.0)
    try:
        reader = open_validated_connection(str(head_db))
        try:
            start = time.monotonic()
            with tx.read(reader):
                reader.exec_driver_sql(
                    "SELECT * FROM messages WHERE owner_member_id = 1 AND type = 'unicast' "
                    "AND status_state = 'input_required' ORDER BY status_timestamp DESC"
                ).all()
            assert time.monotonic() - start < 1.0  # a poll does not wait for the writer lock
        finally:
            close_connection(reader)
        start = time.monotonic()
        with pytest.raises(DatabaseBusy) as e, tx.write(conn):
            conn.exec_driver_sql(ASSET_INSERT, ("/never", TS))  # pragma: no cover
        elapsed = time.monotonic() - start
        assert str(e.value) == "database is locked"
        # The 5 s busy timeout, not the 6 s holder, ended it: past the holder the write works.
        assert elapsed >= 4.5, elapsed
        assert not conn.in_transaction()
    finally:
        holder.kill()  # the 6 s hold has made its point
        holder.wait(timeout=10)
    assert _asset_count(head_db) == 0


def test_begin_immediate_busy_maps_to_database_busy(conn: Connection, head_db: Path) -> None:
    """A writer that skips the writer lock (the sqlite3 shell) holds SQLite's write lock."""
    other = start_python(
        f"""
        import sqlite3, time
        con = sqlite3.connect({str(head_db)!r}, isolation_level=None)
        con.execute("BEGIN IMMEDIATE")
        print("locked", flush=True)
        time.sleep(6)
        con.execute("ROLLBACK")
        """
    )
    try:
        wait_line(other, "locked")
        start = time.monotonic()
        with pytest.raises(DatabaseBusy) as e, tx.write(conn):
            conn.exec_driver_sql(ASSET_INSERT, ("/never", TS))  # pragma: no cover
        elapsed = time.monotonic() - start
        assert str(e.value) == "database is locked"
        # The 5 s busy timeout, not the 6 s holder, ended it: past the holder the write works.
        assert elapsed >= 4.5, elapsed
        assert _lock_is_free(head_db)
        assert not conn.in_transaction()
    finally:
        other.kill()
        other.wait(timeout=10)


def test_writer_lock_is_free_after_commit_and_rollback(conn: Connection, head_db: Path) -> None:
    with tx.write(conn):
        conn.exec_driver_sql(ASSET_INSERT, ("/c", TS))
        assert not _lock_is_free(head_db)
    assert _lock_is_free(head_db)
    with pytest.raises(ValueError), tx.write(conn):
        raise ValueError
    assert _lock_is_free(head_db)
    locks = head_db.parent / "locks"
    assert oct(locks.stat().st_mode & 0o777) == "0o700"
    assert oct((locks / "db-write.lock").stat().st_mode & 0o777) == "0o600"


def test_writer_lock_in_a_worker_thread(conn: Connection, head_db: Path) -> None:
    """Threads cannot take SIGALRM; the bounded wait still works there."""
    holder = hold_lock(writer_lock_path(str(head_db)), 0.5)
    errors: list[BaseException] = []

    def work() -> None:
        try:
            with tx.write(conn):
                conn.exec_driver_sql(ASSET_INSERT, ("/thread", TS))
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    try:
        t = threading.Thread(target=work)
        t.start()
        t.join(timeout=10)
    finally:
        holder.wait(timeout=10)
    assert errors == []
    assert _asset_count(head_db) == 1


# --- §9 item 44 -----------------------------------------------------------------------------------


def test_guard_path_never_imports_alembic(head_db: Path) -> None:
    result = run_python(
        f"""
        import sys
        from cafleet.cli.guard import open_validated_connection, recheck_schema
        from cafleet.db import tx
        from cafleet.db.runtime import close_connection
        from cafleet.db.migrate import run_setup
        conn = open_validated_connection({str(head_db)!r})
        recheck_schema(conn)
        with tx.read(conn):
            conn.exec_driver_sql("SELECT count(*) FROM members").scalar()
        close_connection(conn)
        print(run_setup({str(head_db)!r}))  # setup on a current file
        print(sorted(m for m in sys.modules if m == "alembic" or m.startswith("alembic.")))
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [f"Already at head ({HEAD_VERSION}); nothing to do.", "[]"]


def test_guarded_cli_command_never_imports_alembic(head_db: Path) -> None:
    result = run_python(
        """
        import sys
        import cafleet.cli
        try:
            cafleet.cli.main(["member", "list", "1"])
        except SystemExit as e:
            print("exit", e.code)
        print(sorted(m for m in sys.modules if m == "alembic" or m.startswith("alembic.")))
        """
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[-1] == "[]"
    assert "no cafleet database" not in result.stderr  # the guard passed on the head file


def test_import_cafleet_is_stdlib_only() -> None:
    result = run_python(
        """
        import sys
        import cafleet
        print(sorted(m for m in ("sqlalchemy", "alembic", "click", "libtmux") if m in sys.modules))
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
