"""`cafleet fleet …` commands (docs/cli.md §2.3–§2.6)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cafleet.cli.app import fleet_group
from cafleet.cli.context import invocation
from cafleet.cli.params import id_argument, json_option
from cafleet.output import (
    cell,
    counted_table,
    fleet_dict,
    label_lines,
    out,
    out_json,
    out_lines,
    plural,
)

if TYPE_CHECKING:
    from cafleet.supervision import FleetReport

SHOW_LABEL_WIDTH = 12
FLEET_ID_HELP = "Fleet ID."


# --- fleet list ----------------------------------------------------------------------------------


@fleet_group.command("list", help="List live fleets, newest first.")
@json_option
def fleet_list(as_json: bool) -> None:
    conn = invocation().connection()
    from cafleet.broker.fleets import list_fleets

    fleets = list_fleets(conn)
    if as_json:
        out_json([fleet_dict(f) for f in fleets])
        return
    headers = ("fleet_id", "name", "director", "monitor", "members", "created_at")
    rows = [
        (
            str(f.fleet_id),
            cell(f.name),
            cell(f.director_member_id),
            cell(f.monitor_member_id),
            str(f.member_count),
            cell(f.created_at),
        )
        for f in fleets
    ]
    out_lines(counted_table("fleet", headers, rows))


# --- fleet show ----------------------------------------------------------------------------------


def fleet_show_lines(report: FleetReport) -> list[str]:
    summary = report.summary
    pairs = [
        ("fleet_id", str(summary.fleet_id)),
        ("name", cell(summary.name)),
        ("created_at", cell(summary.created_at)),
    ]
    if summary.deleted_at is not None:
        pairs.append(("deleted_at", cell(summary.deleted_at)))
    pairs += [
        ("director", cell(summary.director_member_id)),
        ("monitor", cell(summary.monitor_member_id)),
        ("members", str(summary.member_count)),
        ("loop", report.loop.text),
    ]
    if summary.deleted_at is None:
        pairs.append(("panes", cell(report.panes.summary())))
    return label_lines(pairs, SHOW_LABEL_WIDTH)


@fleet_group.command(
    "show",
    help=(
        "Show one fleet, soft-deleted fleets included, with its monitor loop (live, stale, "
        "stopped) and its members' panes (alive, gone)."
    ),
)
@id_argument("fleet_id", FLEET_ID_HELP)
@json_option
def fleet_show(fleet_id: int, as_json: bool) -> None:
    conn = invocation().connection()
    from cafleet.supervision import fleet_report

    report = fleet_report(conn, fleet_id)
    if as_json:
        out_json(
            {
                **fleet_dict(report.summary),
                "loop": report.loop.as_dict(),
                "panes": [p.as_dict() for p in report.panes.panes.values()],
            }
        )
    else:
        out_lines(fleet_show_lines(report))


# --- fleet delete --------------------------------------------------------------------------------


@fleet_group.command(
    "delete",
    help=(
        "Soft-delete a fleet: deregister its members and drop their placements "
        "(panes are not killed; messages stay)."
    ),
)
@id_argument("fleet_id", FLEET_ID_HELP)
@json_option
def fleet_delete(fleet_id: int, as_json: bool) -> None:
    inv = invocation()
    conn = inv.connection()
    from cafleet.workflows import fleets

    count = fleets.delete(conn, inv.settings, fleet_id).deregistered_count
    if as_json:
        out_json({"fleet_id": fleet_id, "deregistered_count": count})
    else:
        out(f"Deleted fleet {fleet_id}. Deregistered {plural(count, 'member')}.")
