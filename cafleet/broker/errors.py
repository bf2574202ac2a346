"""The repository's error catalogue (docs/storage.md §7.9). Each str() is the exact contract text."""

from __future__ import annotations

from cafleet import status
from cafleet.db.errors import DatabaseBusy
from cafleet.errors import CafleetError
from cafleet.records import StorageIntegrityError

__all__ = [
    "BootstrapAborted",
    "BrokerError",
    "CannotAck",
    "CannotDeregisterRootDirector",
    "DatabaseBusy",
    "FleetDeleted",
    "FleetNotFound",
    "ImportRefused",
    "KeyReused",
    "MemberDeregistered",
    "MemberNotFound",
    "MessageNotFound",
    "MonitorSlotTaken",
    "NoActiveMonitor",
    "NotSameFleet",
    "PaneDirectsFleet",
    "PlacementVanished",
    "PlacementsChanged",
    "RecipientNotFound",
    "RootDirectorInactive",
    "SenderNotActive",
    "StorageIntegrityError",
    "TaskNotFound",
    "TaskRefused",
]


class BrokerError(CafleetError):
    """Base class of the repository's errors; ``error_code`` is its `cafleet.status` code."""

    error_code = status.CODE_ERROR


class FleetNotFound(BrokerError):
    error_code = status.CODE_NOT_FOUND

    def __init__(self, fleet_id: int) -> None:
        self.fleet_id = fleet_id
        super().__init__(status.not_found("fleet", fleet_id))


class FleetDeleted(BrokerError):
    error_code = status.CODE_DELETED

    def __init__(self, fleet_id: int) -> None:
        self.fleet_id = fleet_id
        super().__init__(f"fleet {fleet_id} is deleted")


class RootDirectorInactive(BrokerError):
    error_code = status.CODE_CONFLICT

    def __init__(self, fleet_id: int, member_id: int | None) -> None:
        self.fleet_id = fleet_id
        self.member_id = member_id
        super().__init__(f"fleet {fleet_id}'s root Director (member {member_id}) is not active.")


class MonitorSlotTaken(BrokerError):
    error_code = status.CODE_CONFLICT

    def __init__(self, fleet_id: int, member_id: int) -> None:
        self.fleet_id = fleet_id
        self.member_id = member_id
        super().__init__(
            f"fleet {fleet_id} already has an active monitor member (member {member_id})"
        )


class NoActiveMonitor(BrokerError):
    error_code = status.CODE_CONFLICT

    def __init__(self, fleet_id: int) -> None:
        self.fleet_id = fleet_id
        super().__init__(
            f"fleet {fleet_id} has no active monitor member; spawn one with --role monitor first"
        )


class MemberNotFound(BrokerError):
    """No such member (or, as `MemberDeregistered`, no longer an active one)."""

    error_code = status.CODE_NOT_FOUND

    def __init__(self, member_id: int) -> None:
        self.member_id = member_id
        super().__init__(status.not_found("member", member_id))


class MemberDeregistered(MemberNotFound):
    """The member exists but the command needs an active one."""

    error_code = status.CODE_DEREGISTERED

    def __init__(self, member_id: int) -> None:  # noqa: B042 - the text differs from the base's
        self.member_id = member_id
        BrokerError.__init__(self, status.deregistered(member_id))


class CannotDeregisterRootDirector(BrokerError):
    error_code = status.CODE_CONFLICT

    def __init__(self, member_id: int | None = None) -> None:
        self.member_id = member_id
        super().__init__("cannot deregister the root Director; use 'cafleet fleet delete' instead")


class _PartyRefused(BrokerError):
    """A sender or recipient that is unknown (`member <id> not found`) or deregistered
    (`member <id> is deregistered`)."""

    def __init__(self, member_id: int, *, deregistered: bool = False) -> None:
        self.member_id = member_id
        self.deregistered = deregistered
        self.error_code = status.CODE_DEREGISTERED if deregistered else status.CODE_NOT_FOUND
        super().__init__(
            status.deregistered(member_id)
            if deregistered
            else status.not_found("member", member_id)
        )


class SenderNotActive(_PartyRefused):
    """The sender is unknown or deregistered."""


class RecipientNotFound(_PartyRefused):
    """The recipient is unknown or deregistered."""


class NotSameFleet(BrokerError):
    error_code = status.CODE_CONFLICT

    def __init__(self, from_member_id: int, to_member_id: int) -> None:
        self.from_member_id = from_member_id
        self.to_member_id = to_member_id
        super().__init__(f"members {from_member_id} and {to_member_id} are not in the same fleet.")


class KeyReused(BrokerError):
    """A send's key already stored another message (docs/cli.md §2.14)."""

    error_code = status.CODE_CONFLICT

    def __init__(self, key: str, message_id: int) -> None:
        self.key = key
        self.message_id = message_id
        super().__init__(
            f"key {key!r} already stored message {message_id}, with another recipient or "
            "text; nothing was stored (use a new key for a new message)"
        )


class MessageNotFound(BrokerError):
    error_code = status.CODE_NOT_FOUND

    def __init__(self, message_id: int) -> None:
        self.message_id = message_id
        super().__init__(status.not_found("message", message_id))


class CannotAck(BrokerError):
    error_code = status.CODE_CONFLICT

    def __init__(self, state: str, message_id: int | None = None) -> None:
        self.state = state
        self.message_id = message_id
        super().__init__(f"Cannot ACK message in state {state}")


class PlacementVanished(BrokerError):
    error_code = status.CODE_CONFLICT

    def __init__(self, member_id: int | None = None) -> None:
        self.member_id = member_id
        super().__init__("placement row vanished before pane-id patch")


class PlacementsChanged(BrokerError):
    """Internal, never retried: a placement outside the caller's locked set could not be locked.

    The CLI prints docs/cli.md §1.11's pane-lock message for `member_id`.
    """

    error_code = status.CODE_BUSY

    def __init__(self, member_id: int, pane_id: str) -> None:
        self.member_id = member_id
        self.pane_id = pane_id
        super().__init__(f"placement of member {member_id} (pane {pane_id}) could not be locked")


class PaneDirectsFleet(BrokerError):
    """One live fleet per Director pane: the pane already is a live fleet's root Director."""

    def __init__(self, pane_id: str, fleet_id: int, name: str | None) -> None:
        self.pane_id = pane_id
        self.fleet_id = fleet_id
        self.name = name
        shown = f" ({name})" if name is not None else ""
        super().__init__(
            f"pane {pane_id} is already the root Director of live fleet {fleet_id}{shown}; "
            f"delete it first ('cafleet fleet delete {fleet_id}') or use another pane"
        )


class BootstrapAborted(BrokerError):
    """A bootstrap step after the monitor pane spawn failed; everything was rolled back.

    str() is the cause's text. `spawned_pane` is what the spawn callback returned (the CLI kills
    it); `rollback_error` is the rollback's own failure, or None.
    """

    def __init__(
        self, cause: BaseException, spawned_pane: object, rollback_error: BaseException | None
    ) -> None:
        self.cause = cause
        self.spawned_pane = spawned_pane
        self.rollback_error = rollback_error
        super().__init__(_cause_text(cause))


def _cause_text(cause: BaseException) -> str:
    """SQLite errors are quoted as `str(exc.orig)`, never SQLAlchemy's multi-line wrapper."""
    orig = getattr(cause, "orig", None)
    if orig is not None:
        return str(orig)
    return str(cause)


class TaskNotFound(BrokerError):
    error_code = status.CODE_NOT_FOUND

    def __init__(self, task_id: int) -> None:
        self.task_id = task_id
        super().__init__(status.not_found("task", task_id))


class TaskRefused(BrokerError):
    """A task command its task's state, fleet, assignee or dependencies forbid; the text says
    which (docs/cli.md §2.32)."""

    error_code = status.CODE_CONFLICT


class ImportRefused(BrokerError):
    """`cafleet import` refused: the database holds fleets already, or a line is no export
    record; nothing was written."""

    error_code = status.CODE_CONFLICT
