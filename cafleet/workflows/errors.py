"""The workflows' own refusals; str() is the text the CLI prints after `Error: `."""

from __future__ import annotations

from cafleet import status
from cafleet.errors import CafleetError


class WorkflowError(CafleetError):
    """Base of the workflow refusals."""

    error_code = status.CODE_ERROR


class WaitTimedOut(WorkflowError):
    """`message wait` reached its deadline with an empty inbox (exit 124, docs/cli.md §2.19)."""

    error_code = status.CODE_TIMEOUT

    def __init__(self, member_id: int, timeout: float) -> None:
        self.member_id = member_id
        self.timeout = timeout
        super().__init__(f"timed out after {timeout:g} s with no message for member {member_id}")


class PaneUnavailable(WorkflowError):
    """A member's pane cannot be captured: no placement, a pending one, tmux unusable, or the
    capture call failed (docs/cli.md §2.12's texts)."""


class NoMonitorRuntime(WorkflowError):
    """The fleet has no monitor_runtime row: no loop ever ran for it."""

    def __init__(self, fleet_id: int) -> None:
        self.fleet_id = fleet_id
        super().__init__(f"fleet {fleet_id} has no monitor runtime row; no monitor loop ever ran")


class LoopNotLive(WorkflowError):
    """A wake was asked for while the fleet's loop is not live."""

    def __init__(self, fleet_id: int) -> None:
        self.fleet_id = fleet_id
        super().__init__(f"monitor loop for fleet {fleet_id} is not running")
