"""Recovering lost panes (docs/cli.md §2.23, §2.24): `member respawn` and `fleet adopt`.

Each parses, runs one workflow of `cafleet.workflows.recovery` and renders its result.
"""

from __future__ import annotations

import click

from cafleet.cli.app import fleet_group, member_group
from cafleet.cli.context import invocation
from cafleet.cli.params import agent_choice, id_argument, json_option, window_option
from cafleet.output import cell, err, member_dict, out, out_json


@member_group.command(
    "respawn",
    short_help="Re-create a member's lost pane.",
    help=(
        "Re-create the pane of a member whose pane is gone (the monitor too): the same coding "
        "agent with its original spawn prompt, the same member id, inbox and history; the new "
        "pane is placed like a new member's."
    ),
)
@id_argument("member_id", "Member ID.")
@window_option
@json_option
def member_respawn(member_id: int, window: str | None, as_json: bool) -> None:
    inv = invocation()
    conn = inv.connection()
    from cafleet.workflows import placing, recovery

    done = recovery.respawn(conn, inv.settings, member_id, window=placing.window_mode(window))
    if as_json:
        out_json(member_dict(done.member))
        return
    agent = done.member.placement.coding_agent if done.member.placement else "-"
    out(
        f"Respawned member {cell(done.member.name)} ({member_id}) in pane {done.pane_id} "
        f"(was {done.previous_pane_id}; agent {agent})."
    )


@fleet_group.command(
    "adopt",
    short_help="Make this pane the root Director of a fleet whose Director pane is gone.",
    help=(
        "Run in a tmux pane to make it the root Director's pane of a fleet whose Director pane "
        "is gone, then restart the fleet's monitor loop."
    ),
)
@id_argument("fleet_id", "Fleet ID.")
@click.option(
    "--coding-agent",
    type=agent_choice(),
    default=None,
    help="The coding agent this pane runs (default: the Director's recorded agent).",
)
@json_option
def fleet_adopt(fleet_id: int, coding_agent: str | None, as_json: bool) -> None:
    inv = invocation()
    conn = inv.connection()
    from cafleet.workflows import recovery

    done = recovery.adopt(conn, inv.settings, fleet_id, coding_agent=coding_agent)
    if done.loop_warning is not None:
        err(f"Warning: {done.loop_warning}")
    loop = None if done.loop_pid is None else {"pid": done.loop_pid}
    if as_json:
        out_json(
            {
                "fleet_id": fleet_id,
                "director": member_dict(done.director),
                "previous_pane_id": done.previous_pane_id,
                "monitor_loop": loop,
            }
        )
        return
    pane = done.director.placement.mux_pane_id if done.director.placement else "-"
    out(
        f"Adopted fleet {fleet_id}: its root Director (member {done.director.member_id}) is now "
        f"pane {pane} (was {done.previous_pane_id or '-'})."
    )
    if done.loop_pid is not None:
        out(f"monitor loop: pid {done.loop_pid}")
