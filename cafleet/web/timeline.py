"""The timeline's grouping (seed 002, runtime.md §7.3): the newest unicast deliveries, grouped.

Rows with a non-null `origin_message_id` collect into one broadcast entry per origin; a null
origin is a standalone unicast. Entries are then ordered by creation time, separately from the
SQL order (`status_timestamp DESC, message_id DESC`). A broadcast cut by the row cap counts only
the deliveries that were returned.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cafleet.records import Message


@dataclass(frozen=True, slots=True)
class Entry:
    kind: str  # "unicast" | "broadcast"
    origin_message_id: int | None
    from_member_id: int
    created_at: str
    text: str
    deliveries: tuple[Message, ...]  # by recipient id

    @property
    def recipients(self) -> int:
        return len(self.deliveries)

    @property
    def acked(self) -> int:
        return sum(1 for d in self.deliveries if d.status_state == "completed")


def ack_at(delivery: Message) -> str | None:
    """A completed delivery's ACK time: its status_timestamp (it changes state exactly once)."""
    return delivery.status_timestamp if delivery.status_state == "completed" else None


def group(rows: Sequence[Message]) -> list[Entry]:
    """Broadcast groups and standalone unicasts, oldest first (`created_at`, then lowest id)."""
    groups: dict[int, list[Message]] = {}
    entries: list[tuple[str, int, Entry | int]] = []
    for row in rows:
        if row.origin_message_id is None:
            entry = Entry("unicast", None, row.from_member_id, row.created_at, row.text, (row,))
            entries.append((row.created_at, row.message_id, entry))
        else:
            groups.setdefault(row.origin_message_id, []).append(row)
    for origin, members in groups.items():
        first = min(members, key=lambda m: (m.created_at, m.message_id))
        entries.append((first.created_at, first.message_id, origin))
    result: list[Entry] = []
    for _created, _mid, item in sorted(entries, key=lambda e: (e[0], e[1])):
        if isinstance(item, Entry):
            result.append(item)
            continue
        members = sorted(groups[item], key=lambda m: (m.owner_member_id, m.message_id))
        first = min(members, key=lambda m: (m.created_at, m.message_id))
        result.append(
            Entry(
                "broadcast",
                item,
                first.from_member_id,
                first.created_at,
                first.text,
                tuple(members),
            )
        )
    return result


__all__ = ["Entry", "ack_at", "group"]
