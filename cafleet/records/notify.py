"""Notification channels, their outbox, answer links and budgets (docs/storage.md §2.14)."""

from __future__ import annotations

from typing import NamedTuple

from cafleet.records import Row, check_enum

CHANNEL_KINDS: tuple[str, ...] = ("desktop", "webhook", "ntfy", "slack")
EVENTS: tuple[str, ...] = (
    "escalation",
    "lost_pane",
    "task_done",
    "task_blocked",
    "budget",
    "loop_stopped",
    "test",
)


class Channel(NamedTuple):
    channel_id: int
    fleet_id: int
    kind: str
    target: str | None  # the URL; None for `desktop`
    events: tuple[str, ...] | None  # None: every event
    answer_base: str | None  # the WebUI as the phone reaches it (escalations link to it)
    created_at: str
    failures: int  # sends failed in a row
    failing_since: str | None  # set when a row gave up; cleared by the next success
    last_error: str | None

    def takes(self, event: str) -> bool:
        return event == "test" or self.events is None or event in self.events


def channel_from_row(row: Row) -> Channel:
    cid = row["channel_id"]
    events = row["events"]
    return Channel(
        channel_id=cid,
        fleet_id=row["fleet_id"],
        kind=check_enum("notify_channels", f"channel_id {cid}", "kind", row["kind"], CHANNEL_KINDS),
        target=row["target"],
        events=None if events is None else tuple(e for e in events.split(",") if e),
        answer_base=row["answer_base"],
        created_at=row["created_at"],
        failures=row["failures"],
        failing_since=row["failing_since"],
        last_error=row["last_error"],
    )


class OutboxEntry(NamedTuple):
    outbox_id: int
    channel_id: int
    event_key: str
    event: str
    payload_json: str
    created_at: str
    attempts: int
    next_at: str | None  # None: sent or given up
    sent_at: str | None
    last_error: str | None


def outbox_from_row(row: Row) -> OutboxEntry:
    return OutboxEntry(
        outbox_id=row["outbox_id"],
        channel_id=row["channel_id"],
        event_key=row["event_key"],
        event=row["event"],
        payload_json=row["payload_json"],
        created_at=row["created_at"],
        attempts=row["attempts"],
        next_at=row["next_at"],
        sent_at=row["sent_at"],
        last_error=row["last_error"],
    )


class AnswerLink(NamedTuple):
    member_id: int
    prompt_digest: str
    created_at: str
    expires_at: str
    used_at: str | None


class Budget(NamedTuple):
    """A ceiling: tokens, micro-dollars, or both (None: no ceiling of that kind)."""

    tokens: int | None
    usd_micros: int | None

    @property
    def usd(self) -> float | None:
        return None if self.usd_micros is None else self.usd_micros / 1_000_000


class MemberBudget(NamedTuple):
    member_id: int
    budget: Budget
    paused_at: str | None
    paused_reason: str | None
