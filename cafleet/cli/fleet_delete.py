"""`cafleet fleet delete` (docs/cli.md §2.6): `cafleet.workflows.teardown`."""

from __future__ import annotations

import click

from cafleet.cli.app import fleet_group
from cafleet.cli.context import invocation
from cafleet.cli.params import id_argument, json_option
from cafleet.cli.worktree_params import discard_worktree_option
from cafleet.output import (
    cell,
    out_json,
    out_lines,
    plural,
    table,
)
from cafleet.workflows import teardown
from cafleet.workflows.teardown import Deleted, PaneReport

SHOW_LABEL_WIDTH = 12
FLEET_ID_HELP = "Fleet ID."


PANE_STATUS_TEXT = {
    "killed": "killed",
    "already_gone": "already gone",
    "kept": "kept (--keep-panes)",
    "director": "not killed (the root Director's pane)",
    "pending": "-",
    "no_placement": "-",
    "elsewhere": "not killed (on another host)",
}


def pane_status_text(report: PaneReport) -> str:
    if report.status == "shared":
        return f"not killed (shared with member {report.shared_with})"
    return PANE_STATUS_TEXT[report.status]


def fleet_delete_lines(deleted: Deleted) -> list[str]:
    lines = [
        f"Deleted fleet {deleted.fleet_id}. "
        f"Deregistered {plural(deleted.deregistered_count, 'member')}."
    ]
    if deleted.panes:
        rows = [
            (
                str(r.member_id),
                cell(r.name),
                "(pending)" if r.status == "pending" else cell(r.pane_id),
                pane_status_text(r),
            )
            for r in deleted.panes
        ]
        lines += table(("member_id", "name", "pane_id", "pane"), rows)
    if deleted.loop_stopped is not None:
        lines.append(f"Stopped monitor loop (pid {deleted.loop_stopped}).")
    for tree in deleted.worktrees:
        lines.append(f"Worktree of member {tree.member_id}: {cell(tree.text())}.")
    return lines


def fleet_delete_dict(deleted: Deleted) -> dict[str, object]:
    return {
        "fleet_id": deleted.fleet_id,
        "deregistered_count": deleted.deregistered_count,
        "panes": [
            {"member_id": r.member_id, "pane_id": r.pane_id, "pane_status": r.status}
            for r in deleted.panes
        ],
        "loop_stopped_pid": deleted.loop_stopped,
        **({"worktrees": [t.as_dict() for t in deleted.worktrees]} if deleted.worktrees else {}),
    }


@fleet_group.command(
    "delete",
    short_help="Delete a fleet: kill its panes, deregister everyone, stop its loop.",
    help=(
        "Delete a fleet: kill its monitor's and members' panes (never the root Director's), "
        "deregister every member, stop its monitor loop. Messages stay."
    ),
)
@id_argument("fleet_id", FLEET_ID_HELP)
@click.option(
    "--keep-panes",
    is_flag=True,
    help="Deregister only; leave the panes running (the loop stops at its next tick).",
)
@discard_worktree_option
@json_option
def fleet_delete(fleet_id: int, keep_panes: bool, discard_worktree: bool, as_json: bool) -> None:
    if keep_panes and discard_worktree:
        raise click.UsageError(
            "--discard-worktree cannot go with --keep-panes (the agents still run in their "
            "worktrees)"
        )
    inv = invocation()
    conn = inv.connection()
    deleted = teardown.delete(
        conn, inv.settings, fleet_id, keep_panes=keep_panes, discard_worktree=discard_worktree
    )
    if as_json:
        out_json(fleet_delete_dict(deleted))
    else:
        out_lines(fleet_delete_lines(deleted))
