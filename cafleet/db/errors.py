"""Storage-level exceptions (docs/storage.md §0). Each str() is user-facing text."""

from __future__ import annotations

from typing import Any

from cafleet import status
from cafleet.errors import CafleetError


class StorageError(CafleetError):
    """Base class of storage-layer errors."""

    error_code = status.CODE_DATABASE


class StorageUsageError(StorageError):
    """A programming error: a statement outside tx.read/tx.write, or a write on an
    unvalidated connection."""


def write_purpose(info: dict[str, Any]) -> str:
    """The checks every write transaction makes before it begins, on both runtimes
    (docs/storage.md §4.3): the connection's purpose, `validated` or `migration`; a nested
    transaction or any other purpose is a `StorageUsageError`."""
    if info.get("cafleet.begin"):
        raise StorageUsageError("nested transaction")
    purpose = info.get("cafleet.purpose")
    if purpose not in ("validated", "migration"):
        raise StorageUsageError(f"tx.write on a connection whose purpose is {purpose!r}")
    return str(purpose)


class DatabaseBusy(StorageError):
    """The writer lock or SQLite's busy_timeout ran out."""

    error_code = status.CODE_BUSY

    def __init__(self, message: str = "database is locked") -> None:
        super().__init__(message)


class SchemaChanged(StorageError):
    def __init__(self, validated: str, now: str) -> None:
        self.validated = validated
        self.now = now
        super().__init__(
            "the database schema changed while this command was running "
            f"(validated schema {validated}, now {now}); re-run the command"
        )


class MigrationRefused(StorageError):
    """Raised by a revision's pre-checks; its text is printed as is."""


class SqliteTooOld(StorageError):
    def __init__(self, version: str) -> None:
        super().__init__(
            f"cafleet requires SQLite 3.35 or newer with JSON functions (found {version})"
        )


class SetupFailed(StorageError):
    """`setup`'s database half failed or refused; str() is the exact text without `Error: `."""

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)
