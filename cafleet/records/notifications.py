"""A pending pane notification (docs/storage.md §7.6)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cafleet.records.members import Member, Placement
    from cafleet.records.messages import Message


@dataclass(frozen=True, slots=True)
class PendingNotification:
    message: Message
    sender_name: str | None  # None when no member row exists (the line prints `unknown`)
    recipient: Member
    placement: Placement
