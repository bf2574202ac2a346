"""Request and response bodies of the WebUI API (the OpenAPI schema is generated from these).

A body that shows a record (`cafleet.records`) is derived from it (`from_record`): its fields,
types and order are the record's, so a column added to a record reaches the API unrestated.
"""

from __future__ import annotations

import typing
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, create_model

from cafleet.config import MAX_ID, MAX_SETTING
from cafleet.output import field_names
from cafleet.records import MEMBER_STATUSES, MESSAGE_STATES, MESSAGE_TYPES
from cafleet.records.fleets import FleetSummary
from cafleet.records.members import Member, Placement
from cafleet.records.messages import Message
from cafleet.records.monitor import MonitorRuntime
from cafleet.records.tasks import TASK_STATES, Task, ThreadMessage
from cafleet.records.wake import WakeRosterEntry

Id = Annotated[StrictInt, Field(ge=1, le=MAX_ID)]


def from_record(
    name: str,
    record: type,
    *,
    hidden: tuple[str, ...] = (),
    types: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
) -> Any:
    """The response body `name` with every field of the dataclass `record` but the `hidden`
    ones, each required and of the record's type (or `types`' narrower one, such as the
    enumeration a column is checked against), then the `extra` fields (`(type, default)`)."""
    hints = typing.get_type_hints(record)
    fields: dict[str, Any] = {
        name: ((types or {}).get(name, hints[name]), ...)
        for name in field_names(record)
        if name not in hidden
    }
    fields.update(extra or {})
    return create_model(name, **fields)


def one_of(values: tuple[str, ...]) -> Any:
    """`Literal[...]` of a record's enumeration (`cafleet.records.MESSAGE_TYPES`, ...)."""
    return Literal[values]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ErrorOut(BaseModel):
    detail: str


if TYPE_CHECKING:  # made at run time from the records; a type checker sees a body
    PlacementOut = BaseModel
    FleetOut = BaseModel
    MemberOut = BaseModel
    MessageOut = BaseModel
    RuntimeOut = BaseModel
    WakeEntryOut = BaseModel
    TaskOut = BaseModel
    ThreadMessageOut = BaseModel
    TaskState = str
else:
    TaskState = one_of(TASK_STATES)
    PlacementOut = from_record(
        "PlacementOut",
        Placement,
        hidden=("member_id", "lost_at", "host_id", *Placement.pane_check()),
    )
    FleetOut = from_record("FleetOut", FleetSummary, hidden=("deleted_at",))
    MemberOut = from_record(
        "MemberOut",
        Member,
        hidden=("fleet_id", "skills"),
        types={
            "kind": Literal["director", "monitor", "member"],
            "status": one_of(MEMBER_STATUSES),
            "placement": PlacementOut | None,
        },
        # docs/permissions.md; null for the Director and the monitor (only in the roster).
        extra={"permissions": (Literal["workspace", "ask", "readonly", "full"] | None, None)},
    )
    MessageOut = from_record(
        "MessageOut",
        Message,
        types={"type": one_of(MESSAGE_TYPES), "status_state": one_of(MESSAGE_STATES)},
        # When the recipient's hook saw its line (docs/cli.md §2.38); the lists fill it in.
        extra={"received_at": (str | None, None)},
    )
    RuntimeOut = from_record("RuntimeOut", MonitorRuntime)
    WakeEntryOut = from_record("WakeEntryOut", WakeRosterEntry)
    TaskOut = from_record(
        "TaskOut",
        Task,
        types={"state": one_of(TASK_STATES), "after": list[int]},
        # The board's own (docs/webui.md): seconds since it was created, and what its assignee
        # used while it was in progress (null: unknown, the reason beside it).
        extra={
            "age_seconds": (float, ...),
            "cost_usd": (float | None, ...),
            "cost_unknown_reason": (str | None, ...),
        },
    )
    ThreadMessageOut = from_record(
        "ThreadMessageOut", ThreadMessage, types={"status_state": one_of(MESSAGE_STATES)}
    )


class ActivityOut(BaseModel):
    member_id: int
    idle: int | None  # seconds since the member's last send, receipt or ACK (`member list`)
    unacked: int
    last_received_at: str | None = None  # its newest receipt from its agent's hook


class UsageOut(BaseModel):
    """A member's tokens from its agent's own records (docs/runtime.md §9.5); the counts are
    null when `unknown` (``unknown_reason`` says why), ``cost_usd`` also when a model has no
    price."""

    member_id: int
    input: int | None
    output: int | None
    cache_read: int | None
    cache_write: int | None
    cost_usd: float | None
    unknown_reason: str | None


class PaneOut(BaseModel):
    member_id: int
    pane_id: str | None
    state: Literal["alive", "gone", "pending", "none", "unknown"]
    activity: str | None  # a live pane's agent state (the delivery classifier's), as member list
    host_id: str | None = (
        None  # the host the pane is on (docs/runtime.md §10.1); null: not recorded
    )
    paused: str | None = None  # `budget`: its lines wait until `member resume` (docs/cli.md §2.36)


class ChoiceOut(BaseModel):
    number: int
    label: str


class PromptOut(BaseModel):
    prompt_id: str  # the digest `member answer --prompt` takes (docs/runtime.md §5.12)
    readable: bool  # False: no question and choices could be read; ``raw`` shows the screen
    question: str | None
    details: list[str]
    choices: list[ChoiceOut]
    raw: list[str]


class ShowingOut(BaseModel):
    member_id: int
    pane_id: str
    state: str  # the pane's agent state (`awaiting_user` while it asks)
    prompt: PromptOut | None


class AnswerIn(Strict):
    # A choice's number or its words; the route refuses what no prompt could offer (400).
    choice: str = Field(max_length=10_000)
    prompt_id: str = Field(pattern=r"^[0-9a-f]{8}$")  # the prompt the buttons were drawn for


class AnsweredOut(BaseModel):
    member_id: int
    pane_id: str
    prompt: PromptOut
    choice: ChoiceOut
    next_prompt: PromptOut | None


class HostOut(BaseModel):
    """One host of a fleet across machines and who delivers there (docs/runtime.md §10.5)."""

    host_id: str
    member_ids: list[int]
    director: bool  # the root Director's host: the fleet's monitor loop delivers
    live: bool  # that loop (the fleet's, or the host's delivery loop) is live
    pid: int | None
    heartbeat_age: int | None


class PanesOut(BaseModel):
    error: str | None  # why tmux could not be asked; every placed pane is then "unknown"
    panes: list[PaneOut]
    hosts: list[HostOut] = []  # only for a fleet whose panes are on more than one host


class WorktreeOut(BaseModel):
    """A member's git worktree and its state now (docs/worktrees.md §2)."""

    member_id: int
    path: str
    branch: str
    base: str
    exists: bool
    head_branch: str | None  # the branch checked out there now; None: detached or unknown
    dirty: bool | None  # None: unknown (gone, or git failed)
    ahead: int | None  # commits on HEAD not on the base; None: unknown
    error: str | None


class DeliveryOut(BaseModel):
    message_id: int
    to_member_id: int
    status_state: Literal["input_required", "completed"]
    ack_at: str | None


class EntryOut(BaseModel):
    kind: Literal["unicast", "broadcast"]
    origin_message_id: int | None
    from_member_id: int
    created_at: str
    text: str
    recipients: int  # of the returned rows only (seed 002)
    acked: int
    deliveries: list[DeliveryOut]


class NameOut(BaseModel):
    member_id: int
    name: str


class TimelineOut(BaseModel):
    limit: int
    rows: int
    limit_reached: bool
    entries: list[EntryOut]
    names: list[NameOut]  # every sender and recipient named in the entries, any status


class SendIn(Strict):
    to_member_id: Id | Literal["*"]
    text: str


class SendOut(BaseModel):
    kind: Literal["unicast", "broadcast"]
    message: MessageOut  # the delivery, or the broadcast's summary
    recipients: int
    notified: int
    warnings: list[str]  # the lines `cafleet message send` prints on stderr


class WakeRosterOut(BaseModel):
    members: list[WakeEntryOut]
    director: WakeEntryOut | None


class MonitorOut(BaseModel):
    live: bool
    runtime: RuntimeOut | None  # null: no loop ever ran for this fleet
    wake_roster: WakeRosterOut


class IntervalIn(Strict):
    wake_interval_seconds: Annotated[StrictInt, Field(ge=0, le=MAX_SETTING)]


class WakeOut(BaseModel):
    wake_requested_at: str


class TaskPageOut(BaseModel):
    """A task's page: `task show` (docs/cli.md §2.32)."""

    task: TaskOut
    seconds_in_state: dict[str, float]
    thread: list[ThreadMessageOut]  # every message sent with the task, in id order


class TaskChangedOut(BaseModel):
    task: TaskOut
    warnings: list[str]  # the lines the `cafleet task` command prints on stderr


class DiffFileOut(BaseModel):
    path: str
    added: int | None  # null: a binary file
    deleted: int | None


class DiffOut(BaseModel):
    """A done task's change (as `task diff --json`, docs/cli.md §2.37)."""

    task_id: int | None
    member_id: int | None
    repo: str
    branch: str
    base: str
    merge_base: str
    head: str | None
    files: list[DiffFileOut]
    diff: str


class MergeIn(Strict):
    gate: str | None = Field(default=None, max_length=10_000)  # null: the fleet's gate


class RejectIn(Strict):
    text: str = Field(max_length=1_048_576)  # what the member should change; blank is refused


class QueueEntryOut(BaseModel):
    task_id: int
    title: str
    assignee_member_id: int | None
    git_branch: str | None
    merging: bool  # its merge holds the repository's lock now


class TaskIn(Strict):
    """`task create`: the root Director creates it."""

    title: str = Field(max_length=10_000)  # one line; blank is refused (422)
    body: str = Field(default="", max_length=1_048_576)
    assignee_member_id: Id | None = None
    after: list[Id] = Field(default=[], max_length=1000)


class AssignIn(Strict):
    member_id: Id
