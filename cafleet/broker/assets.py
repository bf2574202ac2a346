"""Asset installs (docs/storage.md §2.5, §7.7): one upserted row per (coding_agent, path).

`current_asset_versions` is the stale-assets guard's one read (docs/cli.md §3.2): for the agents a
command needs, the version recorded at each agent's resolved path, found by the primary key.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime

from cafleet.agents.registry import agent_names
from cafleet.broker._common import check_coding_agent
from cafleet.db import tx
from cafleet.db.catalog import assets as q
from cafleet.db.runtime import Connection
from cafleet.records import (
    AssetInstall,
    asset_install_from_row,
    check_enum,
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
    params = {"agent": coding_agent, "path": path, "version": cafleet_version}
    _, ts = tx.write_one(conn, q.UPSERT, params, now)
    return AssetInstall(
        coding_agent=coding_agent, path=path, cafleet_version=cafleet_version, installed_at=ts
    )


def asset_installs_for(conn: Connection, coding_agent: str) -> list[AssetInstall]:
    """The agent's rows ordered by path. The row at the currently resolved path is current;
    the others are superseded (the consumer decides)."""
    with tx.read(conn):
        rows = conn.execute(q.FOR_AGENT, {"agent": coding_agent}).mappings().all()
    return [asset_install_from_row(row) for row in rows]


def all_asset_installs(conn: Connection) -> list[AssetInstall]:
    """Every row, by agent then path (doctor partitions them by the resolved paths)."""
    with tx.read(conn):
        rows = conn.execute(q.ALL).mappings().all()
    return [asset_install_from_row(row) for row in rows]


_SCOPES = {
    "member": q.PLACED_AGENTS_OF_MEMBER,
    "fleet": q.PLACED_AGENTS_OF_FLEET,
    "fleet_of_member": q.PLACED_AGENTS_OF_FLEET_OF_MEMBER,
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
    params: dict[str, object] = {f"path_{a}": paths.get(a) for a in agent_names()}
    if scope is not None:
        params["scope_id"] = scope_id
        with tx.read(conn):
            rows = conn.execute(_SCOPES[scope], params).all()
        found: dict[str, str | None] = {}
        for agent, version in rows:
            agent = check_enum(
                "member_placements", "a placement", "coding_agent", agent, agent_names()
            )
            found[agent] = version
        return dict(sorted(found.items(), key=lambda kv: agent_names().index(kv[0])))
    needed = [a for a in dict.fromkeys(agents)]
    for agent in needed:
        check_coding_agent(agent)
    if not needed:
        return {}
    wanted = {f"path_{a}": paths.get(a) if a in needed else None for a in agent_names()}
    with tx.read(conn):
        rows = conn.execute(q.VERSIONS_AT_PATHS, wanted).all()
    versions = {agent: version for agent, version in rows}
    return {agent: versions.get(agent) for agent in needed}


__all__ = [
    "all_asset_installs",
    "asset_installs_for",
    "current_asset_versions",
    "record_asset_install",
]
