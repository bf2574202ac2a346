"""Asset installs (docs/storage.md §2.5, §7.7): one upserted row per (coding_agent, path).

`current_asset_versions` is the stale-assets guard's one read (docs/cli.md §3.2): for the agents a
command needs, the version recorded at each agent's resolved path, found by the primary key.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime

from sqlalchemy import Connection, text

from cafleet.broker._common import check_coding_agent, stamp
from cafleet.db import tx
from cafleet.db.engine import driver_execute
from cafleet.records import (
    CODING_AGENTS,
    AssetInstall,
    asset_install_from_row,
    check_enum,
)

_UPSERT = text(
    "INSERT INTO asset_installs (coding_agent, path, cafleet_version, installed_at) "
    "VALUES (:agent, :path, :version, :now) "
    "ON CONFLICT (coding_agent, path) DO UPDATE SET "
    "cafleet_version = excluded.cafleet_version, installed_at = excluded.installed_at"
)
_ALL = text(
    "SELECT coding_agent, path, cafleet_version, installed_at FROM asset_installs "
    "ORDER BY coding_agent, path"
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


def all_asset_installs(conn: Connection) -> list[AssetInstall]:
    """Every row, by agent then path (doctor partitions them by the resolved paths)."""
    with tx.read(conn):
        rows = conn.execute(_ALL).mappings().all()
    return [asset_install_from_row(row) for row in rows]


# The row at each placement agent's resolved path (NULL path: nothing can match).
_PATH_CASE = (
    "CASE p.coding_agent WHEN 'claude' THEN :path_claude WHEN 'codex' THEN :path_codex "
    "WHEN 'opencode' THEN :path_opencode END"
)
_PLACED_AGENTS = (
    "SELECT DISTINCT p.coding_agent AS coding_agent, a.cafleet_version AS cafleet_version "
    "FROM members AS m JOIN member_placements AS p ON p.member_id = m.member_id "
    "LEFT JOIN asset_installs AS a "
    f"ON a.coding_agent = p.coding_agent AND a.path = {_PATH_CASE} "
    "WHERE m.status = 'active' AND "
)
_SCOPES = {
    "member": "m.member_id = :scope_id",
    "fleet": "m.fleet_id = :scope_id",
    "fleet_of_member": "m.fleet_id = (SELECT fleet_id FROM members WHERE member_id = :scope_id)",
}


def current_asset_versions(
    conn: Connection,
    paths: Mapping[str, str | None],
    *,
    agents: Iterable[str] = (),
    scope: str | None = None,
    scope_id: int | None = None,
) -> dict[str, str | None]:
    """For each needed agent, the `cafleet_version` of its row at ``paths[agent]`` (None: no row
    there, or the path did not resolve). One indexed read.

    The needed agents are ``agents``, or, with ``scope``, the coding agents of the active
    members' placements in that scope: ``"member"`` (member ``scope_id``), ``"fleet"`` (fleet
    ``scope_id``) or ``"fleet_of_member"`` (the fleet of member ``scope_id``).
    """
    if scope is not None:
        statement = text(_PLACED_AGENTS + _SCOPES[scope])
        params: dict[str, object] = {f"path_{a}": paths.get(a) for a in CODING_AGENTS}
        params["scope_id"] = scope_id
        with tx.read(conn):
            rows = driver_execute(conn, statement, params)
        found: dict[str, str | None] = {}
        for agent, version in rows:
            agent = check_enum(
                "member_placements", "a placement", "coding_agent", agent, CODING_AGENTS
            )
            found[agent] = version
        return dict(sorted(found.items(), key=lambda kv: CODING_AGENTS.index(kv[0])))
    needed = [a for a in dict.fromkeys(agents)]
    for agent in needed:
        check_coding_agent(agent)
    if not needed:
        return {}
    clauses = " OR ".join(
        f"(coding_agent = :agent{i} AND path = :path{i})" for i in range(len(needed))
    )
    params = {}
    for i, agent in enumerate(needed):
        params[f"agent{i}"] = agent
        params[f"path{i}"] = paths.get(agent)
    statement = text(f"SELECT coding_agent, cafleet_version FROM asset_installs WHERE {clauses}")
    with tx.read(conn):
        rows = driver_execute(conn, statement, params)
    versions = dict(rows)
    return {agent: versions.get(agent) for agent in needed}


__all__ = [
    "all_asset_installs",
    "asset_installs_for",
    "current_asset_versions",
    "record_asset_install",
]
