"""`member explain` (docs/cli.md §2.39) and doctor's hooks lines: each signal of a member's
state with its time; the state is chosen by `cafleet.workflows.witness` (docs/runtime.md
§4.12)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple

from cafleet import broker
from cafleet.db.timefmt import format_ts, utcnow
from cafleet.delivery.screens import Why, classify_why
from cafleet.mux import MultiplexerError
from cafleet.workflows.supervision import check_panes
from cafleet.workflows.witness import HOOK_FRESH, Choice, choose

if TYPE_CHECKING:
    from cafleet.broker import HookSignal
    from cafleet.db.runtime import Connection
    from cafleet.mux import Multiplexer
    from cafleet.records import Placement


class Signal(NamedTuple):
    source: str  # "hook" or "screen"
    state: str
    at: str | None
    detail: str

    def as_dict(self) -> dict[str, Any]:
        return {"source": self.source, "state": self.state, "at": self.at, "detail": self.detail}


class Explanation(NamedTuple):
    member_id: int
    state: str | None
    source: str | None
    signals: tuple[Signal, ...]
    disagreement: bool

    def as_dict(self) -> dict[str, Any]:
        return {
            "member_id": self.member_id,
            "state": self.state,
            "source": self.source,
            "signals": [s.as_dict() for s in self.signals],
        }


def explain_member(conn: Connection, member_id: int, *, now: datetime | None = None) -> Explanation:
    """The member's state, its source and each signal with its time; the screen's signal names
    the cue that matched and its line (`MemberNotFound` for an unknown member)."""
    member = broker.get_member(conn, member_id)
    hook = broker.hook_signal(conn, member_id)
    why: list[Why] = []
    seen: list[str] = []

    def probe(backend: Multiplexer, placement: Placement, spawned: bool) -> str | None:
        pane_id = placement.mux_pane_id
        if pane_id is None:
            return None
        try:
            screen = backend.screen(pane_id)
        except MultiplexerError:
            return None
        seen.append(format_ts(utcnow()))
        why.append(classify_why(placement.coding_agent, screen, spawned=spawned))
        return why[-1].state

    pane = check_panes([member], agent_state=probe).panes.get(member_id)
    signals: list[Signal] = []
    if hook is not None:
        detail = f"{hook.event}: {hook.text}" if hook.text else hook.event
        signals.append(Signal("hook", hook.state, hook.at, detail))
    screen: str | None = None
    if why:
        screen = why[0].state
        detail = f"cue {why[0].cue!r} on line {why[0].line!r}" if why[0].cue else "no cue matched"
        signals.append(Signal("screen", screen, seen[0], detail))
    elif pane is not None:
        signals.append(Signal("screen", "unknown", None, f"pane {pane.text}"))
    choice = choose(hook, screen, now=now)
    return Explanation(member_id, choice.state, choice.source, tuple(signals), choice.disagreement)


class HookLine(NamedTuple):
    """Doctor's line about one live member's hooks (docs/cli.md §2.2): its last report, or
    none yet (then the line names the fix)."""

    member_id: int
    name: str
    signal: HookSignal | None

    @property
    def line(self) -> str:
        s = self.signal
        if s is None:
            return (
                f"member {self.member_id} ({self.name}): no hook has reported yet, so its screen "
                f"alone decides its state; if it has had a turn, run 'cafleet member respawn "
                f"{self.member_id}' (a member spawned before hooks existed has none)"
            )
        return f"member {self.member_id} ({self.name}): last hook {s.at} ({s.event}: {s.state})"

    def as_dict(self) -> dict[str, Any]:
        s = self.signal
        return {
            "member_id": self.member_id,
            "last_hook_at": None if s is None else s.at,
            "state": None if s is None else s.state,
            "event": None if s is None else s.event,
        }


def hook_lines(conn: Connection, fleet_id: int, live: dict[int, str]) -> list[HookLine]:
    """One line per member in ``live`` (member id -> name: members whose pane is alive and
    whose agent installs hooks), by member id."""
    signals = broker.fleet_hook_signals(conn, fleet_id)
    return [HookLine(m, live[m], signals.get(m)) for m in sorted(live)]


__all__ = [
    "HOOK_FRESH",
    "Choice",
    "Explanation",
    "HookLine",
    "Signal",
    "choose",
    "explain_member",
    "hook_lines",
]
