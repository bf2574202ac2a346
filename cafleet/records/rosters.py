"""`member list`'s roster entries (docs/storage.md §7.8)."""

from typing import NamedTuple

from cafleet.records.members import Member


class RosterEntry(NamedTuple):
    member: Member
    last_sent: str | None
    last_recv: str | None
    last_ack: str | None
    idle: int | None
