"""Messages and broadcasts (docs/storage.md §2.4)."""

from typing import NamedTuple

from cafleet.records import MESSAGE_STATES, MESSAGE_TYPES, Row, check_enum


class Message(NamedTuple):
    message_id: int
    owner_member_id: int
    from_member_id: int
    to_member_id: int | None
    type: str
    created_at: str
    status_state: str
    status_timestamp: str
    origin_message_id: int | None
    text: str


class Broadcast(NamedTuple):
    summary: Message
    deliveries: tuple[Message, ...]


def message_from_row(row: Row, prefix: str = "") -> Message:
    """Decode a message; `prefix` selects aliased columns (e.g. ``x_message_id``)."""
    message_id = row[prefix + "message_id"]
    key = f"message_id {message_id}"
    return Message(
        message_id=message_id,
        owner_member_id=row[prefix + "owner_member_id"],
        from_member_id=row[prefix + "from_member_id"],
        to_member_id=row[prefix + "to_member_id"],
        type=check_enum("messages", key, "type", row[prefix + "type"], MESSAGE_TYPES),
        created_at=row[prefix + "created_at"],
        status_state=check_enum(
            "messages", key, "status_state", row[prefix + "status_state"], MESSAGE_STATES
        ),
        status_timestamp=row[prefix + "status_timestamp"],
        origin_message_id=row[prefix + "origin_message_id"],
        text=row[prefix + "text"],
    )
