"""The checks every write transaction makes before it begins, on both runtimes
(docs/storage.md §4.3): no transaction inside another, and writes only on a validated (or
migrating) connection."""

from __future__ import annotations

from typing import Any

from cafleet.db.errors import StorageUsageError


def write_purpose(info: dict[str, Any]) -> str:
    """The connection's purpose, `validated` or `migration`; else `StorageUsageError`."""
    if info.get("cafleet.begin"):
        raise StorageUsageError("nested transaction")
    purpose = info.get("cafleet.purpose")
    if purpose not in ("validated", "migration"):
        raise StorageUsageError(f"tx.write on a connection whose purpose is {purpose!r}")
    return str(purpose)
