"""Budgets (docs/cli.md §2.36, docs/cli.md §2.36): each tick, a member whose usage reached
its budget, or every member of a fleet whose summed usage reached the fleet's, is paused: its
lines wait, stored (`cafleet.delivery.drains`), the root Director gets one message and the
`budget` event fires. `member resume` lifts the pause.

Usage is what `member usage` reads (the agents' own records, read incrementally); tokens are the
sum of its four counts, dollars its cost estimate. A member whose model has no price is held to
its token budget only. Only `member` kinds are paused: never the Director or the monitor.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cafleet import broker
from cafleet.monitor.notify import fire, payload

if TYPE_CHECKING:
    from cafleet.monitor.state import LoopState
    from cafleet.records import Member
    from cafleet.records.notify import Budget


def reached(budget: Budget, tokens: int, usd: float | None) -> str | None:
    """What reached ``budget`` (`tokens 1200/1000`), or None."""
    if budget.tokens is not None and tokens >= budget.tokens:
        return f"{tokens} tokens of a {budget.tokens}-token budget"
    if budget.usd_micros is not None and usd is not None and usd * 1_000_000 >= budget.usd_micros:
        return f"${usd:.4f} of a ${budget.usd_micros / 1_000_000:.2f} budget"
    return None


def pause_text(member: Member, what: str, fleet_wide: bool) -> str:
    mid = member.member_id
    whose = "the fleet's budget" if fleet_wide else "its budget"
    return (
        f"[cafleet] member {mid} ({member.name}) is paused: it used {what} ({whose}). Its "
        f"messages wait in its inbox, untyped. Resume it with: cafleet member resume {mid} "
        "(--budget-tokens N or --budget-usd X to raise the budget)"
    )


def check_budgets(state: LoopState, members: list[Member]) -> list[int]:
    """Pause the fleet's members whose budget (or the fleet's) is reached; returns their ids."""
    own = {b.member_id: b for b in broker.fleet_member_budgets(state.conn, state.fleet_id)}
    fleet = broker.fleet_budget(state.conn, state.fleet_id)
    budgeted = [
        m
        for m in members
        if m.kind == "member"
        and m.is_active
        and (fleet is not None or (m.member_id in own and _has(own[m.member_id].budget)))
    ]
    if not budgeted:
        return []
    used = _usage(state, budgeted if fleet is None else [m for m in members if m.kind == "member"])
    paused: list[int] = []
    for member in budgeted:
        row = own.get(member.member_id)
        if row is None or row.paused_at is not None:
            continue
        tokens, usd = used.get(member.member_id, (0, None))
        what = reached(row.budget, tokens, usd)
        if what is not None and _pause(state, member, what, fleet_wide=False):
            paused.append(member.member_id)
    if fleet is not None:
        total = sum(t for t, _ in used.values())
        costs = [u for _, u in used.values()]
        usd_total = None if any(c is None for c in costs) else sum(c for c in costs if c)
        what = reached(fleet, total, usd_total)
        if what is not None:
            for member in budgeted:
                row = own.get(member.member_id)
                if member.member_id in paused or (row is not None and row.paused_at is not None):
                    continue
                if _pause(state, member, what, fleet_wide=True):
                    paused.append(member.member_id)
    return paused


def _has(budget: Budget) -> bool:
    return budget.tokens is not None or budget.usd_micros is not None


def _usage(state: LoopState, members: list[Member]) -> dict[int, tuple[int, float | None]]:
    """Each member's tokens and cost (None: no price for a model it used); unknown usage
    counts as nothing yet."""
    from cafleet.sessions import prices, usage

    subjects = [
        usage.Subject(
            m.member_id, m.placement.coding_agent, broker.session_id(state.conn, m.member_id)
        )
        for m in members
        if m.placement is not None and m.placement.coding_agent is not None
    ]
    try:
        table = prices.load()
    except prices.PriceFileError:
        table = None
    out: dict[int, tuple[int, float | None]] = {}
    for found in usage.read_usage(state.db_dir, subjects):
        if found.tally is None:
            continue
        usd = None if table is None else prices.cost(found.tally, table)
        out[found.member_id] = (sum(found.tally.totals()), usd)
    return out


def _pause(state: LoopState, member: Member, what: str, *, fleet_wide: bool) -> bool:
    """Pause one member; only the call that paused it tells the Director and fires the event."""
    if not broker.pause_member(state.conn, member_id=member.member_id, reason="budget"):
        return False
    text = pause_text(member, what, fleet_wide)
    fleet = broker.get_fleet(state.conn, state.fleet_id)
    director = fleet.director_member_id if fleet is not None else None
    if director is not None:
        monitor = broker.get_active_monitor(state.conn, fleet_id=state.fleet_id)
        sender = monitor.member_id if monitor is not None else director
        broker.send_message(state.conn, from_member_id=sender, to_member_id=director, text=text)
    paused = broker.member_budget(state.conn, member.member_id)
    key = f"{member.member_id}:{paused.paused_at if paused else ''}"
    fire(
        state.conn,
        state.fleet_id,
        "budget",
        key,
        payload("budget", state.fleet_id, text, member.member_id, member.name),
    )
    state.log(f"tick -> budget: member {member.member_id} paused ({what})")
    return True


__all__ = ["check_budgets", "pause_text", "reached"]
