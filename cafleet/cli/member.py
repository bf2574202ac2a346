"""`cafleet member …` commands (docs/cli.md §2.7–§2.13)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from cafleet.cli.app import member_group
from cafleet.cli.context import invocation
from cafleet.cli.params import id_argument, json_option
from cafleet.output import (
    cell,
    counted_table,
    label_lines,
    member_dict,
    out,
    out_json,
    out_lines,
    placement_text,
    roster_dict,
)
from cafleet.text import idle_text

if TYPE_CHECKING:
    from cafleet.records import Member, RosterEntry
    from cafleet.workflows.supervision import PaneReport

SHOW_LABEL_WIDTH = 17
MEMBER_ID_HELP = "Member ID."
FLEET_ID_HELP = "Fleet ID."


# --- member list ---------------------------------------------------------------------------------


def roster_row(entry: RosterEntry, pane: PaneReport | None = None) -> tuple[str, ...]:
    member = entry.member
    placement = member.placement
    if placement is None:
        agent, pane_id = "-", "-"
    else:
        agent = cell(placement.coding_agent)
        pane_id = "(pending)" if placement.mux_pane_id is None else cell(placement.mux_pane_id)
        if placement.lost_at is not None:
            pane_id += " (gone)"  # the monitor loop found it gone and told the Director
    return (
        str(member.member_id),
        cell(member.name),
        member.kind,
        agent,
        pane_id,
        "?" if pane is None else cell(pane.text),
        idle_text(entry.idle),
    )


@member_group.command(
    "list",
    help=(
        "List the active members of a fleet with their activity and whether each pane is "
        "alive or gone, then the fleet's monitor loop."
    ),
)
@id_argument("fleet_id", FLEET_ID_HELP)
@click.option(
    "--usage",
    "with_usage",
    is_flag=True,
    help="Add each member's tokens and cost estimate (as 'cafleet member usage').",
)
@json_option
def member_list(fleet_id: int, with_usage: bool, as_json: bool) -> None:
    inv = invocation()
    conn = inv.connection()
    from cafleet.workflows.supervision import classified_state, fleet_report

    report = fleet_report(conn, fleet_id, roster_required=True, agent_state=classified_state)
    panes = report.panes.panes
    extra: list[dict[str, object]] = [{} for _ in report.roster]
    cells: list[tuple[str, ...]] = [() for _ in report.roster]
    headers: tuple[str, ...] = ("member_id", "name", "kind", "agent", "pane_id", "pane", "idle")
    if with_usage:
        from cafleet.cli.usage import USAGE_HEADERS, read_members_usage, usage_cells, usage_dict

        found, table = read_members_usage(conn, inv.settings, [e.member for e in report.roster])
        extra = [usage_dict(u, table) for u in found]
        cells = [usage_cells(u, table) for u in found]
        headers += USAGE_HEADERS
    if as_json:
        out_json(
            [
                {**roster_dict(entry), **_pane_keys(panes.get(entry.member.member_id)), **more}
                for entry, more in zip(report.roster, extra, strict=True)
            ]
        )
        return
    rows = [
        roster_row(entry, panes.get(entry.member.member_id)) + more
        for entry, more in zip(report.roster, cells, strict=True)
    ]
    out_lines(counted_table("member", headers, rows))
    out(f"monitor loop: {report.loop.text}")


def _pane_keys(pane: PaneReport | None) -> dict[str, object]:
    if pane is None:
        return {"pane_state": "unknown", "agent_state": None}
    return {"pane_state": pane.state, "agent_state": pane.agent_state}


# --- member show ---------------------------------------------------------------------------------


def member_show_lines(member: Member, session_id: str | None = None) -> list[str]:
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
    if member.kind != "director":  # the root Director is the user's own agent: not tracked
        pairs.append(("agent_session", cell(session_id) if session_id else "-"))
    pairs.append(("placement", placement_text(member.placement)))
    return label_lines(pairs, SHOW_LABEL_WIDTH)


@member_group.command("show", help="Show one member, active or deregistered.")
@id_argument("member_id", MEMBER_ID_HELP)
@json_option
def member_show(member_id: int, as_json: bool) -> None:
    inv = invocation()
    conn = inv.connection()
    from cafleet import broker
    from cafleet.workflows.sessions import learn_quietly

    member = broker.get_member(conn, member_id)
    session_id = learn_quietly(conn, inv.settings, member)
    if as_json:
        out_json({**member_dict(member), "agent_session_id": session_id})
    else:
        out_lines(member_show_lines(member, session_id))
