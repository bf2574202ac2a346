"""Doctor's member-permissions rows (docs/cli.md §3.3): rules in the agents' own settings that would
block the cafleet commands members run.

Members run `cafleet message …`; the monitor also runs `cafleet monitor scan …` and
`cafleet member ping …` (docs/runtime.md §2.2). Each agent's package checks its own settings the
way the agent decides (`CodingAgent.check_permissions`, `cafleet/agents/<name>/rules.py`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

MEMBER_COMMANDS: tuple[str, ...] = (
    "cafleet message poll 1",
    "cafleet message ack 1",
    "cafleet message send --from-member-id 1 --to-member-id 2 done",
    "cafleet message wait 1",
)
MONITOR_COMMANDS: tuple[str, ...] = ("cafleet monitor scan 1 --json", "cafleet member ping 1")
NEEDED_COMMANDS = MEMBER_COMMANDS + MONITOR_COMMANDS


@dataclass(frozen=True, slots=True)
class Blocking:
    file: str
    rule: str
    command: str  # the first needed command it blocks


@dataclass
class PermissionRow:
    coding_agent: str
    checked: list[str] = field(default_factory=list)  # files read
    blocking: list[Blocking] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and not self.blocking


# --- wildcard patterns, as several agents write them ----------------------------------------------


def wildcard_matches(pattern: str, command: str) -> bool:
    """`*` matches any run of characters (spaces included); everything else is literal."""
    regex = ".*".join(re.escape(part) for part in pattern.split("*"))
    return re.fullmatch(regex, command, re.DOTALL) is not None


__all__ = [
    "MEMBER_COMMANDS",
    "MONITOR_COMMANDS",
    "NEEDED_COMMANDS",
    "Blocking",
    "PermissionRow",
    "wildcard_matches",
]
