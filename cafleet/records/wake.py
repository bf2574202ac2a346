"""The monitor wake line's roster (docs/runtime.md §5.7)."""

from __future__ import annotations

from typing import NamedTuple


class WakeRosterEntry(NamedTuple):
    """One entry of the monitor's wake line (docs/runtime.md §5.7)."""

    member_id: int
    name: str
    coding_agent: str | None  # None: no placement row (only possible for the Director)
    unacked: int


class WakeRoster(NamedTuple):
    members: tuple[WakeRosterEntry, ...]  # active kind-`member` members with a placement row
    director: WakeRosterEntry | None  # None: the fleet has no Director row
