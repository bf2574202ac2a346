"""The wake line typed into the monitor member's pane (docs/runtime.md §5.7), exact grammar.

The roster is bounded (docs/runtime.md §5.7): entries are listed in id order while their text stays within
``ROSTER_LIMIT`` code points, and the rest are counted as `… and <K> more`, so a fleet of any
size gets one line of bounded length (at most about 2,400 code points with 100-character names).
`N` in `health-check your N members` is always the whole roster.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cafleet.text import ELLIPSIS, id_tag, sanitize_wake_field

_DASH = "\u2014"  # —
ROSTER_LIMIT = 2000  # code points of listed entries (with their ", " separators)


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


def _listed(entries: Sequence[WakeEntry], limit: int) -> str:
    """`entry, entry, …` within ``limit`` code points, then `… and <K> more` for the rest."""
    shown: list[str] = []
    size = 0
    for entry in entries:
        text = render_entry(entry)
        added = len(text) + (2 if shown else 0)
        if size + added > limit:
            break
        shown.append(text)
        size += added
    rest = len(entries) - len(shown)
    if rest:
        shown.append(f"{ELLIPSIS} and {rest} more")
    return ", ".join(shown)


def render_roster(entries: Sequence[WakeEntry], limit: int = ROSTER_LIMIT) -> str:
    n = len(entries)
    if n == 0:
        return "no members to health-check."
    noun = "member" if n == 1 else "members"
    return f"health-check your {n} {noun}: " + _listed(entries, limit) + "."


TASKS_SHOWN = 10  # overdue tasks a wake names; the rest are counted


def render_overdue(overdue: Sequence[tuple[int, int | None]], minutes: int) -> str:
    """` Tasks in progress over <M> min: <T> (member <M>), …` for ``(task_id, assignee)``
    pairs; empty when there are none."""
    if not overdue:
        return ""
    named = [f"{t} (member {m})" for t, m in overdue[:TASKS_SHOWN]]
    rest = len(overdue) - len(named)
    more = f" and {rest} more" if rest else ""
    return f" Tasks in progress over {minutes} min: {', '.join(named)}{more}."


def build_wake_line(
    fleet_id: int,
    roster: Sequence[WakeEntry],
    director: WakeEntry,
    wake_id: str | None = None,
    overdue: Sequence[tuple[int, int | None]] = (),
    overdue_minutes: int = 0,
) -> str:
    """The wake line; ``wake_id`` (`text.line_id`) ends it as ` [wake <id>]`, which is how the
    screen check recognises this wake whatever the pane's height (docs/runtime.md §5.7).
    ``overdue``: the tasks in progress longer than ``overdue_minutes``, named after the
    Director."""
    tag = "" if wake_id is None else " " + id_tag("wake", wake_id)
    return (
        f"[cafleet] tick: fleet {fleet_id} {_DASH} {render_roster(roster)} "
        f"Director: {render_entry(director)}.{render_overdue(overdue, overdue_minutes)} "
        "Follow your monitor role protocol. "
        f"Resume your work if something was still running.{tag}"
    )
