"""The workflows' typed errors: each carries exactly what the CLI prints.

A workflow refuses or fails by raising one of these (or a repository, mux or agent error, whose
str() is already user-facing). The CLI maps them in `cafleet.cli.context.CafleetCommand`:
`WorkflowError` is `Error: <str>`, exit 1; `WorkflowUsageError` is Click's usage rendering, exit 2;
`CompensatedError` prints its primary error and then every cleanup line, exit 1.
"""

from __future__ import annotations

from collections.abc import Sequence


class WorkflowError(Exception):
    """A refusal or failure; str() is the text after `Error: ` (exit 1)."""


class WorkflowUsageError(WorkflowError):
    """Bad input found only once the workflow ran (an agent option, a spawn template): exit 2."""


class CompensatedError(WorkflowError):
    """A failure after something was written or spawned, and undone (cli.md §1.11).

    ``primary`` is the error (None for a signal stop: only the cleanup lines are printed, and the
    exit code becomes the signal's); ``cleanup`` holds one line per cleanup step that failed or
    could not be confirmed, in order.
    """

    def __init__(self, primary: str | None, cleanup: Sequence[str] = ()) -> None:
        self.primary = primary
        self.cleanup = tuple(cleanup)
        super().__init__(primary or "")


def lock_busy_message(member_id: int) -> str:
    """cli.md §1.11's pane-lock message."""
    return f"member {member_id}'s pane is receiving another keystroke; retry in a few seconds"


__all__ = ["CompensatedError", "WorkflowError", "WorkflowUsageError", "lock_busy_message"]
