"""The repository's error catalogue (storage.md §7.9). Each str() is the exact contract text."""

from __future__ import annotations

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
    "MemberNotFound",
    "MessageNotFound",
    "MonitorSlotTaken",
    "NoActiveMonitor",
    "NotSameFleet",
    "PlacementVanished",
    "PlacementsChanged",
    "RecipientNotFound",
    "RootDirectorInactive",
    "SenderNotActive",
    "StorageIntegrityError",
]


class BrokerError(CafleetError):
    """Base class of the repository's errors."""


class FleetNotFound(BrokerError):
    def __init__(self, fleet_id: int) -> None:
        self.fleet_id = fleet_id
        super().__init__(f"fleet '{fleet_id}' not found.")


class FleetDeleted(BrokerError):
    def __init__(self, fleet_id: int) -> None:
        self.fleet_id = fleet_id
        super().__init__(f"fleet {fleet_id} is deleted")


class RootDirectorInactive(BrokerError):
    def __init__(self, fleet_id: int, member_id: int | None) -> None:
        self.fleet_id = fleet_id
        self.member_id = member_id
        super().__init__(f"fleet {fleet_id}'s root Director (member {member_id}) is not active.")


class MonitorSlotTaken(BrokerError):
    def __init__(self, fleet_id: int, member_id: int) -> None:
        self.fleet_id = fleet_id
        self.member_id = member_id
        super().__init__(
            f"fleet {fleet_id} already has an active monitor member (member {member_id})"
        )


class NoActiveMonitor(BrokerError):
    def __init__(self, fleet_id: int) -> None:
        self.fleet_id = fleet_id
        super().__init__(
            f"fleet {fleet_id} has no active monitor member; spawn one with --role monitor first"
        )


class MemberNotFound(BrokerError):
    def __init__(self, member_id: int) -> None:
        self.member_id = member_id
        super().__init__(f"Member {member_id} not found")


class CannotDeregisterRootDirector(BrokerError):
    def __init__(self, member_id: int | None = None) -> None:
        self.member_id = member_id
        super().__init__("cannot deregister the root Director; use 'cafleet fleet delete' instead")


class SenderNotActive(BrokerError):
    def __init__(self, member_id: int) -> None:
        self.member_id = member_id
        super().__init__(f"Sender member not found or not active: {member_id}")


class RecipientNotFound(BrokerError):
    def __init__(self, member_id: int) -> None:
        self.member_id = member_id
        super().__init__(f"Destination member not found: {member_id}")


class NotSameFleet(BrokerError):
    def __init__(self, from_member_id: int, to_member_id: int) -> None:
        self.from_member_id = from_member_id
        self.to_member_id = to_member_id
        super().__init__(f"members {from_member_id} and {to_member_id} are not in the same fleet.")


class MessageNotFound(BrokerError):
    def __init__(self, message_id: int) -> None:
        self.message_id = message_id
        super().__init__(f"Message {message_id} not found")


class CannotAck(BrokerError):
    def __init__(self, state: str, message_id: int | None = None) -> None:
        self.state = state
        self.message_id = message_id
        super().__init__(f"Cannot ACK message in state {state}")


class PlacementVanished(BrokerError):
    def __init__(self, member_id: int | None = None) -> None:
        self.member_id = member_id
        super().__init__("placement row vanished before pane-id patch")


class PlacementsChanged(BrokerError):
    """Internal, never retried: a placement outside the caller's locked set could not be locked.

    The CLI prints cli.md §1.11's pane-lock message for `member_id`.
    """

    def __init__(self, member_id: int, pane_id: str) -> None:
        self.member_id = member_id
        self.pane_id = pane_id
        super().__init__(f"placement of member {member_id} (pane {pane_id}) could not be locked")


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
