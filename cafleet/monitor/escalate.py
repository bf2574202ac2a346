"""Blocked members (docs/runtime.md §5.12): each tick, a member whose pane has shown the same
permission prompt or question for `CAFLEET_ESCALATE_AFTER` seconds is reported to the root
Director once, as a message in its inbox (never typed into its pane).

"The same prompt" is the prompt's digest (`cafleet.delivery.screens.prompts`): the first tick that
sees a digest on a member's screen starts its clock; the report goes out at the first tick
past the threshold and the digest is remembered, so later ticks stay quiet. A screen without a
prompt forgets the member, so a prompt that comes back later is a new one. The clocks live in
the loop process (no schema change); a restarted loop starts them again and, before reporting,
looks for the same report still un-ACKed in the Director's inbox, so a restart does not repeat
a report the Director has not read yet.

Reading costs one `list-panes` (with each pane's session and window: a pane that is not the
placement's is never captured, docs/runtime.md §1.8) and one capture per member pane, and only
runs when the fleet has member panes.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import TYPE_CHECKING

from cafleet import broker
from cafleet.db.timefmt import parse_ts, utcnow
from cafleet.errors import CafleetError
from cafleet.monitor.answerlinks import new_link
from cafleet.monitor.notify import fire, payload

if TYPE_CHECKING:
    from cafleet.broker import HookSignal
    from cafleet.delivery.screens.prompts import Prompt
    from cafleet.monitor.state import LoopState
    from cafleet.records import Member


def prompt_marker(member_id: int, digest: str) -> str:
    """The words every report of one prompt carries (and the restart check looks for)."""
    return f"member {member_id} prompt {digest}"


def escalation_text(member: Member, pane_id: str, prompt: Prompt, waited: float) -> str:
    """The report's body (docs/runtime.md §5.12)."""
    mid = member.member_id
    head = (
        f"[cafleet] {prompt_marker(mid, prompt.digest)}: member {mid} ({member.name}) has been "
        f"waiting for an answer for {int(waited)}s in pane {pane_id}."
    )
    if not prompt.readable:
        shown = "\n".join(f"  {line}" for line in prompt.raw)
        return (
            f"{head} cafleet cannot read its prompt, so here are its last lines as the screen "
            f"shows them:\n{shown}\nAnswer it in the pane yourself (cafleet member answer "
            "only picks a choice it can read)."
        )
    asked = [f"  {d}" for d in prompt.details]  # in the screen's order, question and details
    asked.insert(0 if prompt.question_first else len(asked), f"  {prompt.question}")
    lines = [head, *asked, *(f"  {c.number}. {c.label}" for c in prompt.choices)]
    lines.append(
        f"Answer with: cafleet member answer {mid} <choice> --prompt {prompt.digest}"
        f"  (<choice>: {_numbers(prompt)})"
    )
    return "\n".join(lines)


def hook_waited(hook: HookSignal | None) -> float:
    """How long the member's own hook says it has waited for the user (docs/runtime.md
    §4.12): a prompt the screen shows is timed from that report, not from the tick that first
    saw it; 0 without such a report (or one from the future, or over an hour old)."""
    if hook is None or hook.state != "awaiting_user":
        return 0.0
    at = parse_ts(hook.at)
    waited = 0.0 if at is None else (utcnow() - at).total_seconds()
    return waited if 0 < waited < 3600 else 0.0


def disagreement(
    hook: HookSignal | None, prompt_shown: bool, now: datetime | None = None
) -> str | None:
    """What the screen says against an older hook report about waiting for the user (the
    screen wins, docs/runtime.md §4.12); None when they agree, when the report is still fresh,
    or when a tool's `working` report precedes the prompt it drew."""
    if hook is None or (hook.state == "awaiting_user") == prompt_shown:
        return None
    if prompt_shown and hook.state == "working":
        return None
    if parse_ts(hook.at) is None or hook.fresh(now):
        return None
    shown = "a prompt" if prompt_shown else "no prompt"
    return f"its hook said {hook.state} at {hook.at} but its screen shows {shown}: the screen wins"


def _numbers(prompt: Prompt) -> str:
    """`1, 2 or 3`: the numbers a choice may be given by."""
    numbers = [str(c.number) for c in prompt.choices]
    return numbers[0] if len(numbers) == 1 else f"{', '.join(numbers[:-1])} or {numbers[-1]}"


def escalate_prompts(
    state: LoopState, live: frozenset[str], director_pane: str, members: list[Member]
) -> None:
    """Report every member prompt that reached the threshold (see the module docstring);
    ``members``: the fleet's placed members, read once per tick."""
    from cafleet.delivery.screens.prompts import read_prompt
    from cafleet.monitor.state import SeenPrompt
    from cafleet.mux import MultiplexerError, holds, is_owners_place, owner_of

    candidates = [
        m
        for m in members
        if m.kind != "director"
        and m.placement is not None
        and m.placement.backend == state.backend.name
        and m.placement.lost_at is None
        and holds(live, m.placement)
        and m.placement.mux_pane_id != director_pane
    ]
    for gone in set(state.prompts_seen) - {m.member_id for m in candidates}:
        state.prompts_seen.pop(gone, None)
    if not candidates:
        return
    places = state.backend.pane_places()
    hooks = broker.fleet_hook_signals(state.conn, state.fleet_id)
    director = next((m for m in members if m.kind == "director"), None)
    for member in candidates:
        if state.stop_requested() or not state.beat_if_due():
            return
        placement = member.placement
        assert placement is not None and placement.mux_pane_id is not None
        pane_id = placement.mux_pane_id
        where = places.get(pane_id)
        if (
            where is None
            or not holds(places, placement)
            or not is_owners_place(state.backend, owner_of(placement), where)
        ):
            state.prompts_seen.pop(member.member_id, None)
            continue
        try:
            screen = state.backend.screen(pane_id)
        except MultiplexerError:
            continue  # the next tick looks again
        prompt = read_prompt(placement.coding_agent, screen, spawned=True)
        _log_disagreement(state, member.member_id, hooks.get(member.member_id), prompt is not None)
        if prompt is None:
            state.prompts_seen.pop(member.member_id, None)
            continue
        now = time.monotonic()
        seen = state.prompts_seen.get(member.member_id)
        if seen is None or seen.digest != prompt.digest:
            since = now - hook_waited(hooks.get(member.member_id))
            seen = state.prompts_seen[member.member_id] = SeenPrompt(prompt.digest, since)
        if seen.reported or now - seen.since < state.escalate_after or director is None:
            continue
        seen.reported = True
        _report(state, member, director.member_id, pane_id, prompt, now - seen.since)


def _log_disagreement(
    state: LoopState, member_id: int, hook: HookSignal | None, prompt_shown: bool
) -> None:
    """Log a hook report the screen contradicts, once per report."""
    said = disagreement(hook, prompt_shown)
    if said is None or hook is None or state.disagreements_logged.get(member_id) == hook.at:
        return
    state.disagreements_logged[member_id] = hook.at
    state.log(f"tick -> member {member_id}: {said}")


def _report(
    state: LoopState, member: Member, director_id: int, pane_id: str, prompt: Prompt, waited: float
) -> None:
    marker = prompt_marker(member.member_id, prompt.digest)
    if any(marker in m.text for m in broker.unacked_deliveries(state.conn, director_id)):
        state.log(f"tick -> prompt of member {member.member_id} already reported ({marker})")
        return
    monitor = broker.get_active_monitor(state.conn, fleet_id=state.fleet_id)
    sender = monitor.member_id if monitor is not None else director_id
    sent = broker.send_message(
        state.conn,
        from_member_id=sender,
        to_member_id=director_id,
        text=escalation_text(member, pane_id, prompt, waited),
    )
    state.log(
        f"tick -> escalated: member {member.member_id} waits at prompt {prompt.digest} "
        f"(reported to the Director as msg {sent.message_id})"
    )
    _fire(state, member, prompt, sent.text, sent.message_id)


def _fire(state: LoopState, member: Member, prompt: Prompt, text: str, report_id: int) -> None:
    """The `escalation` event (docs/cli.md §2.35): one per prompt, with an answer link for
    each channel that knows where the WebUI is."""
    # Keyed by the Director's report too: the same prompt asked again later is a new event.
    key = f"{member.member_id}:{prompt.digest}:{report_id}"
    data = payload(
        "escalation",
        state.fleet_id,
        text,
        member.member_id,
        member.name,
        question=prompt.question if prompt.readable else None,
        details=list(prompt.details),
        prompt_id=prompt.digest,
        choices=[{"number": c.number, "label": c.label} for c in prompt.choices],
        answer_url=None,
    )
    channels = [c for c in broker.notify_channels(state.conn, state.fleet_id) if c.answer_base]
    if not channels or not prompt.readable:
        fire(state.conn, state.fleet_id, "escalation", key, data)
        return
    for channel in broker.notify_channels(state.conn, state.fleet_id):
        try:
            url = None
            if channel.answer_base and channel.takes("escalation"):
                url = new_link(state.conn, channel.answer_base, member.member_id, prompt.digest)
            broker.record_event(
                state.conn,
                fleet_id=state.fleet_id,
                event="escalation",
                event_key=f"escalation:{key}",
                payload={**data, "answer_url": url},
                channel_id=channel.channel_id,
            )
        except CafleetError as exc:
            state.log(
                f"tick -> escalation event not recorded for channel {channel.channel_id}: {exc}"
            )


__all__ = ["escalate_prompts", "escalation_text", "prompt_marker"]
