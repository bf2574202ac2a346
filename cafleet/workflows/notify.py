"""Notification channels and budgets (docs/cli.md §2.35, §2.36): what `cafleet notify …`,
`member budget`, `member resume` and `fleet budget` do. Sending is the monitor loop's
(`cafleet.monitor.notify`); only `notify test` sends from the command, synchronously."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, NamedTuple
from urllib.parse import urlsplit

from cafleet import broker
from cafleet.monitor.notify import redact, send_test
from cafleet.records.notify import CHANNEL_KINDS, EVENTS, Budget
from cafleet.sessions.prices import PriceFileError, load, rates_for
from cafleet.workflows import messaging
from cafleet.workflows.errors import WorkflowError
from cafleet.workflows.spawning import WorkflowUsageError as NotifyUsage

if TYPE_CHECKING:
    from cafleet.db.runtime import Connection
    from cafleet.records.notify import Channel, MemberBudget

URL_MAX = 2000


class TestOutcome(NamedTuple):
    channel: Channel
    error: str | None  # None: sent


def parse_events(raw: str | None) -> tuple[str, ...] | None:
    if raw is None:
        return None
    events = tuple(dict.fromkeys(e.strip() for e in raw.split(",") if e.strip()))
    unknown = [e for e in events if e not in EVENTS]
    if unknown or not events:
        raise NotifyUsage(
            f"unknown event {unknown[0] if unknown else repr(raw)} in --events; events are "
            + ", ".join(EVENTS)
        )
    return events


def _check_url(url: str, what: str) -> str:
    try:
        parts = urlsplit(url)
        ok = parts.scheme in ("http", "https") and bool(parts.hostname)
        parts.port  # noqa: B018 - a bad port raises here
    except ValueError:
        ok = False
    if not ok or len(url) > URL_MAX or any(ch.isspace() or ord(ch) < 32 for ch in url):
        raise NotifyUsage(f"{what} must be an http:// or https:// URL (got {redact(url)})")
    return url


def add_channel(
    conn: Connection,
    *,
    fleet_id: int,
    kind: str,
    url: str | None,
    events: str | None,
    answer_base: str | None,
) -> Channel:
    if kind not in CHANNEL_KINDS:
        raise NotifyUsage(f"unknown channel kind {kind!r}; kinds are {', '.join(CHANNEL_KINDS)}")
    if kind == "desktop":
        if url is not None:
            raise NotifyUsage("a desktop channel takes no URL")
    elif url is None:
        raise NotifyUsage(f"a {kind} channel needs its URL: cafleet notify add {kind} URL")
    else:
        _check_url(url, "URL")
    if answer_base is not None:
        _check_url(answer_base, "--answer-base")
    return broker.add_channel(
        conn,
        fleet_id=fleet_id,
        kind=kind,
        target=url,
        events=parse_events(events),
        answer_base=answer_base,
    )


def remove_channel(conn: Connection, channel_id: int) -> Channel:
    removed = broker.remove_channel(conn, channel_id)
    if removed is None:
        raise WorkflowError(f"channel {channel_id} not found; cafleet notify list shows them")
    return removed


def test_channels(conn: Connection, fleet_id: int) -> list[TestOutcome]:
    broker.get_fleet(conn, fleet_id)  # FleetNotFound
    channels = broker.notify_channels(conn, fleet_id)
    if not channels:
        raise WorkflowError(
            f"fleet {fleet_id} has no notification channel; add one with: cafleet notify add "
            f"--fleet-id {fleet_id} webhook URL"
        )
    return [TestOutcome(c, send_test(conn, c, fleet_id)) for c in channels]


# --- budgets -------------------------------------------------------------------------------------


def budget_of(tokens: int | None, usd: float | None) -> Budget:
    if usd is not None and (not math.isfinite(usd) or usd <= 0 or usd > 1_000_000):
        raise NotifyUsage(f"--budget-usd must be a positive number of dollars (got {usd:g})")
    if tokens is not None and tokens <= 0:
        raise NotifyUsage(f"--budget-tokens must be a positive whole number (got {tokens})")
    return Budget(tokens, None if usd is None else round(usd * 1_000_000))


def unpriced_note(model: str | None, budget: Budget) -> str | None:
    """Said at create: a model without a price is budgeted by tokens only."""
    if budget.usd_micros is None:
        return None
    try:
        table = load()
    except PriceFileError:
        return "the price table cannot be read: the member is budgeted by tokens only"
    if model is not None and rates_for(model, table) is None:
        return f"model {model} has no price: the member is budgeted by tokens only"
    return None


def set_member_budget(
    conn: Connection, member_id: int, tokens: int | None, usd: float | None
) -> MemberBudget:
    return broker.set_member_budget(conn, member_id=member_id, budget=budget_of(tokens, usd))


def resume_member(
    conn: Connection, member_id: int, tokens: int | None, usd: float | None
) -> MemberBudget | None:
    """Lift a member's pause (its held lines go out with the next drain), raising its budget
    first when given."""
    member = broker.get_member(conn, member_id)
    if tokens is not None or usd is not None:
        broker.set_member_budget(conn, member_id=member_id, budget=budget_of(tokens, usd))
    broker.resume_member(conn, member_id)
    messaging._restart_loop_if_needed(conn, [member.fleet_id], lambda _line: None)
    return broker.member_budget(conn, member_id)


def set_fleet_budget(
    conn: Connection, fleet_id: int, tokens: int | None, usd: float | None
) -> None:
    broker.set_fleet_budget(conn, fleet_id=fleet_id, budget=budget_of(tokens, usd))


__all__ = [
    "TestOutcome",
    "add_channel",
    "budget_of",
    "parse_events",
    "remove_channel",
    "resume_member",
    "set_fleet_budget",
    "set_member_budget",
    "test_channels",
    "unpriced_note",
]
