"""The database half of `cafleet setup` (docs/storage.md §6); the only importer of `alembic`.

Alembic is imported lazily, inside the migrating function, so `setup` on a current file (and
everything else) never imports it.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.resources
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy.exc import DBAPIError

from cafleet import signals, status
from cafleet.config import db_dir_of, is_postgres, locks_dir
from cafleet.db import engine
from cafleet.db.diagnosis import (
    Diagnosis,
    diagnose,
    duplicate_monitors_text,
    guard_text,
    render_differences,
)
from cafleet.db.errors import DatabaseBusy, MigrationRefused, SetupFailed
from cafleet.db.shapes import HEAD_REVISION, HEAD_VERSION, REVISIONS
from cafleet.errors import CafleetError
from cafleet.files import create_private, private_dirs, tighten

if TYPE_CHECKING:  # pragma: no cover
    from sqlalchemy import Connection

SETUP_LOCK_POLL = 0.05  # seconds between tries of the setup lock (a signal still stops it)

# The driver's own copy of the duplicate-monitor query (§3.3); the revision's copy is frozen
# with its file.
_DUPLICATE_MONITORS_SQL = (
    "SELECT fleet_id, member_id FROM members WHERE status = 'active' "
    "AND CASE WHEN json_valid(member_card_json) "
    "THEN json_extract(member_card_json, '$.cafleet.kind') END = 'monitor' "
    "ORDER BY fleet_id, member_id"
)


def already_at_head() -> str:
    return f"Already at head ({HEAD_VERSION}); nothing to do."


def _created(path: str) -> str:
    return f"Created {path} and applied migrations to head ({HEAD_VERSION})."


def _upgraded(old: int) -> str:
    return f"Upgraded from {old} to {HEAD_VERSION}."


# --- script location (§3.5) --------------------------------------------------------------------


def _candidates() -> tuple[Path, Path]:
    import cafleet

    first = Path(str(importlib.resources.files("cafleet") / "_migrations" / "alembic"))
    second = Path(cafleet.__file__).resolve().parent.parent / "alembic"
    return first, second


def _usable(location: Path) -> bool:
    return (location / "env.py").is_file() and (location / "versions").is_dir()


def script_location() -> Path:
    """The directory holding env.py and versions/: the installed wheel's copy, else the
    checkout's. Never the current directory."""
    first, second = _candidates()
    for location in (first, second):
        if _usable(location):
            return location
    raise SetupFailed(
        "cafleet installation is incomplete: migration scripts not found "
        f"(looked in {first}, {second})"
    )


# --- locks -------------------------------------------------------------------------------------


def setup_lock_path(path: str) -> str:
    return os.path.join(locks_dir(db_dir_of(path)), "setup.lock")


def _take_setup_lock(path: str, on_wait: Callable[[str], None] | None = None) -> int:
    """Exclusive flock on locks/setup.lock, tried every 50 ms with no deadline. When the first
    try finds it taken, ``on_wait`` gets the lock file's path once (setup says it waits)."""
    lock_path = setup_lock_path(path)
    try:
        fd = engine.lock_file_fd(lock_path)
    except OSError as e:
        raise SetupFailed(status.os_error_text(e, action="create")) from None
    told = False
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return fd
            except BlockingIOError:
                pass
            if not told and on_wait is not None:
                told = True
                on_wait(lock_path)
            if signals.stop_requested():
                raise signals.Interrupted()
            time.sleep(SETUP_LOCK_POLL)
    except BaseException:
        os.close(fd)
        raise


@contextlib.contextmanager
def setup_lock(path: str) -> Iterator[None]:
    """Hold `locks/setup.lock` beside the database ``path`` (setup's assets half runs under it
    too, so concurrent setups install one after another)."""
    fd = _take_setup_lock(path)
    try:
        yield
    finally:
        os.close(fd)


def assets_lock(path: str | None) -> contextlib.AbstractContextManager[None]:
    """The setup lock setup's assets half runs under: none when the path did not resolve or a
    file's directory does not exist (nothing is created for a missing file); a PostgreSQL
    database's local directory (docs/storage.md §10.1) is created if need be: the assets are
    this host's files."""
    if path is None:
        return contextlib.nullcontext()
    if is_postgres(path):
        private_dirs(db_dir_of(path))
    elif not os.path.isdir(db_dir_of(path)):
        return contextlib.nullcontext()
    return setup_lock(path)


# --- the driver --------------------------------------------------------------------------------


class _Rollback(CafleetError):
    """Raised inside tx.write to roll back; carries the outcome."""

    def __init__(self, result: str | None = None, failure: str | None = None) -> None:
        super().__init__(result or failure)
        self.result = result
        self.failure = failure


def _guard_text(d: Diagnosis) -> str:
    return guard_text(d) or ""


def _alembic_upgrade(conn: Connection, target: str) -> None:
    from alembic.config import Config

    from alembic import command

    cfg = Config()
    cfg.set_main_option("script_location", str(script_location()))
    cfg.attributes["connection"] = conn
    command.upgrade(cfg, target)


def _duplicate_text(conn: Connection) -> str | None:
    return duplicate_monitors_text(conn.exec_driver_sql(_DUPLICATE_MONITORS_SQL))


def _sqlite_detail(e: BaseException) -> str:
    if isinstance(e, DBAPIError):
        return str(e.orig)
    return str(e) or type(e).__name__


def _foreign_key_failure(conn: Connection) -> str | None:
    rows = conn.exec_driver_sql("PRAGMA foreign_key_check").all()
    if not rows:
        return None
    table, rowid, parent, _fkid = rows[0]
    return (
        f"foreign key check found {len(rows)} violation(s); first: {table} rowid {rowid} "
        f"references missing {parent} row"
    )


def _migrate_in_tx(conn: Connection, path: str, target: str) -> str:
    """Steps 5–8 inside the open write transaction; returns the success line or raises
    `_Rollback` (which rolls back)."""
    d = diagnose(path, conn)
    if d.state in ("current", "behind") and d.revision is not None:
        if REVISIONS.index(d.revision) >= REVISIONS.index(target):
            raise _Rollback(result=already_at_head() if target == HEAD_REVISION else "")
    elif d.state != "missing":
        raise _Rollback(failure=_guard_text(d))
    old_version = d.schema_version

    def failed(detail: str) -> _Rollback:
        return _Rollback(failure=f"migration failed: {detail}; {path} was left unchanged")

    try:
        _alembic_upgrade(conn, target)
    except MigrationRefused as e:
        raise _Rollback(failure=str(e)) from e
    except Exception as e:
        detail = _sqlite_detail(e)
        if "UNIQUE constraint failed: members.fleet_id" in detail:
            try:
                duplicate = _duplicate_text(conn)
            except Exception:  # pragma: no cover - the transaction is still open
                duplicate = None
            if duplicate is not None:
                raise _Rollback(failure=duplicate) from e
        raise failed(detail) from e
    try:
        fk_failure = _foreign_key_failure(conn)
    except DBAPIError as e:
        raise failed(_sqlite_detail(e)) from e
    if fk_failure is not None:
        raise failed(fk_failure)
    after = diagnose(path, conn)
    expected_state = "current" if target == HEAD_REVISION else "behind"
    if after.state != expected_state or after.revision != target:
        shown = render_differences(after.differences) if after.differences else after.state
        raise failed(f"resulting schema does not match schema {int(target)} ({shown})")
    if old_version is None:
        return _created(path) if target == HEAD_REVISION else ""
    return _upgraded(old_version) if target == HEAD_REVISION else ""


def _open(path: str, mode: engine.Mode) -> Connection:
    try:
        return engine.open_connection(path, mode=mode, purpose="migration")
    except DBAPIError as e:
        raise SetupFailed(_guard_text(_unreadable(path, str(e.orig)))) from None
    except sqlite3.Error as e:
        raise SetupFailed(_guard_text(_unreadable(path, str(e)))) from None


def _unreadable(path: str, cause: str) -> Diagnosis:
    return Diagnosis(
        state="unreadable", path=path, revision=None, schema_version=None, reason=cause
    )


def _run(path: str, target: str, on_wait: Callable[[str], None] | None = None) -> str:
    parent = os.path.dirname(path)
    if not os.path.isdir(parent):
        try:
            private_dirs(parent)
        except OSError as e:
            raise SetupFailed(status.os_error_text(e, action="create directory")) from None
    lock_fd = _take_setup_lock(path, on_wait)
    try:
        return _run_locked(path, target)
    finally:
        os.close(lock_fd)  # releases the setup lock, after the connection is closed


def make_private(path: str) -> list[str]:
    """After a successful db half: database file `path` and its companions made readable by
    their owner alone (every fleet's messages are in them), one line per file changed, for setup
    to say so. Nothing for PostgreSQL, whose files are the server's."""
    if is_postgres(path):
        return []
    lines = []
    for name in (path, *(path + suffix for suffix in ("-wal", "-shm", "-journal"))):
        before = tighten(name)
        if before is not None:
            lines.append(f"Made {name} readable by you alone (mode 0600; it was {before:04o}).")
    return lines


def _create_private(path: str) -> None:
    """Create the new database file `0600` before SQLite opens it: SQLite gives its `-wal` and
    `-shm` the database's mode, so they are private too, whatever the umask."""
    try:
        os.close(create_private(path))
    except OSError as e:
        raise SetupFailed(status.os_error_text(e, action="create")) from None


def stray_companions_text(path: str) -> str | None:
    """The refusal for an absent `path` with a `-wal` or `-shm` beside it (docs/storage.md §6), else None.

    SQLite would adopt such a `-wal` as the new file's log, or delete it, and it may hold
    another database's committed frames; so setup creates nothing next to one."""
    stray = [path + suffix for suffix in ("-wal", "-shm") if os.path.lexists(path + suffix)]
    if not stray:
        return None
    names = " and ".join(stray)
    verb, pronoun, obj = ("exist", "they", "them") if len(stray) > 1 else ("exists", "it", "it")
    return (
        f"{path} does not exist but {names} {verb} beside it; {pronoun} may hold another "
        f"database's data, so cafleet will not create a database next to {obj}: restore "
        f"{path}, or move {names} away, then run 'cafleet setup' again"
    )


def _run_locked(path: str, target: str) -> str:
    absent = not os.path.exists(path)
    if absent:
        stray = stray_companions_text(path)
        if stray is not None:
            raise SetupFailed(stray)
        script_location()  # fail before creating anything when the scripts are missing
        _create_private(path)
    conn = _open(path, "rwc" if absent else "rw")
    use_file = False  # True once cafleet wrote to the file: a plain close is then ordinary
    try:
        raw = engine.raw(conn)
        try:
            raw.execute("PRAGMA foreign_keys = OFF")
            fk = raw.execute("PRAGMA foreign_keys").fetchone()
        except sqlite3.Error as e:
            raise SetupFailed(_guard_text(_unreadable(path, str(e)))) from None
        if fk is None or fk[0] != 0:  # pragma: no cover - SQLite ignores it only in a tx
            raise SetupFailed(
                f"migration failed: cannot turn foreign keys off; {path} was left unchanged"
            )

        d = diagnose(path, conn)
        if d.state in ("current", "behind") and d.revision is not None:
            if REVISIONS.index(d.revision) >= REVISIONS.index(target):
                return already_at_head() if target == HEAD_REVISION else ""
        elif d.state == "missing":
            try:
                mode = raw.execute("PRAGMA journal_mode").fetchone()[0]
                if str(mode).lower() != "wal":
                    mode = raw.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            except sqlite3.Error as e:
                mode = str(e)
            if str(mode).lower() != "wal":
                raise SetupFailed(
                    f"cannot enable WAL journal mode for {path} (SQLite reports '{mode}'); "
                    "use a local filesystem"
                )
        else:
            raise SetupFailed(_guard_text(d))
        script_location()

        try:
            with engine.tx.write(conn):
                result = _migrate_in_tx(conn, path, target)
        except _Rollback as outcome:
            if outcome.failure is not None:
                raise SetupFailed(outcome.failure) from None
            return outcome.result or ""
        except DatabaseBusy as e:
            raise SetupFailed(str(e)) from None
        except DBAPIError as e:  # BEGIN IMMEDIATE or COMMIT failed otherwise
            raise SetupFailed(
                f"migration failed: {_sqlite_detail(e)}; {path} was left unchanged"
            ) from None
        use_file = True
        return result
    finally:
        _close_connection(conn, guarded=not use_file)


def _close_connection(conn: Connection, *, guarded: bool) -> None:
    """Indirection so tests can simulate a process that exits without closing (§9 item 66)."""
    engine.close_connection(conn, guarded=guarded)


def run_setup(path: str, on_wait: Callable[[str], None] | None = None) -> str:
    """`cafleet setup`'s database half (docs/storage.md §6). Returns the success line; raises
    `SetupFailed` (str = the exact text without `Error: `) or `signals.Interrupted`.
    ``on_wait(lock_path)`` runs once when another setup holds the setup lock. A PostgreSQL
    `P` is migrated by `cafleet.db.pg.migrate` (docs/storage.md §10.2)."""
    if is_postgres(path):
        from cafleet.db.pg.migrate import run_setup as pg_run_setup

        return pg_run_setup(path, script_location())
    return _run(path, HEAD_REVISION, on_wait)


def upgrade_to(path: str, revision: str) -> None:
    """Test hook: the real driver stopped at `revision` (builds files at older revisions)."""
    if revision not in REVISIONS:
        raise ValueError(f"unknown revision {revision!r}")
    if is_postgres(path):
        from cafleet.db.pg.migrate import upgrade_to as pg_upgrade_to

        pg_upgrade_to(path, revision, script_location())
        return
    _run(path, revision)
