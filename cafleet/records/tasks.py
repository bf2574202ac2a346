"""Tasks (docs/storage.md §2.12)."""

from __future__ import annotations

from typing import NamedTuple

from cafleet.records import Row, check_enum

TASK_STATES: tuple[str, ...] = ("waiting", "ready", "in_progress", "blocked", "done", "cancelled")
OPEN_STATES: tuple[str, ...] = ("waiting", "ready", "in_progress", "blocked")


class Task(NamedTuple):
    task_id: int
    fleet_id: int
    title: str
    body: str
    state: str
    creator_member_id: int | None
    assignee_member_id: int | None
    after: tuple[
        int, ...
    ]  # the tasks it comes after; fields in the JSON's order (docs/cli.md §2.32)
    reason: str | None
    result: str | None
    created_at: str
    started_at: str | None
    finished_at: str | None
    state_since: str


def task_from_row(row: Row, after: tuple[int, ...] = ()) -> Task:
    task_id = row["task_id"]
    return Task(
        task_id=task_id,
        fleet_id=row["fleet_id"],
        title=row["title"],
        body=row["body"],
        state=check_enum("tasks", f"task_id {task_id}", "state", row["state"], TASK_STATES),
        creator_member_id=row["creator_member_id"],
        assignee_member_id=row["assignee_member_id"],
        reason=row["reason"],
        result=row["result"],
        created_at=row["created_at"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        state_since=row["state_since"],
        after=after,
    )


class TaskEvent(NamedTuple):
    state: str
    at: str
    member_id: int | None


class ThreadMessage(NamedTuple):
    """A message with its task and the message it answers (docs/storage.md §2.4)."""

    message_id: int
    owner_member_id: int
    from_member_id: int
    to_member_id: int | None
    created_at: str
    status_state: str
    text: str
    task_id: int | None
    reply_to_message_id: int | None


def thread_message_from_row(row: Row) -> ThreadMessage:
    return ThreadMessage(
        message_id=row["message_id"],
        owner_member_id=row["owner_member_id"],
        from_member_id=row["from_member_id"],
        to_member_id=row["to_member_id"],
        created_at=row["created_at"],
        status_state=row["status_state"],
        text=row["text"],
        task_id=row["task_id"],
        reply_to_message_id=row["reply_to_message_id"],
    )
