"""The coding agents' own session records (docs/runtime.md §9): which session a member's agent
runs, whether the agent still has it, and the token usage it recorded.

Standard library only. Each agent's package (`cafleet/agents/<name>/records.py`) reads its
agent's records and nothing in them but what these jobs need: session ids, the directory a session ran
in, the first user message (only to compare it with the member's spawn prompt) and usage.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from cafleet.agents.registry import find_agent
from cafleet.errors import CafleetError


class RecordUnreadable(CafleetError):
    """A record that is missing, was rotated or cannot be read: its usage is `unknown`."""


@dataclass(frozen=True, slots=True)
class SessionRecord:
    """One session of an agent: its id, the file that holds it (Claude Code's and Codex's jsonl,
    opencode's database), the directory it ran in and when it was created (epoch seconds)."""

    session_id: str
    path: str
    cwd: str | None
    created: float


# The four token counts of a tally, in order: uncached input, output, cache reads, cache writes.
COUNTS: tuple[str, ...] = ("input", "output", "cache_read", "cache_write")


@dataclass
class Tally:
    """Tokens per model (model name -> the four `COUNTS`)."""

    by_model: dict[str, list[int]] = field(default_factory=dict)

    def add(self, model: str, counts: tuple[int, int, int, int]) -> None:
        row = self.by_model.setdefault(model or "unknown", [0, 0, 0, 0])
        for i, value in enumerate(counts):
            row[i] += value

    def merge(self, other: Tally) -> None:
        for model, counts in other.by_model.items():
            self.add(model, (counts[0], counts[1], counts[2], counts[3]))

    def totals(self) -> tuple[int, int, int, int]:
        sums = [0, 0, 0, 0]
        for counts in self.by_model.values():
            for i, value in enumerate(counts):
                sums[i] += value
        return (sums[0], sums[1], sums[2], sums[3])

    def to_json(self) -> dict[str, list[int]]:
        return {model: list(counts) for model, counts in self.by_model.items()}

    @classmethod
    def from_json(cls, data: Any) -> Tally:
        tally = cls()
        if isinstance(data, dict):
            for model, counts in data.items():
                if isinstance(counts, list) and len(counts) == 4:
                    tally.by_model[str(model)] = [_count(c) for c in counts]
        return tally


# Usage is also kept per span of this many seconds of the time it was recorded, so a task can
# be given what its assignee used while it was in progress (cafleet.workflows.tasks).
SPAN_SECONDS = 10


def add_timed(state: dict[str, Any], at: float | None, model: str, counts: Any) -> None:
    """Add ``counts`` to ``state["timed"]``, under the span holding ``at`` (epoch seconds); a
    record without a time is in the tally only."""
    timed = state.setdefault("timed", {})
    if at is None:
        return
    row = timed.setdefault(str(int(at // SPAN_SECONDS)), {})
    Tally(row).add(model, counts)


def timed_between(timed: Mapping[str, Any], start: float, end: float) -> Tally:
    """The tally of the spans that overlap ``[start, end]`` (so to `SPAN_SECONDS`)."""
    tally = Tally()
    first, last = int(start // SPAN_SECONDS), int(end // SPAN_SECONDS)
    if last - first < len(timed):  # a short task of a long session: look its spans up
        keys: Any = (str(k) for k in range(first, last + 1))
    else:
        keys = (k for k in timed if k.isdigit() and first <= int(k) <= last)
    for key in keys:
        if key in timed:
            tally.merge(Tally.from_json(timed[key]))
    return tally


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def count(value: Any) -> int:
    """A token count from a record: a non-negative int, anything else 0."""
    return _count(value)


class AgentRecords(Protocol):
    """What each agent module provides."""

    def find(
        self, env: Mapping[str, str], *, since: float, cwd: str | None, prompt: str
    ) -> list[SessionRecord]: ...

    def locate(self, env: Mapping[str, str], session_id: str) -> SessionRecord | None: ...

    def read_usage(self, record: SessionRecord, state: dict[str, Any]) -> dict[str, Any]: ...


def records_of(agent: str) -> AgentRecords:
    """The record reader of ``agent`` (its package's `records`); ValueError for a name
    cafleet does not know."""
    found = find_agent(agent)
    if found is None:
        raise ValueError(f"unknown coding agent {agent!r}")
    return found.records


def epoch(value: Any) -> float | None:
    """Epoch seconds of a record's time: ISO 8601 text, or a number (milliseconds when large)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return value / 1000 if value > 1e11 else float(value)
    if isinstance(value, str):
        from datetime import datetime

        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


_SPACE = re.compile(r"\s+")


def prompt_matches(prompt: str, text: str) -> bool:
    """Whether a session's first user message is the member's spawn prompt: the rendered prompt,
    whitespace collapsed, appears in the message (an agent may quote or wrap it), not as part of
    a longer word or number (member 7's prompt is not found in member 71's)."""
    want = _SPACE.sub(" ", prompt).strip()
    if not want:
        return False
    pattern = r"(?<!\w)" + re.escape(want) + r"(?!\w)"
    return re.search(pattern, _SPACE.sub(" ", text)) is not None


__all__ = [
    "COUNTS",
    "AgentRecords",
    "RecordUnreadable",
    "SessionRecord",
    "SPAN_SECONDS",
    "Tally",
    "add_timed",
    "count",
    "epoch",
    "prompt_matches",
    "timed_between",
    "records_of",
]
