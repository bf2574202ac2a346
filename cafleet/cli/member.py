"""`cafleet member …` commands (docs/cli.md §2.7–§2.13)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cafleet.cli.app import member_group
from cafleet.cli.context import invocation
from cafleet.cli.params import id_argument, json_option
from cafleet.output import (
    cell,
    counted_table,
    idle_text,
    label_lines,
    member_dict,
    out_json,
    out_lines,
    placement_text,
    roster_dict,
)

if TYPE_CHECKING:
    from cafleet.records import Member, RosterEntry

SHOW_LABEL_WIDTH = 17
MEMBER_ID_HELP = "Member ID."
FLEET_ID_HELP = "Fleet ID."


# --- member list ---------------------------------------------------------------------------------


def roster_row(entry: RosterEntry) -> tuple[str, ...]:
    member = entry.member
    placement = member.placement
    if placement is None:
        agent, pane = "-", "-"
    else:
        agent = cell(placement.coding_agent)
        pane = "(pending)" if placement.mux_pane_id is None else cell(placement.mux_pane_id)
        if placement.lost_at is not None:
            pane += " (gone)"  # the monitor loop found it gone and told the Director
    return (
        str(member.member_id),
        cell(member.name),
        member.kind,
        agent,
        pane,
        idle_text(entry.idle),
    )


@member_group.command("list", help="List the active members of a fleet with their activity.")
@id_argument("fleet_id", FLEET_ID_HELP)
@json_option
def member_list(fleet_id: int, as_json: bool) -> None:
    conn = invocation().connection()
    from cafleet.broker.members import member_roster

    roster = member_roster(conn, fleet_id=fleet_id)
    if as_json:
        out_json([roster_dict(entry) for entry in roster])
        return
    headers = ("member_id", "name", "kind", "agent", "pane_id", "idle")
    out_lines(counted_table("member", headers, [roster_row(entry) for entry in roster]))


# --- member show ---------------------------------------------------------------------------------


def member_show_lines(member: Member) -> list[str]:
    pairs = [
        ("member_id", str(member.member_id)),
        ("fleet_id", str(member.fleet_id)),
        ("name", cell(member.name)),
        ("kind", member.kind),
        ("status", member.status),
        ("description", cell(member.description)),
        ("registered_at", cell(member.registered_at)),
    ]
    if member.status == "deregistered":
        pairs.append(("deregistered_at", cell(member.deregistered_at)))
    pairs.append(("placement", placement_text(member.placement)))
    return label_lines(pairs, SHOW_LABEL_WIDTH)


@member_group.command("show", help="Show one member, active or deregistered.")
@id_argument("member_id", MEMBER_ID_HELP)
@json_option
def member_show(member_id: int, as_json: bool) -> None:
    conn = invocation().connection()
    from cafleet.broker.members import get_member

    member = get_member(conn, member_id)
    if as_json:
        out_json(member_dict(member))
    else:
        out_lines(member_show_lines(member))
