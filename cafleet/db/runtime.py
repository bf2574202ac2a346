"""The runtime connection (docs/storage.md §4): `open_connection` picks the dialect's class
(`SqliteConnection` here, on the standard library's `sqlite3`; `cafleet.db.pg.runtime` for a
PostgreSQL `P`), and `tx` runs that connection's own transactions.

Every command, the monitor loop and the WebUI run the repository's statements here. The
statements are authored as SQLAlchemy Core constructs (`cafleet.db.statements`) and compiled
ahead of time into the catalog (`cafleet.db.catalog`); this module runs the compiled text, so a
command never imports SQLAlchemy. Setup and migrations keep SQLAlchemy's connection
(`cafleet.db.engine`); the two share the PRAGMAs, the writer lock and the transaction rules.

Every statement runs inside `tx.read(conn)` (deferred BEGIN, one snapshot) or `tx.write(conn)`
(writer lock, then BEGIN IMMEDIATE, then the ledger re-check); a statement outside both is
refused, so a stray statement fails loudly instead of running in an implicit transaction.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from cafleet.config import POSTGRES_SCHEMES
from cafleet.db.connection import WAIT_BOUND, Compiled, Connection, Statement
from cafleet.db.errors import (
    DatabaseBusy,
    SchemaChanged,
    SqliteTooOld,
    StorageUsageError,
    write_purpose,
)
from cafleet.db.results import Result
from cafleet.db.writelock import (
    WRITER_LOCK_TIMEOUT,
    flock_with_timeout,
    lock_file_fd,
    unlock,
    writer_lock_path,
)

if TYPE_CHECKING:
    from contextlib import AbstractContextManager
    from datetime import datetime

    from sqlalchemy import Connection as SAConnection

Mode = Literal["rw", "rwc", "ro"]
Purpose = Literal["command", "validated", "migration", "readonly"]

BUSY_TIMEOUT_MS = 5000
PRAGMAS = (
    "PRAGMA foreign_keys = ON",
    f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}",
    "PRAGMA synchronous = FULL",
)

Row = sqlite3.Row

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


_URI_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-~/")


def uri_path(path: str) -> str:
    """`path` percent-encoded for an SQLite URI filename, as `urllib.parse.quote` does (which
    costs ~5 ms of imports on every command)."""
    return "".join(chr(b) if b in _URI_SAFE else f"%{b:02X}" for b in os.fsencode(path))


# This process's busy timeout in milliseconds: BUSY_TIMEOUT_MS, or `cafleet hook`'s shorter bound.
_busy_ms: list[int] = [BUSY_TIMEOUT_MS]


def bound_waits(seconds: float) -> None:
    """Bound this process's waits on a busy database (SQLite's busy handler and the writer
    lock; PostgreSQL's lock_timeout and connect timeout) to ``seconds``: for `cafleet hook`, which skips a report rather than wait
    (docs/runtime.md §4.12). Connections opened afterwards use it."""
    global WRITER_LOCK_TIMEOUT
    _busy_ms[0] = max(1, int(seconds * 1000))
    WRITER_LOCK_TIMEOUT = seconds
    WAIT_BOUND[0] = seconds  # PostgreSQL: its lock_timeout and connect timeout


def connect_driver(path: str, mode: Mode) -> sqlite3.Connection:
    """The DBAPI connection both connection kinds use: URI mode, autocommit (the driver issues no
    BEGIN/COMMIT of its own), cafleet's PRAGMAs."""
    driver = sqlite3.connect(
        f"file:{uri_path(path)}?mode={mode}",
        uri=True,
        isolation_level=None,
        check_same_thread=False,
        timeout=_busy_ms[0] / 1000,
    )
    try:
        for pragma in PRAGMAS:
            driver.execute(pragma)
        if _busy_ms[0] != BUSY_TIMEOUT_MS:
            driver.execute(f"PRAGMA busy_timeout = {int(_busy_ms[0])}")
    except BaseException:
        driver.close()
        raise
    return driver


def is_busy(error: BaseException) -> bool:
    """SQLite's busy errors, raw or wrapped by SQLAlchemy (its `.orig`)."""
    cause = getattr(error, "orig", None) or error
    if not isinstance(cause, sqlite3.OperationalError):
        return False
    return "database is locked" in str(cause) or "database is busy" in str(cause)


# --- the connection ----------------------------------------------------------------------------


class SqliteConnection(Connection):
    """One `sqlite3` connection: SQLite's dialect of the runtime connection."""

    __slots__ = ()
    dialect = "sqlite"
    driver: sqlite3.Connection

    def in_transaction(self) -> bool:
        return self.driver.in_transaction

    def text_query(self, words: list[str]) -> str:
        # FTS5: each word a quoted string, so none is read as an operator; all are required.
        return " ".join('"' + word.replace('"', '""') + '"' for word in words)

    def _check(self) -> None:
        if not self.info.get("cafleet.begin") or not self.driver.in_transaction:
            raise StorageUsageError("statement issued outside tx.read()/tx.write()")

    def execute(self, statement: Statement, params: Mapping[str, Any] | None = None) -> Result[Row]:
        """Run one catalog statement (`cafleet.db.catalog`) with its named parameters."""
        self._check()
        sql, names = self._resolved.get(statement) or self.compiled(statement)
        args = [params[name] for name in names] if params else ()
        cursor = self.driver.execute(sql, args)
        try:
            rows = cursor.fetchall()
            return Result(rows, cursor.lastrowid, cursor.rowcount)
        finally:
            cursor.close()

    def exec_driver_sql(
        self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()
    ) -> Result[Row]:
        """Run literal SQL (PRAGMAs, the diagnosis' catalogue reads, tests' probes); a list of
        parameter tuples runs it once per tuple, as SQLAlchemy's `exec_driver_sql` does."""
        self._check()
        if isinstance(params, list) and params and isinstance(params[0], tuple | list | dict):
            cursor = self.driver.executemany(sql, params)
            cursor.close()
            return Result([], None, cursor.rowcount)
        cursor = self.driver.execute(sql, params)
        try:
            rows = cursor.fetchall()
            return Result(rows, cursor.lastrowid, cursor.rowcount)
        finally:
            cursor.close()

    def rollback(self) -> None:
        if self.driver.in_transaction:
            self.driver.execute("ROLLBACK")

    def rollback_leftover(self) -> BaseException | None:
        if not self.driver.in_transaction:
            return None
        try:
            self.driver.execute("ROLLBACK")
        except Exception as exc:
            return exc
        return None

    def raw(self) -> sqlite3.Connection:
        """The DBAPI connection, for PRAGMAs SQLite refuses inside a transaction."""
        if self.driver.in_transaction:
            raise StorageUsageError("raw PRAGMA issued inside a transaction")
        return self.driver

    # --- transactions ---------------------------------------------------------------------

    @contextlib.contextmanager
    def read(self) -> Iterator[SqliteConnection]:
        """Deferred BEGIN: one snapshot."""
        info = self.info
        if info.get("cafleet.begin"):
            raise StorageUsageError("nested transaction")
        info["cafleet.begin"] = "read"
        driver = self.driver
        try:
            driver.execute("BEGIN")
            try:
                yield self
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    driver.execute("ROLLBACK")
                raise
            else:
                driver.execute("COMMIT")
        finally:
            info.pop("cafleet.begin", None)

    @contextlib.contextmanager
    def write(self) -> Iterator[SqliteConnection]:
        """The writer lock, BEGIN IMMEDIATE, the ledger re-check; COMMIT or ROLLBACK."""
        info = self.info
        purpose = write_purpose(info)
        fd = _writer_fd(info)
        if not flock_with_timeout(fd, WRITER_LOCK_TIMEOUT):
            raise DatabaseBusy()
        info["cafleet.begin"] = "write"
        driver = self.driver
        try:
            try:
                driver.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as e:
                if is_busy(e):
                    raise DatabaseBusy() from e
                raise
            try:
                if purpose == "validated":
                    recheck_ledger(driver, info.get("cafleet.revision"))
                yield self
            except BaseException as e:
                with contextlib.suppress(sqlite3.Error):
                    driver.execute("ROLLBACK")
                if is_busy(e):
                    raise DatabaseBusy() from e
                raise
            else:
                try:
                    driver.execute("COMMIT")
                except sqlite3.OperationalError as e:
                    with contextlib.suppress(sqlite3.Error):
                        driver.execute("ROLLBACK")
                    if is_busy(e):
                        raise DatabaseBusy() from e
                    raise
        finally:
            info.pop("cafleet.begin", None)
            unlock(fd)

    # --- other connections' commits ---------------------------------------------------------

    def data_version(self) -> int:
        """SQLite's `PRAGMA data_version` (no query of the file)."""
        return int(self.raw().execute("PRAGMA data_version").fetchone()[0])

    def wait_for_change(self, seconds: float, since: int | None = None) -> bool:
        """SQLite cannot be woken: sleep, then compare `data_version` with `since`."""
        time.sleep(seconds)
        return since is not None and self.data_version() != since

    def checkpoint(self) -> None:
        self.raw().execute("PRAGMA wal_checkpoint(RESTART)")

    def close(self, *, guarded: bool = False) -> None:
        close_tracked(self.info, self._close_quietly, guarded=guarded)

    def _close_quietly(self) -> None:
        with contextlib.suppress(Exception):
            if self.driver.in_transaction:
                self.driver.execute("ROLLBACK")
        with contextlib.suppress(Exception):
            self.driver.close()


def open_connection(path: str, *, mode: Mode = "rw", purpose: Purpose = "command") -> Connection:
    """Open one runtime connection to the file at `path` (never created unless mode='rwc');
    a PostgreSQL `P` gets PostgreSQL's runtime connection (docs/storage.md §10)."""
    if path.startswith(POSTGRES_SCHEMES):
        from cafleet.db.pg.runtime import open_connection as open_pg  # psycopg: only for P

        return open_pg(path, purpose=purpose)
    check_sqlite()
    companions = companions_exist(path)
    driver = connect_driver(path, mode)
    driver.row_factory = sqlite3.Row
    return SqliteConnection(
        driver,
        {
            "cafleet.path": path,
            "cafleet.purpose": purpose,
            "cafleet.companions_at_open": companions,
        },
    )


# --- the other connection kind ------------------------------------------------------------------


class OtherKind(NamedTuple):
    """SQLAlchemy's connection (`cafleet.db.engine`, setup and the migrations): its module
    registers these when it is imported, so this module never imports it (docs/storage.md §4.2)
    and a function below given such a connection hands it over."""

    raw: Callable[[Any], sqlite3.Connection]
    read: Callable[[Any], AbstractContextManager[Any]]
    write: Callable[[Any], AbstractContextManager[Any]]
    close: Callable[[Any, bool], None]


_other: list[OtherKind] = []


def register_other_kind(kind: OtherKind) -> None:
    _other[:] = [kind]


def _other_kind() -> OtherKind:
    if not _other:  # no SQLAlchemy connection can exist before cafleet.db.engine made one
        raise StorageUsageError("not a cafleet connection")
    return _other[0]


def raw(conn: Connection | SAConnection) -> sqlite3.Connection:
    """The DBAPI connection, for PRAGMAs SQLite refuses inside a transaction."""
    if isinstance(conn, SqliteConnection):
        return conn.raw()
    if isinstance(conn, Connection):
        raise StorageUsageError(f"no SQLite connection under a {conn.dialect} connection")
    return _other_kind().raw(conn)


def data_version(conn: Connection) -> int:
    """A number that changes whenever another connection commits (`Connection.data_version`).
    Outside a transaction only."""
    return conn.data_version()


def connection_lost(conn: Connection) -> bool:
    """Whether the connection's server is gone (PostgreSQL); an SQLite file never is."""
    return conn.lost()


def reconnect(conn: Connection) -> None:
    """A lost connection gets a new server session in place (`Connection.reconnect`)."""
    conn.reconnect()


def is_postgres_connection(conn: object) -> bool:
    """Whether `conn` is PostgreSQL's runtime connection (`cafleet.db.pg.runtime`)."""
    return getattr(conn, "dialect", None) == "postgresql"


def mark_validated(conn: Connection | SAConnection, revision: str) -> None:
    conn.info["cafleet.purpose"] = "validated"
    conn.info["cafleet.revision"] = revision


# --- transactions ------------------------------------------------------------------------------


def _writer_fd(info: dict[str, Any]) -> int:
    fd = info.get("cafleet.writer_fd")
    if fd is None:
        fd = lock_file_fd(writer_lock_path(info["cafleet.path"]))
        info["cafleet.writer_fd"] = fd
    assert isinstance(fd, int)
    return fd


def recheck_ledger(driver: sqlite3.Connection, validated: str | None) -> None:
    """Inside every write transaction of a validated connection: the ledger still holds the
    revision the guard validated, else `SchemaChanged` (docs/storage.md §4.4)."""
    try:
        rows = driver.execute("SELECT version_num FROM alembic_version").fetchall()
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


class tx:  # noqa: N801 - used as a namespace: tx.read(conn), tx.write(conn)
    """The connection's own transactions (`Connection.read`/`write`/`write_one`), or those of
    setup's SQLAlchemy connection."""

    @staticmethod
    def read(conn: Connection | SAConnection) -> AbstractContextManager[Any]:
        if isinstance(conn, Connection):
            return conn.read()
        return _other_kind().read(conn)  # setup's and the migrations' SQLAlchemy connection

    @staticmethod
    def write(conn: Connection | SAConnection) -> AbstractContextManager[Any]:
        if isinstance(conn, Connection):
            return conn.write()
        return _other_kind().write(conn)

    @staticmethod
    def write_one(
        conn: Connection,
        statement: Statement,
        params: Mapping[str, Any],
        now: datetime | None = None,
    ) -> tuple[Result[Any], str]:
        """One catalog statement as a whole write transaction (`Connection.write_one`)."""
        return conn.write_one(statement, params, now)


# --- closing -----------------------------------------------------------------------------------


def close_connection(conn: Connection | SAConnection, *, guarded: bool = False) -> None:
    """Close `conn`; with `guarded`, avoid the checkpoint-on-last-close (docs/storage.md §5.5).

    The guarded close applies only when a -wal/-shm existed at open: a read-only connection is
    opened and read first, so the read-write close is not the last one and skips the checkpoint.
    """
    if isinstance(conn, Connection):
        conn.close(guarded=guarded)
        return
    _other_kind().close(conn, guarded)


def close_tracked(info: dict[str, Any], close: Callable[[], None], *, guarded: bool) -> None:
    """Run ``close`` for a connection whose ``info`` this module filled at open (either kind:
    this runtime's or the SQLAlchemy engine's): inside `guarded_close` when asked and companions
    existed at open, then release its writer-lock descriptor."""
    fd = info.pop("cafleet.writer_fd", None)
    try:
        if guarded and info.get("cafleet.companions_at_open"):
            with guarded_close(info["cafleet.path"]):
                close()
        else:
            close()
    finally:
        if fd is not None:
            os.close(fd)


@contextlib.contextmanager
def guarded_close(path: str) -> Iterator[None]:
    """Hold a read-only connection, read once, around the body's close of the last read-write
    connection: SQLite then skips the checkpoint-on-last-close."""
    try:
        ro = sqlite3.connect(f"file:{uri_path(path)}?mode=ro", uri=True, isolation_level=None)
    except sqlite3.Error:
        ro = None
    try:
        if ro is not None:
            with contextlib.suppress(sqlite3.Error):
                ro.execute("SELECT count(*) FROM sqlite_master").fetchall()
        yield
    finally:
        if ro is not None:
            ro.close()


__all__ = [
    "BUSY_TIMEOUT_MS",
    "Compiled",
    "Connection",
    "Result",
    "Row",
    "SqliteConnection",
    "Statement",
    "bound_waits",
    "check_sqlite",
    "close_connection",
    "close_tracked",
    "companions_exist",
    "connection_lost",
    "data_version",
    "is_busy",
    "is_postgres_connection",
    "mark_validated",
    "open_connection",
    "raw",
    "reconnect",
    "tx",
]
