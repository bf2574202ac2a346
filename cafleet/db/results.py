"""One statement's rows, fetched at once (so COMMIT never meets a statement in progress), with
the few accessors the repository uses: the one `Result` of both runtimes, the stdlib `sqlite3`
one (`db/runtime.py`, rows are `sqlite3.Row`) and the PostgreSQL one (`db/pg/runtime.py`, rows
read by index and by label the same way)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Generic, TypeVar

from cafleet.db.errors import StorageUsageError

RowT = TypeVar("RowT")


class Result(Generic[RowT]):
    __slots__ = ("_rows", "lastrowid", "rowcount")

    def __init__(self, rows: list[RowT], lastrowid: int | None, rowcount: int) -> None:
        self._rows = rows
        self.lastrowid = lastrowid
        self.rowcount = rowcount

    def __iter__(self) -> Iterator[RowT]:
        return iter(self._rows)

    def mappings(self) -> Result[RowT]:
        """The same rows: each is read by label already."""
        return self

    def all(self) -> list[RowT]:
        return self._rows

    def first(self) -> RowT | None:
        return self._rows[0] if self._rows else None

    def one(self) -> RowT:
        if len(self._rows) != 1:
            raise StorageUsageError(f"expected one row, got {len(self._rows)}")
        return self._rows[0]

    def scalar(self) -> Any:
        return self._rows[0][0] if self._rows else None  # type: ignore[index]

    def scalar_one(self) -> Any:
        return self.one()[0]  # type: ignore[index]
