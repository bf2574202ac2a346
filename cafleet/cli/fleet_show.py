"""`cafleet fleet show` (docs/cli.md §2.5): the fleet's report (`cafleet.workflows.supervision`)."""

from __future__ import annotations

from cafleet import broker
from cafleet.cli.app import fleet_group
from cafleet.cli.context import invocation
from cafleet.cli.params import id_argument, json_option
from cafleet.monitor.collisions import current
from cafleet.output import (
    cell,
    fleet_dict,
    label_lines,
    out_json,
    out_lines,
)
from cafleet.workflows.remedies import fleet_problems
from cafleet.workflows.supervision import FleetReport, classified_state, fleet_report

SHOW_LABEL_WIDTH = 12
FLEET_ID_HELP = "Fleet ID."


# --- fleet show ----------------------------------------------------------------------------------


def fleet_show_lines(report: FleetReport, receipts: dict[int, str] | None = None) -> list[str]:
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
    if receipts:  # each member's newest receipt from its agent's hook (docs/cli.md §2.38)
        pairs.append(("received", "; ".join(f"member {m} at {receipts[m]}" for m in receipts)))
    lines = label_lines(pairs, SHOW_LABEL_WIDTH)
    hosts = report.hosts
    if summary.deleted_at is None and hosts is not None and hosts.spans:
        # A fleet across machines: each host, its members and who delivers there.
        texts = [cell(h.text) for h in hosts.hosts]
        lines += label_lines([("hosts", texts[0])], SHOW_LABEL_WIDTH)
        lines += [" " * SHOW_LABEL_WIDTH + text for text in texts[1:]]
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
    report = fleet_report(conn, fleet_id, agent_state=classified_state, collisions=current)
    receipts = broker.fleet_receipts(conn, fleet_id)
    if as_json:
        out_json(
            {
                **fleet_dict(report.summary),
                "loop": report.loop.as_dict(),
                "panes": [p.as_dict() for p in report.panes.panes.values()],
                **_hosts_key(report),
                "received": [{"member_id": m, "received_at": at} for m, at in receipts.items()],
                "problems": [p.as_dict() for p in fleet_problems(report)],
            }
        )
    else:
        out_lines(fleet_show_lines(report, receipts))


def _hosts_key(report: FleetReport) -> dict[str, object]:
    """`hosts` only for a fleet across machines (one-host output stays as it was)."""
    hosts = report.hosts
    if hosts is None or not hosts.spans:
        return {}
    return {"hosts": [h.as_dict() for h in hosts.hosts]}


# --- fleet delete --------------------------------------------------------------------------------
