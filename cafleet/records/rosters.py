"""`member list`'s roster and the monitor wake line's (docs/storage.md §7.8, docs/runtime.md §5.7)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cafleet.records.members import Member


@dataclass(frozen=True, slots=True)
class RosterEntry:
    member: Member
    last_sent: str | None
    last_recv: str | None
    last_ack: str | None
    idle: int | None


@dataclass(frozen=True, slots=True)
class WakeRosterEntry:
    """One entry of the monitor's wake line (docs/runtime.md §5.7)."""

    member_id: int
    name: str
    coding_agent: str | None  # None: no placement row (only possible for the Director)
    unacked: int


@dataclass(frozen=True, slots=True)
class WakeRoster:
    members: tuple[WakeRosterEntry, ...]  # active kind-`member` members with a placement row
    director: WakeRosterEntry | None  # None: the fleet has no Director row
