"""Recovering lost panes (docs/cli.md §2.23, §2.24, §2.27): `member respawn`, `fleet adopt` and
`fleet restore`.

Each parses, runs one workflow of `cafleet.workflows.recovery` and renders its result.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from cafleet.cli.app import fleet_group, member_group
from cafleet.cli.context import invocation
from cafleet.cli.params import agent_choice, id_argument, json_option, window_option
from cafleet.output import cell, err, member_dict, out, out_json, out_lines
from cafleet.workflows import placing, recovery
from cafleet.workflows.restore import restore

if TYPE_CHECKING:
    from cafleet.workflows.restore import Restored


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
@click.option(
    "--resume",
    is_flag=True,
    help=(
        "Continue the member's own agent session (its conversation so far) instead of "
        "starting afresh with the spawn prompt."
    ),
)
@json_option
def member_respawn(member_id: int, window: str | None, resume: bool, as_json: bool) -> None:
    inv = invocation()
    conn = inv.connection()
    done = recovery.respawn(
        conn, inv.settings, member_id, window=placing.window_mode(window), resume=resume
    )
    if done.host_loop_problem is not None:
        err(f"Warning: {done.host_loop_problem}")
    if as_json:
        out_json({**member_dict(done.member), "resumed_session_id": done.resumed_session})
        return
    agent = done.member.placement.coding_agent if done.member.placement else "-"
    resumed = "" if done.resumed_session is None else f"; resumed session {done.resumed_session}"
    # No previous pane: the interrupted 'member create' that registered it was finished.
    was = done.previous_pane_id or "pending: its interrupted create finished"
    out(
        f"Respawned member {cell(done.member.name)} ({member_id}) in pane {done.pane_id} "
        f"(was {was}; agent {agent}{resumed})."
    )
    if done.host_loop_pid is not None:
        # docs/runtime.md §10.4: this host's loop delivers the member's lines.
        out(f"delivery loop for host {cell(done.host_id)}: pid {done.host_loop_pid}")


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


@fleet_group.command(
    "restore",
    short_help="Bring a fleet back after its tmux server is gone.",
    help=(
        "Run in a tmux pane after the fleet's tmux server is gone (a reboot): this pane "
        "becomes the root Director's (as 'fleet adopt'), every member whose pane is gone is "
        "respawned continuing its own agent session (as 'member respawn --resume'), and the "
        "monitor loop is started. Prints one line per member; members whose pane runs are left "
        "alone, so running it again changes nothing. In a fleet across machines run it on each "
        "host: it restores the members whose pane is on this host and names the host of each "
        "other member."
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
def fleet_restore(fleet_id: int, coding_agent: str | None, as_json: bool) -> None:
    inv = invocation()
    conn = inv.connection()
    done = restore(conn, inv.settings, fleet_id, coding_agent=coding_agent)
    for warning in (done.loop_warning, done.host_loop_warning):
        if warning is not None:
            err(f"Warning: {warning}")
    if as_json:
        out_json(restore_dict(done, fleet_id))
    else:
        out_lines(restore_lines(done, fleet_id))
    if done.failed:
        # Every line printed; a member of this host was not restored (one on another host is
        # not a failure: `fleet restore` there restores it).
        click.get_current_context().exit(1)


def restore_dict(done: Restored, fleet_id: int) -> dict[str, object]:
    """`fleet restore --json` (docs/cli.md §2.27)."""
    return {
        "fleet_id": fleet_id,
        "director_pane_id": done.director_pane,
        "director_host_id": done.director_host,
        "adopted_from": done.adopted_from,
        "members": [
            {
                "member_id": o.member_id,
                "name": o.name,
                "outcome": o.state,
                "detail": o.detail,
                "session_id": o.session_id,
            }
            for o in done.outcomes
        ],
        "monitor_loop": None if done.loop_pid is None else {"pid": done.loop_pid},
        "host_loop": (
            None
            if done.host_loop_pid is None
            else {"host_id": done.host_id, "pid": done.host_loop_pid}
        ),
    }


def restore_lines(done: Restored, fleet_id: int) -> list[str]:
    """`fleet restore`'s text: the Director, one line per member, the loops started."""
    if done.director_pane is None:
        lines = [f"Director: on host {done.director_host}; {_run_there(fleet_id)}."]
    elif done.adopted_from is not None:
        lines = [f"Director: pane {done.director_pane} (adopted; was {done.adopted_from})."]
    else:
        lines = [f"Director: pane {done.director_pane} (already this pane)."]
    lines += [
        f"member {o.member_id} ({cell(o.name)}): {_outcome_text(o, fleet_id)}"
        for o in done.outcomes
    ]
    if done.loop_pid is not None:
        lines.append(f"monitor loop: pid {done.loop_pid}")
    if done.host_loop_pid is not None:
        lines.append(f"delivery loop for host {done.host_id}: pid {done.host_loop_pid}")
    return lines


def _run_there(fleet_id: int) -> str:
    return f"run 'cafleet fleet restore {fleet_id}' there"


def _outcome_text(o: Any, fleet_id: int) -> str:
    if o.state == "elsewhere":
        return f"on host {o.detail}; {_run_there(fleet_id)}"
    if o.state == "resumed":
        return f"resumed session {o.session_id} in {o.detail}"
    if o.state == "alive":
        return f"alive in {o.detail}, left alone"
    if o.state == "afresh":
        return f"started afresh in {o.detail} (no agent session of it was known)"
    if o.state == "finished":
        return f"finished its interrupted 'member create' in {o.detail}"
    return f"not restored: {o.detail}"
