"""Doctor's coding-agents rows (docs/cli.md §3.3): per agent, the resolved identity path and its
source, the install recorded there, and a state.

- `ok`: the row at the resolved path has this version and the files on disk are this version's;
- `missing`: no row at the resolved path (or the path cannot be resolved), or a file cafleet
  installs there is absent;
- `stale`: the row records another version, or a file differs from this version's (edited, or
  left by another version);
- `unknown`: the database could not be read (its own section says why).

Rows of the agent at other paths are *superseded*: informational notes, never a failure. Only
reads: the files are compared, never written.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from cafleet.agents.registry import agent_names
from cafleet.assets.bundle import Unit, units_for
from cafleet.assets.install import changes_for
from cafleet.assets.targets import Target, TargetUnresolved, resolve_target
from cafleet.records import AssetInstall


@dataclass
class AgentStatus:
    coding_agent: str
    target: Target | None
    state: str
    current: AssetInstall | None = None
    superseded: list[AssetInstall] = field(default_factory=list)
    detail: str | None = None

    @property
    def ok(self) -> bool:
        return self.state == "ok"


def file_state(root: str, units: Sequence[Unit]) -> tuple[str, str | None]:
    """("ok" | "missing" | "stale", detail) of the installed files against ``units``."""
    changes = [c for unit in units for c in changes_for(root, unit)]
    absent = [c.path for c in changes if c.change == "created"]
    if absent:
        return "missing", "missing " + ", ".join(absent)
    if changes:
        return "stale", "differs from this version: " + ", ".join(c.path for c in changes)
    return "ok", None


def agent_status(
    coding_agent: str, rows: Sequence[AssetInstall] | None, version: str
) -> AgentStatus:
    """``rows`` are the agent's asset_installs rows, or None when the database is unreadable."""
    try:
        target = resolve_target(coding_agent)
    except TargetUnresolved as exc:
        return AgentStatus(coding_agent, None, "missing", detail=str(exc))
    remedy = f"run 'cafleet setup --coding-agent {coding_agent}'"
    if rows is None:
        return AgentStatus(coding_agent, target, "unknown", detail="the database cannot be read")
    current = next((r for r in rows if r.path == target.path), None)
    superseded = [r for r in rows if r.path != target.path]
    status = AgentStatus(coding_agent, target, "ok", current, superseded)
    if current is None:
        status.state, status.detail = "missing", f"no install recorded here; {remedy}"
    elif current.cafleet_version != version:
        status.state = "stale"
        status.detail = f"installed by cafleet {current.cafleet_version}; {remedy}"
    else:
        state, detail = file_state(target.path, units_for(coding_agent, version))
        if state != "ok":
            status.state, status.detail = state, f"{detail}; {remedy}"
    return status


def agent_statuses(
    rows: Sequence[AssetInstall] | None, version: str, agents: Sequence[str] | None = None
) -> list[AgentStatus]:
    return [
        agent_status(
            agent, None if rows is None else [r for r in rows if r.coding_agent == agent], version
        )
        for agent in (agent_names() if agents is None else agents)
    ]


__all__ = ["AgentStatus", "agent_status", "agent_statuses", "file_state"]
