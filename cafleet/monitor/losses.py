"""Lost panes (docs/runtime.md §5.11): each tick, a member or monitor pane that tmux no longer
has is reported to the root Director once, as a message in its inbox, and marked lost
(`member_placements.lost_at`, which `member list` shows as `(gone)`).

A candidate is an active member other than the root Director whose concrete placement has no
`lost_at` and whose pane is not in the tick's live set. Under one non-blocking try of that pane's
lock (a busy lock means a delete, respawn or keystroke is working on it: the next tick looks
again) the member is re-read and the pane probed; only a pane tmux says is gone is recorded,
together with its report, in one transaction (`broker.record_pane_loss`). The sender is the
fleet's active monitor member, or the Director itself when the fleet has none.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cafleet.monitor.state import LoopState
    from cafleet.records import Member


def loss_text(member: Member, pane_id: str) -> str:
    """The report's body (docs/runtime.md §5.11)."""
    mid = member.member_id
    if member.kind == "monitor":
        return (
            f"[cafleet] the monitor (member {mid}) lost its pane {pane_id}: tmux no longer has "
            "it, so no one health-checks the fleet. Its messages wait in its inbox. Re-create "
            f"it with: cafleet member respawn {mid}"
        )
    return (
        f"[cafleet] member {mid} ({member.name}) lost its pane {pane_id}: tmux no longer has "
        f"it. Its messages wait in its inbox. Re-create it with: cafleet member respawn {mid} "
        f"(or remove it: cafleet member delete {mid})"
    )


def report_losses(
    state: LoopState, live: frozenset[str], director_pane: str, members: list[Member]
) -> None:
    """Record and report every newly lost pane of the fleet (see the module docstring);
    ``members``: the fleet's placed members (`broker.placed_members`), read once per tick."""
    from cafleet import broker
    from cafleet.mux import pane_state

    candidates = [
        m
        for m in members
        if m.kind != "director"
        and m.placement is not None
        and m.placement.backend == state.backend.name
        and m.placement.lost_at is None
        and pane_state(m.placement, live) == "gone"
        and m.placement.mux_pane_id != director_pane
    ]
    if not candidates:
        return
    director = next((m for m in members if m.kind == "director"), None)
    if director is None:
        return  # the tick's Director check stops the loop
    monitor = broker.get_active_monitor(state.conn, fleet_id=state.fleet_id)
    sender = monitor.member_id if monitor is not None else director.member_id
    for member in candidates:
        if state.stop_requested():
            return
        _report_one(state, member, director.member_id, sender)


def _report_one(state: LoopState, member: Member, director_id: int, sender: int) -> None:
    from cafleet import broker
    from cafleet.broker.errors import MemberNotFound
    from cafleet.mux import PaneGone, PaneKey, owner_of, replaced
    from cafleet.mux.locks import try_pane_lock

    placement = member.placement
    assert placement is not None and placement.pane_key is not None
    pane_id = placement.pane_key[2]
    lock = try_pane_lock(
        state.db_dir, PaneKey(*placement.pane_key), purpose=f"record loss member {member.member_id}"
    )
    if lock is None:
        return
    with lock:
        try:
            fresh = broker.get_member(state.conn, member.member_id)
        except MemberNotFound:
            return
        p = fresh.placement
        if (
            not fresh.is_active
            or p is None
            or (p.pane_key, p.created_at) != (placement.pane_key, placement.created_at)
            or p.lost_at
        ):
            return
        try:
            status = state.backend.pane_status(pane_id)
        except PaneGone:
            pass
        else:
            # A pane of a later server or another process with its id is not the member's
            # (docs/runtime.md §1.8): its own is gone. Else it came back or the set was stale.
            if not replaced(owner_of(placement), status.server, status.pane_pid):
                return
        message_id = broker.record_pane_loss(
            state.conn,
            member_id=member.member_id,
            pane_key=placement.pane_key,
            director_id=director_id,
            sender_id=sender,
            text=loss_text(fresh, pane_id),
        )
    if message_id is not None:
        state.log(
            f"tick -> pane lost: member {member.member_id} pane {pane_id} "
            f"(reported to the Director as msg {message_id})"
        )


__all__ = ["loss_text", "report_losses"]
