"""Task commands (docs/cli.md §2.32): each change is one repository call (`cafleet.broker.tasks`),
then the messages it stored are delivered at once through the send path's drains; the monitor
loop types any that could not be typed now."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import TYPE_CHECKING, NamedTuple

from cafleet import broker, signals
from cafleet.db.timefmt import parse_ts, utcnow
from cafleet.monitor.notify import fire, payload
from cafleet.workflows import messaging, review

if TYPE_CHECKING:
    from cafleet.broker.tasks import TaskChange, TaskDetail
    from cafleet.config import Settings
    from cafleet.db.runtime import Connection
    from cafleet.records.tasks import Task, TaskEvent

Warn = Callable[[str], None]


class TaskView(NamedTuple):
    """`task show`: the task, its thread and the seconds spent in each state so far."""

    detail: TaskDetail
    seconds_in_state: dict[str, float]


def create(
    conn: Connection,
    settings: Settings,
    *,
    fleet_id: int,
    title: str,
    body: str,
    creator_id: int | None,
    assignee_id: int | None,
    after: Iterable[int],
    warn: Warn,
) -> Task:
    if creator_id is None:
        creator_id = broker.get_fleet(conn, fleet_id).director_member_id
    change = broker.create_task(
        conn,
        fleet_id=fleet_id,
        title=title,
        body=body,
        creator_id=creator_id,
        assignee_id=assignee_id,
        after=after,
    )
    return _delivered(conn, settings, change, warn)


def assign(
    conn: Connection, settings: Settings, *, task_id: int, member_id: int, warn: Warn
) -> Task:
    change = broker.assign_task(conn, task_id=task_id, member_id=member_id)
    return _delivered(conn, settings, change, warn)


def claim(conn: Connection, *, task_id: int, member_id: int) -> Task:
    return broker.claim_task(conn, task_id=task_id, member_id=member_id).task


def done(
    conn: Connection,
    settings: Settings,
    *,
    task_id: int,
    member_id: int,
    result: str | None,
    warn: Warn,
) -> Task:
    # The member's worktree branch and HEAD (docs/cli.md §2.37); git only for a worktree.
    work = review.git_work(conn, member_id, warn)
    change = broker.finish_task(conn, task_id=task_id, member_id=member_id, result=result, git=work)
    _fire(conn, change.task, "task_done", member_id, result)
    return _delivered(conn, settings, change, warn)


def block(
    conn: Connection, settings: Settings, *, task_id: int, member_id: int, reason: str, warn: Warn
) -> Task:
    change = broker.block_task(conn, task_id=task_id, member_id=member_id, reason=reason)
    _fire(conn, change.task, "task_blocked", member_id, reason)
    return _delivered(conn, settings, change, warn)


def _fire(conn: Connection, task: Task, event: str, member_id: int, said: str | None) -> None:
    """The `task_done`/`task_blocked` event (docs/cli.md §2.35), recorded only: the monitor
    loop sends it. Keyed by the task's state change, so a retried command adds nothing."""
    verb = "finished" if event == "task_done" else "is blocked on"
    text = f"[cafleet] member {member_id} {verb} task {task.task_id} ({task.title})"
    if said:
        text += f": {said}"
    name = dict(broker.member_names(conn, [member_id])).get(member_id)
    data = payload(event, task.fleet_id, text, member_id, name, task_id=task.task_id)
    fire(conn, task.fleet_id, event, f"{task.task_id}:{task.state_since}", data)


def reopen(conn: Connection, settings: Settings, *, task_id: int, warn: Warn) -> Task:
    return _delivered(conn, settings, broker.reopen_task(conn, task_id=task_id), warn)


def cancel(conn: Connection, settings: Settings, *, task_id: int, warn: Warn) -> Task:
    return _delivered(conn, settings, broker.cancel_task(conn, task_id=task_id), warn)


def show(conn: Connection, task_id: int, now: datetime | None = None) -> TaskView:
    detail = broker.task_detail(conn, task_id)
    return TaskView(detail, seconds_in_state(detail.events, detail.task, now))


def seconds_in_state(
    events: list[TaskEvent], task: Task, now: datetime | None = None
) -> dict[str, float]:
    """Seconds between each state's entry and the next; an open task's current state counts
    up to ``now``, a done, merged or cancelled one's not at all."""

    spent: dict[str, float] = {}
    end: datetime | None = now or utcnow()
    for i, event in enumerate(events):
        if i + 1 < len(events):
            until = parse_ts(events[i + 1].at)
        elif task.state in ("done", "merged", "cancelled"):
            continue
        else:
            until = end
        start = parse_ts(event.at)
        if start is not None and until is not None:
            seconds = max(0.0, (until - start).total_seconds())
            spent[event.state] = spent.get(event.state, 0.0) + seconds
    return spent


def _delivered(conn: Connection, settings: Settings, change: TaskChange, warn: Warn) -> Task:
    """Drain the recipients of the messages the change stored, as `message send` does, and
    start the fleet's monitor loop while a line is still pending (docs/cli.md §1.11)."""
    own = {recipient: message_id for recipient, message_id in change.sent}
    if own and not signals.stop_requested():
        _, tmux_usable = messaging._drain_recipients(conn, settings, own, warn)
        if tmux_usable and not signals.stop_requested():
            messaging._restart_loop_if_needed(conn, [change.task.fleet_id], warn)
    return change.task


__all__ = [
    "TaskView",
    "assign",
    "block",
    "cancel",
    "claim",
    "create",
    "done",
    "reopen",
    "seconds_in_state",
    "show",
]
