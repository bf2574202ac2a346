"""Fleets (docs/storage.md §2.1)."""

from typing import TYPE_CHECKING, NamedTuple

from cafleet.records import Row

if TYPE_CHECKING:
    from cafleet.records.members import Member


class Fleet(NamedTuple):
    fleet_id: int
    name: str | None
    created_at: str
    deleted_at: str | None
    director_member_id: int | None


class FleetSummary(NamedTuple):
    fleet_id: int
    name: str | None
    created_at: str
    deleted_at: str | None
    director_member_id: int | None
    monitor_member_id: int | None
    member_count: int


class FleetBootstrap(NamedTuple):
    fleet: Fleet
    director: "Member"
    monitor: "Member"


def fleet_from_row(row: Row) -> Fleet:
    return Fleet(
        fleet_id=row["fleet_id"],
        name=row["name"],
        created_at=row["created_at"],
        deleted_at=row["deleted_at"],
        director_member_id=row["director_member_id"],
    )


def fleet_summary_from_row(row: Row) -> FleetSummary:
    return FleetSummary(
        fleet_id=row["fleet_id"],
        name=row["name"],
        created_at=row["created_at"],
        deleted_at=row["deleted_at"],
        director_member_id=row["director_member_id"],
        monitor_member_id=row["monitor_member_id"],
        member_count=row["member_count"],
    )
