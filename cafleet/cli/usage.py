"""`cafleet member usage` (docs/cli.md §2.28): each member's tokens from its agent's own records,
with a cost estimate; also the cells `member list --usage` adds."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import click

from cafleet.cli.app import member_group
from cafleet.cli.context import invocation, usage_error
from cafleet.cli.params import ID, json_option
from cafleet.output import cell, counted_table, out_json, out_lines

if TYPE_CHECKING:
    from cafleet.records import Member
    from cafleet.sessions.prices import Rates
    from cafleet.sessions.usage import MemberUsage

UNKNOWN = "unknown"
USAGE_HEADERS = ("input", "output", "cache_read", "cache_write", "cost")


def cost_text(value: float | None) -> str:
    return "-" if value is None else f"${value:.4f}"


def usage_cells(found: MemberUsage, table: Mapping[str, Rates]) -> tuple[str, ...]:
    """input, output, cache_read, cache_write, cost: `unknown` when the records cannot say,
    `-` for the cost of a model without a price."""
    from cafleet.sessions.prices import cost

    if found.tally is None:
        return (UNKNOWN, UNKNOWN, UNKNOWN, UNKNOWN, "-")
    totals = found.tally.totals()
    return (*(str(n) for n in totals), cost_text(cost(found.tally, table)))


def usage_dict(found: MemberUsage, table: Mapping[str, Rates]) -> dict[str, Any]:
    from cafleet.sessions import COUNTS
    from cafleet.sessions.prices import cost

    if found.tally is None:
        return {"usage": None, "cost_usd": None, "unknown_reason": found.reason}
    totals = found.tally.totals()
    return {
        "usage": {
            **dict(zip(COUNTS, totals, strict=True)),
            "by_model": {
                m: dict(zip(COUNTS, c, strict=True)) for m, c in found.tally.by_model.items()
            },
        },
        "cost_usd": cost(found.tally, table),
        "unknown_reason": None,
    }


def read_members_usage(
    conn: Any, settings: Any, members: Sequence[Member]
) -> tuple[list[MemberUsage], Mapping[str, Rates]]:
    from cafleet.sessions import prices
    from cafleet.workflows.sessions import usage

    table = prices.load()  # a bad user file fails before any record is read
    return usage(conn, settings.db_dir, list(members)), table


@member_group.command(
    "usage",
    short_help="Show the tokens each member used, with a cost estimate.",
    help=(
        "Show the input, output and cache tokens of one member (MEMBER_ID) or of every member "
        "of a fleet (--fleet-id), summed from the coding agent's own session records, with a "
        "cost estimate from the price table (models without a price show tokens only). "
        "'unknown': the member's session is not known yet, or its records are gone or "
        "unreadable."
    ),
)
@click.argument(
    "member_id", type=ID, required=False, metavar="[MEMBER_ID]", help="Member ID (one member)."
)
@click.option("--fleet-id", type=ID, default=None, metavar="ID", help="Every member of a fleet.")
@json_option
def member_usage(member_id: int | None, fleet_id: int | None, as_json: bool) -> None:
    if (member_id is None) == (fleet_id is None):
        usage_error("give exactly one of MEMBER_ID and --fleet-id")
    inv = invocation()
    conn = inv.connection()
    members = _usage_members(conn, member_id, fleet_id)
    found, table = read_members_usage(conn, inv.settings, members)
    if as_json:
        out_json(
            [
                {
                    "member_id": m.member_id,
                    "name": m.name,
                    "coding_agent": m.placement.coding_agent if m.placement else None,
                    **usage_dict(u, table),
                }
                for m, u in zip(members, found, strict=True)
            ]
        )
        return
    headers = ("member_id", "name", "agent", *USAGE_HEADERS)
    rows = [
        (
            str(m.member_id),
            cell(m.name),
            cell(m.placement.coding_agent) if m.placement else "-",
            *usage_cells(u, table),
        )
        for m, u in zip(members, found, strict=True)
    ]
    out_lines(counted_table("member", headers, rows))


def _usage_members(conn: Any, member_id: int | None, fleet_id: int | None) -> list[Member]:
    """The one member, or every active member of the fleet but its root Director."""
    from cafleet import broker

    if member_id is not None:
        return [broker.get_member(conn, member_id)]
    assert fleet_id is not None
    fleet = broker.get_fleet(conn, fleet_id)
    return [
        e.member
        for e in broker.member_roster(conn, fleet_id=fleet.fleet_id)
        if e.member.member_id != fleet.director_member_id
    ]
