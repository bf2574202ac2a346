"""The runtime connection (docs/storage.md §4): the standard library's `sqlite3`, nothing else.

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
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from cafleet.config import POSTGRES_SCHEMES
from cafleet.db.errors import (
    DatabaseBusy,
    SchemaChanged,
    SqliteTooOld,
    StorageUsageError,
    write_purpose,
)
from cafleet.db.results import Result
from cafleet.db.timefmt import format_ts, utcnow
from cafleet.db.writelock import (
    WRITER_LOCK_TIMEOUT,
    flock_with_timeout,
    lock_file_fd,
    unlock,
    writer_lock_path,
)
from cafleet.errors import CafleetError

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

# A catalog entry: the dialect's SQL text and the names of its parameters in placeholder order
# (a name used twice appears twice).
Compiled = tuple[str, tuple[str, ...]]
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


def connect_driver(path: str, mode: Mode) -> sqlite3.Connection:
    """The DBAPI connection both connection kinds use: URI mode, autocommit (the driver issues no
    BEGIN/COMMIT of its own), cafleet's PRAGMAs."""
    driver = sqlite3.connect(
        f"file:{uri_path(path)}?mode={mode}",
        uri=True,
        isolation_level=None,
        check_same_thread=False,
        timeout=BUSY_TIMEOUT_MS / 1000,
    )
    try:
        for pragma in PRAGMAS:
            driver.execute(pragma)
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


class Connection:
    """One `sqlite3` connection and cafleet's bookkeeping about it (`info`, as SQLAlchemy's
    `Connection.info`: path, purpose, validated revision, the writer lock's fd)."""

    __slots__ = ("driver", "info")

    def __init__(self, driver: sqlite3.Connection, info: dict[str, Any]) -> None:
        self.driver = driver
        self.info = info

    def in_transaction(self) -> bool:
        return self.driver.in_transaction

    def _check(self) -> None:
        if not self.info.get("cafleet.begin") or not self.driver.in_transaction:
            raise StorageUsageError("statement issued outside tx.read()/tx.write()")

    def execute(self, statement: Compiled, params: Mapping[str, Any] | None = None) -> Result[Row]:
        """Run one catalog statement (`cafleet.db.catalog`) with its named parameters."""
        self._check()
        sql, names = statement
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
        """End an open transaction, if any (a loop's cleanup after a failed write)."""
        if self.driver.in_transaction:
            self.driver.execute("ROLLBACK")

    def rollback_leftover(self) -> BaseException | None:
        """Make sure SQLite's transaction is gone (after a failed bootstrap); report a failure."""
        if not self.driver.in_transaction:
            return None
        try:
            self.driver.execute("ROLLBACK")
        except Exception as exc:
            return exc
        return None


def open_connection(path: str, *, mode: Mode = "rw", purpose: Purpose = "command") -> Connection:
    """Open one runtime connection to the file at `path` (never created unless mode='rwc');
    a PostgreSQL `P` gets PostgreSQL's runtime connection (docs/storage.md §10)."""
    if path.startswith(POSTGRES_SCHEMES):
        from cafleet.db.pg import runtime as pg

        return pg.open_connection(path, purpose=purpose)  # type: ignore[return-value]
    check_sqlite()
    companions = companions_exist(path)
    driver = connect_driver(path, mode)
    driver.row_factory = sqlite3.Row
    return Connection(
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
    if is_postgres_connection(conn):
        raise StorageUsageError("no SQLite connection under a PostgreSQL connection")
    if not isinstance(conn, Connection):
        return _other_kind().raw(conn)
    if conn.in_transaction():
        raise StorageUsageError("raw PRAGMA issued inside a transaction")
    return conn.driver


def data_version(conn: Connection) -> int:
    """A number that changes whenever another connection commits: SQLite's `PRAGMA
    data_version`, or PostgreSQL's notification counter (docs/storage.md §10.4). Outside a
    transaction only."""
    if is_postgres_connection(conn):
        from cafleet.db.pg import runtime as pg

        return pg.data_version(conn)  # type: ignore[arg-type]
    return int(raw(conn).execute("PRAGMA data_version").fetchone()[0])


def connection_lost(conn: Connection) -> bool:
    """Whether the connection's server is gone (PostgreSQL); an SQLite file never is."""
    if is_postgres_connection(conn):
        from cafleet.db.pg import runtime as pg

        return pg.lost_connection(conn)  # type: ignore[arg-type]
    return False


def reconnect(conn: Connection) -> None:
    """A lost PostgreSQL connection gets a new server connection in place (`pg.reconnect`;
    `sqlite3.OperationalError` while the server is unreachable); on SQLite nothing to do."""
    if is_postgres_connection(conn):
        from cafleet.db.pg import runtime as pg

        pg.reconnect(conn)  # type: ignore[arg-type]


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


class _Unchanged(CafleetError):
    """Raised inside tx.write to roll back a one-statement write that changed no row."""


class tx:  # noqa: N801 - used as a namespace: tx.read(conn), tx.write(conn)
    @staticmethod
    @contextlib.contextmanager
    def read(conn: Connection | SAConnection) -> Iterator[Any]:
        if is_postgres_connection(conn):
            from cafleet.db.pg import runtime as pg

            with pg.read(conn) as c:  # type: ignore[arg-type]
                yield c
            return
        if not isinstance(conn, Connection):  # setup's and the migrations' SQLAlchemy connection
            with _other_kind().read(conn) as c:
                yield c
            return
        info = conn.info
        if info.get("cafleet.begin"):
            raise StorageUsageError("nested transaction")
        info["cafleet.begin"] = "read"
        driver = conn.driver
        try:
            driver.execute("BEGIN")
            try:
                yield conn
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    driver.execute("ROLLBACK")
                raise
            else:
                driver.execute("COMMIT")
        finally:
            info.pop("cafleet.begin", None)

    @staticmethod
    @contextlib.contextmanager
    def write(conn: Connection | SAConnection) -> Iterator[Any]:
        if is_postgres_connection(conn):
            from cafleet.db.pg import runtime as pg

            with pg.write(conn) as c:  # type: ignore[arg-type]
                yield c
            return
        if not isinstance(conn, Connection):
            with _other_kind().write(conn) as c:
                yield c
            return
        info = conn.info
        purpose = write_purpose(info)
        fd = _writer_fd(info)
        if not flock_with_timeout(fd, WRITER_LOCK_TIMEOUT):
            raise DatabaseBusy()
        info["cafleet.begin"] = "write"
        driver = conn.driver
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
                yield conn
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

    @staticmethod
    def write_one(
        conn: Connection | SAConnection,
        statement: Compiled,
        params: Mapping[str, Any],
        now: datetime | None = None,
    ) -> tuple[Result[Any], str]:
        """One catalog statement as a whole write transaction, its `now` parameter the stamp
        read after the writer lock (docs/storage.md §7.1); returns the result and that stamp.
        The same as `tx.write` around one `execute`; on PostgreSQL one round trip when it
        succeeds (`pg.write_one`), this path otherwise."""
        if is_postgres_connection(conn):
            from cafleet.db.pg import runtime as pg

            done = pg.write_one(conn, statement, params, now)  # type: ignore[arg-type]
            if done is not None:
                return done
        try:
            with tx.write(conn) as c:
                ts = format_ts(now if now is not None else utcnow())
                result = c.execute(statement, {**params, "now": ts})
                if result.rowcount <= 0 and not result.all():
                    # Rolled back, not committed: a refused write leaves the file's bytes as
                    # they were (an empty commit can still write pages, docs/storage.md §5.5).
                    raise _Unchanged
        except _Unchanged:
            pass
        return result, ts


# --- closing -----------------------------------------------------------------------------------


def close_connection(conn: Connection | SAConnection, *, guarded: bool = False) -> None:
    """Close `conn`; with `guarded`, avoid the checkpoint-on-last-close (docs/storage.md §5.5).

    The guarded close applies only when a -wal/-shm existed at open: a read-only connection is
    opened and read first, so the read-write close is not the last one and skips the checkpoint.
    """
    if is_postgres_connection(conn):
        from cafleet.db.pg import runtime as pg

        pg.close_connection(conn)  # type: ignore[arg-type]
        return
    if not isinstance(conn, Connection):
        _other_kind().close(conn, guarded)
        return
    close_tracked(conn.info, lambda: _close_quietly(conn), guarded=guarded)


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


def _close_quietly(conn: Connection) -> None:
    with contextlib.suppress(Exception):
        if conn.driver.in_transaction:
            conn.driver.execute("ROLLBACK")
    with contextlib.suppress(Exception):
        conn.driver.close()


__all__ = [
    "BUSY_TIMEOUT_MS",
    "Compiled",
    "Connection",
    "Result",
    "Row",
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
