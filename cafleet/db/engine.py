"""Connection factory, transactions and the writer lock (storage.md §4).

Every statement runs inside `tx.read(conn)` (deferred BEGIN, one snapshot) or `tx.write(conn)`
(writer lock, then BEGIN IMMEDIATE). The `begin` listener refuses anything else, so a stray
statement fails loudly instead of running in an implicit transaction.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import signal
import sqlite3
import threading
import time
import urllib.parse
from collections.abc import Iterator, Mapping
from typing import Any, Literal, cast

from sqlalchemy import Connection, TextClause, create_engine, event, exc
from sqlalchemy.pool import NullPool

from cafleet.config import locks_dir
from cafleet.db.errors import DatabaseBusy, SchemaChanged, SqliteTooOld, StorageUsageError
from cafleet.errors import CafleetError

Mode = Literal["rw", "rwc", "ro"]
Purpose = Literal["command", "validated", "migration", "readonly"]

BUSY_TIMEOUT_MS = 5000
WRITER_LOCK_TIMEOUT = 5.0  # seconds; the same bound as busy_timeout

_sqlite_checked = False


def check_sqlite() -> None:
    """SQLite >= 3.35 with JSON functions; checked once per process."""
    global _sqlite_checked
    if _sqlite_checked:
        return
    version = sqlite3.sqlite_version
    ok = sqlite3.sqlite_version_info >= (3, 35, 0)
    if ok:
        probe = sqlite3.connect(":memory:")
        try:
            probe.execute("SELECT json_valid('{}')")
        except sqlite3.Error:
            ok = False
        finally:
            probe.close()
    if not ok:
        raise SqliteTooOld(version)
    _sqlite_checked = True


def companions_exist(path: str) -> bool:
    return os.path.exists(path + "-wal") or os.path.exists(path + "-shm")


def _on_connect(dbapi_connection: sqlite3.Connection, _record: object) -> None:
    dbapi_connection.isolation_level = None  # the driver must issue no BEGIN/COMMIT of its own
    dbapi_connection.execute("PRAGMA foreign_keys = ON")
    dbapi_connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    dbapi_connection.execute("PRAGMA synchronous = FULL")


def _on_begin(conn: Connection) -> None:
    mode = conn.info.get("cafleet.begin")
    if mode is None:
        raise StorageUsageError("statement issued outside tx.read()/tx.write()")
    # Straight to the driver: BEGIN runs on every transaction, and SQLAlchemy's statement
    # machinery would cost more than SQLite itself (the benchmark's send rate shows it).
    _driver(conn).execute("BEGIN IMMEDIATE" if mode == "write" else "BEGIN")


def open_connection(path: str, *, mode: Mode = "rw", purpose: Purpose = "command") -> Connection:
    """Open one SQLAlchemy connection to the file at `path` (never created unless mode='rwc')."""
    check_sqlite()
    companions = companions_exist(path)
    uri = f"file:{urllib.parse.quote(path)}?mode={mode}"

    def creator() -> sqlite3.Connection:
        return sqlite3.connect(
            uri,
            uri=True,
            isolation_level=None,
            check_same_thread=False,
            timeout=BUSY_TIMEOUT_MS / 1000,
        )

    engine = create_engine("sqlite+pysqlite://", creator=creator, poolclass=NullPool)
    event.listen(engine, "connect", _on_connect)
    event.listen(engine, "begin", _on_begin)
    conn = engine.connect()
    conn.info["cafleet.path"] = path
    conn.info["cafleet.purpose"] = purpose
    conn.info["cafleet.companions_at_open"] = companions
    return conn


def _driver(conn: Connection) -> sqlite3.Connection:
    """The pysqlite connection under `conn` (set for as long as `conn` is open)."""
    return cast(sqlite3.Connection, conn.connection.driver_connection)


def raw(conn: Connection) -> sqlite3.Connection:
    """The DBAPI connection, for PRAGMAs SQLite refuses inside a transaction."""
    if conn.in_transaction():
        raise StorageUsageError("raw PRAGMA issued inside a transaction")
    return _driver(conn)


def mark_validated(conn: Connection, revision: str) -> None:
    conn.info["cafleet.purpose"] = "validated"
    conn.info["cafleet.revision"] = revision


# --- the writer lock ---------------------------------------------------------------------------


class _LockTimeout(CafleetError):
    pass


def lock_file_fd(path: str) -> int:
    """Open (creating) a lock file under locks/, 0o600, in a 0o700 directory."""
    directory = os.path.dirname(path)
    if not os.path.isdir(directory):
        with contextlib.suppress(FileExistsError):
            os.mkdir(directory, 0o700)
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)


def flock_with_timeout(fd: int, timeout: float) -> bool:
    """Blocking exclusive flock bounded by `timeout`; True when taken.

    A blocked flock is woken the moment the holder releases, so waiters take turns (SQLite's
    busy handler is not a queue). In the main thread an interval timer bounds the wait; other
    threads cannot take signals, so they poll instead.
    """
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        pass
    if timeout <= 0:
        return False
    if threading.current_thread() is not threading.main_thread():
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            time.sleep(0.005)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                continue
        return False

    def _alarm(_signum: int, _frame: object) -> None:
        raise _LockTimeout

    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return True
    except _LockTimeout:
        return False
    except OSError as e:  # pragma: no cover - EINTR is retried by Python itself
        if e.errno == errno.EINTR:
            return False
        raise
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def writer_lock_path(db_path: str) -> str:
    return os.path.join(locks_dir(os.path.dirname(db_path)), "db-write.lock")


def _writer_fd(conn: Connection) -> int:
    fd = conn.info.get("cafleet.writer_fd")
    if fd is None:
        fd = lock_file_fd(writer_lock_path(conn.info["cafleet.path"]))
        conn.info["cafleet.writer_fd"] = fd
    return fd


def _is_busy(error: BaseException) -> bool:
    """SQLite's busy errors, raw (`sqlite3.OperationalError`) or wrapped by SQLAlchemy."""
    cause = error.orig if isinstance(error, exc.OperationalError) else error
    if not isinstance(cause, sqlite3.OperationalError):
        return False
    return "database is locked" in str(cause) or "database is busy" in str(cause)


# --- transactions ------------------------------------------------------------------------------


class tx:  # noqa: N801 - used as a namespace: tx.read(conn), tx.write(conn)
    @staticmethod
    @contextlib.contextmanager
    def read(conn: Connection) -> Iterator[Connection]:
        if conn.info.get("cafleet.begin"):
            raise StorageUsageError("nested transaction")
        conn.info["cafleet.begin"] = "read"
        try:
            trans = conn.begin()
            try:
                yield conn
            except BaseException:
                trans.rollback()
                raise
            else:
                trans.commit()
        finally:
            conn.info.pop("cafleet.begin", None)

    @staticmethod
    @contextlib.contextmanager
    def write(conn: Connection) -> Iterator[Connection]:
        if conn.info.get("cafleet.begin"):
            raise StorageUsageError("nested transaction")
        purpose = conn.info.get("cafleet.purpose")
        if purpose not in ("validated", "migration"):
            raise StorageUsageError(f"tx.write on a connection whose purpose is {purpose!r}")
        fd = _writer_fd(conn)
        if not flock_with_timeout(fd, WRITER_LOCK_TIMEOUT):
            raise DatabaseBusy()
        conn.info["cafleet.begin"] = "write"
        try:
            try:
                trans = conn.begin()
            except (exc.OperationalError, sqlite3.OperationalError) as e:
                if _is_busy(e):
                    raise DatabaseBusy() from e
                raise
            try:
                if purpose == "validated":
                    _recheck_ledger(conn)
                yield conn
            except BaseException as e:
                with contextlib.suppress(Exception):
                    trans.rollback()
                if _is_busy(e):
                    raise DatabaseBusy() from e
                raise
            else:
                try:
                    trans.commit()
                except exc.OperationalError as e:
                    with contextlib.suppress(Exception):
                        trans.rollback()
                    if _is_busy(e):
                        raise DatabaseBusy() from e
                    raise
        finally:
            conn.info.pop("cafleet.begin", None)
            fcntl.flock(fd, fcntl.LOCK_UN)


def _recheck_ledger(conn: Connection) -> None:
    validated = conn.info.get("cafleet.revision")
    try:
        # Runs in every write transaction: straight to the driver, as BEGIN does.
        rows = _driver(conn).execute("SELECT version_num FROM alembic_version").fetchall()
    except sqlite3.Error:
        now = "unreadable"
    else:
        if len(rows) == 1 and str(rows[0][0]).isdigit():
            if rows[0][0] == validated:
                return
            now = f"schema {int(rows[0][0])}"
        else:
            now = "unreadable"
    raise SchemaChanged(str(int(validated)) if validated else "unknown", now)


def driver_execute(
    conn: Connection, statement: TextClause, params: Mapping[str, Any]
) -> list[tuple[Any, ...]]:
    """Run one `text()` statement on the DBAPI connection inside the current transaction and
    return all its rows.

    Only for the hottest statement paths, like BEGIN and the ledger re-check above: SQLAlchemy's
    execution path adds ~90 µs per statement, a third of a send on this machine's disk
    (`python -m benchmarks --only send_paths`). The statement stays a SQLAlchemy `text()`
    construct with named parameters; the outside-a-transaction guard of the `begin` listener is
    repeated here because this path does not pass through it.
    """
    if not conn.info.get("cafleet.begin") or not conn.in_transaction():
        raise StorageUsageError("statement issued outside tx.read()/tx.write()")
    # fetchall() steps the statement to its end, so COMMIT never meets a statement in progress.
    return _driver(conn).execute(statement.text, params).fetchall()


# --- closing -----------------------------------------------------------------------------------


def close_connection(conn: Connection, *, guarded: bool = False) -> None:
    """Close `conn`; with `guarded`, avoid the checkpoint-on-last-close (storage.md §5.5).

    The guarded close applies only when a -wal/-shm existed at open: a read-only connection is
    opened and read first, so the read-write close is not the last one and skips the checkpoint.
    """
    fd = conn.info.pop("cafleet.writer_fd", None)
    try:
        if guarded and conn.info.get("cafleet.companions_at_open"):
            path = conn.info["cafleet.path"]
            try:
                ro = sqlite3.connect(
                    f"file:{urllib.parse.quote(path)}?mode=ro", uri=True, isolation_level=None
                )
            except sqlite3.Error:
                ro = None
            try:
                if ro is not None:
                    with contextlib.suppress(sqlite3.Error):
                        ro.execute("SELECT count(*) FROM sqlite_master").fetchall()
                _close_quietly(conn)
            finally:
                if ro is not None:
                    ro.close()
        else:
            _close_quietly(conn)
    finally:
        if fd is not None:
            os.close(fd)


def _close_quietly(conn: Connection) -> None:
    engine = conn.engine
    with contextlib.suppress(Exception):
        conn.close()
    with contextlib.suppress(Exception):
        engine.dispose()
