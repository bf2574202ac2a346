"""The wake line typed into the monitor member's pane (runtime.md §5.7), exact grammar."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

_RETURN = "\u23ce"  # ⏎
_DASH = "\u2014"  # —


@dataclass(frozen=True, slots=True)
class WakeEntry:
    member_id: int
    name: str
    coding_agent: str
    unacked: int


def sanitize(text: str) -> str:
    """§5.7's sanitiser for NAME and AGENT, steps in order.

    1. CRLF, then each CR, LF, TAB, U+2028 and U+2029 become ⏎;
    2. the remaining C0 controls, U+007F and the C1 controls are removed;
    3. lone surrogates become U+FFFD;
    4. a backtick becomes U+02CB;
    5. ``$(`` becomes ``$`` + U+FE59.
    """
    text = text.replace("\r\n", _RETURN)
    for ch in ("\r", "\n", "\t", "\u2028", "\u2029"):
        text = text.replace(ch, _RETURN)
    out: list[str] = []
    for ch in text:
        code = ord(ch)
        if code < 0x20 or code == 0x7F or 0x80 <= code <= 0x9F:
            continue
        if 0xD800 <= code <= 0xDFFF:
            out.append("\ufffd")
            continue
        out.append(ch)
    text = "".join(out)
    text = text.replace("`", "\u02cb")
    return text.replace("$(", "$\ufe59")


def render_entry(entry: WakeEntry) -> str:
    return (
        f"{entry.member_id} ({sanitize(entry.name)}; coding_agent={sanitize(entry.coding_agent)}; "
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
