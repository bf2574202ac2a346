"""A task's cost and the WebUI's board (docs/runtime.md §9.5): what a task's assignee used while
it was in progress, from its agent's records. Apart from `cafleet.workflows.tasks` so the
commands agents run most (`task claim`, `task done`) never import the record readers."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple

from cafleet import broker
from cafleet.db.timefmt import parse_ts, utcnow
from cafleet.sessions import COUNTS, Tally, timed_between
from cafleet.sessions.prices import PriceFileError, cost, load
from cafleet.workflows.sessions import usage
from cafleet.workflows.tasks import TaskView
from cafleet.workflows.tasks import show as show_task

if TYPE_CHECKING:
    from cafleet.config import Settings
    from cafleet.db.runtime import Connection
    from cafleet.records.tasks import Task, TaskEvent


class TaskCost(NamedTuple):
    """What a task's assignee used while it was in progress; ``usd`` None: unknown, and
    ``unknown_reason`` says why (``tally`` is None too unless only a price is missing)."""

    usd: float | None
    unknown_reason: str | None
    tally: Tally | None = None

    def as_dict(self) -> dict[str, Any]:
        """As `member usage --json` shows a member's (docs/cli.md §2.28)."""
        counts = None if self.tally is None else dict(zip(COUNTS, self.tally.totals(), strict=True))
        return {"usage": counts, "cost_usd": self.usd, "unknown_reason": self.unknown_reason}


class BoardEntry(NamedTuple):
    """A task as the WebUI's board shows it: its age (seconds since it was created) and cost."""

    task: Task
    age_seconds: float
    cost: TaskCost


class CostedView(NamedTuple):
    """`task show`: the task, its thread, its time in each state, and its cost."""

    view: TaskView
    cost: TaskCost


def _nothing() -> TaskCost:
    """A task never in progress used nothing."""
    return TaskCost(0.0, None, Tally())


def show(
    conn: Connection, settings: Settings, task_id: int, now: datetime | None = None
) -> CostedView:
    now = now or utcnow()
    view = show_task(conn, task_id, now)
    return CostedView(view, costs(conn, settings, [view.detail.task], now)[task_id])


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
    # Only a task that changed state since it was created can have been in progress (a
    # reopened one no longer has a `started_at`).
    moved = [t for t in tasks if t.started_at is not None or t.state_since != t.created_at]
    events = broker.task_events(conn, [t.task_id for t in moved]) if moved else {}
    spans = {t.task_id: in_progress_spans(events[t.task_id], t, now) for t in moved}
    out = {t.task_id: _nothing() for t in tasks if not spans.get(t.task_id)}
    started = [t for t in tasks if spans.get(t.task_id)]
    if not started:
        return out
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
            unknown = None if usd is not None else "a model has no price"
            out[task.task_id] = TaskCost(usd, unknown, tally)
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


__all__ = [
    "BoardEntry",
    "CostedView",
    "TaskCost",
    "board",
    "costs",
    "entries",
    "in_progress_spans",
    "show",
]
