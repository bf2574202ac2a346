"""`cafleet doctor`'s coding-agents and member-permissions sections (docs/cli.md §3.3).

Both read only: the asset rows through a read transaction closed the guarded way (no checkpoint
on doctor's behalf), the installed files and the agents' settings files. Each failing row is one
issue.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from cafleet import broker
from cafleet.assets.permissions import PermissionRow
from cafleet.assets.status import agent_statuses
from cafleet.db.errors import StorageError
from cafleet.db.runtime import close_connection, open_connection
from cafleet.output import label_lines
from cafleet.records import StorageIntegrityError

LABEL_WIDTH = 11


@dataclass
class RowsSection:
    name: str
    lines: list[str]
    data: list[dict[str, Any]]
    issues: int

    @property
    def ok(self) -> bool:
        return self.issues == 0


def recorded_installs(path: str | None, db_state: str | None) -> list[Any] | None:
    """The asset_installs rows: [] for a missing database, None when it cannot be read."""
    if db_state == "missing":
        return []
    if path is None or db_state != "current":
        return None
    import sqlite3

    try:
        conn = open_connection(path, mode="rw", purpose="command")
    except (sqlite3.Error, StorageError, OSError):
        return None
    try:
        return broker.all_asset_installs(conn)
    except (sqlite3.Error, StorageError, StorageIntegrityError):
        return None
    finally:
        close_connection(conn, guarded=True)


def _binary_dict(installed: Any) -> dict[str, Any]:
    error = installed.version_error
    if not installed.found:
        error = _not_found(installed)
    return {"path": installed.path, "version": installed.version, "error": error}


def _status_dict(status: Any, installed: Any) -> dict[str, Any]:
    target, current = status.target, status.current
    return {
        "coding_agent": status.coding_agent,
        "path": target.path if target is not None else None,
        "source": target.source if target is not None else None,
        "installed_version": current.cafleet_version if current is not None else None,
        "installed_at": current.installed_at if current is not None else None,
        "state": status.state,
        "ok": status.ok,
        "superseded": [
            {"path": r.path, "cafleet_version": r.cafleet_version, "installed_at": r.installed_at}
            for r in status.superseded
        ],
        "error": None if status.ok else status.detail,
        "binary": _binary_dict(installed),
    }


def _not_found(installed: Any) -> str:
    return f"no '{installed.coding_agent}' on PATH: {installed.remedy()}"


def _binary_text(installed: Any) -> str:
    """`<path> (<version>)`, or why the version or the binary is missing."""
    if not installed.found:
        return _not_found(installed)
    version = installed.version or f"version unknown: {installed.version_error}"
    return f"{installed.path} ({version})"


def _row_text(status: Any, installed: Any) -> str:
    """The state (`not installed` before the assets' own), the binary, then the assets."""
    target = status.target
    where = f"{target.path} ({target.source_text})" if target is not None else "(unresolved)"
    if status.current is not None:
        where += f", cafleet {status.current.cafleet_version}"
    if status.detail is not None:
        where += f": {status.detail}"
    if installed.found:
        return f"{status.state}  {_binary_text(installed)}; assets {where}"
    assets = "assets" if status.ok else f"assets {status.state}"
    return f"not installed  {_binary_text(installed)}; {assets} {where}"


def coding_agents_section(
    rows: list[Any] | None, version: str, installed: list[Any]
) -> tuple[RowsSection, list[Any]]:
    """One line per agent: its binary (``installed``, `cafleet.agents.installed`) and its
    assets. A failing asset row is an issue; a binary missing is one only when no agent at
    all is installed (nothing could be spawned)."""

    statuses = agent_statuses(rows, version)
    by_agent = {i.coding_agent: i for i in installed}
    pairs: list[tuple[str, str]] = []
    notes: list[str] = []
    for status in statuses:
        pairs.append((status.coding_agent, _row_text(status, by_agent[status.coding_agent])))
        for row in status.superseded:
            notes.append(
                f"  note: {status.coding_agent} install at {row.path} (cafleet "
                f"{row.cafleet_version}, {row.installed_at}) is superseded"
            )
    issues = sum(1 for s in statuses if not s.ok)
    if not any(i.found for i in installed):
        issues += 1
        notes.append("  no coding agent is installed: install at least one of them")
    section = RowsSection(
        "coding agents",
        label_lines(pairs, LABEL_WIDTH, "  ") + notes,
        [_status_dict(s, by_agent[s.coding_agent]) for s in statuses],
        issues,
    )
    return section, statuses


def _permission_dict(row: Any) -> dict[str, Any]:
    return {
        "coding_agent": row.coding_agent,
        "ok": row.ok,
        "checked": list(row.checked),
        "blocking": [{"file": b.file, "rule": b.rule, "command": b.command} for b in row.blocking],
        "notes": list(row.notes),
        "error": row.error,
    }


def member_permissions_section(statuses: list[Any], version: str) -> RowsSection:
    from cafleet.agents import get_agent

    cwd = os.getcwd()
    rows = []
    for status in statuses:
        agent = status.coding_agent
        if status.target is None:
            rows.append(PermissionRow(agent, error="its configuration directory did not resolve"))
        else:
            rows.append(get_agent(agent).check_permissions(status.target.path, cwd, version))
    pairs: list[tuple[str, str]] = []
    extra: list[str] = []
    for row in rows:
        if row.ok:
            read = f"{len(row.checked)} file{'' if len(row.checked) == 1 else 's'} read"
            pairs.append((row.coding_agent, f"ok ({read})"))
        else:
            problems = [f"{b.rule} in {b.file} blocks '{b.command}'" for b in row.blocking]
            if row.error is not None:
                problems.append(row.error)
            pairs.append((row.coding_agent, "blocked: " + "; ".join(problems)))
        extra += [f"  note: {row.coding_agent}: {note}" for note in row.notes]
    return RowsSection(
        "member permissions",
        label_lines(pairs, LABEL_WIDTH, "  ") + extra,
        [_permission_dict(r) for r in rows],
        sum(1 for r in rows if not r.ok),
    )


__all__ = [
    "RowsSection",
    "coding_agents_section",
    "member_permissions_section",
    "recorded_installs",
]
