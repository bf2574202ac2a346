"""The PostgreSQL runtime connection (docs/storage.md §10): psycopg 3, and no SQLAlchemy.

The same repository functions run here as on SQLite: a statement is the SQLite catalog's entry
(`cafleet.db.catalog.sqlite.<module>.<NAME>`), which this connection swaps for its twin in
`cafleet.db.catalog.postgresql` (same module, same name). Values are bound client-side
(`psycopg.ClientCursor`), as SQLite's `?` parameters are: a parameter never needs a declared
type. Errors reach callers as the standard library's `sqlite3` exception classes with SQLite's
wording for the constraint failures the repository recognises (`UNIQUE constraint failed:
members.fleet_id`, `FOREIGN KEY constraint failed`), so the broker and the commands handle one
family of errors on both dialects.

Transactions keep SQLite's guarantees (§10.4): `tx.read` is one REPEATABLE READ snapshot;
`tx.write` takes cafleet's transaction-scoped advisory lock first (the writer lock: writers run
one at a time, in commit order, as under SQLite's BEGIN IMMEDIATE), waiting at most
`lock_timeout` = 5 s, then re-checks the ledger like SQLite's.
"""

from __future__ import annotations

import contextlib
import importlib
import re
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from cafleet.db.catalog import MODULES
from cafleet.db.errors import DatabaseBusy, SchemaChanged, StorageUsageError, write_purpose
from cafleet.db.predicates import APPLICATION_ID
from cafleet.db.results import Result
from cafleet.db.timefmt import format_ts
from cafleet.pgurl import connect_url, redact

if TYPE_CHECKING:
    from datetime import datetime

    import psycopg

# A catalog entry, as `cafleet.db.runtime.Compiled` (not imported: that module imports this one).
Compiled = tuple[str, tuple[str, ...]]

DIALECT = "postgresql"
# The advisory lock keys (one per database): the writer lock every write transaction takes, and
# the setup lock `cafleet setup` holds for the whole run.
WRITER_LOCK_KEY = APPLICATION_ID
SETUP_LOCK_KEY = APPLICATION_ID + 1
CHANGES_CHANNEL = "cafleet_changes"  # NOTIFY'd by every committed write transaction
LOCK_TIMEOUT = "5s"  # the writer lock's bound, as SQLite's busy_timeout / writer-lock wait
CONNECT_TIMEOUT = 10  # seconds; an unreachable server fails instead of hanging
# A loop's reconnect attempt (docs/storage.md §10.4): short, so a stop is seen between attempts.
RECONNECT_TIMEOUT = 3

_twins: dict[int, Compiled] | None = None
_RECOVERABLE = "INSERT INTO members "
# PostgreSQL's text type cannot hold U+0000 (docs/storage.md §10.5): such a value is refused
# before anything is sent, so nothing is written.
MISSING_DRIVER = "PostgreSQL support is not installed (pip install 'cafleet[postgres]')"
NUL_TEXT = "text contains a NUL character (U+0000), which PostgreSQL cannot store"


def _twin_map() -> dict[int, Compiled]:
    """id(SQLite catalog entry) -> the PostgreSQL catalog's entry of the same module and name."""
    global _twins
    if _twins is None:
        found: dict[int, Compiled] = {}
        for module in MODULES:
            lite = importlib.import_module(f"cafleet.db.catalog.sqlite.{module}")
            pg = importlib.import_module(f"cafleet.db.catalog.postgresql.{module}")
            for name, value in vars(pg).items():
                if name.isupper() and isinstance(value, tuple):
                    found[id(getattr(lite, name))] = value
        _twins = found
    return _twins


def twin(statement: Compiled) -> Compiled:
    found = _twin_map().get(id(statement))
    if found is None:
        raise StorageUsageError("statement is not in the catalog")
    return found


class Row(tuple[Any, ...]):
    """A result row read by index and by column label, as `sqlite3.Row` is."""

    _labels: dict[str, int]

    def __new__(cls, values: Sequence[Any], labels: dict[str, int]) -> Row:
        row = super().__new__(cls, values)
        row._labels = labels
        return row

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return tuple.__getitem__(self, self._labels[key])
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self._labels)


def _row_factory(cursor: Any) -> Any:
    description = cursor.description or ()
    labels = {col.name: i for i, col in reversed(list(enumerate(description)))}

    def make(values: Sequence[Any]) -> Row:
        return Row(values, labels)

    return make


def first_line(error: BaseException) -> str:
    """psycopg's message without libpq's hints: its first non-empty line, `FATAL:` and
    whitespace runs folded (it names the host; libpq never includes the password)."""
    for line in str(error).splitlines():
        line = " ".join(line.replace("FATAL:", "").split())
        if line:
            return line
    return type(error).__name__


def as_sqlite_error(error: BaseException) -> BaseException:
    """The `sqlite3` exception (or `DatabaseBusy`) standing for a psycopg error."""
    import psycopg
    from psycopg import errors as pe

    if isinstance(error, pe.LockNotAvailable | pe.DeadlockDetected):
        return DatabaseBusy()
    if isinstance(error, pe.UniqueViolation):
        # SQLite's words: `UNIQUE constraint failed: <table>.<column>, <table>.<column>`, the
        # columns read from PostgreSQL's detail `Key (a, b)=(...) already exists.`
        diag = error.diag
        key = re.match(r"Key \(([^)]*)\)=", diag.message_detail or "")
        columns = [c.strip() for c in key.group(1).split(",")] if key else []
        named = ", ".join(f"{diag.table_name}.{c}" for c in columns) or str(diag.table_name)
        return sqlite3.IntegrityError(f"UNIQUE constraint failed: {named}")
    if isinstance(error, pe.ForeignKeyViolation):
        return sqlite3.IntegrityError("FOREIGN KEY constraint failed")
    if isinstance(error, pe.NotNullViolation):
        diag = error.diag
        return sqlite3.IntegrityError(
            f"NOT NULL constraint failed: {diag.table_name}.{diag.column_name}"
        )
    if isinstance(error, psycopg.DataError) and "NUL (0x00)" in str(error):
        return sqlite3.DataError(NUL_TEXT)
    if isinstance(error, psycopg.IntegrityError):
        return sqlite3.IntegrityError(first_line(error))
    if isinstance(error, psycopg.OperationalError):
        return sqlite3.OperationalError(first_line(error))
    return sqlite3.DatabaseError(first_line(error))


def lost_connection(conn: Connection) -> bool:
    """The connection to the server is gone (closed, or broken by a failure)."""
    return bool(conn.driver.closed or conn.driver.broken)


def _as_error(conn: Connection | None, error: BaseException) -> BaseException:
    """`as_sqlite_error`, or for a connection that the failure broke an error naming the
    database (`P`, never the password): `lost the connection to <P>: <libpq's first line>`."""
    if conn is not None and lost_connection(conn):
        return sqlite3.OperationalError(
            f"lost the connection to {conn.info.get('cafleet.path')}: {first_line(error)}"
        )
    return as_sqlite_error(error)


@contextlib.contextmanager
def _translated(conn: Connection | None = None) -> Iterator[None]:
    import psycopg

    try:
        yield
    except psycopg.Error as e:
        raise _as_error(conn, e) from e


class Connection:
    """One psycopg connection in autocommit mode (cafleet issues BEGIN/COMMIT itself) and
    cafleet's bookkeeping about it (`info`, as the SQLite runtime connection's)."""

    __slots__ = ("driver", "info")
    dialect = DIALECT

    def __init__(self, driver: psycopg.Connection[Any], info: dict[str, Any]) -> None:
        self.driver = driver
        self.info = info

    def in_transaction(self) -> bool:
        from psycopg.pq import TransactionStatus

        return bool(self.driver.info.transaction_status != TransactionStatus.IDLE)

    def _check(self) -> None:
        if not self.info.get("cafleet.begin") or not self.in_transaction():
            raise StorageUsageError("statement issued outside tx.read()/tx.write()")

    def _run(self, sql: str, args: Sequence[Any] | Mapping[str, Any] | None) -> Result[Row]:
        # A failed statement aborts a PostgreSQL transaction, but registration reads the current
        # monitor after a monitor-slot violation (docs/storage.md §7.4): that insert runs under
        # a savepoint, so the transaction stays usable.
        recover = sql.startswith(_RECOVERABLE)
        driver = self.driver
        with _translated(self):
            if recover:
                driver.execute("SAVEPOINT cafleet_insert")
            try:
                cursor = driver.execute(sql, args or None)
            except BaseException:
                if recover:
                    driver.execute("ROLLBACK TO SAVEPOINT cafleet_insert")
                raise
            try:
                rows = cursor.fetchall() if cursor.description is not None else []
                rowcount = cursor.rowcount
            finally:
                cursor.close()
            if recover:
                driver.execute("RELEASE SAVEPOINT cafleet_insert")
        lastrowid = rows[-1][0] if rows and sql.startswith("INSERT") else None
        return Result(rows, lastrowid, rowcount)

    def execute(self, statement: Compiled, params: Mapping[str, Any] | None = None) -> Result[Row]:
        """Run one catalog statement (the SQLite entry's PostgreSQL twin)."""
        self._check()
        sql, names = twin(statement)
        args = [params[name] for name in names] if params else []
        return self._run(sql, args)

    def exec_driver_sql(
        self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()
    ) -> Result[Row]:
        """Run literal PostgreSQL SQL: the diagnosis' catalogue reads, tests' probes; a list of
        parameter tuples runs it once per tuple. Placeholders are `%s`, or SQLite's `?` in a
        text without `%s`, so a portable probe runs on both dialects."""
        self._check()
        if params and "?" in sql and "%s" not in sql:
            sql = sql.replace("%", "%%").replace("?", "%s")
        if isinstance(params, list) and params and isinstance(params[0], tuple | list | dict):
            with _translated(self), self.driver.cursor() as cursor:
                cursor.executemany(sql, params)
                return Result([], None, cursor.rowcount)
        return self._run(sql, params)

    def rollback(self) -> None:
        if self.in_transaction():
            with contextlib.suppress(Exception):
                self.driver.execute("ROLLBACK")

    def rollback_leftover(self) -> BaseException | None:
        if not self.in_transaction():
            return None
        try:
            self.driver.execute("ROLLBACK")
        except Exception as exc:
            return exc
        return None


def _session_options(url: str, lock_timeout: str) -> str | None:
    """libpq's `options` for a connection: the user's own (the URL's `options`, else PGOPTIONS,
    which libpq reads only when no `options` is given) followed by cafleet's session settings,
    which therefore win, as the SETs they replace did (docs/storage.md §10.4). None with a
    connection service (`service=`, PGSERVICE): its file may carry options that an explicit
    `options` would override."""
    import os

    from psycopg.conninfo import conninfo_to_dict

    params = conninfo_to_dict(url)
    if params.get("service") or os.environ.get("PGSERVICE"):
        return None
    own = params.get("options") or os.environ.get("PGOPTIONS") or ""
    return f"{own} -c lock_timeout={lock_timeout} -c TimeZone=UTC".strip()


def url_problem(url: str) -> str | None:
    """Why ``url`` cannot name a server: libpq cannot read it (its words, every password of the
    URL hidden), or a port is not a number; else None."""
    try:
        from psycopg import Error
        from psycopg.conninfo import conninfo_to_dict
    except ImportError:
        return MISSING_DRIVER
    try:
        params = conninfo_to_dict(url)
    except Error as e:
        return redact(first_line(e), url)
    for port in str(params.get("port") or "").split(","):
        if port and not (port.isascii() and port.isdigit() and 1 <= int(port) <= 65535):
            return f"port '{redact(port, url)}' is not a number from 1 to 65535"
    return None


def connect_driver(
    path: str, *, lock_timeout: str = LOCK_TIMEOUT, connect_timeout: int = CONNECT_TIMEOUT
) -> psycopg.Connection[Any]:
    """A psycopg connection to database `P` (the password from CAFLEET_DATABASE_URL, PGPASSWORD
    or ~/.pgpass), autocommit, client-side binding, cafleet's session settings. Failures raise
    `sqlite3.OperationalError` with libpq's first line (it names the host, never the password).

    The settings (`lock_timeout`, UTC) travel in the startup packet (libpq's `options`), so they
    cost no round trip. Where they cannot (a connection service), or a server or pooler refuses
    them (`unsupported startup parameter`) or ignores them (the TimeZone it reports is not
    UTC), they are sent as SETs, in one round trip.
    """
    try:
        import psycopg
    except ImportError:
        raise sqlite3.OperationalError(MISSING_DRIVER) from None

    url = connect_url(path)
    problem = url_problem(url)
    if problem is not None:
        raise sqlite3.OperationalError(problem)
    kwargs: dict[str, Any] = {
        "autocommit": True,
        "cursor_factory": psycopg.ClientCursor,
        "row_factory": _row_factory,
        "connect_timeout": connect_timeout,
        "application_name": "cafleet",
    }
    try:
        options = _session_options(url, lock_timeout)
        if options is None:
            driver = psycopg.connect(url, **kwargs)
        else:
            try:
                driver = psycopg.connect(url, options=options, **kwargs)
            except psycopg.OperationalError as e:
                if "startup parameter" not in str(e):
                    raise
                options = None
                driver = psycopg.connect(url, **kwargs)
    except psycopg.Error as e:
        raise sqlite3.OperationalError(redact(first_line(e), url)) from None
    if options is None or driver.info.parameter_status("TimeZone") != "UTC":
        try:
            with _translated():
                driver.execute(f"SET lock_timeout = '{lock_timeout}'; SET TIME ZONE 'UTC'")
        except BaseException:
            driver.close()
            raise
    return driver


def open_connection(path: str, *, purpose: str = "command") -> Connection:
    return Connection(
        connect_driver(path),
        {"cafleet.path": path, "cafleet.purpose": purpose, "cafleet.companions_at_open": False},
    )


def reconnect(conn: Connection, *, connect_timeout: int = RECONNECT_TIMEOUT) -> None:
    """Give ``conn`` a new server session in place of a lost one (`lost_connection`), so every
    holder of the object keeps working; its validation stands (the next schema re-check and
    every write compare the ledger). A connection that listened for commits listens again, and
    its counter moves on by one: commits made while it was away notified nobody. Raises
    `sqlite3.OperationalError` while the server cannot be reached (the old connection kept)."""
    driver = connect_driver(conn.info["cafleet.path"], connect_timeout=connect_timeout)
    if "cafleet.data_version" in conn.info:
        try:
            with _translated():
                driver.execute(f"LISTEN {CHANGES_CHANNEL}")
        except BaseException:
            driver.close()
            raise
        conn.info["cafleet.data_version"] += 1
    old, conn.driver = conn.driver, driver
    conn.info.pop("cafleet.begin", None)
    with contextlib.suppress(Exception):
        old.close()


def backend_pid(conn: Connection) -> int | None:
    """The server process of this session (libpq knows it: no round trip)."""
    with contextlib.suppress(Exception):
        return int(conn.driver.info.backend_pid) or None
    return None


def backend_alive(conn: Connection, pid: int) -> bool:
    """Whether server process ``pid`` (an earlier session's) is still running: while it is,
    a transaction it began may still commit."""
    with read(conn):
        rows = conn.exec_driver_sql(
            "SELECT 1 FROM pg_stat_activity WHERE pid = %s AND pid <> pg_backend_pid()", (pid,)
        )
        return bool(rows.all())


def _ledger_check(rows: list[Any] | None, validated: str | None) -> None:
    """The ledger rows read in a write transaction still name the validated revision (None:
    the ledger could not be read), else `SchemaChanged` (docs/storage.md §4.4)."""
    if rows is not None and len(rows) == 1 and str(rows[0][0]).isdigit():
        if rows[0][0] == validated:
            return
        now = f"schema {int(rows[0][0])}"
    else:
        now = "unreadable"
    raise SchemaChanged(str(int(validated)) if validated else "unknown", now)


# The start of a write transaction, sent as one simple-query batch (one round trip): BEGIN, the
# writer lock and, for a validated connection, the ledger read under a savepoint. A failed
# ledger read leaves that savepoint behind (its RELEASE never runs), which is how the failure
# is told apart from the lock's or the connection's.
_BEGIN_WRITE = f"BEGIN; SELECT pg_advisory_xact_lock({WRITER_LOCK_KEY})"
_BEGIN_VALIDATED_WRITE = (
    f"{_BEGIN_WRITE}; SAVEPOINT cafleet_ledger; SELECT version_num FROM alembic_version; "
    "RELEASE SAVEPOINT cafleet_ledger"
)
# The end of a write transaction: NOTIFY and COMMIT in one round trip. If NOTIFY failed the
# batch stops there and the transaction is rolled back.
_COMMIT_WRITE = f"NOTIFY {CHANGES_CHANNEL}; COMMIT"


def _begin_write(conn: Connection, validated: bool) -> None:
    """BEGIN, the writer lock (at most `lock_timeout`, then `DatabaseBusy`) and, when
    `validated`, the ledger re-check, in one round trip; on an error the transaction is left
    for the caller to roll back."""
    import psycopg

    driver = conn.driver
    if not validated:
        with _translated(conn):
            driver.execute(_BEGIN_WRITE)
        return
    rows: list[Any] | None
    try:
        cursor = driver.execute(_BEGIN_VALIDATED_WRITE)
    except psycopg.Error as e:
        try:  # only the ledger read runs inside the savepoint
            driver.execute("ROLLBACK TO SAVEPOINT cafleet_ledger")
        except psycopg.Error:
            raise _as_error(conn, e) from e
        rows = None
    else:
        with _translated(conn):
            cursor.nextset()  # the lock's row
            cursor.nextset()  # SAVEPOINT
            cursor.nextset()  # the ledger
            rows = cursor.fetchall()
    _ledger_check(rows, conn.info.get("cafleet.revision"))


@contextlib.contextmanager
def read(conn: Connection) -> Iterator[Connection]:
    info = conn.info
    if info.get("cafleet.begin"):
        raise StorageUsageError("nested transaction")
    info["cafleet.begin"] = "read"
    driver = conn.driver
    try:
        with _translated(conn):
            driver.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        try:
            yield conn
        except BaseException:
            with contextlib.suppress(Exception):
                driver.execute("ROLLBACK")
            raise
        else:
            with _translated(conn):
                driver.execute("COMMIT")
    finally:
        info.pop("cafleet.begin", None)


@contextlib.contextmanager
def write(conn: Connection) -> Iterator[Connection]:
    """The writer rules on PostgreSQL: BEGIN, the transaction-scoped writer lock (at most
    `lock_timeout`, then `DatabaseBusy`), the ledger re-check; COMMIT or ROLLBACK."""
    info = conn.info
    purpose = write_purpose(info)
    info["cafleet.begin"] = "write"
    driver = conn.driver
    try:
        try:
            _begin_write(conn, purpose == "validated")
            yield conn
        except BaseException:
            with contextlib.suppress(Exception):
                driver.execute("ROLLBACK")
            raise
        else:
            try:
                with _translated(conn):
                    # Wakes every listener (`data_version`) when this commit lands; NOTIFY is
                    # transactional, so a rolled-back write wakes nobody.
                    driver.execute(_COMMIT_WRITE)
            except BaseException:
                with contextlib.suppress(Exception):
                    driver.execute("ROLLBACK")
                raise
    finally:
        info.pop("cafleet.begin", None)


# `format_ts`'s text (`YYYY-MM-DDTHH:MM:SS.ffffff+00:00`) from the server's clock.
_SERVER_NOW = (
    "to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"+00:00\"')"
)
_one_batches: dict[tuple[int, bool, str], str] = {}


def _one_batch(
    statement: Compiled, sql: str, names: tuple[str, ...], server_now: bool, revision: str
) -> str:
    """`write_one`'s batch for `statement` (cached). Its first query takes the writer lock,
    then (reading the lock's row, so never before it) checks the ledger against `revision`
    ("" when not validated) and sets the stamp; the statement's `now` placeholders read that
    stamp (`server_now`), or stay placeholders for an injected `now`."""
    key = (id(statement), server_now, revision)
    batch = _one_batches.get(key)
    if batch is None:
        if server_now:
            parts = sql.split("%s")
            sql = parts[0] + "".join(
                ("current_setting('cafleet.now')" if name == "now" else "%s") + part
                for name, part in zip(names, parts[1:], strict=True)
            )
        # The ledger check fails the batch (a text that is not a number, cast to int) unless
        # the ledger holds exactly the validated revision; `write` then says what changed.
        check = (
            f"(CASE WHEN (SELECT version_num FROM alembic_version) = '{revision}' "
            "THEN '1' ELSE 'cafleet: schema changed' END)::int"
            if revision
            else "1"
        )
        stamp = f"set_config('cafleet.now', {_SERVER_NOW}, true)" if server_now else "NULL"
        batch = (
            f"WITH cafleet_lock AS MATERIALIZED (SELECT pg_advisory_xact_lock({WRITER_LOCK_KEY}))"
            f" SELECT {stamp}, {check} FROM cafleet_lock; {sql}; NOTIFY {CHANGES_CHANNEL}"
        )
        _one_batches[key] = batch
    return batch


def write_one(
    conn: Connection, statement: Compiled, params: Mapping[str, Any], now: datetime | None
) -> tuple[Result[Row], str] | None:
    """One catalog statement as a whole write transaction, sent as one simple query (one round
    trip, docs/storage.md §10.4), which PostgreSQL runs as one implicit transaction: the writer
    lock, the ledger check and the stamp, the statement, NOTIFY; COMMIT at its end. The stamp
    is the server's clock read after the lock (so timestamps follow commit order), the
    statement's `now`, and returned with its result. A failure anywhere rolls everything back
    and returns None: the caller then runs the write through `write`, whose errors are the
    exact ones (`SchemaChanged`, a constraint's), so only a success takes one round trip. None
    too, untried, for a write this form cannot carry."""
    import psycopg

    info = conn.info
    purpose = write_purpose(info)
    sql, names = twin(statement)
    revision = info.get("cafleet.revision") if purpose == "validated" else ""
    if (
        sql.startswith(_RECOVERABLE)
        or not isinstance(revision, str)
        or not (revision.isdigit() or purpose == "migration")
        or conn.in_transaction()
    ):
        return None
    server_now = now is None
    if server_now:  # the batch reads the server's stamp in place of `now`
        args = [params[name] for name in names if name != "now"]
    else:
        ts = format_ts(now)  # type: ignore[arg-type]
        args = [ts if name == "now" else params[name] for name in names]
    batch = _one_batch(statement, sql, names, server_now, revision)
    info["cafleet.begin"] = "write"
    try:
        cursor = conn.driver.execute(batch, args or None)
        stamped = cursor.fetchone()
        cursor.nextset()  # the statement
        rows = cursor.fetchall() if cursor.description is not None else []
        rowcount = cursor.rowcount
        cursor.close()
    except psycopg.Error as e:
        conn.rollback()  # (PostgreSQL rolled the implicit transaction back already)
        translated = _as_error(conn, e)
        # Busy, or the connection is gone (whether the batch committed is unknown: the
        # caller asks), is not worth a second try through `write`.
        if isinstance(translated, DatabaseBusy) or lost_connection(conn):
            raise translated from e
        return None
    except BaseException:
        conn.rollback()
        raise
    finally:
        info.pop("cafleet.begin", None)
    if server_now:
        ts = str(stamped[0])  # type: ignore[index]
    lastrowid = rows[-1][0] if rows and sql.startswith("INSERT") else None
    return Result(rows, lastrowid, rowcount), ts


def data_version(conn: Connection) -> int:
    """SQLite's `PRAGMA data_version` on PostgreSQL (docs/storage.md §10.4): a counter that
    changes when a write transaction commits. The first call LISTENs on the channel every
    `tx.write` notifies at commit; each call then counts the notifications that arrived, without
    a query (psycopg reads them from the socket). Outside a transaction only."""
    info = conn.info
    if conn.in_transaction():
        raise StorageUsageError("data_version read inside a transaction")
    with _translated(conn):
        if "cafleet.data_version" not in info:
            conn.driver.execute(f"LISTEN {CHANGES_CHANNEL}")
            info["cafleet.data_version"] = 0
        for _notify in conn.driver.notifies(timeout=0):
            info["cafleet.data_version"] += 1
    return int(info["cafleet.data_version"])


def wait_for_change(conn: Connection, seconds: float) -> bool:
    """Block up to `seconds` for a commit notification (after `data_version` started
    listening); True when one arrived, counted into `data_version`."""
    info = conn.info
    if "cafleet.data_version" not in info or seconds <= 0:
        return False
    arrived = False
    with _translated(conn):
        for _notify in conn.driver.notifies(timeout=seconds, stop_after=1):
            info["cafleet.data_version"] += 1
            arrived = True
    return arrived


def close_connection(conn: Connection) -> None:
    """Close quietly: a server-side connection leaves nothing behind to guard (§5.5 is SQLite's)."""
    with contextlib.suppress(Exception):
        if conn.in_transaction():
            conn.driver.execute("ROLLBACK")
    with contextlib.suppress(Exception):
        conn.driver.close()


__all__ = [
    "DIALECT",
    "SETUP_LOCK_KEY",
    "WRITER_LOCK_KEY",
    "Connection",
    "Result",
    "Row",
    "as_sqlite_error",
    "backend_alive",
    "backend_pid",
    "close_connection",
    "connect_driver",
    "data_version",
    "first_line",
    "lost_connection",
    "open_connection",
    "read",
    "reconnect",
    "twin",
    "wait_for_change",
    "write",
    "write_one",
]
