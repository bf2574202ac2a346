"""`cafleet fleet …` commands (docs/cli.md §2.3–§2.6)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from cafleet.cli.app import fleet_group
from cafleet.cli.context import invocation
from cafleet.cli.params import id_argument, json_option
from cafleet.cli.worktree_params import discard_worktree_option
from cafleet.output import (
    cell,
    counted_table,
    fleet_dict,
    label_lines,
    out_json,
    out_lines,
    plural,
    table,
)

if TYPE_CHECKING:
    from cafleet.workflows.supervision import FleetReport
    from cafleet.workflows.teardown import Deleted, PaneReport

SHOW_LABEL_WIDTH = 12
FLEET_ID_HELP = "Fleet ID."


# --- fleet list ----------------------------------------------------------------------------------


@fleet_group.command("list", help="List live fleets, newest first.")
@json_option
def fleet_list(as_json: bool) -> None:
    conn = invocation().connection()
    from cafleet import broker

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
        ("loop", report.loop.text if summary.deleted_at is None else "stopped (fleet deleted)"),
    ]
    if summary.deleted_at is None:
        pairs.append(("panes", cell(report.panes.summary())))
    lines = label_lines(pairs, SHOW_LABEL_WIDTH)
    hosts = report.hosts
    if summary.deleted_at is None and hosts is not None and hosts.spans:
        # A fleet across machines: each host, its members and who delivers there.
        texts = [cell(h.text) for h in hosts.hosts]
        lines += label_lines([("hosts", texts[0])], SHOW_LABEL_WIDTH)
        lines += [" " * SHOW_LABEL_WIDTH + text for text in texts[1:]]
    from cafleet.workflows.remedies import fleet_problems

    problems = [cell(p.line) for p in fleet_problems(report)]
    if summary.deleted_at is None or problems:  # a deleted fleet's: worktrees left behind
        problems = problems or ["none"]
        lines += label_lines([("problems", problems[0])], SHOW_LABEL_WIDTH)
        lines += [" " * SHOW_LABEL_WIDTH + line for line in problems[1:]]
    return lines


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
    from cafleet.workflows.supervision import classified_state, fleet_report

    report = fleet_report(conn, fleet_id, agent_state=classified_state)
    if as_json:
        from cafleet.workflows.remedies import fleet_problems

        out_json(
            {
                **fleet_dict(report.summary),
                "loop": report.loop.as_dict(),
                "panes": [p.as_dict() for p in report.panes.panes.values()],
                **_hosts_key(report),
                "problems": [p.as_dict() for p in fleet_problems(report)],
            }
        )
    else:
        out_lines(fleet_show_lines(report))


def _hosts_key(report: FleetReport) -> dict[str, object]:
    """`hosts` only for a fleet across machines (one-host output stays as it was)."""
    hosts = report.hosts
    if hosts is None or not hosts.spans:
        return {}
    return {"hosts": [h.as_dict() for h in hosts.hosts]}


# --- fleet delete --------------------------------------------------------------------------------

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
    from cafleet.workflows import teardown

    deleted = teardown.delete(
        conn, inv.settings, fleet_id, keep_panes=keep_panes, discard_worktree=discard_worktree
    )
    if as_json:
        out_json(fleet_delete_dict(deleted))
    else:
        out_lines(fleet_delete_lines(deleted))
