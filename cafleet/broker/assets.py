"""Asset installs (storage.md §2.5, §7.7): one upserted row per (coding_agent, path)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, text

from cafleet.broker._common import check_coding_agent, stamp
from cafleet.db import tx
from cafleet.records import AssetInstall, asset_install_from_row

_UPSERT = text(
    "INSERT INTO asset_installs (coding_agent, path, cafleet_version, installed_at) "
    "VALUES (:agent, :path, :version, :now) "
    "ON CONFLICT (coding_agent, path) DO UPDATE SET "
    "cafleet_version = excluded.cafleet_version, installed_at = excluded.installed_at"
)
_FOR_AGENT = text(
    "SELECT coding_agent, path, cafleet_version, installed_at FROM asset_installs "
    "WHERE coding_agent = :agent ORDER BY path"
)


def record_asset_install(
    conn: Connection,
    *,
    coding_agent: str,
    path: str,
    cafleet_version: str,
    now: datetime | None = None,
) -> AssetInstall:
    """Upsert the row for `(coding_agent, path)` with this CLI version and time."""
    check_coding_agent(coding_agent)
    with tx.write(conn):
        ts = stamp(now)
        conn.execute(
            _UPSERT, {"agent": coding_agent, "path": path, "version": cafleet_version, "now": ts}
        )
    return AssetInstall(
        coding_agent=coding_agent, path=path, cafleet_version=cafleet_version, installed_at=ts
    )


def asset_installs_for(conn: Connection, coding_agent: str) -> list[AssetInstall]:
    """The agent's rows ordered by path. The row at the currently resolved path is current;
    the others are superseded (the consumer decides)."""
    with tx.read(conn):
        rows = conn.execute(_FOR_AGENT, {"agent": coding_agent}).mappings().all()
    return [asset_install_from_row(row) for row in rows]


__all__ = ["asset_installs_for", "record_asset_install"]
