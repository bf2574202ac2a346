"""Frozen records decoded from rows (docs/storage.md §7.2).

Every enumeration column (docs/storage.md §2.6) is checked on decode; an unknown stored value raises
`StorageIntegrityError` and nothing is coerced. `Member.placement is None` (no row) differs from a
pending placement (`placement.mux_pane_id is None`).

`PaneContext` belongs to the mux layer. This module never imports `cafleet.mux` (the mux layer
re-exports `PaneKey` from here); the repository accepts any object with `.session`,
`.window_id` and `.pane_id`.
"""

import json
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from cafleet import lazy, status
from cafleet.errors import CafleetError

if TYPE_CHECKING:  # the same names, for type checkers and editors
    from cafleet.records.assets import AssetInstall, asset_install_from_row
    from cafleet.records.fleets import (
        Fleet,
        FleetBootstrap,
        FleetSummary,
        fleet_from_row,
        fleet_summary_from_row,
    )
    from cafleet.records.members import Member, Placement, member_from_row, placement_from_row
    from cafleet.records.messages import Broadcast, Message, message_from_row
    from cafleet.records.monitor import (
        HostLoop,
        MonitorRuntime,
        host_loop_from_row,
        monitor_runtime_from_row,
    )
    from cafleet.records.notifications import PendingNotification
    from cafleet.records.rosters import RosterEntry
    from cafleet.records.specs import PlacementSpec, RecordedWorktree, SpawnSpec, WorktreeSpec
    from cafleet.records.wake import WakeRoster, WakeRosterEntry

MEMBER_STATUSES: tuple[str, ...] = ("active", "deregistered")
MESSAGE_TYPES: tuple[str, ...] = ("unicast", "broadcast_summary")
MESSAGE_STATES: tuple[str, ...] = ("input_required", "completed")
BACKENDS: tuple[str, ...] = ("tmux", "herdr")


class Row(Protocol):
    """A result row read by column label (`sqlite3.Row`, or any mapping)."""

    def __getitem__(self, key: str, /) -> Any: ...

    def keys(self) -> Any: ...


class PaneKey(NamedTuple):
    """A concrete placement's `(backend, mux_session, mux_pane_id)`: what names its pane and
    its pane-input lock. A tuple, so it equals and hashes like the plain triple."""

    backend: str
    session: str
    pane_id: str


class StorageIntegrityError(CafleetError):
    """A stored enumeration value outside its allowed set (docs/storage.md §7.2).

    `key` names the row, e.g. ``"member_id 7"``; str() is
    ``integrity error: members.status is 'paused' for member_id 7 (expected one of: active, deregistered)``.
    """

    error_code = status.CODE_DATABASE

    def __init__(
        self, table: str, key: str, column: str, value: object, expected: tuple[str, ...]
    ) -> None:
        self.table = table
        self.key = key
        self.column = column
        self.value = value
        self.expected = expected
        super().__init__(
            f"integrity error: {table}.{column} is '{value}' for {key} "
            f"(expected one of: {', '.join(expected)})"
        )


def check_enum(table: str, key: str, column: str, value: Any, allowed: tuple[str, ...]) -> str:
    """Return `value` unchanged when it is one of `allowed`, else raise StorageIntegrityError."""
    if isinstance(value, str) and value in allowed:
        return value
    raise StorageIntegrityError(table, key, column, value, allowed)


def decode_skills(card_json: str | None) -> list[Any]:
    """The card's `skills` array as stored, or [] if the card is malformed or has none.

    Never raises.
    """
    if not card_json:
        return []
    try:
        card = json.loads(card_json)
    except (ValueError, TypeError, RecursionError):
        return []
    if not isinstance(card, dict):
        return []
    skills = card.get("skills")
    return skills if isinstance(skills, list) else []


def member_card(
    name: str, description: str, skills: tuple[Any, ...] | list[Any] = (), *, monitor: bool = False
) -> str:
    """The card JSON of docs/storage.md §2.6: keys name, description, skills[, cafleet]."""
    card: dict[str, Any] = {"name": name, "description": description, "skills": list(skills)}
    if monitor:
        card["cafleet"] = {"kind": "monitor"}
    return json.dumps(card, ensure_ascii=False, separators=(",", ":"))


class PaneLike(Protocol):
    """What the repository needs of a mux `PaneContext` (docs/runtime.md §1.1)."""

    @property
    def session(self) -> str: ...

    @property
    def window_id(self) -> str: ...

    @property
    def pane_id(self) -> str: ...


def _optional(row: Row, label: str) -> Any:
    """The column's value, or None when the row has no such column (sqlite3.Row's `in` looks
    at values, not labels)."""
    return row[label] if label in row.keys() else None  # noqa: SIM118


# Record name -> the submodule that defines it. Each frozen slotted dataclass costs about a
# millisecond to create, so a command creates only the records it uses (PEP 562).
_HOMES: dict[str, str] = {
    "Message": "messages",
    "Broadcast": "messages",
    "message_from_row": "messages",
    "Placement": "members",
    "Member": "members",
    "placement_from_row": "members",
    "member_from_row": "members",
    "RosterEntry": "rosters",
    "WakeRosterEntry": "wake",
    "WakeRoster": "wake",
    "PlacementSpec": "specs",
    "RecordedWorktree": "specs",
    "SpawnSpec": "specs",
    "WorktreeSpec": "specs",
    "Fleet": "fleets",
    "FleetSummary": "fleets",
    "FleetBootstrap": "fleets",
    "fleet_from_row": "fleets",
    "fleet_summary_from_row": "fleets",
    "PendingNotification": "notifications",
    "MonitorRuntime": "monitor",
    "monitor_runtime_from_row": "monitor",
    "HostLoop": "monitor",
    "host_loop_from_row": "monitor",
    "AssetInstall": "assets",
    "asset_install_from_row": "assets",
}


def __getattr__(name: str) -> Any:
    return lazy.load(__name__, _HOMES, name)


__all__ = [
    "AssetInstall",
    "BACKENDS",
    "Broadcast",
    "Fleet",
    "FleetBootstrap",
    "FleetSummary",
    "HostLoop",
    "MEMBER_STATUSES",
    "MESSAGE_STATES",
    "MESSAGE_TYPES",
    "Member",
    "Message",
    "MonitorRuntime",
    "PaneKey",
    "PaneLike",
    "PendingNotification",
    "Placement",
    "PlacementSpec",
    "RecordedWorktree",
    "RosterEntry",
    "Row",
    "SpawnSpec",
    "StorageIntegrityError",
    "WakeRoster",
    "WakeRosterEntry",
    "WorktreeSpec",
    "asset_install_from_row",
    "check_enum",
    "decode_skills",
    "fleet_from_row",
    "fleet_summary_from_row",
    "host_loop_from_row",
    "member_card",
    "member_from_row",
    "message_from_row",
    "monitor_runtime_from_row",
    "placement_from_row",
]
