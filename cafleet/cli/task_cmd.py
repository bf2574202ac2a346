"""`cafleet task …` and `cafleet message thread` (docs/cli.md §2.32)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from cafleet import broker
from cafleet.cli.app import message_group, task_group
from cafleet.cli.context import invocation
from cafleet.cli.params import id_argument, id_option, json_option, read_body_file
from cafleet.cli.task_list_cmd import task_dict
from cafleet.output import err, out, out_json, out_lines, record_dict
from cafleet.workflows import tasks

if TYPE_CHECKING:
    from cafleet.records.tasks import Task, ThreadMessage
    from cafleet.workflows.task_costs import TaskCost

TASK_ID_HELP = "Task ID."


THREAD_KEYS = (
    "message_id",
    "from_member_id",
    "to_member_id",
    "created_at",
    "status",
    "task_id",
    "reply_to_message_id",
    "text",
)


def thread_dict(message: ThreadMessage) -> dict[str, Any]:
    return record_dict(message, THREAD_KEYS, status="status_state")


def _task_lines(task: Task) -> list[str]:
    lines = [
        f"task {task.task_id}: {task.title}",
        f"  state: {task.state} (since {task.state_since})",
        f"  fleet: {task.fleet_id}  assignee: {task.assignee_member_id or '-'}",
    ]
    if task.after:
        lines.append("  after: " + ", ".join(str(t) for t in task.after))
    if task.reason:
        lines.append(f"  reason: {task.reason}")
    if task.result:
        lines.append(f"  result: {task.result}")
    if task.body:
        lines.extend(["", *task.body.splitlines()])
    return lines


def _thread_lines(thread: list[ThreadMessage]) -> list[str]:
    lines = []
    for m in thread:
        reply = f" (reply to {m.reply_to_message_id})" if m.reply_to_message_id else ""
        lines.append(
            f"[{m.message_id}] {m.created_at} {m.from_member_id} -> {m.to_member_id}{reply}"
        )
        lines.extend("  " + line for line in m.text.splitlines() or [""])
    return lines


def _render(task: Task, as_json: bool, what: str) -> None:
    if as_json:
        out_json({"task": task_dict(task)})
    else:
        out(f"Task {task.task_id} {what}.")
        out_lines(_task_lines(task))


def _body(body: str | None) -> str:
    if body is None:
        return ""
    return read_body_file("-", "--body") if body == "-" else body


def _text(value: str, option: str) -> str:
    if not value.strip():
        raise click.BadParameter("must not be empty", param_hint=option)
    return value


@task_group.command("create", help="Create a task in a fleet (ready, or waiting on --after).")
@id_option("--fleet-id", "Fleet ID.")
@click.option("--title", required=True, help="One line naming the work.")
@click.option("--body", default=None, help="The whole brief ('-' reads stdin).")
@id_option("--assign", "The member who will do it.", required=False)
@click.option(
    "--after",
    "after",
    type=click.IntRange(1),
    multiple=True,
    metavar="ID",
    help="A task that must be done first (repeat for several).",
)
@id_option("--member-id", "Creator (default: the fleet's Director).", required=False)
@json_option
def task_create(
    fleet_id: int,
    title: str,
    body: str | None,
    assign: int | None,
    after: tuple[int, ...],
    member_id: int | None,
    as_json: bool,
) -> None:
    title = _text(title, "--title")
    inv = invocation()
    conn = inv.connection()

    task = tasks.create(
        conn,
        inv.settings,
        fleet_id=fleet_id,
        title=title,
        body=_body(body),
        creator_id=member_id,
        assignee_id=assign,
        after=after,
        warn=err,
    )
    _render(task, as_json, "created")


@task_group.command("show", help="One task, its time in each state and its thread.")
@id_argument("task_id", TASK_ID_HELP)
@json_option
def task_show(task_id: int, as_json: bool) -> None:
    inv = invocation()
    conn = inv.connection()

    # Only `task show` reads the agents' records: the other task commands never import them.
    from cafleet.workflows import task_costs

    shown_view = task_costs.show(conn, inv.settings, task_id)
    view, cost = shown_view.view, shown_view.cost
    detail = view.detail
    if as_json:
        shown = task_dict(detail.task)
        shown["seconds_in_state"] = view.seconds_in_state
        shown["in_progress_usage"] = cost.as_dict()
        out_json({"task": shown, "thread": [thread_dict(m) for m in detail.thread]})
        return
    out_lines(_task_lines(detail.task))
    spent = ", ".join(f"{s} {round(v)}s" for s, v in view.seconds_in_state.items())
    lines = [f"time in state: {spent or '-'}", f"used in progress: {_usage_text(cost)}"]
    out_lines(["", *lines, "", *_thread_lines(detail.thread)])


def _usage_text(cost: TaskCost) -> str:
    if cost.tally is None:
        return f"unknown ({cost.unknown_reason})"
    i, o, cr, cw = cost.tally.totals()
    price = f"${cost.usd:.4f}" if cost.usd is not None else f"cost unknown ({cost.unknown_reason})"
    return f"in {i} · out {o} · cache {cr + cw} · {price}"


@task_group.command("assign", help="Give a task to a member (sent to it when ready).")
@id_argument("task_id", TASK_ID_HELP)
@id_argument("member_id", "Member ID.")
@json_option
def task_assign(task_id: int, member_id: int, as_json: bool) -> None:
    inv = invocation()
    conn = inv.connection()

    task = tasks.assign(conn, inv.settings, task_id=task_id, member_id=member_id, warn=err)
    _render(task, as_json, "assigned")


@task_group.command("claim", help="Start a ready task (it becomes yours).")
@id_argument("task_id", TASK_ID_HELP)
@id_option("--member-id", "Your member ID.")
@json_option
def task_claim(task_id: int, member_id: int, as_json: bool) -> None:
    inv = invocation()
    conn = inv.connection()
    inv.act_as(member_id)

    _render(tasks.claim(conn, task_id=task_id, member_id=member_id), as_json, "claimed")


@task_group.command("done", help="Mark your task done (the Director is told).")
@id_argument("task_id", TASK_ID_HELP)
@id_option("--member-id", "Your member ID.")
@click.option("--result", default=None, help="What you did.")
@json_option
def task_done(task_id: int, member_id: int, result: str | None, as_json: bool) -> None:
    inv = invocation()
    conn = inv.connection()
    inv.act_as(member_id)

    task = tasks.done(
        conn, inv.settings, task_id=task_id, member_id=member_id, result=result, warn=err
    )
    _render(task, as_json, "done")


@task_group.command("block", help="Mark your task blocked, with why (the Director is told).")
@id_argument("task_id", TASK_ID_HELP)
@id_option("--member-id", "Your member ID.")
@click.option("--reason", required=True, help="Why it cannot go on.")
@json_option
def task_block(task_id: int, member_id: int, reason: str, as_json: bool) -> None:
    reason = _text(reason, "--reason")
    inv = invocation()
    conn = inv.connection()
    inv.act_as(member_id)

    task = tasks.block(
        conn, inv.settings, task_id=task_id, member_id=member_id, reason=reason, warn=err
    )
    _render(task, as_json, "blocked")


@task_group.command("reopen", help="Open a done, blocked or cancelled task again.")
@id_argument("task_id", TASK_ID_HELP)
@json_option
def task_reopen(task_id: int, as_json: bool) -> None:
    inv = invocation()
    conn = inv.connection()

    _render(tasks.reopen(conn, inv.settings, task_id=task_id, warn=err), as_json, "reopened")


@task_group.command("cancel", help="Cancel an open task (the Director is told).")
@id_argument("task_id", TASK_ID_HELP)
@json_option
def task_cancel(task_id: int, as_json: bool) -> None:
    inv = invocation()
    conn = inv.connection()

    _render(tasks.cancel(conn, inv.settings, task_id=task_id, warn=err), as_json, "cancelled")


@message_group.command("thread", help="A message's thread: what it answers and every reply.")
@id_argument("message_id", "Message ID.")
@json_option
def message_thread(message_id: int, as_json: bool) -> None:
    inv = invocation()
    conn = inv.connection()

    thread = broker.message_thread(conn, message_id)
    if as_json:
        out_json([thread_dict(m) for m in thread])
    else:
        out_lines(_thread_lines(thread))
