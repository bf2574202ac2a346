"""One signal policy for every command (cli.md §1.4).

The handlers only record the first SIGINT/SIGTERM; code acts on it at safe points by calling
`stop_requested()` (or `check()`, which raises `Interrupted`). The exit code becomes 130/143.
"""

from __future__ import annotations

import signal
from types import FrameType

from cafleet.errors import CafleetError

_received: int | None = None


class Interrupted(CafleetError):
    """Raised at a safe point once a signal was recorded; main maps it to 130/143."""


def _record(signum: int, _frame: FrameType | None) -> None:
    global _received
    if _received is None:
        _received = signum


def install() -> None:
    signal.signal(signal.SIGINT, _record)
    signal.signal(signal.SIGTERM, _record)


def received() -> int | None:
    return _received


def stop_requested() -> bool:
    return _received is not None


def keep_waiting() -> bool:
    """For lock waits: keep trying while no signal has been recorded."""
    return _received is None


def check() -> None:
    if _received is not None:
        raise Interrupted()


def exit_code_for_signal() -> int | None:
    if _received == signal.SIGINT:
        return 130
    if _received == signal.SIGTERM:
        return 143
    return None


def reset() -> None:
    """For in-process tests only."""
    global _received
    _received = None
