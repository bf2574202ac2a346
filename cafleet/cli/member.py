"""`cafleet member …` commands (docs/cli.md §2.7–§2.13)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from cafleet.cli.app import member_group
from cafleet.cli.context import invocation
from cafleet.cli.params import id_argument, json_option
from cafleet.output import (
    cell,
    counted_table,
    label_lines,
    member_dict,
    out,
    out_json,
    out_lines,
    placement_text,
    roster_dict,
)
from cafleet.text import idle_text

if TYPE_CHECKING:
    from cafleet.db.runtime import Connection
    from cafleet.records import Member, RosterEntry, SpawnSpec
    from cafleet.workflows.supervision import PaneReport
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
    panes = report.panes.panes
    trees = _worktrees(conn, fleet_id)
    extra: list[dict[str, object]] = [{} for _ in report.roster]
    cells: list[tuple[str, ...]] = [() for _ in report.roster]
    if with_usage:
        from cafleet.cli.usage import USAGE_HEADERS, read_members_usage, usage_cells, usage_dict

        found, table = read_members_usage(conn, inv.settings, [e.member for e in report.roster])
        extra = [usage_dict(u, table) for u in found]
        cells = [usage_cells(u, table) for u in found]
    if as_json:
        from cafleet import broker
        from cafleet.agents.permissions import shown_profile

        recorded = broker.fleet_permissions(conn, fleet_id)
        out_json(
            [
                {
                    **roster_dict(entry),
                    **_pane_keys(panes.get(entry.member.member_id)),
                    **(
                        {"host_id": report.hosts.member_host.get(entry.member.member_id)}
                        if report.hosts is not None and report.hosts.spans
                        else {}
                    ),
                    **_tree_keys(trees.get(entry.member.member_id)),
                    "permissions": shown_profile(
                        entry.member.kind, recorded.get(entry.member.member_id)
                    ),
                    **more,
                }
                for entry, more in zip(report.roster, extra, strict=True)
            ]
        )
        return
    headers: tuple[str, ...] = ("member_id", "name", "kind", "agent", "pane_id", "pane", "idle")
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
    if with_usage:
        headers += USAGE_HEADERS
        rows = [(*row, *more) for row, more in zip(rows, cells, strict=True)]
    out_lines(counted_table("member", headers, rows))
    out(f"monitor loop: {report.loop.text}")
    if hosts is not None and hosts.spans:
        for host in hosts.hosts:
            out(f"host {cell(host.text)}")
    if report.panes.unknown_reason is not None:
        # Why a pane reads `?`: its tmux server could not be asked.
        out(f"pane ?: not checked: {cell(report.panes.unknown_reason)}")
    from cafleet.workflows.remedies import fleet_problems

    for problem in fleet_problems(report):
        out(f"problem: {cell(problem.line)}")


def _worktrees(conn: Connection, fleet_id: int) -> dict[int, WorktreeReport]:
    """Each member's worktree with its state; git runs only when some member has one."""
    from cafleet.broker import fleet_worktrees

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
    if pane is None:
        return {"pane_state": "unknown", "agent_state": None}
    return {"pane_state": pane.state, "agent_state": pane.agent_state}


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
    from cafleet import broker
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
