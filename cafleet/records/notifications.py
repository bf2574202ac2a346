"""A pending pane notification (docs/storage.md §7.6)."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from cafleet.records.members import Member, Placement
    from cafleet.records.messages import Message


class PendingNotification(NamedTuple):
    message: Message
    sender_name: str | None  # None when no member row exists (the line prints `unknown`)
    recipient: Member
    placement: Placement
    director_host: str | None = None  # the root Director placement's host (cafleet.hosts)

    @property
    def host(self) -> str | None:
        """The host the recipient's pane is on (None: not recorded, any host's)."""
        from cafleet.hosts import effective_host

        return effective_host(self.placement.host_id, self.director_host)
