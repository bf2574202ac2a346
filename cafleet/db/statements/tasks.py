"""Statements of `cafleet.broker.tasks` (docs/storage.md §2.12)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import BigInteger, String, cast, insert, or_, select, update

from cafleet.db.schema import fleets, members, messages, task_deps, task_events, tasks
from cafleet.db.statements import const, message_columns, param

TASK_FIELDS = (
    "task_id",
    "fleet_id",
    "title",
    "body",
    "state",
    "creator_member_id",
    "assignee_member_id",
    "reason",
    "result",
    "created_at",
    "started_at",
    "finished_at",
    "state_since",
    "git_repo",
    "git_branch",
    "git_base",
    "git_head",
    "merge_commit",
)
_TASK = [tasks.c[name].label(name) for name in TASK_FIELDS]

FLEET = select(fleets.c.fleet_id, fleets.c.deleted_at, fleets.c.director_member_id).where(
    fleets.c.fleet_id == param("fleet_id")
)
MEMBER = select(members.c.member_id, members.c.fleet_id, members.c.status).where(
    members.c.member_id == param("member_id")
)
INSERT_TASK = (
    insert(tasks)
    .values(
        fleet_id=param("fleet_id"),
        title=param("title"),
        body=param("body"),
        state=param("state"),
        creator_member_id=param("creator"),
        assignee_member_id=param("assignee"),
        created_at=param("now"),
        state_since=param("now"),
    )
    .returning(tasks.c.task_id)
)
INSERT_DEP = insert(task_deps).values(task_id=param("task_id"), after_task_id=param("after"))
INSERT_EVENT = insert(task_events).values(
    task_id=param("task_id"), state=param("state"), at=param("now"), member_id=param("member_id")
)
TASK = select(*_TASK).where(tasks.c.task_id == param("task_id"))
BOARD = (
    select(*_TASK)
    .where(
        tasks.c.fleet_id == param("fleet_id"),
        # Typed, so PostgreSQL can prepare "no filter" (an untyped NULL has no type there).
        or_(cast(param("state"), String).is_(None), tasks.c.state == param("state")),
        or_(
            cast(param("member"), BigInteger).is_(None),
            tasks.c.assignee_member_id == param("member"),
        ),
    )
    .order_by(tasks.c.task_id)
)
# Every dependency edge of a fleet: the board's `after` lists. No cycle can form: `--after` names
# tasks that exist when the task is created.
FLEET_DEPS = (
    select(task_deps.c.task_id, task_deps.c.after_task_id)
    .select_from(task_deps.join(tasks, tasks.c.task_id == task_deps.c.task_id))
    .where(tasks.c.fleet_id == param("fleet_id"))
    .order_by(task_deps.c.task_id, task_deps.c.after_task_id)
)
DEPS_OF = (
    select(task_deps.c.after_task_id, tasks.c.state)
    .select_from(task_deps.join(tasks, tasks.c.task_id == task_deps.c.after_task_id))
    .where(task_deps.c.task_id == param("task_id"))
    .order_by(task_deps.c.after_task_id)
)
DEPENDENTS = (
    select(task_deps.c.task_id)
    .where(task_deps.c.after_task_id == param("task_id"))
    .order_by(task_deps.c.task_id)
)
UPDATE_TASK = (
    update(tasks)
    .where(tasks.c.task_id == param("task_id"))
    .values(
        state=param("state"),
        assignee_member_id=param("assignee"),
        reason=param("reason"),
        result=param("result"),
        started_at=param("started_at"),
        finished_at=param("finished_at"),
        state_since=param("state_since"),
        git_repo=param("git_repo"),
        git_branch=param("git_branch"),
        git_base=param("git_base"),
        git_head=param("git_head"),
        merge_commit=param("merge_commit"),
    )
)
# The fleet's gate command for `task merge` (revision 0012).
MERGE_GATE = select(fleets.c.merge_gate).where(fleets.c.fleet_id == param("fleet_id"))
SET_MERGE_GATE = (
    update(fleets).where(fleets.c.fleet_id == param("fleet_id")).values(merge_gate=param("gate"))
)
EVENTS = (
    select(task_events.c.state, task_events.c.at, task_events.c.member_id)
    .where(task_events.c.task_id == param("task_id"))
    .order_by(task_events.c.event_id)
)
LINK_MESSAGE = (
    update(messages)
    .where(messages.c.message_id == param("message_id"))
    .values(task_id=param("task_id"), reply_to_message_id=param("reply_to"))
)
_THREAD_COLUMNS: list[Any] = [
    *message_columns(messages),
    messages.c.task_id.label("task_id"),
    messages.c.reply_to_message_id.label("reply_to_message_id"),
]
THREAD_OF_TASK = (
    select(*_THREAD_COLUMNS)
    .where(messages.c.task_id == param("task_id"), messages.c.type == const("unicast"))
    .order_by(messages.c.message_id)
)
LINKED_MESSAGE = (
    select(*_THREAD_COLUMNS, members.c.fleet_id.label("fleet_id"))
    .select_from(messages.join(members, members.c.member_id == messages.c.owner_member_id))
    .where(messages.c.message_id == param("message_id"))
)
REPLIES_TO = (
    select(*_THREAD_COLUMNS)
    .where(messages.c.reply_to_message_id == param("message_id"))
    .order_by(messages.c.message_id)
)

STATEMENTS: dict[str, Any] = {
    "FLEET": FLEET,
    "MEMBER": MEMBER,
    "INSERT_TASK": INSERT_TASK,
    "INSERT_DEP": INSERT_DEP,
    "INSERT_EVENT": INSERT_EVENT,
    "TASK": TASK,
    "BOARD": BOARD,
    "FLEET_DEPS": FLEET_DEPS,
    "DEPS_OF": DEPS_OF,
    "DEPENDENTS": DEPENDENTS,
    "UPDATE_TASK": UPDATE_TASK,
    "EVENTS": EVENTS,
    "MERGE_GATE": MERGE_GATE,
    "SET_MERGE_GATE": SET_MERGE_GATE,
    "LINK_MESSAGE": LINK_MESSAGE,
    "THREAD_OF_TASK": THREAD_OF_TASK,
    "LINKED_MESSAGE": LINKED_MESSAGE,
    "REPLIES_TO": REPLIES_TO,
}
