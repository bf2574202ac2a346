"""Statements of `cafleet.broker.assets` (docs/storage.md §2.5, §7.7)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import case, or_, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from cafleet.agents.registry import agent_names
from cafleet.db.schema import asset_installs, member_placements, members
from cafleet.db.statements import const, param

_upsert = sqlite_insert(asset_installs).values(
    coding_agent=param("agent"),
    path=param("path"),
    cafleet_version=param("version"),
    installed_at=param("now"),
)
UPSERT = _upsert.on_conflict_do_update(
    index_elements=[asset_installs.c.coding_agent, asset_installs.c.path],
    set_={
        "cafleet_version": _upsert.excluded.cafleet_version,
        "installed_at": _upsert.excluded.installed_at,
    },
)
_pg_upsert = pg_insert(asset_installs).values(
    coding_agent=param("agent"),
    path=param("path"),
    cafleet_version=param("version"),
    installed_at=param("now"),
)
# The same upsert in PostgreSQL's own construct (docs/storage.md §10.3).
PG_UPSERT = _pg_upsert.on_conflict_do_update(
    index_elements=[asset_installs.c.coding_agent, asset_installs.c.path],
    set_={
        "cafleet_version": _pg_upsert.excluded.cafleet_version,
        "installed_at": _pg_upsert.excluded.installed_at,
    },
)
_ROW = (
    asset_installs.c.coding_agent,
    asset_installs.c.path,
    asset_installs.c.cafleet_version,
    asset_installs.c.installed_at,
)
ALL = select(*_ROW).order_by(asset_installs.c.coding_agent, asset_installs.c.path)
FOR_AGENT = (
    select(*_ROW)
    .where(asset_installs.c.coding_agent == param("agent"))
    .order_by(asset_installs.c.path)
)


def _path_for(agent_column: Any) -> Any:
    """The agent's resolved path, one parameter per agent (NULL: nothing can match)."""
    return case(*[(const(a), param(f"path_{a}")) for a in agent_names()], value=agent_column)


# The versions recorded at the agents' resolved paths: one primary-key search per agent (a NULL
# path, for an agent not asked about, matches nothing).
VERSIONS_AT_PATHS = select(asset_installs.c.coding_agent, asset_installs.c.cafleet_version).where(
    or_(
        *[
            (asset_installs.c.coding_agent == const(a))
            & (asset_installs.c.path == param(f"path_{a}"))
            for a in agent_names()
        ]
    )
)

_m = members.alias("m")
_p = member_placements.alias("p")
_a = asset_installs.alias("a")


def _placed_agents(scope: Any) -> Any:
    """The coding agents of the active members' placements in a scope, each with the version
    recorded at its resolved path."""
    return (
        select(
            _p.c.coding_agent.label("coding_agent"), _a.c.cafleet_version.label("cafleet_version")
        )
        .distinct()
        .select_from(
            _m.join(_p, _p.c.member_id == _m.c.member_id).outerjoin(
                _a,
                (_a.c.coding_agent == _p.c.coding_agent)
                & (_a.c.path == _path_for(_p.c.coding_agent)),
            )
        )
        .where(_m.c.status == const("active"), scope)
    )


PLACED_AGENTS_OF_MEMBER = _placed_agents(_m.c.member_id == param("scope_id"))
PLACED_AGENTS_OF_FLEET = _placed_agents(_m.c.fleet_id == param("scope_id"))
PLACED_AGENTS_OF_FLEET_OF_MEMBER = _placed_agents(
    _m.c.fleet_id
    == select(members.c.fleet_id).where(members.c.member_id == param("scope_id")).scalar_subquery()
)

STATEMENTS: dict[str, Any] = {
    "UPSERT": UPSERT,
    "ALL": ALL,
    "FOR_AGENT": FOR_AGENT,
    "VERSIONS_AT_PATHS": VERSIONS_AT_PATHS,
    "PLACED_AGENTS_OF_MEMBER": PLACED_AGENTS_OF_MEMBER,
    "PLACED_AGENTS_OF_FLEET": PLACED_AGENTS_OF_FLEET,
    "PLACED_AGENTS_OF_FLEET_OF_MEMBER": PLACED_AGENTS_OF_FLEET_OF_MEMBER,
}
# Per-dialect replacements of a statement written with another dialect's own construct.
DIALECT_STATEMENTS: dict[str, dict[str, Any]] = {"postgresql": {"UPSERT": PG_UPSERT}}
