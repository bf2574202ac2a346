"""Wake cadence (docs/runtime.md §5.6): a pure function of the clock and the runtime row."""

from __future__ import annotations

import math
from datetime import datetime

from cafleet.db.timefmt import parse_ts


def wake_due(
    now: datetime,
    interval: int,
    last_wake_at: str | datetime | None,
    started_at: str | datetime | None,
) -> bool:
    """True when a scheduled wake is due.

    - interval 0 (or less) is never due; a forced request is decided elsewhere;
    - the baseline is ``last_wake_at``, else ``started_at``; a missing or unparsable baseline
      counts as due;
    - due when ``floor((now - baseline).total_seconds()) >= interval``; a future baseline is
      not due.
    """
    if interval <= 0:
        return False
    raw = last_wake_at if last_wake_at is not None else started_at
    baseline = raw if isinstance(raw, datetime) else parse_ts(raw)
    if baseline is None:
        return True
    if baseline.tzinfo is None:
        from datetime import UTC

        baseline = baseline.replace(tzinfo=UTC)
    elapsed = (now - baseline).total_seconds()
    if elapsed < 0:
        return False
    return math.floor(elapsed) >= interval
