"""SQLAlchemy's connection, for `setup` and the migrations only (docs/storage.md §4.2).

Commands run on the runtime connection (`cafleet.db.runtime`); this one shares its PRAGMAs,
writer lock, ledger re-check and guarded close. Every statement runs inside `tx.read(conn)`
(deferred BEGIN, one snapshot) or `tx.write(conn)` (writer lock, then BEGIN IMMEDIATE). The
`begin` listener refuses anything else, so a stray statement fails loudly instead of running in
an implicit transaction.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from typing import cast

from sqlalchemy import Connection, create_engine, event, exc
from sqlalchemy.pool import NullPool

from cafleet.db.errors import DatabaseBusy, StorageUsageError
from cafleet.db.runtime import (
    BUSY_TIMEOUT_MS,
    PRAGMAS,
    Mode,
    OtherKind,
    Purpose,
    check_sqlite,
    close_tracked,
    companions_exist,
    recheck_ledger,
    register_other_kind,
    uri_path,
)
from cafleet.db.runtime import is_busy as _is_busy
from cafleet.db.writelock import (
    WRITER_LOCK_TIMEOUT,
    flock_with_timeout,
    lock_file_fd,
    unlock,
    writer_lock_path,
)

# The runtime connection's own definitions; this module adds SQLAlchemy's connection for setup
# and the migrations.
__all__ = [
    "BUSY_TIMEOUT_MS",
    "Mode",
    "Purpose",
    "WRITER_LOCK_TIMEOUT",
    "check_sqlite",
    "companions_exist",
    "flock_with_timeout",
    "lock_file_fd",
    "writer_lock_path",
]


def _on_connect(dbapi_connection: sqlite3.Connection, _record: object) -> None:
    dbapi_connection.isolation_level = None  # the driver must issue no BEGIN/COMMIT of its own
    for pragma in PRAGMAS:
        dbapi_connection.execute(pragma)


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
    uri = f"file:{uri_path(path)}?mode={mode}"

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


# --- the writer lock (cafleet.db.writelock) -----------------------------------------------


def _writer_fd(conn: Connection) -> int:
    fd = conn.info.get("cafleet.writer_fd")
    if fd is None:
        fd = lock_file_fd(writer_lock_path(conn.info["cafleet.path"]))
        conn.info["cafleet.writer_fd"] = fd
    return fd


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
            unlock(fd)


def _recheck_ledger(conn: Connection) -> None:
    # Runs in every write transaction: straight to the driver, as BEGIN does.
    recheck_ledger(_driver(conn), conn.info.get("cafleet.revision"))


# --- closing -----------------------------------------------------------------------------------


def close_connection(conn: Connection, *, guarded: bool = False) -> None:
    """Close `conn`; with `guarded`, avoid the checkpoint-on-last-close (docs/storage.md §5.5).

    The guarded close applies only when a -wal/-shm existed at open: a read-only connection is
    opened and read first, so the read-write close is not the last one and skips the checkpoint.
    """
    close_tracked(conn.info, lambda: _close_quietly(conn), guarded=guarded)


def _close_quietly(conn: Connection) -> None:
    engine = conn.engine
    with contextlib.suppress(Exception):
        conn.close()
    with contextlib.suppress(Exception):
        engine.dispose()


# cafleet.db.runtime's functions take either connection kind; they hand this one over here.
register_other_kind(
    OtherKind(
        raw=raw,
        read=tx.read,
        write=tx.write,
        close=lambda conn, guarded: close_connection(conn, guarded=guarded),
    )
)
