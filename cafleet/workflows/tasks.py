"""Task commands (docs/cli.md §2.32): each change is one repository call (`cafleet.broker.tasks`),
then the messages it stored are delivered at once through the send path's drains; the monitor
loop types any that could not be typed now."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, NamedTuple

from cafleet import broker, signals
from cafleet.db.timefmt import parse_ts, utcnow
from cafleet.sessions import Tally, timed_between
from cafleet.sessions.prices import PriceFileError, cost, load
from cafleet.workflows import messaging
from cafleet.workflows.sessions import usage

if TYPE_CHECKING:
    from cafleet.broker.tasks import TaskChange, TaskDetail
    from cafleet.config import Settings
    from cafleet.db.runtime import Connection
    from cafleet.records.tasks import Task, TaskEvent

Warn = Callable[[str], None]


class TaskView(NamedTuple):
    """`task show`: the task, its thread, the seconds spent in each state so far and what its
    assignee used while it was in progress."""

    detail: TaskDetail
    seconds_in_state: dict[str, float]
    cost: TaskCost


class TaskCost(NamedTuple):
    """What a task's assignee used while it was in progress; ``usd`` None: unknown, and
    ``unknown_reason`` says why (``tally`` is None too unless only a price is missing)."""

    usd: float | None
    unknown_reason: str | None
    tally: Tally | None = None


class BoardEntry(NamedTuple):
    """A task as the WebUI's board shows it: its age (seconds since it was created) and cost."""

    task: Task
    age_seconds: float
    cost: TaskCost


NEVER_STARTED = TaskCost(None, "never started")


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
    change = broker.finish_task(conn, task_id=task_id, member_id=member_id, result=result)
    return _delivered(conn, settings, change, warn)


def block(
    conn: Connection, settings: Settings, *, task_id: int, member_id: int, reason: str, warn: Warn
) -> Task:
    change = broker.block_task(conn, task_id=task_id, member_id=member_id, reason=reason)
    return _delivered(conn, settings, change, warn)


def reopen(conn: Connection, settings: Settings, *, task_id: int, warn: Warn) -> Task:
    return _delivered(conn, settings, broker.reopen_task(conn, task_id=task_id), warn)


def cancel(conn: Connection, settings: Settings, *, task_id: int, warn: Warn) -> Task:
    return _delivered(conn, settings, broker.cancel_task(conn, task_id=task_id), warn)


def show(
    conn: Connection, settings: Settings, task_id: int, now: datetime | None = None
) -> TaskView:
    now = now or utcnow()
    detail = broker.task_detail(conn, task_id)
    spent = seconds_in_state(detail.events, detail.task, now)
    return TaskView(detail, spent, costs(conn, settings, [detail.task], now)[task_id])


def board(
    conn: Connection,
    settings: Settings,
    fleet_id: int,
    *,
    state: str | None = None,
    now: datetime | None = None,
) -> list[BoardEntry]:
    """The fleet's tasks in id order (`task list`), each with its age and cost."""
    return entries(conn, settings, broker.task_board(conn, fleet_id, state=state), now)


def entries(
    conn: Connection, settings: Settings, tasks: Sequence[Task], now: datetime | None = None
) -> list[BoardEntry]:
    now = now or utcnow()
    found = costs(conn, settings, tasks, now)
    out = []
    for task in tasks:
        created = parse_ts(task.created_at)
        age = 0.0 if created is None else max(0.0, (now - created).total_seconds())
        out.append(BoardEntry(task, age, found[task.task_id]))
    return out


def costs(
    conn: Connection, settings: Settings, tasks: Sequence[Task], now: datetime | None = None
) -> dict[int, TaskCost]:
    """What each task's assignee used while it was in progress: the usage its agent recorded
    in those spans of time (to `cafleet.sessions.SPAN_SECONDS`), priced as `member usage`."""
    now = now or utcnow()
    out = {t.task_id: NEVER_STARTED for t in tasks if t.started_at is None}
    started = [t for t in tasks if t.started_at is not None]
    if not started:
        return out
    events = broker.task_events(conn, [t.task_id for t in started])
    spans = {t.task_id: in_progress_spans(events[t.task_id], t, now) for t in started}
    ids = sorted({member_id for found in spans.values() for member_id, _, _ in found})
    members = [broker.get_member(conn, member_id) for member_id in ids]
    used = {u.member_id: u for u in usage(conn, settings.db_dir, members, learn_missing=False)}
    try:
        table = load()
    except PriceFileError as exc:
        table, priced = None, str(exc)
    for task in started:
        tally, reason = Tally(), None
        for member_id, start, end in spans[task.task_id]:
            u = used[member_id]
            reason = u.reason if u.tally is None else None
            if u.tally is not None and u.timed is None:
                reason = f"member {member_id}'s agent records no times"
            if reason is not None:
                break
            tally.merge(timed_between(u.timed or {}, start, end))
        if reason is not None:
            out[task.task_id] = TaskCost(None, reason)
        elif table is None:
            out[task.task_id] = TaskCost(None, priced, tally)
        else:
            usd = cost(tally, table)
            out[task.task_id] = TaskCost(
                usd, None if usd is not None else "a model has no price", tally
            )
    return out


def in_progress_spans(
    events: list[TaskEvent], task: Task, now: datetime
) -> list[tuple[int, float, float]]:
    """``(member, start, end)`` in epoch seconds for each time the task was in progress: from
    the claim to the next state, or to ``now`` while it still is."""
    spans = []
    for i, event in enumerate(events):
        member_id = event.member_id or task.assignee_member_id
        if event.state != "in_progress" or member_id is None:
            continue
        start = parse_ts(event.at)
        end = parse_ts(events[i + 1].at) if i + 1 < len(events) else now
        if start is not None and end is not None:
            spans.append((member_id, start.timestamp(), end.timestamp()))
    return spans


def seconds_in_state(
    events: list[TaskEvent], task: Task, now: datetime | None = None
) -> dict[str, float]:
    """Seconds between each state's entry and the next; an open task's current state counts
    up to ``now``, a done or cancelled one's not at all."""

    spent: dict[str, float] = {}
    end: datetime | None = now or utcnow()
    for i, event in enumerate(events):
        if i + 1 < len(events):
            until = parse_ts(events[i + 1].at)
        elif task.state in ("done", "cancelled"):
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
    "BoardEntry",
    "TaskCost",
    "TaskView",
    "assign",
    "block",
    "board",
    "costs",
    "cancel",
    "claim",
    "create",
    "done",
    "entries",
    "in_progress_spans",
    "reopen",
    "seconds_in_state",
    "show",
]
