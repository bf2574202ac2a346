"""Tasks: the fleet's work as rows (docs/storage.md §2.12, docs/cli.md §2.32).

Every change is one transaction holding the task's new state, its event, and the messages the
change sends: the assignment to a task's assignee when it becomes ready (created ready, assigned
while ready, reopened, or released by its last dependency's `done`), and the Director's notice
when it is done, blocked or cancelled. Those messages are ordinary unicast deliveries, so the
drains and the monitor loop type them with the usual verified, at-least-once delivery; being
written with the change, each is stored exactly once.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from datetime import datetime
from typing import Any, NamedTuple

from cafleet.broker._common import stamp
from cafleet.broker.board import _fleet
from cafleet.broker.errors import (
    KeyReused,
    MemberDeregistered,
    MemberNotFound,
    MessageNotFound,
    TaskNotFound,
    TaskRefused,
)
from cafleet.broker.messages import Stored, _delivery, _refuse_send
from cafleet.db import tx
from cafleet.db.catalog import members as members_q
from cafleet.db.catalog import messages as mq
from cafleet.db.catalog import tasks as q
from cafleet.db.runtime import Connection
from cafleet.records import message_from_row
from cafleet.records.tasks import (
    DONE_STATES,
    OPEN_STATES,
    GitWork,
    Task,
    TaskEvent,
    ThreadMessage,
    task_from_row,
    thread_message_from_row,
)

THREAD_DEPTH_MAX = 1000  # reply_to links followed up to a thread's first message


class TaskChange(NamedTuple):
    """A task after a change, and the messages the change stored: ``(recipient, message_id)``."""

    task: Task
    sent: tuple[tuple[int, int], ...]


class TaskDetail(NamedTuple):
    task: Task
    thread: list[ThreadMessage]
    events: list[TaskEvent]


# --- reads ---------------------------------------------------------------------------------------


def get_task(conn: Connection, task_id: int) -> Task:
    with tx.read(conn):
        return _task(conn, task_id)


def overdue_tasks(conn: Connection, fleet_id: int, *, started_before: str) -> list[Task]:
    """The fleet's tasks in progress since before ``started_before`` (the monitor's wake)."""
    with tx.read(conn):
        rows = conn.execute(
            q.BOARD, {"fleet_id": fleet_id, "state": "in_progress", "member": None}
        ).all()
        return [task_from_row(r) for r in rows if r["state_since"] < started_before]


def task_detail(conn: Connection, task_id: int) -> TaskDetail:
    """The task, every message about it (`--task`) and every state it entered."""
    with tx.read(conn):
        task = _task(conn, task_id)
        thread = [
            thread_message_from_row(r)
            for r in conn.execute(q.THREAD_OF_TASK, {"task_id": task_id}).all()
        ]
        events = [
            TaskEvent(r["state"], r["at"], r["member_id"])
            for r in conn.execute(q.EVENTS, {"task_id": task_id}).all()
        ]
        return TaskDetail(task, thread, events)


def task_events(conn: Connection, task_ids: Iterable[int]) -> dict[int, list[TaskEvent]]:
    """Every state each task entered, in order (the board's costs)."""
    with tx.read(conn):
        return {
            task_id: [
                TaskEvent(r["state"], r["at"], r["member_id"])
                for r in conn.execute(q.EVENTS, {"task_id": task_id}).all()
            ]
            for task_id in task_ids
        }


def message_thread(conn: Connection, message_id: int) -> list[ThreadMessage]:
    """Message ``message_id``'s thread: from the first message its `reply_to` links lead to,
    every reply below it, in id order."""
    with tx.read(conn):
        row = conn.execute(q.LINKED_MESSAGE, {"message_id": message_id}).first()
        if row is None:
            raise MessageNotFound(message_id)
        for _ in range(THREAD_DEPTH_MAX):
            parent = row["reply_to_message_id"]
            above = (
                None
                if parent is None
                else conn.execute(q.LINKED_MESSAGE, {"message_id": parent}).first()
            )
            if above is None:
                break
            row = above
        found = {row["message_id"]: thread_message_from_row(row)}
        queue = [row["message_id"]]
        while queue:
            for reply in conn.execute(q.REPLIES_TO, {"message_id": queue.pop()}).all():
                if reply["message_id"] not in found:
                    found[reply["message_id"]] = thread_message_from_row(reply)
                    queue.append(reply["message_id"])
        return [found[k] for k in sorted(found)]


# --- writes --------------------------------------------------------------------------------------


def create_task(
    conn: Connection,
    *,
    fleet_id: int,
    title: str,
    body: str,
    creator_id: int | None,
    assignee_id: int | None,
    after: Iterable[int] = (),
    now: datetime | None = None,
) -> TaskChange:
    """A new task: `ready` when every task it comes after is done, else `waiting`."""
    deps = sorted(set(after))
    with tx.write(conn):
        ts = stamp(now)
        fleet = _fleet(conn, fleet_id, live=True)
        for member in (creator_id, assignee_id):
            if member is not None:
                _member_of(conn, member, fleet_id)
        states = {}
        for dep in deps:
            other = _task(conn, dep)
            if other.fleet_id != fleet_id:
                raise TaskRefused(f"task {dep} is in fleet {other.fleet_id}, not fleet {fleet_id}")
            states[dep] = other.state
        state = "ready" if all(s in DONE_STATES for s in states.values()) else "waiting"
        params = {
            "fleet_id": fleet_id,
            "title": title,
            "body": body,
            "state": state,
            "creator": creator_id,
            "assignee": assignee_id,
            "now": ts,
        }
        task_id = conn.execute(q.INSERT_TASK, params).scalar_one()
        for dep in deps:
            conn.execute(q.INSERT_DEP, {"task_id": task_id, "after": dep})
        _event(conn, task_id, state, ts, creator_id)
        task = _task(conn, task_id)
        sent = _assignment(conn, task, fleet, ts) if state == "ready" else []
        return TaskChange(task, tuple(sent))


def assign_task(
    conn: Connection, *, task_id: int, member_id: int, now: datetime | None = None
) -> TaskChange:
    with tx.write(conn):
        ts = stamp(now)
        task = _task(conn, task_id)
        fleet = _fleet(conn, task.fleet_id, live=True)
        _member_of(conn, member_id, task.fleet_id)
        _require_open(task, "assign")
        if task.assignee_member_id == member_id:
            return TaskChange(task, ())
        task = _update(conn, task, assignee=member_id)
        sent = _assignment(conn, task, fleet, ts) if task.state == "ready" else []
        return TaskChange(task, tuple(sent))


def claim_task(
    conn: Connection, *, task_id: int, member_id: int, now: datetime | None = None
) -> TaskChange:
    """The member starts the task: it must be ready (or blocked, to resume it), and be the
    member's or nobody's."""
    with tx.write(conn):
        ts = stamp(now)
        task = _task(conn, task_id)
        _fleet(conn, task.fleet_id, live=True)
        _member_of(conn, member_id, task.fleet_id)
        if task.assignee_member_id not in (None, member_id):
            raise TaskRefused(
                f"task {task_id} is assigned to member {task.assignee_member_id}, "
                f"not member {member_id}"
            )
        if task.state == "in_progress" and task.assignee_member_id == member_id:
            return TaskChange(task, ())
        if task.state not in ("ready", "blocked"):
            raise TaskRefused(_state_text(task, "claimed"))
        task = _update(
            conn,
            task,
            state="in_progress",
            assignee=member_id,
            reason=None,
            started_at=task.started_at or ts,
            state_since=ts,
        )
        _event(conn, task_id, "in_progress", ts, member_id)
        return TaskChange(task, ())


def finish_task(
    conn: Connection,
    *,
    task_id: int,
    member_id: int,
    result: str | None,
    git: GitWork | None = None,
    now: datetime | None = None,
) -> TaskChange:
    """The assignee marks the task done, recording its worktree's branch and HEAD (``git``;
    None: no worktree); the Director is told, and every task waiting only on it becomes ready
    (its assignee is sent the task) in the same transaction."""
    with tx.write(conn):
        ts = stamp(now)
        task = _task(conn, task_id)
        fleet = _fleet(conn, task.fleet_id, live=True)
        _require_assignee(conn, task, member_id)
        if task.state not in ("ready", "in_progress", "blocked"):
            raise TaskRefused(_state_text(task, "done"))
        task = _update(
            conn,
            task,
            state="done",
            reason=None,
            result=result,
            started_at=task.started_at or ts,
            finished_at=ts,
            state_since=ts,
            git_repo=git.repo if git else None,
            git_branch=git.branch if git else None,
            git_base=git.base if git else None,
            git_head=git.head if git else None,
            merge_commit=None,
        )
        _event(conn, task_id, "done", ts, member_id)
        sent = _notice(conn, task, fleet, ts, member_id)
        for row in conn.execute(q.DEPENDENTS, {"task_id": task_id}).all():
            sent += _release(conn, row["task_id"], fleet, ts)
        return TaskChange(task, tuple(sent))


def block_task(
    conn: Connection, *, task_id: int, member_id: int, reason: str, now: datetime | None = None
) -> TaskChange:
    with tx.write(conn):
        ts = stamp(now)
        task = _task(conn, task_id)
        fleet = _fleet(conn, task.fleet_id, live=True)
        _require_assignee(conn, task, member_id)
        if task.state not in ("ready", "in_progress"):
            raise TaskRefused(_state_text(task, "blocked"))
        task = _update(conn, task, state="blocked", reason=reason, state_since=ts)
        _event(conn, task_id, "blocked", ts, member_id)
        return TaskChange(task, tuple(_notice(conn, task, fleet, ts, member_id)))


def reopen_task(conn: Connection, *, task_id: int, now: datetime | None = None) -> TaskChange:
    """A done, cancelled or blocked task opens again: `ready` (its assignee is sent it again)
    or, when a task it comes after is not done, `waiting`."""
    with tx.write(conn):
        ts = stamp(now)
        task = _task(conn, task_id)
        fleet = _fleet(conn, task.fleet_id, live=True)
        if task.state not in ("done", "cancelled", "blocked"):
            raise TaskRefused(_state_text(task, "reopened"))
        state = "ready" if _deps_done(conn, task_id) else "waiting"
        task = _update(
            conn,
            task,
            state=state,
            reason=None,
            result=None,
            started_at=None,
            finished_at=None,
            state_since=ts,
        )
        _event(conn, task_id, state, ts, None)
        sent = _assignment(conn, task, fleet, ts) if state == "ready" else []
        return TaskChange(task, tuple(sent))


def cancel_task(conn: Connection, *, task_id: int, now: datetime | None = None) -> TaskChange:
    with tx.write(conn):
        ts = stamp(now)
        task = _task(conn, task_id)
        fleet = _fleet(conn, task.fleet_id, live=True)
        _require_open(task, "cancel")
        task = _update(conn, task, state="cancelled", finished_at=ts, state_since=ts)
        _event(conn, task_id, "cancelled", ts, None)
        return TaskChange(task, tuple(_notice(conn, task, fleet, ts, None)))


def merge_gate(conn: Connection, fleet_id: int) -> str | None:
    """The fleet's configured gate command for `task merge` (None: none)."""
    with tx.read(conn):
        _fleet(conn, fleet_id, live=False)
        row = conn.execute(q.MERGE_GATE, {"fleet_id": fleet_id}).first()
        return None if row is None else row["merge_gate"]


def set_merge_gate(conn: Connection, fleet_id: int, gate: str | None) -> None:
    with tx.write(conn):
        _fleet(conn, fleet_id, live=True)
        conn.execute(q.SET_MERGE_GATE, {"fleet_id": fleet_id, "gate": gate})


def mark_merged(
    conn: Connection, *, task_id: int, head: str, merge_commit: str, now: datetime | None = None
) -> Task:
    """A done task whose recorded HEAD (``head``) `task merge` brought into its target: it
    reads `merged` with ``merge_commit``. Refused when the task changed meanwhile."""
    with tx.write(conn):
        ts = stamp(now)
        task = _task(conn, task_id)
        if task.state != "done" or task.git_head != head:
            raise TaskRefused(f"task {task_id} changed while it was merged; it is {task.state}")
        task = _update(conn, task, state="merged", merge_commit=merge_commit, state_since=ts)
        _event(conn, task_id, "merged", ts, None)
        return task


def send_back_task(
    conn: Connection,
    *,
    task_id: int,
    head: str | None,
    to_assignee: str,
    to_director: str,
    now: datetime | None = None,
) -> TaskChange:
    """A done task whose merge failed (or the reviewer rejected) goes back to `in_progress`:
    its assignee is sent ``to_assignee`` and the Director ``to_director`` (one line), in the
    transaction of the change. ``head``: the HEAD that was reviewed (refused when a new `done`
    recorded another meanwhile; None: not checked)."""
    with tx.write(conn):
        ts = stamp(now)
        task = _task(conn, task_id)
        fleet = _fleet(conn, task.fleet_id, live=True)
        if task.state != "done" or (head is not None and task.git_head != head):
            raise TaskRefused(_state_text(task, "sent back"))
        task = _update(conn, task, state="in_progress", reason=None, state_since=ts)
        _event(conn, task_id, "in_progress", ts, None)
        sent = _assignment(conn, task, fleet, ts, to_assignee)
        director = fleet["director_member_id"]
        if director is not None:
            monitor = conn.execute(
                members_q.ACTIVE_MONITOR_MEMBER, {"fleet_id": task.fleet_id}
            ).first()
            sender = monitor["member_id"] if monitor is not None else director
            message_id = _send(conn, sender, director, to_director, ts)
            _link(conn, message_id, task_id)
            if message_id is not None:
                sent.append((director, message_id))
        return TaskChange(task, tuple(sent))


def store_task_send(
    conn: Connection,
    *,
    from_member_id: int,
    to_member_id: int,
    text: str,
    token: str | None,
    task_id: int | None,
    reply_to: int | None,
    now: datetime | None = None,
) -> Stored:
    """`store_send` for a message about a task (``task_id``) or answering another message
    (``reply_to``): the task and the answered message must be of the sender's fleet; the row
    and its links are one transaction."""
    with tx.write(conn):
        ts = stamp(now)
        sender = conn.execute(q.MEMBER, {"member_id": from_member_id}).first()
        if sender is not None:
            if task_id is not None:
                task = _task(conn, task_id)
                if task.fleet_id != sender["fleet_id"]:
                    raise TaskRefused(
                        f"task {task_id} is in fleet {task.fleet_id}, not the sender's fleet "
                        f"{sender['fleet_id']}"
                    )
            if reply_to is not None:
                answered = conn.execute(q.LINKED_MESSAGE, {"message_id": reply_to}).first()
                if answered is None or answered["fleet_id"] != sender["fleet_id"]:
                    raise MessageNotFound(reply_to)
        if token is not None:
            earlier = conn.execute(
                mq.MESSAGE_BY_TOKEN, {"from_id": from_member_id, "token": token}
            ).first()
            if earlier is not None:
                message = message_from_row(earlier)
                if (message.to_member_id, message.text) != (to_member_id, text):
                    raise KeyReused(token, message.message_id)
                return Stored(message, False)
        message_id = _send(conn, from_member_id, to_member_id, text, ts, token)
        if message_id is None:
            _refuse_send(conn, from_member_id, to_member_id)
        conn.execute(
            q.LINK_MESSAGE, {"message_id": message_id, "task_id": task_id, "reply_to": reply_to}
        )
        message = _delivery(message_id, from_member_id, to_member_id, ts, text, origin=None)
        return Stored(message, True)


# --- inside a transaction --------------------------------------------------------------------------


def _task(conn: Connection, task_id: int) -> Task:
    row = conn.execute(q.TASK, {"task_id": task_id}).first()
    if row is None:
        raise TaskNotFound(task_id)
    after = tuple(r["after_task_id"] for r in conn.execute(q.DEPS_OF, {"task_id": task_id}))
    return task_from_row(row, after)


def _member_of(conn: Connection, member_id: int, fleet_id: int) -> None:
    row = conn.execute(q.MEMBER, {"member_id": member_id}).first()
    if row is None:
        raise MemberNotFound(member_id)
    if row["status"] != "active":
        raise MemberDeregistered(member_id)
    if row["fleet_id"] != fleet_id:
        raise TaskRefused(f"member {member_id} is in fleet {row['fleet_id']}, not fleet {fleet_id}")


def _require_assignee(conn: Connection, task: Task, member_id: int) -> None:
    _member_of(conn, member_id, task.fleet_id)
    if task.assignee_member_id != member_id:
        whose = "no one" if task.assignee_member_id is None else f"member {task.assignee_member_id}"
        raise TaskRefused(f"task {task.task_id} is assigned to {whose}, not member {member_id}")


def _require_open(task: Task, verb: str) -> None:
    if task.state not in OPEN_STATES:
        raise TaskRefused(f"cannot {verb} task {task.task_id}: it is {task.state}")


def _state_text(task: Task, done_as: str) -> str:
    return f"task {task.task_id} is {task.state}, so it cannot be {done_as}"


def _update(conn: Connection, task: Task, **changes: Any) -> Task:
    values = {
        "state": task.state,
        "assignee": task.assignee_member_id,
        "reason": task.reason,
        "result": task.result,
        "started_at": task.started_at,
        "finished_at": task.finished_at,
        "state_since": task.state_since,
        "git_repo": task.git_repo,
        "git_branch": task.git_branch,
        "git_base": task.git_base,
        "git_head": task.git_head,
        "merge_commit": task.merge_commit,
    }
    values.update(changes)
    conn.execute(q.UPDATE_TASK, {"task_id": task.task_id, **values})
    return _task(conn, task.task_id)


def _event(conn: Connection, task_id: int, state: str, ts: str, member_id: int | None) -> None:
    conn.execute(
        q.INSERT_EVENT, {"task_id": task_id, "state": state, "now": ts, "member_id": member_id}
    )


def _deps_done(conn: Connection, task_id: int) -> bool:
    return all(r["state"] in DONE_STATES for r in conn.execute(q.DEPS_OF, {"task_id": task_id}))


def _release(conn: Connection, task_id: int, fleet: Any, ts: str) -> list[tuple[int, int]]:
    """A waiting task whose dependencies are all done becomes ready."""
    task = _task(conn, task_id)
    if task.state != "waiting" or not _deps_done(conn, task_id):
        return []
    task = _update(conn, task, state="ready", state_since=ts)
    _event(conn, task_id, "ready", ts, None)
    return _assignment(conn, task, fleet, ts)


def _send(
    conn: Connection, sender: int, recipient: int, text: str, ts: str, token: str | None = None
) -> int | None:
    """One unicast row through the send path's own statement; None when a party is not
    active in one fleet."""
    params = {"text": text, "from_id": sender, "to_id": recipient, "token": token, "now": ts}
    try:
        rows = conn.execute(mq.SEND, params).all()
    except sqlite3.IntegrityError as e:
        if "client_token" not in str(e):
            raise
        raise KeyReused(str(token), 0) from e
    return rows[0][0] if rows else None


def _link(conn: Connection, message_id: int | None, task_id: int) -> None:
    if message_id is not None:
        conn.execute(
            q.LINK_MESSAGE, {"message_id": message_id, "task_id": task_id, "reply_to": None}
        )


def assignment_text(task: Task) -> str:
    """What the assignee of a ready task is sent (docs/cli.md §2.32)."""
    t, m = task.task_id, task.assignee_member_id
    body = f"\n{task.body}" if task.body else ""
    return (
        f"[cafleet] task {t} is ready for you: {task.title}{body}\n"
        f"Start it: cafleet task claim {t} --member-id {m}\n"
        f'Finish it: cafleet task done {t} --member-id {m} --result "<what you did>"\n'
        f'Stuck: cafleet task block {t} --member-id {m} --reason "<why>"'
    )


def reminder_text(task: Task) -> str:
    """What the assignee of a task in progress is sent when `fleet restore` restarted its agent:
    a resumed agent waits for a prompt and a fresh one knows nothing of it."""
    head, _, steps = assignment_text(task).partition("\nStart it:")
    _, _, steps = steps.partition("\n")
    head = head.replace(" is ready for you:", " is still in progress with you:", 1)
    return f"{head}\nYour agent was restarted: carry on from where the work stands.\n{steps}"


def remind_restarted(
    conn: Connection, *, fleet_id: int, member_ids: Iterable[int], now: datetime | None = None
) -> list[tuple[int, int]]:
    """After `fleet restore` restarted these members' agents, each task one of them has in
    progress is sent to it again (docs/cli.md §2.32); the messages are stored for delivery."""
    sent: list[tuple[int, int]] = []
    with tx.write(conn):
        ts = stamp(now)
        fleet = _fleet(conn, fleet_id, live=True)
        for member_id in sorted(set(member_ids)):
            rows = conn.execute(
                q.BOARD, {"fleet_id": fleet_id, "state": "in_progress", "member": member_id}
            ).all()
            for row in rows:
                task = task_from_row(row)
                sent += _assignment(conn, task, fleet, ts, reminder_text(task))
    return sent


def notice_text(task: Task, member_id: int | None) -> str:
    """What the Director is sent when a task is done, blocked or cancelled."""
    by = f" by member {member_id}" if member_id is not None else ""
    head = f"[cafleet] task {task.task_id} ({task.title}) is {task.state}{by}"
    if task.state == "done":
        return f"{head}: {task.result}" if task.result else head
    if task.state == "blocked":
        return f"{head}: {task.reason}"
    return head


def _assignment(
    conn: Connection, task: Task, fleet: Any, ts: str, text: str | None = None
) -> list[tuple[int, int]]:
    """The ready task's assignment (or `text` about it), from its creator (the Director when
    the creator is gone); nothing without an assignee."""
    assignee = task.assignee_member_id
    if assignee is None:
        return []
    text = assignment_text(task) if text is None else text
    for sender in (task.creator_member_id, fleet["director_member_id"]):
        if sender is None:
            continue
        message_id = _send(conn, sender, assignee, text, ts)
        if message_id is not None:
            _link(conn, message_id, task.task_id)
            return [(assignee, message_id)]
    return []


def _notice(
    conn: Connection, task: Task, fleet: Any, ts: str, member_id: int | None
) -> list[tuple[int, int]]:
    """The Director's notice, from the fleet's active monitor or else the Director itself (as
    the lost-pane reports, docs/runtime.md §5.11)."""
    director = fleet["director_member_id"]
    if director is None:
        return []
    monitor = conn.execute(members_q.ACTIVE_MONITOR_MEMBER, {"fleet_id": task.fleet_id}).first()
    sender = monitor["member_id"] if monitor is not None else director
    message_id = _send(conn, sender, director, notice_text(task, member_id), ts)
    _link(conn, message_id, task.task_id)
    return [] if message_id is None else [(director, message_id)]


__all__ = [
    "TaskChange",
    "TaskDetail",
    "assign_task",
    "assignment_text",
    "remind_restarted",
    "reminder_text",
    "block_task",
    "cancel_task",
    "claim_task",
    "create_task",
    "finish_task",
    "get_task",
    "mark_merged",
    "merge_gate",
    "send_back_task",
    "set_merge_gate",
    "message_thread",
    "notice_text",
    "overdue_tasks",
    "reopen_task",
    "store_task_send",
    "task_detail",
]
