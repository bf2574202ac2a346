"""Shared helpers of the repository (private). Its SQL is authored in `cafleet.db.statements`."""

from __future__ import annotations

from datetime import datetime

from cafleet.db.timefmt import format_ts, utcnow
from cafleet.records import BACKENDS, CODING_AGENTS


def stamp(now: datetime | None) -> str:
    """The one timestamp a call writes; read right after BEGIN IMMEDIATE (docs/storage.md §7.1)."""
    return format_ts(now if now is not None else utcnow())


def check_backend(backend: str) -> None:
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r} (expected one of: {', '.join(BACKENDS)})")


def check_coding_agent(coding_agent: str) -> None:
    if coding_agent not in CODING_AGENTS:
        raise ValueError(
            f"unknown coding agent {coding_agent!r} (expected one of: {', '.join(CODING_AGENTS)})"
        )
