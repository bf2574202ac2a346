"""The PostgreSQL runtime connection (docs/storage.md §10): psycopg 3, and no SQLAlchemy.

The same repository functions run here as on SQLite: `PgConnection` resolves each catalog
statement (`cafleet.db.catalog.<module>.<NAME>`) to its entry in `cafleet.db.catalog.postgresql`
(same module, same name). Values are bound client-side
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
import re
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from cafleet.db.connection import WAIT_BOUND, Connection, Statement
from cafleet.db.errors import DatabaseBusy, SchemaChanged, StorageUsageError, write_purpose
from cafleet.db.predicates import APPLICATION_ID
from cafleet.db.results import Result
from cafleet.db.timefmt import format_ts
from cafleet.pgurl import connect_url, redact

if TYPE_CHECKING:
    from datetime import datetime

    import psycopg

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

# PostgreSQL's text type cannot hold U+0000 (docs/storage.md §10.5): such a value is refused
# before anything is sent, so nothing is written.
MISSING_DRIVER = "PostgreSQL support is not installed (pip install 'cafleet[postgres]')"
NUL_TEXT = "text contains a NUL character (U+0000), which PostgreSQL cannot store"


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


def _as_error(conn: PgConnection | None, error: BaseException) -> BaseException:
    """`as_sqlite_error`, or for a connection that the failure broke an error naming the
    database (`P`, never the password): `lost the connection to <P>: <libpq's first line>`."""
    if conn is not None and conn.lost():
        return sqlite3.OperationalError(
            f"lost the connection to {conn.info.get('cafleet.path')}: {first_line(error)}"
        )
    return as_sqlite_error(error)


@contextlib.contextmanager
def _translated(conn: PgConnection | None = None) -> Iterator[None]:
    import psycopg

    try:
        yield
    except psycopg.Error as e:
        raise _as_error(conn, e) from e


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
    # jit=off: a plan whose estimate passes jit_above_cost (a search's) compiled for 0.2-2.5 s
    # before running for milliseconds; no cafleet statement gains from it.
    return f"{own} -c lock_timeout={lock_timeout} -c TimeZone=UTC -c jit=off".strip()


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

    bound = WAIT_BOUND[0]
    if bound is not None:  # `cafleet hook`: skip a busy or unreachable server, never hang
        lock_timeout = f"{max(1, int(bound * 1000))}ms"
        connect_timeout = min(connect_timeout, 2)  # libpq's shortest (it reads 1 as 2)
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
                driver.execute(
                    f"SET lock_timeout = '{lock_timeout}'; SET TIME ZONE 'UTC'; SET jit = off"
                )
        except BaseException:
            driver.close()
            raise
    return driver


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


def _begin_write(conn: PgConnection, validated: bool) -> None:
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


# `format_ts`'s text (`YYYY-MM-DDTHH:MM:SS.ffffff+00:00`) from the server's clock.
_SERVER_NOW = (
    "to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"+00:00\"')"
)
_one_batches: dict[tuple[Statement, bool, str], str] = {}


def _one_batch(
    statement: Statement, sql: str, names: tuple[str, ...], server_now: bool, revision: str
) -> str:
    """`write_one`'s batch for `statement` (cached). Its first query takes the writer lock,
    then (reading the lock's row, so never before it) checks the ledger against `revision`
    ("" when not validated) and sets the stamp; the statement's `now` placeholders read that
    stamp (`server_now`), or stay placeholders for an injected `now`."""
    key = (statement, server_now, revision)
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


class PgConnection(Connection):
    """One psycopg connection in autocommit mode (cafleet issues BEGIN/COMMIT itself):
    PostgreSQL's dialect of the runtime connection."""

    __slots__ = ()
    dialect = DIALECT
    driver: psycopg.Connection[Any]

    def in_transaction(self) -> bool:
        from psycopg.pq import TransactionStatus

        return bool(self.driver.info.transaction_status != TransactionStatus.IDLE)

    def text_query(self, words: list[str]) -> str:
        return " ".join(words)  # plainto_tsquery: every word, none of them an operator

    def _check(self) -> None:
        if not self.info.get("cafleet.begin") or not self.in_transaction():
            raise StorageUsageError("statement issued outside tx.read()/tx.write()")

    def _run(
        self,
        sql: str,
        args: Sequence[Any] | Mapping[str, Any] | None,
        *,
        savepoint: bool = False,
        inserts: bool = False,
    ) -> Result[Row]:
        # A failed statement aborts a PostgreSQL transaction, but registration reads the current
        # monitor after a monitor-slot violation (docs/storage.md §7.4): such a statement
        # (`Statement.needs_savepoint`) runs under a savepoint, so the transaction stays usable.
        driver = self.driver
        with _translated(self):
            if savepoint:
                driver.execute("SAVEPOINT cafleet_insert")
            try:
                cursor = driver.execute(sql, args or None)
            except BaseException:
                if savepoint:
                    driver.execute("ROLLBACK TO SAVEPOINT cafleet_insert")
                raise
            try:
                rows = cursor.fetchall() if cursor.description is not None else []
                rowcount = cursor.rowcount
            finally:
                cursor.close()
            if savepoint:
                driver.execute("RELEASE SAVEPOINT cafleet_insert")
        lastrowid = rows[-1][0] if rows and inserts else None
        return Result(rows, lastrowid, rowcount)

    def execute(self, statement: Statement, params: Mapping[str, Any] | None = None) -> Result[Row]:
        """Run one catalog statement (its `cafleet.db.catalog.postgresql` entry)."""
        self._check()
        sql, names = self._resolved.get(statement) or self.compiled(statement)
        args = [params[name] for name in names] if params else []
        return self._run(sql, args, savepoint=statement.needs_savepoint, inserts=statement.inserts)

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
        return self._run(sql, params, inserts=sql.startswith("INSERT"))

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

    # --- transactions ---------------------------------------------------------------------

    @contextlib.contextmanager
    def read(self) -> Iterator[PgConnection]:
        """One REPEATABLE READ snapshot."""
        info = self.info
        if info.get("cafleet.begin"):
            raise StorageUsageError("nested transaction")
        info["cafleet.begin"] = "read"
        driver = self.driver
        try:
            with _translated(self):
                driver.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            try:
                yield self
            except BaseException:
                with contextlib.suppress(Exception):
                    driver.execute("ROLLBACK")
                raise
            else:
                with _translated(self):
                    driver.execute("COMMIT")
        finally:
            info.pop("cafleet.begin", None)

    @contextlib.contextmanager
    def write(self) -> Iterator[PgConnection]:
        """The writer rules on PostgreSQL: BEGIN, the transaction-scoped writer lock (at most
        `lock_timeout`, then `DatabaseBusy`), the ledger re-check; COMMIT or ROLLBACK."""
        info = self.info
        purpose = write_purpose(info)
        info["cafleet.begin"] = "write"
        driver = self.driver
        try:
            try:
                _begin_write(self, purpose == "validated")
                yield self
            except BaseException:
                with contextlib.suppress(Exception):
                    driver.execute("ROLLBACK")
                raise
            else:
                try:
                    with _translated(self):
                        # Wakes every listener (`data_version`) when this commit lands; NOTIFY
                        # is transactional, so a rolled-back write wakes nobody.
                        driver.execute(_COMMIT_WRITE)
                except BaseException:
                    with contextlib.suppress(Exception):
                        driver.execute("ROLLBACK")
                    raise
        finally:
            info.pop("cafleet.begin", None)

    def write_one(
        self, statement: Statement, params: Mapping[str, Any], now: datetime | None = None
    ) -> tuple[Result[Any], str]:
        """One round trip when it succeeds (`_write_one_batch`); `write` otherwise."""
        done = self._write_one_batch(statement, params, now)
        if done is not None:
            return done
        return super().write_one(statement, params, now)

    def _write_one_batch(
        self, statement: Statement, params: Mapping[str, Any], now: datetime | None
    ) -> tuple[Result[Row], str] | None:
        """One catalog statement as a whole write transaction, sent as one simple query (one
        round trip, docs/storage.md §10.4), which PostgreSQL runs as one implicit transaction:
        the writer lock, the ledger check and the stamp, the statement, NOTIFY; COMMIT at its
        end. The stamp is the server's clock read after the lock (so timestamps follow commit
        order), the statement's `now`, and returned with its result. A failure anywhere rolls
        everything back and returns None: the caller then runs the write through `write`,
        whose errors are the exact ones (`SchemaChanged`, a constraint's), so only a success
        takes one round trip. None too, untried, for a write this form cannot carry."""
        import psycopg

        info = self.info
        purpose = write_purpose(info)
        sql, names = self.compiled(statement)
        revision = info.get("cafleet.revision") if purpose == "validated" else ""
        if (
            statement.needs_savepoint
            or not isinstance(revision, str)
            or not (revision.isdigit() or purpose == "migration")
            or self.in_transaction()
        ):
            return None
        server_now = now is None
        if now is None:  # the batch reads the server's stamp in place of `now`
            args = [params[name] for name in names if name != "now"]
        else:
            ts = format_ts(now)
            args = [ts if name == "now" else params[name] for name in names]
        batch = _one_batch(statement, sql, names, server_now, revision)
        info["cafleet.begin"] = "write"
        try:
            cursor = self.driver.execute(batch, args or None)
            stamped = cursor.fetchone()
            cursor.nextset()  # the statement
            rows = cursor.fetchall() if cursor.description is not None else []
            rowcount = cursor.rowcount
            cursor.close()
        except psycopg.Error as e:
            self.rollback()  # (PostgreSQL rolled the implicit transaction back already)
            translated = _as_error(self, e)
            # Busy, or the connection is gone (whether the batch committed is unknown: the
            # caller asks), is not worth a second try through `write`.
            if isinstance(translated, DatabaseBusy) or self.lost():
                raise translated from e
            return None
        except BaseException:
            self.rollback()
            raise
        finally:
            info.pop("cafleet.begin", None)
        if server_now:
            ts = str(stamped[0])  # type: ignore[index]
        lastrowid = rows[-1][0] if rows and statement.inserts else None
        return Result(rows, lastrowid, rowcount), ts

    # --- other connections' commits ---------------------------------------------------------

    def data_version(self) -> int:
        """SQLite's `PRAGMA data_version` on PostgreSQL (docs/storage.md §10.4): a counter that
        changes when a write transaction commits. The first call LISTENs on the channel every
        write notifies at commit; each call then counts the notifications that arrived,
        without a query (psycopg reads them from the socket). Outside a transaction only."""
        info = self.info
        if self.in_transaction():
            raise StorageUsageError("data_version read inside a transaction")
        with _translated(self):
            if "cafleet.data_version" not in info:
                self.driver.execute(f"LISTEN {CHANGES_CHANNEL}")
                info["cafleet.data_version"] = 0
            for _notify in self.driver.notifies(timeout=0):
                info["cafleet.data_version"] += 1
        return int(info["cafleet.data_version"])

    def wait_for_change(self, seconds: float, since: int | None = None) -> bool:
        """Block up to `seconds` for a commit notification (after `data_version` started
        listening); True when one arrived, counted into `data_version`."""
        info = self.info
        if "cafleet.data_version" not in info or seconds <= 0:
            return False
        arrived = False
        with _translated(self):
            for _notify in self.driver.notifies(timeout=seconds, stop_after=1):
                info["cafleet.data_version"] += 1
                arrived = True
        return arrived

    # --- the connection itself ------------------------------------------------------------

    def lost(self) -> bool:
        """The connection to the server is gone (closed, or broken by a failure)."""
        return bool(self.driver.closed or self.driver.broken)

    def reconnect(self, connect_timeout: int | None = None) -> None:
        """Give this connection a new server session in place of a lost one, so every holder
        of the object keeps working; its validation stands (the next schema re-check and every
        write compare the ledger). A connection that listened for commits listens again, and
        its counter moves on by one: commits made while it was away notified nobody. Raises
        `sqlite3.OperationalError` while the server cannot be reached (the old one kept)."""
        timeout = RECONNECT_TIMEOUT if connect_timeout is None else connect_timeout
        driver = connect_driver(self.info["cafleet.path"], connect_timeout=timeout)
        if "cafleet.data_version" in self.info:
            try:
                with _translated():
                    driver.execute(f"LISTEN {CHANGES_CHANNEL}")
            except BaseException:
                driver.close()
                raise
            self.info["cafleet.data_version"] += 1
        old, self.driver = self.driver, driver
        self.info.pop("cafleet.begin", None)
        with contextlib.suppress(Exception):
            old.close()

    def session(self) -> int | None:
        """The server process of this session (libpq knows it: no round trip)."""
        with contextlib.suppress(Exception):
            return int(self.driver.info.backend_pid) or None
        return None

    def session_ended(self, session: int) -> bool:
        """Whether server process `session` (an earlier session's) has ended: while it runs,
        a transaction it began may still commit."""
        with self.read():
            rows = self.exec_driver_sql(
                "SELECT 1 FROM pg_stat_activity WHERE pid = %s AND pid <> pg_backend_pid()",
                (session,),
            )
            return not rows.all()

    def close(self, *, guarded: bool = False) -> None:
        """Close quietly: a server-side connection leaves nothing behind to guard (§5.5 is
        SQLite's)."""
        with contextlib.suppress(Exception):
            if self.in_transaction():
                self.driver.execute("ROLLBACK")
        with contextlib.suppress(Exception):
            self.driver.close()


def open_connection(path: str, *, purpose: str = "command") -> PgConnection:
    return PgConnection(
        connect_driver(path),
        {"cafleet.path": path, "cafleet.purpose": purpose, "cafleet.companions_at_open": False},
    )


def close_connection(conn: PgConnection) -> None:
    conn.close()


__all__ = [
    "DIALECT",
    "SETUP_LOCK_KEY",
    "WRITER_LOCK_KEY",
    "PgConnection",
    "Result",
    "Row",
    "as_sqlite_error",
    "close_connection",
    "connect_driver",
    "first_line",
    "open_connection",
]
