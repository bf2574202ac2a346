"""`cafleet worktree list` / `cafleet worktree remove PATH` (docs/cli.md §2.30): the worktrees
cafleet made for members, any fleet's, deleted ones too (`cafleet.workflows.leftovers`)."""

from __future__ import annotations

import click

from cafleet.cli.app import worktree_group
from cafleet.cli.context import invocation
from cafleet.cli.params import json_option
from cafleet.output import cell, counted_table, out, out_json, out_lines


@worktree_group.command(
    "list",
    help=(
        "List the git worktrees cafleet made for members, of every fleet (deleted ones too), "
        "whose directories still exist: each one's branch, state and member."
    ),
)
@json_option
def worktree_list(as_json: bool) -> None:
    conn = invocation().connection()
    from cafleet.workflows.leftovers import listing

    found = listing(conn)
    if as_json:
        out_json([item.as_dict() for item in found])
        return
    rows = []
    for item in found:
        rec = item.recorded
        member = f"{rec.member_id} {rec.member_name}" + ("" if rec.member_active else " (deleted)")
        fleet = f"{rec.fleet_id}" + (" (deleted)" if rec.fleet_deleted else "")
        state = item.report.state_text()
        rows.append((cell(rec.spec.path), cell(rec.spec.branch), cell(state), member, fleet))
    out_lines(counted_table("worktree", ("path", "branch", "state", "member", "fleet"), rows))


@worktree_group.command(
    "remove",
    short_help="Remove a worktree a deleted member left behind.",
    help=(
        "Remove the git worktree at PATH that a deleted member left behind (any fleet's, "
        "deleted ones too), when git shows no change in it and its HEAD is on a branch; then "
        "its branch, when it has no commit beyond its base."
    ),
)
@click.argument("path", help="The worktree's directory (as 'cafleet worktree list' shows it).")
@click.option(
    "--discard",
    is_flag=True,
    help="Remove it even with uncommitted changes or commits on no branch (they are lost).",
)
@json_option
def worktree_remove(path: str, discard: bool, as_json: bool) -> None:
    conn = invocation().connection()
    from cafleet.workflows.leftovers import remove

    retired = remove(conn, path, discard=discard)
    if as_json:
        out_json(retired.as_dict())
    else:
        out(cell(retired.text()))
