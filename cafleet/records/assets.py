"""An asset install row (docs/storage.md §2.5)."""

from __future__ import annotations

from dataclasses import dataclass

from cafleet.agents.registry import agent_names
from cafleet.records import Row, check_enum


@dataclass(frozen=True, slots=True)
class AssetInstall:
    coding_agent: str
    path: str
    cafleet_version: str
    installed_at: str


def asset_install_from_row(row: Row) -> AssetInstall:
    return AssetInstall(
        coding_agent=check_enum(
            "asset_installs",
            f"path '{row['path']}'",
            "coding_agent",
            row["coding_agent"],
            agent_names(),
        ),
        path=row["path"],
        cafleet_version=row["cafleet_version"],
        installed_at=row["installed_at"],
    )
