"""`cafleet fleet create` (docs/cli.md §2.3): bootstrap a fleet around the calling pane.

Parses, runs `cafleet.workflows.fleets.create` (the bootstrap transaction, the monitor spawn, the
loop start and their compensation) and renders its result.
"""

from __future__ import annotations

import click

from cafleet.agents.permissions import FULL_WARNING
from cafleet.cli.app import fleet_group
from cafleet.cli.context import invocation
from cafleet.cli.params import (
    PERMISSION_PROFILES,
    agent_choice,
    budget_tokens,
    budget_usd,
    json_option,
    name_option,
    read_body_file,
)
from cafleet.cli.worktree_params import fleet_worktree_option
from cafleet.output import err, member_dict, out, out_json
from cafleet.workflows import fleets
from cafleet.workflows import notify as budgets


@fleet_group.command(
    "create",
    short_help="Create a fleet around this tmux pane and start its monitor.",
    help=(
        "Create a fleet from this tmux pane: register the pane as the fleet's root Director, "
        "spawn the monitor member next to it and start the fleet's monitor loop."
    ),
)
@name_option("Fleet name.")
@click.option(
    "--coding-agent",
    type=agent_choice(),
    required=True,
    help="The coding agent the calling (Director) pane runs; the monitor runs it too.",
)
@click.option(
    "--monitor-file",
    metavar="PATH",
    default=None,
    help="Spawn-prompt template for the monitor ('-' reads stdin); default: the bundled prompt.",
)
@click.option("--monitor-model", default=None, help="Model for the monitor (agent default).")
@click.option(
    "--monitor-effort", default=None, help="Reasoning effort for the monitor (agent default)."
)
@fleet_worktree_option
@click.option(
    "--permissions",
    type=click.Choice(PERMISSION_PROFILES),
    default=None,
    help="Default permission profile of the fleet's members (docs/permissions.md; "
    "default: workspace).",
)
@budget_tokens
@budget_usd
@json_option
def fleet_create(
    name: str,
    coding_agent: str,
    monitor_file: str | None,
    monitor_model: str | None,
    monitor_effort: str | None,
    worktree: bool,
    permissions: str | None,
    budget_tokens: int | None,
    budget_usd: float | None,
    as_json: bool,
) -> None:
    budgeted = budget_tokens is not None or budget_usd is not None
    if budgeted:
        budgets.budget_of(budget_tokens, budget_usd)  # refused before anything spawns
    inv = invocation()
    conn = inv.connection()
    created = fleets.create(
        conn,
        inv.settings,
        name=name,
        coding_agent=coding_agent,
        monitor_template=(
            None if monitor_file is None else lambda: read_body_file(monitor_file, "--monitor-file")
        ),
        monitor_model=monitor_model,
        monitor_effort=monitor_effort,
        close=inv.close,
        member_defaults=_member_defaults(worktree, permissions),
    )
    if budgeted:  # the fleet-wide ceiling (docs/cli.md §2.36); the loop enforces it
        fleet_id = created.boot.fleet.fleet_id
        budgets.set_fleet_budget(inv.connection(), fleet_id, budget_tokens, budget_usd)
    if permissions == "full":
        err(FULL_WARNING)
    _print_created(created, as_json)


def _print_created(created: fleets.Created, as_json: bool) -> None:
    # A signal received from here on still prints; main maps the exit code.
    boot, pid = created.boot, created.loop_pid
    if as_json:
        out_json(
            {
                "fleet_id": boot.fleet.fleet_id,
                "name": boot.fleet.name,
                "created_at": boot.fleet.created_at,
                "director": member_dict(boot.director),
                "monitor": member_dict(boot.monitor),
                "monitor_loop": {"pid": pid},
            }
        )
    else:
        out(
            f"{boot.fleet.fleet_id} director={boot.director.member_id} monitor={boot.monitor.member_id}"
        )
        out(f"monitor loop: pid {pid}")


def _member_defaults(worktree: bool, permissions: str | None) -> dict[str, object] | None:
    """What `fleets.member_defaults_json` stores for the fleet's new members (None: nothing)."""
    defaults: dict[str, object] = {}
    if worktree:
        defaults["worktree"] = True
    if permissions is not None:
        defaults["permissions"] = permissions
    return defaults or None
