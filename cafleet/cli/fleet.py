"""`cafleet fleet list` (docs/cli.md §2.4); show and delete have their own modules."""

from __future__ import annotations

from cafleet import broker
from cafleet.cli.app import fleet_group
from cafleet.cli.context import invocation
from cafleet.cli.params import json_option
from cafleet.output import (
    cell,
    counted_table,
    fleet_dict,
    out_json,
    out_lines,
)

SHOW_LABEL_WIDTH = 12
FLEET_ID_HELP = "Fleet ID."


# --- fleet list ----------------------------------------------------------------------------------


@fleet_group.command("list", help="List live fleets, newest first.")
@json_option
def fleet_list(as_json: bool) -> None:
    conn = invocation().connection()
    fleets = broker.list_fleets(conn)
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
