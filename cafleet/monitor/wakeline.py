"""The wake line typed into the monitor member's pane (runtime.md §5.7), exact grammar."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cafleet.text import sanitize_wake_field

_DASH = "\u2014"  # —


@dataclass(frozen=True, slots=True)
class WakeEntry:
    member_id: int
    name: str
    coding_agent: str
    unacked: int


def render_entry(entry: WakeEntry) -> str:
    return (
        f"{entry.member_id} ({sanitize_wake_field(entry.name)}; coding_agent={sanitize_wake_field(entry.coding_agent)}; "
        f"unacked={entry.unacked})"
    )


def render_roster(entries: Sequence[WakeEntry]) -> str:
    n = len(entries)
    if n == 0:
        return "no members to health-check."
    noun = "member" if n == 1 else "members"
    return f"health-check your {n} {noun}: " + ", ".join(render_entry(e) for e in entries) + "."


def build_wake_line(fleet_id: int, roster: Sequence[WakeEntry], director: WakeEntry) -> str:
    return (
        f"[cafleet] tick: fleet {fleet_id} {_DASH} {render_roster(roster)} "
        f"Director: {render_entry(director)}. Follow your monitor role protocol. "
        "Resume your work if something was still running."
    )
