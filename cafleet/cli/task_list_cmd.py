"""`cafleet task list` (docs/cli.md §2.32), and the JSON of a task every task command prints.

Apart from `task_cmd`: the board is one repository read, so it does not import the workflows
that deliver the messages a change sends (`docs/performance.md` §22).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from cafleet import broker
from cafleet.cli.app import task_group
from cafleet.cli.context import invocation
from cafleet.cli.params import id_option, json_option
from cafleet.output import out_json, out_lines, record_dict, table

if TYPE_CHECKING:
    from cafleet.records.tasks import Task

TASK_STATES = ("waiting", "ready", "in_progress", "blocked", "done", "merged", "cancelled")


def task_dict(task: Task) -> dict[str, Any]:
    return record_dict(task)


@task_group.command("list", help="The fleet's board: every task, its state and assignee.")
@id_option("--fleet-id", "Fleet ID.")
@click.option("--state", type=click.Choice(TASK_STATES), default=None, help="Only this state.")
@id_option("--member", "Only this assignee's tasks.", required=False)
@json_option
def task_list(fleet_id: int, state: str | None, member: int | None, as_json: bool) -> None:
    inv = invocation()
    conn = inv.connection()

    board = broker.task_board(conn, fleet_id, state=state, member_id=member)
    if as_json:
        out_json([task_dict(t) for t in board])
        return
    rows = [
        [
            str(t.task_id),
            t.state,
            str(t.assignee_member_id or "-"),
            ",".join(str(a) for a in t.after) or "-",
            t.title,
        ]
        for t in board
    ]
    out_lines(table(["ID", "STATE", "ASSIGNEE", "AFTER", "TITLE"], rows))
