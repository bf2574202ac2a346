"""An asset install row (docs/storage.md §2.5)."""

from __future__ import annotations

from typing import NamedTuple

from cafleet.agents.registry import agent_names
from cafleet.records import Row, check_enum


class AssetInstall(NamedTuple):
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
