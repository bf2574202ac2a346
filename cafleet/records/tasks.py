"""Tasks (docs/storage.md §2.12)."""

from typing import NamedTuple

from cafleet.records import Row, check_enum

TASK_STATES: tuple[str, ...] = (
    "waiting",
    "ready",
    "in_progress",
    "blocked",
    "done",
    "merged",
    "cancelled",
)
# A dependency is satisfied by these; a task in one of them is finished (docs/cli.md §2.37).
DONE_STATES: tuple[str, ...] = ("done", "merged")
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
    # Revision 0012 (docs/cli.md §2.37): the assignee's worktree at `task done` (the checkout it
    # was added from, its branch and base, the branch's HEAD), and the commit `task merge` made.
    git_repo: str | None = None
    git_branch: str | None = None
    git_base: str | None = None
    git_head: str | None = None
    merge_commit: str | None = None


class GitWork(NamedTuple):
    """The assignee's worktree when it marks a task done (docs/cli.md §2.37): the checkout it
    was added from, its branch, the base the branch started from, the branch's HEAD commit."""

    repo: str
    branch: str
    base: str
    head: str


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
        git_repo=row["git_repo"],
        git_branch=row["git_branch"],
        git_base=row["git_base"],
        git_head=row["git_head"],
        merge_commit=row["merge_commit"],
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
