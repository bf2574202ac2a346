"""`cafleet notify …` (docs/cli.md §2.35) and the budget commands `member budget`, `member
resume` and `fleet budget` (docs/cli.md §2.36)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from cafleet import broker
from cafleet.cli.app import fleet_group, member_group, notify_group
from cafleet.cli.context import invocation
from cafleet.cli.params import ID, budget_tokens, budget_usd, id_argument, id_option, json_option
from cafleet.monitor.notify import redact
from cafleet.output import out, out_json, out_lines
from cafleet.records.notify import CHANNEL_KINDS, EVENTS
from cafleet.workflows import notify as workflow
from cafleet.workflows.errors import WorkflowError

if TYPE_CHECKING:
    from cafleet.records.notify import Channel, MemberBudget


def channel_dict(channel: Channel) -> dict[str, Any]:
    return {
        "channel_id": channel.channel_id,
        "fleet_id": channel.fleet_id,
        "kind": channel.kind,
        "url": None if channel.target is None else redact(channel.target),
        "events": list(channel.events) if channel.events is not None else list(EVENTS),
        "answer_base": None if channel.answer_base is None else redact(channel.answer_base),
        "failures": channel.failures,
        "failing": channel.failing_since is not None,
        "last_error": channel.last_error,
    }


def channel_line(channel: Channel) -> str:
    d = channel_dict(channel)
    events = "all events" if channel.events is None else ",".join(channel.events)
    health = "ok"
    if channel.failing_since is not None:
        health = f"failing since {channel.failing_since}: {channel.last_error}"
    elif channel.failures:
        health = f"{channel.failures} failed tries: {channel.last_error}"
    url = f" {d['url']}" if d["url"] else ""
    return f"channel {channel.channel_id} (fleet {channel.fleet_id}) {channel.kind}{url} [{events}] {health}"


@notify_group.command(
    "add",
    help="Add a notification channel to a fleet.",
)
@id_option("--fleet-id", "The fleet.")
@click.argument("kind", type=click.Choice(CHANNEL_KINDS), metavar="KIND", help="Channel kind.")
@click.argument("url", required=False, metavar="[URL]", help="Its URL (not for desktop).")
@click.option("--events", default=None, metavar="E,…", help="Only these events.")
@click.option(
    "--answer-base",
    default=None,
    metavar="URL",
    help="WebUI URL for answer links.",
)
@json_option
def notify_add(
    fleet_id: int,
    kind: str,
    url: str | None,
    events: str | None,
    answer_base: str | None,
    as_json: bool,
) -> None:
    channel = workflow.add_channel(
        invocation().connection(),
        fleet_id=fleet_id,
        kind=kind,
        url=url,
        events=events,
        answer_base=answer_base,
    )
    if as_json:
        out_json(channel_dict(channel))
    else:
        out(f"Added {channel_line(channel)}")


@notify_group.command("list", help="List notification channels.")
@id_option("--fleet-id", "The fleet.", required=False)
@json_option
def notify_list(fleet_id: int | None, as_json: bool) -> None:
    channels = broker.notify_channels(invocation().connection(), fleet_id)
    if as_json:
        out_json([channel_dict(c) for c in channels])
    elif channels:
        out_lines([channel_line(c) for c in channels])
    else:
        out("No channels.")


@notify_group.command("remove", help="Remove a channel.")
@id_argument("channel_id", "Channel ID.")
def notify_remove(channel_id: int) -> None:
    removed = workflow.remove_channel(invocation().connection(), channel_id)
    out(f"Removed channel {removed.channel_id}.")


@notify_group.command(
    "test",
    help="Send a test event to the fleet's channels now.",
)
@id_option("--fleet-id", "The fleet.")
def notify_test(fleet_id: int) -> None:
    outcomes = workflow.test_channels(invocation().connection(), fleet_id)
    failed = 0
    for outcome in outcomes:
        c = outcome.channel
        if outcome.error is None:
            out(f"channel {c.channel_id} {c.kind}: sent")
        else:
            failed += 1
            out(f"channel {c.channel_id} {c.kind}: failed: {outcome.error}")
    if failed:
        raise WorkflowError(f"{failed} of {len(outcomes)} channels failed the test")


def _budget_text(found: MemberBudget | None) -> str:
    if found is None or (found.budget.tokens is None and found.budget.usd_micros is None):
        limits = "no budget"
    else:
        parts = []
        if found.budget.tokens is not None:
            parts.append(f"{found.budget.tokens} tokens")
        if found.budget.usd is not None:
            parts.append(f"${found.budget.usd:.2f}")
        limits = "budget " + " or ".join(parts)
    state = "paused (budget)" if found is not None and found.paused_at is not None else "running"
    return f"{limits}, {state}"


@member_group.command(
    "budget",
    help="Set a member's budget (neither option: none).",
)
@id_argument("member_id", "Member ID.")
@budget_tokens
@budget_usd
def member_budget(member_id: int, budget_tokens: int | None, budget_usd: float | None) -> None:
    found = workflow.set_member_budget(
        invocation().connection(), member_id, budget_tokens, budget_usd
    )
    out(f"Member {member_id}: {_budget_text(found)}.")


@member_group.command(
    "resume",
    help="Lift a member's budget pause.",
)
@id_argument("member_id", "Member ID.")
@budget_tokens
@budget_usd
def member_resume(member_id: int, budget_tokens: int | None, budget_usd: float | None) -> None:
    found = workflow.resume_member(invocation().connection(), member_id, budget_tokens, budget_usd)
    out(f"Member {member_id}: {_budget_text(found)}.")


@fleet_group.command(
    "budget",
    help="Set a fleet's budget (neither option: none).",
)
@click.argument("fleet_id", type=ID, metavar="FLEET_ID", help="Fleet ID.")
@budget_tokens
@budget_usd
def fleet_budget(fleet_id: int, budget_tokens: int | None, budget_usd: float | None) -> None:
    workflow.set_fleet_budget(invocation().connection(), fleet_id, budget_tokens, budget_usd)
    if budget_tokens is None and budget_usd is None:
        out(f"Fleet {fleet_id}: no budget.")
        return
    parts = [f"{budget_tokens} tokens"] if budget_tokens is not None else []
    parts += [f"${budget_usd:.2f}"] if budget_usd is not None else []
    out(f"Fleet {fleet_id}: budget {' or '.join(parts)}.")


__all__ = ["channel_dict", "channel_line"]
