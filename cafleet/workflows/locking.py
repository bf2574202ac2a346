"""Waiting for one pane-input lock the way every command does (docs/runtime.md §3.5): up to the
pane-lock timeout, giving up early on a signal; the caller says what a timeout means."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cafleet.workflows.errors import WorkflowError

if TYPE_CHECKING:
    from cafleet.config import Settings
    from cafleet.mux.locks import PaneLockTimeout


def wait_for_lock(
    settings: Settings, key: Any, purpose: str, busy: Callable[[PaneLockTimeout], str]
) -> Any:
    """The lock on ``key``, held by the caller. A timeout raises `WorkflowError` with
    ``busy(exc)``; an abandoned wait re-checks for a signal and re-raises."""
    from cafleet import signals
    from cafleet.mux.locks import PaneLockAbandoned, PaneLockTimeout, acquire_pane_lock

    try:
        return acquire_pane_lock(
            settings.db_dir,
            key,
            timeout=settings.pane_lock_timeout,
            purpose=purpose,
            keep_waiting=signals.keep_waiting,
        )
    except PaneLockAbandoned:
        signals.check()
        raise
    except PaneLockTimeout as exc:
        raise WorkflowError(busy(exc)) from None


__all__ = ["wait_for_lock"]
