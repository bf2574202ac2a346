"""`cafleet member …` commands (docs/cli.md §2.7–§2.13)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from cafleet import broker
from cafleet.broker import fleet_worktrees
from cafleet.cli.app import member_group
from cafleet.cli.context import invocation
from cafleet.cli.params import id_argument, json_option
from cafleet.output import (
    cell,
    counted_table,
    label_lines,
    member_dict,
    out_json,
    out_lines,
    placement_text,
    roster_dict,
)
from cafleet.text import idle_text

if TYPE_CHECKING:
    from cafleet.config import Settings
    from cafleet.db.runtime import Connection
    from cafleet.records import Member, RosterEntry, SpawnSpec
    from cafleet.workflows.supervision import FleetReport, PaneReport
    from cafleet.workflows.worktrees import Report as WorktreeReport

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
    trees = _worktrees(conn, fleet_id)
    usage = _roster_usage(conn, inv.settings, report) if with_usage else None
    receipts = broker.fleet_receipts(conn, fleet_id)
    if as_json:
        out_json(roster_records(conn, fleet_id, report, trees, usage, receipts))
    else:
        out_lines(roster_lines(report, trees, usage, receipts))


# Each roster member's usage: its JSON keys and its table cells (`member list --usage`).
RosterUsage = list[tuple[dict[str, object], tuple[str, ...]]]


def _roster_usage(conn: Connection, settings: Settings, report: FleetReport) -> RosterUsage:
    from cafleet.cli.usage import read_members_usage, usage_cells, usage_dict

    found, table = read_members_usage(conn, settings, [e.member for e in report.roster])
    return [(usage_dict(u, table), usage_cells(u, table)) for u in found]


def roster_records(
    conn: Connection,
    fleet_id: int,
    report: FleetReport,
    trees: dict[int, WorktreeReport],
    usage: RosterUsage | None,
    receipts: dict[int, str] | None = None,
) -> list[dict[str, object]]:
    """`member list --json`: a roster row per member with its pane, host, worktree,
    permission profile, newest hook receipt (`last_received_at`) and usage."""
    from cafleet.agents.permissions import shown_profile

    recorded = broker.fleet_permissions(conn, fleet_id)
    hosts = report.hosts
    extra = [keys for keys, _cells in usage] if usage is not None else [{} for _ in report.roster]
    return [
        {
            **roster_dict(entry),
            **_pane_keys(report.panes.panes.get(entry.member.member_id)),
            **(
                {"host_id": hosts.member_host.get(entry.member.member_id)}
                if hosts is not None and hosts.spans
                else {}
            ),
            **_tree_keys(trees.get(entry.member.member_id)),
            "permissions": shown_profile(entry.member.kind, recorded.get(entry.member.member_id)),
            "last_received_at": (receipts or {}).get(entry.member.member_id),
            **more,
        }
        for entry, more in zip(report.roster, extra, strict=True)
    ]


def roster_lines(
    report: FleetReport,
    trees: dict[int, WorktreeReport],
    usage: RosterUsage | None,
    receipts: dict[int, str] | None = None,
) -> list[str]:
    """`member list`'s text: the table, the loop, the hosts, why a pane reads `?`, problems."""
    headers: tuple[str, ...] = ("member_id", "name", "kind", "agent", "pane_id", "pane", "idle")
    panes = report.panes.panes
    rows: list[tuple[str, ...]] = [
        roster_row(entry, panes.get(entry.member.member_id)) for entry in report.roster
    ]
    hosts = report.hosts
    if hosts is not None and hosts.spans:  # the host column only for a fleet across machines
        headers += ("host",)
        rows = [
            (*row, cell(hosts.member_host.get(entry.member.member_id) or "-"))
            for row, entry in zip(rows, report.roster, strict=True)
        ]
    if trees:  # the worktree column only where some member has one (docs/worktrees.md)
        headers += ("worktree",)
        rows = [
            (*row, _tree_text(trees.get(entry.member.member_id)))
            for row, entry in zip(rows, report.roster, strict=True)
        ]
    if receipts:  # the receipt column only where some member's hook reported one
        headers += ("received",)
        rows = [
            (*row, cell(receipts.get(entry.member.member_id) or "-"))
            for row, entry in zip(rows, report.roster, strict=True)
        ]
    if usage is not None:
        from cafleet.cli.usage import USAGE_HEADERS

        headers += USAGE_HEADERS
        rows = [(*row, *cells) for row, (_keys, cells) in zip(rows, usage, strict=True)]
    lines = [*counted_table("member", headers, rows), f"monitor loop: {report.loop.text}"]
    if hosts is not None and hosts.spans:
        lines += [f"host {cell(host.text)}" for host in hosts.hosts]
    if report.panes.unknown_reason is not None:
        # Why a pane reads `?`: its tmux server could not be asked.
        lines.append(f"pane ?: not checked: {cell(report.panes.unknown_reason)}")
    from cafleet.workflows.remedies import fleet_problems

    return lines + [f"problem: {cell(problem.line)}" for problem in fleet_problems(report)]


def _worktrees(conn: Connection, fleet_id: int) -> dict[int, WorktreeReport]:
    """Each member's worktree with its state; git runs only when some member has one."""
    specs = fleet_worktrees(conn, fleet_id)
    if not specs:
        return {}
    from cafleet.workflows.worktrees import reports

    return reports(specs)


def _tree_keys(tree: WorktreeReport | None) -> dict[str, object]:
    return {} if tree is None else {"worktree": tree.as_dict()}


def _tree_text(tree: WorktreeReport | None) -> str:
    return "-" if tree is None else cell(tree.text())


def _pane_keys(pane: PaneReport | None) -> dict[str, object]:
    # `paused`: why the member's lines wait (`budget`, docs/cli.md §2.36), else null.
    if pane is None:
        return {"pane_state": "unknown", "agent_state": None, "paused": None}
    return {"pane_state": pane.state, "agent_state": pane.agent_state, "paused": pane.paused}


# --- member show ---------------------------------------------------------------------------------


def member_show_lines(
    member: Member,
    tree: WorktreeReport | None = None,
    permissions: str | None = None,
    session_id: str | None = None,
) -> list[str]:
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
    if tree is not None:
        pairs.append(("worktree", cell(f"{tree.spec.path} {tree.text()} base={tree.spec.base}")))
    if member.kind == "member":
        pairs.append(("permissions", permissions or "-"))
    return label_lines(pairs, SHOW_LABEL_WIDTH)


@member_group.command("show", help="Show one member, active or deregistered.")
@id_argument("member_id", MEMBER_ID_HELP)
@json_option
def member_show(member_id: int, as_json: bool) -> None:
    inv = invocation()
    conn = inv.connection()
    from cafleet.agents.permissions import shown_profile
    from cafleet.workflows.sessions import learn_quietly

    member = broker.get_member(conn, member_id)
    spawn = broker.get_spawn(conn, member_id) if member.kind == "member" else None
    permissions = shown_profile(member.kind, spawn.permissions if spawn else None)
    tree = _member_worktree(spawn, member_id)
    session_id = learn_quietly(conn, inv.settings, member)
    if as_json:
        out_json(
            {
                **member_dict(member),
                "permissions": permissions,
                **_tree_keys(tree),
                "agent_session_id": session_id,
            }
        )
    else:
        out_lines(member_show_lines(member, tree, permissions, session_id))


def _member_worktree(spawn: SpawnSpec | None, member_id: int) -> WorktreeReport | None:
    if spawn is None or spawn.worktree is None:
        return None
    from cafleet.workflows.worktrees import reports

    return reports({member_id: spawn.worktree})[member_id]
