"""The database half of `cafleet setup` on PostgreSQL (docs/storage.md §6, §10.2).

The same steps as on a file, with PostgreSQL's locks: the setup lock is a session advisory lock
(concurrent setups, from any host, take turns), the whole migration is one transaction that
first takes the writer lock (the advisory lock every cafleet writer takes), then diagnoses,
runs the pending revisions of the one Alembic chain (`cafleet.db.pg.alembic_impl` reads the
SQLite-only details), diagnoses again and commits. Any failure rolls back: PostgreSQL's DDL is
transactional, so a refused or failed setup leaves the database as it was.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cafleet.db.diagnosis import (
    Diagnosis,
    duplicate_monitors_text,
    guard_text,
    make_diagnosis,
    render_differences,
)
from cafleet.db.errors import DatabaseBusy, MigrationRefused, SetupFailed
from cafleet.db.pg.diagnosis import diagnose_in_tx
from cafleet.db.pg.runtime import SETUP_LOCK_KEY, WRITER_LOCK_KEY, as_sqlite_error, first_line
from cafleet.db.shapes import HEAD_REVISION, HEAD_VERSION, REVISIONS
from cafleet.errors import CafleetError
from cafleet.pgurl import connect_url, redact

if TYPE_CHECKING:
    from sqlalchemy import Connection

# The driver's own copy of the duplicate-monitor query (§3.3), as on SQLite.
_DUPLICATE_MONITORS_SQL = (
    "SELECT fleet_id, member_id FROM members WHERE status = 'active' "
    "AND CASE WHEN json_valid(member_card_json) "
    "THEN json_extract(member_card_json, '$.cafleet.kind') END = 'monitor' "
    "ORDER BY fleet_id, member_id"
)


def _unreadable(path: str, cause: str) -> str:
    d = Diagnosis(state="unreadable", path=path, revision=None, schema_version=None, reason=cause)
    return guard_text(d) or ""


def sqlalchemy_url(path: str) -> str:
    url = connect_url(path)
    scheme, rest = url.split("://", 1)
    return f"postgresql+psycopg://{rest}"


@contextmanager
def sa_connection(path: str) -> Iterator[Connection]:
    """SQLAlchemy's connection to `P` (setup and the `alembic` command only)."""
    from sqlalchemy import create_engine
    from sqlalchemy.pool import NullPool

    from cafleet.db.pg.runtime import CONNECT_TIMEOUT, LOCK_TIMEOUT, url_problem

    url = connect_url(path)
    problem = url_problem(url)  # libpq's reading first: its words, and the password hidden
    if problem is not None:
        raise sqlite3.OperationalError(problem)
    try:
        engine = create_engine(
            sqlalchemy_url(path),
            poolclass=NullPool,
            connect_args={"connect_timeout": CONNECT_TIMEOUT, "application_name": "cafleet"},
        )
    except Exception:  # a URL libpq reads but SQLAlchemy does not; its words may quote the URL
        raise sqlite3.OperationalError(
            "malformed database URL (SQLAlchemy cannot read it)"
        ) from None
    try:
        try:
            conn = engine.connect()
        except Exception as e:
            raise sqlite3.OperationalError(
                redact(first_line(getattr(e, "orig", None) or e), url)
            ) from None
        try:
            conn.exec_driver_sql(f"SET lock_timeout = '{LOCK_TIMEOUT}'")
            conn.commit()
            yield conn
        finally:
            conn.close()
    finally:
        engine.dispose()


class _Rollback(CafleetError):
    def __init__(self, result: str | None = None, failure: str | None = None) -> None:
        super().__init__(result or failure)
        self.result = result
        self.failure = failure


def _duplicate_text(conn: Connection) -> str | None:
    return duplicate_monitors_text(conn.exec_driver_sql(_DUPLICATE_MONITORS_SQL))


def _detail(e: BaseException) -> str:
    orig = getattr(e, "orig", None)
    if orig is not None:
        return str(as_sqlite_error(orig)) if not isinstance(orig, sqlite3.Error) else str(orig)
    return str(e) or type(e).__name__


def _upgrade(conn: Connection, target: str, scripts: Path) -> None:
    from alembic.config import Config

    import cafleet.db.pg.alembic_impl  # noqa: F401 - registers the PostgreSQL reading
    from alembic import command

    cfg = Config()
    cfg.set_main_option("script_location", str(scripts))
    cfg.attributes["connection"] = conn
    command.upgrade(cfg, target)


def _in_tx(conn: Connection, path: str, target: str, scripts: Path) -> str:
    d: Diagnosis = diagnose_in_tx(path, conn, make_diagnosis)  # type: ignore[arg-type]
    if d.state in ("current", "behind") and d.revision is not None:
        if REVISIONS.index(d.revision) >= REVISIONS.index(target):
            raise _Rollback(result=already_at_head() if target == HEAD_REVISION else "")
    elif d.state != "missing":
        raise _Rollback(failure=guard_text(d) or "")
    old_version = d.schema_version

    def failed(detail: str) -> _Rollback:
        return _Rollback(failure=f"migration failed: {detail}; {path} was left unchanged")

    conn.exec_driver_sql("SAVEPOINT cafleet_migration")
    try:
        _upgrade(conn, target, scripts)
    except MigrationRefused as e:
        raise _Rollback(failure=str(e)) from e
    except Exception as e:
        detail = _detail(e)
        if "UNIQUE constraint failed: members.fleet_id" in detail or (
            "idx_members_one_active_monitor_per_fleet" in str(e)
        ):
            conn.exec_driver_sql("ROLLBACK TO SAVEPOINT cafleet_migration")
            duplicate = _duplicate_text(conn)
            if duplicate is not None:
                raise _Rollback(failure=duplicate) from e
        raise failed(detail) from e
    after: Diagnosis = diagnose_in_tx(path, conn, make_diagnosis)  # type: ignore[arg-type]
    expected = "current" if target == HEAD_REVISION else "behind"
    if after.state != expected or after.revision != target:
        shown = render_differences(after.differences) if after.differences else after.state
        raise failed(f"resulting schema does not match schema {int(target)} ({shown})")
    if old_version is None:
        if target != HEAD_REVISION:
            return ""
        return f"Created {path} and applied migrations to head ({HEAD_VERSION})."
    return f"Upgraded from {old_version} to {HEAD_VERSION}." if target == HEAD_REVISION else ""


def already_at_head() -> str:
    return f"Already at head ({HEAD_VERSION}); nothing to do."


def _run(path: str, target: str, scripts: Path) -> str:
    from sqlalchemy.exc import DBAPIError

    try:
        with sa_connection(path) as conn:
            # The setup lock: a session lock, no deadline (a signal still stops the wait).
            conn.exec_driver_sql("SET lock_timeout = 0")
            conn.exec_driver_sql("SELECT pg_advisory_lock(%s)", (SETUP_LOCK_KEY,))
            conn.exec_driver_sql("SET lock_timeout = '5s'")
            conn.commit()
            try:
                trans = conn.begin()
                try:
                    conn.exec_driver_sql("SELECT pg_advisory_xact_lock(%s)", (WRITER_LOCK_KEY,))
                    result = _in_tx(conn, path, target, scripts)
                except BaseException:
                    trans.rollback()
                    raise
                trans.commit()
                return result
            except _Rollback as outcome:
                if outcome.failure is not None:
                    raise SetupFailed(outcome.failure) from None
                return outcome.result or ""
            finally:
                _unlock(conn)
    except sqlite3.OperationalError as e:
        raise SetupFailed(_unreadable(path, str(e))) from None
    except DBAPIError as e:
        cause = as_sqlite_error(e.orig) if e.orig is not None else e
        if isinstance(cause, DatabaseBusy):
            raise SetupFailed(str(cause)) from None
        raise SetupFailed(
            f"migration failed: {first_line(e.orig or e)}; {path} was left unchanged"
        ) from None


def _unlock(conn: Any) -> None:
    try:
        if conn.in_transaction():
            conn.rollback()
        conn.exec_driver_sql("SELECT pg_advisory_unlock_all()")
        conn.commit()
    except Exception:  # pragma: no cover - closing the connection releases it anyway
        pass


def run_setup(path: str, scripts: Path) -> str:
    """`cafleet setup`'s database half on PostgreSQL, with the migration scripts at `scripts`
    (`cafleet.db.migrate.script_location()`, which imports this module); raises `SetupFailed`."""
    return _run(path, HEAD_REVISION, scripts)


def upgrade_to(path: str, revision: str, scripts: Path) -> None:
    """Test hook: the driver stopped at `revision`."""
    if revision not in REVISIONS:
        raise ValueError(f"unknown revision {revision!r}")
    _run(path, revision, scripts)


__all__ = ["run_setup", "sa_connection", "sqlalchemy_url", "upgrade_to"]
