"""`cafleet task diff/merge/gate` and `cafleet member diff` (docs/cli.md §2.37)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from cafleet import broker
from cafleet.cli.app import member_group, task_group
from cafleet.cli.context import invocation
from cafleet.cli.params import id_argument, id_option, json_option
from cafleet.cli.task_list_cmd import task_dict
from cafleet.output import err, out, out_json, out_lines
from cafleet.workflows import review

if TYPE_CHECKING:
    from cafleet.workflows.review import DiffView, Merged

TASK_ID_HELP = "Task ID."
SECONDS = click.FloatRange(min=0, min_open=False)


def _show_diff(view: DiffView, stat: bool, as_json: bool) -> None:
    if as_json:
        out_json(view.as_dict())
        return
    head = view.head[:12] if view.head else "working tree"
    out(f"# {view.branch}: {view.base}...{head} (merge base {view.merge_base[:12]}) in {view.repo}")
    if not view.files:
        out("# no changes")
    if view.text:
        click.echo(view.text, nl=not view.text.endswith("\n"))


@task_group.command("diff", help="A done task's branch against its base.")
@id_argument("task_id", TASK_ID_HELP)
@click.option("--stat", is_flag=True, help="Files only.")
@json_option
def task_diff(task_id: int, stat: bool, as_json: bool) -> None:
    inv = invocation()
    conn = inv.connection()
    _show_diff(review.task_diff(conn, task_id, stat=stat), stat, as_json)


@member_group.command("diff", help="A member's worktree against its base.")
@id_argument("member_id", "Member ID.")
@click.option("--stat", is_flag=True, help="Files only.")
@json_option
def member_diff(member_id: int, stat: bool, as_json: bool) -> None:
    inv = invocation()
    conn = inv.connection()
    _show_diff(review.member_diff(conn, member_id, stat=stat), stat, as_json)


def _merged_line(m: Merged) -> str:
    if m.already:
        return f"Task {m.task.task_id} merged: {m.target} already holds it ({m.merge_commit[:12]})."
    where = f"; {m.updated_checkout} updated" if m.updated_checkout else ""
    gate = f"; {m.gate.text()}" if m.gate else ""
    return f"Task {m.task.task_id} merged into {m.target} as {m.merge_commit[:12]}{where}{gate}."


@task_group.command("merge", help="Merge a done task's branch through the gate.")
@click.argument(
    "task_id",
    type=click.IntRange(1),
    required=False,
    metavar="[TASK_ID]",
    help=f"{TASK_ID_HELP} Not with --all-done.",
)
@click.option("--all-done", is_flag=True, help="Every done task of --fleet-id.")
@id_option("--fleet-id", "With --all-done.", required=False)
@click.option("--gate", default=None, help="Gate command.")
@click.option("--into", default=None, metavar="BRANCH", help="Target branch.")
@click.option("--gate-timeout", type=SECONDS, default=600.0, show_default=True, help="Seconds.")
@click.option("--wait", type=SECONDS, default=60.0, show_default=True, help="Seconds to queue.")
@json_option
def task_merge(
    task_id: int | None,
    all_done: bool,
    fleet_id: int | None,
    gate: str | None,
    into: str | None,
    gate_timeout: float,
    wait: float,
    as_json: bool,
) -> None:
    if all_done == (task_id is not None):
        raise click.UsageError("pass either TASK_ID or --all-done --fleet-id ID")
    if all_done and fleet_id is None:
        raise click.UsageError("--all-done needs --fleet-id ID")
    if into is not None and not into.strip():
        raise click.BadParameter("must not be empty", param_hint="--into")
    inv = invocation()
    conn = inv.connection()
    if task_id is not None:
        merged = review.merge(
            conn, inv.settings, task_id=task_id, gate=gate, into=into,
            gate_timeout=gate_timeout, wait=wait, warn=err,
        )  # fmt: skip
        if as_json:
            out_json({"task": task_dict(merged.task), "merge": merged.as_dict()})
        else:
            out(_merged_line(merged))
        return
    assert fleet_id is not None
    done, failed = review.merge_all_done(
        conn, inv.settings, fleet_id=fleet_id, gate=gate, into=into,
        gate_timeout=gate_timeout, wait=wait, warn=err,
    )  # fmt: skip
    if as_json:
        out_json({"merged": [m.as_dict() for m in done], "not_merged": failed})
    else:
        out_lines([_merged_line(m) for m in done] or ["No task merged."])
    for line in failed:
        err(f"Error: {line}")
    if failed:
        raise SystemExit(1)


@task_group.command("gate", help="Show, or set (COMMAND; '' clears), the fleet's merge gate.")
@id_option("--fleet-id", "Fleet ID.")
@click.argument(
    "command",
    required=False,
    metavar="[COMMAND]",
    help="The gate's shell command; '' clears it; none shows it.",
)
def task_gate(fleet_id: int, command: str | None) -> None:
    inv = invocation()
    conn = inv.connection()
    if command is not None:
        broker.set_merge_gate(conn, fleet_id, command if command.strip() else None)
    gate = broker.merge_gate(conn, fleet_id)
    out(f"fleet {fleet_id} gate: {gate if gate is not None else '(none)'}")
