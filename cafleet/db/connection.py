"""The runtime connection every dialect implements (docs/storage.md §4), and the catalog's
statement names it runs.

A repository function names a statement (`cafleet.db.catalog.<module>.<NAME>`, a `Statement`)
and never its SQL: the connection resolves the name to its own dialect's compiled entry
(`cafleet.db.catalog.<dialect>.<module>`) on first use and keeps it. Each dialect is one subclass
of `Connection` (`cafleet.db.runtime.SqliteConnection`, `cafleet.db.pg.runtime.PgConnection`):
adding a dialect is writing that class and its catalog package.
"""

from __future__ import annotations

import abc
import importlib
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, ClassVar

from cafleet.db.results import Result
from cafleet.db.timefmt import format_ts, utcnow
from cafleet.errors import CafleetError

# `cafleet hook`'s bound on every wait, in seconds (`cafleet.db.runtime.bound_waits`); None: the
# usual waits. Both dialects' connections read it when they open.
WAIT_BOUND: list[float | None] = [None]

# A dialect's catalog entry: its SQL text and the names of its parameters in placeholder order
# (a name used twice appears twice).
Compiled = tuple[str, tuple[str, ...]]


class Statement:
    """One catalog statement by name, the same object on every dialect, with the flags the
    build read from its construct (`cafleet.db.catalog.build`):

    - `needs_savepoint`: its caller reads on after it fails (registration after a monitor-slot
      violation), so a dialect whose failed statement aborts the transaction runs it under a
      savepoint;
    - `inserts`: an INSERT, whose last returned row's first column is the new key
      (`Result.lastrowid` where the driver has none).

    Compared by identity: a connection's resolved entries are keyed by the object.
    """

    __slots__ = ("inserts", "module", "name", "needs_savepoint")

    def __init__(
        self, module: str, name: str, *, needs_savepoint: bool = False, inserts: bool = False
    ) -> None:
        self.module = module
        self.name = name
        self.needs_savepoint = needs_savepoint
        self.inserts = inserts

    def __repr__(self) -> str:
        return f"Statement({self.module}.{self.name})"


class _Unchanged(CafleetError):
    """Raised inside a write to roll back a one-statement write that changed no row."""


class Connection(abc.ABC):
    """One database connection and cafleet's bookkeeping about it (`info`, as SQLAlchemy's
    `Connection.info`: path, purpose, validated revision, the writer lock's fd). A subclass is
    one dialect: its driver, its transactions (`read`, `write`, `write_one`), and how it hears
    of other connections' commits (`data_version`, `wait_for_change`)."""

    __slots__ = ("driver", "info")
    # The dialect's name, which is also its catalog package (`cafleet.db.catalog.<dialect>`).
    dialect: ClassVar[str]
    # The dialect's resolved entries, shared by its connections (filled on first use).
    _resolved: ClassVar[dict[Statement, Compiled]]

    def __init__(self, driver: Any, info: dict[str, Any]) -> None:
        self.driver = driver
        self.info = info

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        cls._resolved = {}

    def compiled(self, statement: Statement) -> Compiled:
        """This dialect's text for `statement`."""
        found = self._resolved.get(statement)
        if found is None:
            module = importlib.import_module(
                f"cafleet.db.catalog.{self.dialect}.{statement.module}"
            )
            found = self._resolved[statement] = getattr(module, statement.name)
        return found

    # --- statements -----------------------------------------------------------------------

    @abc.abstractmethod
    def in_transaction(self) -> bool: ...

    @abc.abstractmethod
    def execute(self, statement: Statement, params: Mapping[str, Any] | None = None) -> Result[Any]:
        """Run one catalog statement with its named parameters, inside `read` or `write`."""

    @abc.abstractmethod
    def exec_driver_sql(
        self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()
    ) -> Result[Any]:
        """Run literal SQL of this dialect (probes, catalogue reads); a list of parameter
        tuples runs it once per tuple."""

    @abc.abstractmethod
    def rollback(self) -> None:
        """End an open transaction, if any (a loop's cleanup after a failed write)."""

    @abc.abstractmethod
    def rollback_leftover(self) -> BaseException | None:
        """Make sure no transaction is left (after a failed bootstrap); report a failure."""

    # --- transactions ---------------------------------------------------------------------

    @abc.abstractmethod
    def read(self) -> AbstractContextManager[Connection]:
        """One read transaction: one snapshot."""

    @abc.abstractmethod
    def write(self) -> AbstractContextManager[Connection]:
        """One write transaction under the writer lock, the ledger re-checked."""

    def write_one(
        self, statement: Statement, params: Mapping[str, Any], now: datetime | None = None
    ) -> tuple[Result[Any], str]:
        """One catalog statement as a whole write transaction, its `now` parameter the stamp
        read after the writer lock (docs/storage.md §7.1); returns the result and that stamp.
        A write that changed no row is rolled back, not committed: a refused write leaves the
        database as it was (an empty SQLite commit can still write pages, §5.5)."""
        try:
            with self.write() as c:
                ts = format_ts(now if now is not None else utcnow())
                result = c.execute(statement, {**params, "now": ts})
                if result.rowcount <= 0 and not result.all():
                    raise _Unchanged
        except _Unchanged:
            pass
        return result, ts

    # --- other connections' commits ---------------------------------------------------------

    @abc.abstractmethod
    def data_version(self) -> int:
        """A number that changes whenever another connection commits; outside a transaction."""

    @abc.abstractmethod
    def wait_for_change(self, seconds: float, since: int | None = None) -> bool:
        """Block up to `seconds` for another connection's commit; True when one was seen. A
        dialect that cannot be woken sleeps, then compares `data_version` with `since` (when
        given)."""

    # --- full-text search -------------------------------------------------------------------

    @abc.abstractmethod
    def text_query(self, words: list[str]) -> str:
        """The search index's query for all of `words`, each taken literally (never the
        engine's operators), for the catalog's search statements."""

    # --- the connection itself ------------------------------------------------------------

    def lost(self) -> bool:
        """Whether the connection's server is gone (a file never is)."""
        return False

    def reconnect(self, connect_timeout: int | None = None) -> None:
        """A lost connection gets a new server session in place (`sqlite3.OperationalError`
        while the server is unreachable); nothing to do where nothing is lost."""
        return None

    def session(self) -> int | None:
        """This connection's server session (None: no server), read before a write so that
        `session_ended` can ask about it after a failure."""
        return None

    def session_ended(self, session: int) -> bool:
        """True once the earlier `session` can commit nothing more."""
        return True

    def checkpoint(self) -> None:
        """Move committed pages into the database file, where the dialect has such a step
        (SQLite's WAL); outside a transaction."""
        return None

    @abc.abstractmethod
    def close(self, *, guarded: bool = False) -> None:
        """Close quietly; `guarded` avoids SQLite's checkpoint-on-last-close (§5.5)."""


__all__ = ["Compiled", "Connection", "Statement"]
