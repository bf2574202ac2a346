"""Lost panes (docs/runtime.md §5.11): each tick, a member or monitor pane that tmux no longer
has is reported to the root Director once, as a message in its inbox, and marked lost
(`member_placements.lost_at`, which `member list` shows as `(gone)`).

A candidate is an active member other than the root Director whose concrete placement has no
`lost_at` and whose pane is not in the tick's live set. A tick takes at most `LOSS_BATCH` of
them, so it stays short whatever the fleet's size (the rest are the next ticks'). It makes one
non-blocking try of each one's pane lock (a busy lock means a delete, respawn or keystroke is
working on it: a later tick looks again), then, holding them, lists tmux's panes once; a pane
still missing (or only its id left, on a later server or in another process) is recorded, all
of them together with one report naming them (count and first names), in one transaction
(`broker.record_pane_losses`, which marks only a placement still active, the one the tick saw
and not yet marked). The sender is the fleet's active monitor member, or the Director itself when
the fleet has none.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from cafleet.monitor.notify import fire, payload

if TYPE_CHECKING:
    from cafleet.monitor.state import LoopState
    from cafleet.mux.locks import PaneLock
    from cafleet.records import Member

LOSS_BATCH = 200  # lost panes one tick records (~1 s with each one's lock taken)
NAMES_SHOWN = 10  # members a report of several losses names; the rest are counted


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


def losses_text(members: list[Member], fleet_id: int) -> str:
    """One tick's report: `loss_text` for one loss; for several, their count and the first
    `NAMES_SHOWN` (the monitor first, as its loss stops the health checks)."""
    panes = {m.member_id: m.placement.mux_pane_id if m.placement else None for m in members}
    if len(members) == 1:
        return loss_text(members[0], str(panes[members[0].member_id]))
    ordered = sorted(members, key=lambda m: (m.kind != "monitor", m.member_id))
    named = [
        f"{m.member_id} ({'the monitor' if m.kind == 'monitor' else m.name}) pane "
        f"{panes[m.member_id]}"
        for m in ordered[:NAMES_SHOWN]
    ]
    more = len(members) - len(named)
    listed = ", ".join(named) + (f" and {more} more" if more else "")
    monitor = (
        " One is the monitor, so no one health-checks the fleet."
        if ordered[0].kind == "monitor"
        else ""
    )
    return (
        f"[cafleet] {len(members)} members lost their panes: {listed}. tmux no longer has "
        f"them.{monitor} Their messages wait in their inboxes. Re-create each with: cafleet "
        "member respawn <M> (or remove it: cafleet member delete <M>); cafleet member list "
        f"{fleet_id} shows every pane gone."
    )


def report_losses(
    state: LoopState, live: frozenset[str], director_pane: str, members: list[Member]
) -> int:
    """Record and report the fleet's newly lost panes, at most `LOSS_BATCH` of them (see the
    module docstring); ``members``: the fleet's placed members (`broker.placed_members`),
    read once per tick. Returns how many it recorded."""
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
        return 0
    director = next((m for m in members if m.kind == "director"), None)
    if director is None:
        return 0  # the tick's Director check stops the loop
    monitor = broker.get_active_monitor(state.conn, fleet_id=state.fleet_id)
    sender = monitor.member_id if monitor is not None else director.member_id
    with contextlib.ExitStack() as held:
        locked = _lock_batch(state, candidates[:LOSS_BATCH], held)
        lost = _still_lost(state, locked)
        if not lost:
            return 0
        message_id, marked = broker.record_pane_losses(
            state.conn,
            losses=[
                (m.member_id, m.placement.pane_key, m.placement.created_at)  # type: ignore[union-attr, misc]
                for m in lost
            ],
            director_id=director.member_id,
            sender_id=sender,
            text=lambda ids: losses_text([m for m in lost if m.member_id in ids], state.fleet_id),
        )
    recorded = set(marked)
    for member in lost:
        if member.member_id in recorded:
            pane_id = member.placement.mux_pane_id  # type: ignore[union-attr]
            state.log(
                f"tick -> pane lost: member {member.member_id} pane {pane_id} "
                f"(reported to the Director as msg {message_id})"
            )
            text = loss_text(member, str(pane_id))
            key = f"{member.member_id}:{member.placement.created_at}"  # type: ignore[union-attr]
            data = payload("lost_pane", state.fleet_id, text, member.member_id, member.name)
            fire(state.conn, state.fleet_id, "lost_pane", key, {**data, "pane_id": pane_id})
    return len(recorded)


def _lock_batch(state: LoopState, batch: list[Member], held: contextlib.ExitStack) -> list[Member]:
    """One non-blocking try of each member's pane lock, kept on ``held``; the members whose
    lock was free (a stop requested ends the tries)."""
    from cafleet.mux import PaneKey
    from cafleet.mux.locks import try_pane_lock

    locked = []
    for member in batch:
        if state.stop_requested():
            break
        placement = member.placement
        assert placement is not None and placement.pane_key is not None
        lock: PaneLock | None = try_pane_lock(
            state.db_dir,
            PaneKey(*placement.pane_key),
            purpose=f"record loss member {member.member_id}",
        )
        if lock is not None:
            held.enter_context(lock)
            locked.append(member)
    return locked


def _still_lost(state: LoopState, locked: list[Member]) -> list[Member]:
    """Under the locks: the members whose own pane tmux still does not list (it came back, or
    the tick's live set was stale), from one listing for the whole batch. A pane with the id on
    a later server or running another process is not the member's (docs/runtime.md §1.8): its
    own is gone. A placement changed meanwhile (respawned, deleted, already marked) is left
    alone by the write itself."""
    from cafleet.mux import holds

    if not locked:
        return []
    listed = state.backend.list_panes()
    return [m for m in locked if m.placement is not None and not holds(listed, m.placement)]


__all__ = ["LOSS_BATCH", "loss_text", "losses_text", "report_losses"]
