"""`member list`'s roster entries (docs/storage.md §7.8)."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from cafleet.records.members import Member


class RosterEntry(NamedTuple):
    member: Member
    last_sent: str | None
    last_recv: str | None
    last_ack: str | None
    idle: int | None
