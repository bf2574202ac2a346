"""Frozen records decoded from rows (docs/storage.md §7.2).

Every enumeration column (docs/storage.md §2.6) is checked on decode; an unknown stored value raises
`StorageIntegrityError` and nothing is coerced. `Member.placement is None` (no row) differs from a
pending placement (`placement.mux_pane_id is None`).

`PaneContext` belongs to the mux layer. This module never imports `cafleet.mux` (the mux layer
re-exports `PaneKey` from here); the repository accepts any object with `.session`,
`.window_id` and `.pane_id`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from cafleet import status
from cafleet.errors import CafleetError

MEMBER_STATUSES: tuple[str, ...] = ("active", "deregistered")
MESSAGE_TYPES: tuple[str, ...] = ("unicast", "broadcast_summary")
MESSAGE_STATES: tuple[str, ...] = ("input_required", "completed")
BACKENDS: tuple[str, ...] = ("tmux", "herdr")
CODING_AGENTS: tuple[str, ...] = ("claude", "codex", "opencode")


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


@dataclass(frozen=True, slots=True)
class PlacementSpec:
    """A placement to insert pending (no pane id yet), for `register_member`."""

    mux_session: str
    mux_window_id: str
    coding_agent: str
    backend: str = "tmux"


@dataclass(frozen=True, slots=True)
class SpawnSpec:
    """What a member is spawned with (`member_spawns`, revision 0003): its spawn-prompt template
    (None: the bundled monitor prompt), model and effort. `member respawn` starts it again."""

    prompt: str | None
    model: str | None
    effort: str | None


@dataclass(frozen=True, slots=True)
class Fleet:
    fleet_id: int
    name: str | None
    created_at: str
    deleted_at: str | None
    director_member_id: int | None


@dataclass(frozen=True, slots=True)
class FleetSummary:
    fleet_id: int
    name: str | None
    created_at: str
    deleted_at: str | None
    director_member_id: int | None
    monitor_member_id: int | None
    member_count: int


@dataclass(frozen=True, slots=True)
class Placement:
    member_id: int
    backend: str
    mux_session: str
    mux_window_id: str
    mux_pane_id: str | None
    coding_agent: str
    created_at: str
    lost_at: str | None = None  # when the monitor loop found the pane gone (reported once)

    @property
    def is_concrete(self) -> bool:
        return self.mux_pane_id is not None

    @property
    def pane_key(self) -> PaneKey | None:
        """`(backend, mux_session, mux_pane_id)`, or None while pending."""
        if self.mux_pane_id is None:
            return None
        return PaneKey(self.backend, self.mux_session, self.mux_pane_id)


@dataclass(frozen=True, slots=True)
class Member:
    member_id: int
    fleet_id: int
    name: str
    description: str
    status: str
    registered_at: str
    deregistered_at: str | None
    kind: str
    skills: list[Any]
    placement: Placement | None

    @property
    def is_active(self) -> bool:
        return self.status == "active"


@dataclass(frozen=True, slots=True)
class Message:
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


@dataclass(frozen=True, slots=True)
class PendingNotification:
    message: Message
    sender_name: str | None  # None when no member row exists (the line prints `unknown`)
    recipient: Member
    placement: Placement


@dataclass(frozen=True, slots=True)
class RosterEntry:
    member: Member
    last_sent: str | None
    last_recv: str | None
    last_ack: str | None
    idle: int | None


@dataclass(frozen=True, slots=True)
class WakeRosterEntry:
    """One entry of the monitor's wake line (docs/runtime.md §5.7)."""

    member_id: int
    name: str
    coding_agent: str | None  # None: no placement row (only possible for the Director)
    unacked: int


@dataclass(frozen=True, slots=True)
class WakeRoster:
    members: tuple[WakeRosterEntry, ...]  # active kind-`member` members with a placement row
    director: WakeRosterEntry | None  # None: the fleet has no Director row


@dataclass(frozen=True, slots=True)
class Broadcast:
    summary: Message
    deliveries: tuple[Message, ...]


@dataclass(frozen=True, slots=True)
class FleetBootstrap:
    fleet: Fleet
    director: Member
    monitor: Member


@dataclass(frozen=True, slots=True)
class MonitorRuntime:
    fleet_id: int
    pid: int | None
    started_at: str | None
    last_tick_at: str | None
    tick_seconds: int
    last_wake_at: str | None
    wake_interval_seconds: int | None  # None = unset (env/default apply); never turned into 0
    wake_requested_at: str | None


@dataclass(frozen=True, slots=True)
class AssetInstall:
    coding_agent: str
    path: str
    cafleet_version: str
    installed_at: str


# --- decoders ----------------------------------------------------------------------------------


def fleet_from_row(row: Row) -> Fleet:
    return Fleet(
        fleet_id=row["fleet_id"],
        name=row["name"],
        created_at=row["created_at"],
        deleted_at=row["deleted_at"],
        director_member_id=row["director_member_id"],
    )


def fleet_summary_from_row(row: Row) -> FleetSummary:
    return FleetSummary(
        fleet_id=row["fleet_id"],
        name=row["name"],
        created_at=row["created_at"],
        deleted_at=row["deleted_at"],
        director_member_id=row["director_member_id"],
        monitor_member_id=row["monitor_member_id"],
        member_count=row["member_count"],
    )


def _optional(row: Row, label: str) -> Any:
    """The column's value, or None when the row has no such column (sqlite3.Row's `in` looks
    at values, not labels)."""
    return row[label] if label in row.keys() else None  # noqa: SIM118


def placement_from_row(row: Row, prefix: str = "") -> Placement:
    """Decode a placement; `prefix` selects aliased columns (e.g. ``p_member_id``)."""
    member_id = row[prefix + "member_id"]
    key = f"member_id {member_id}"
    return Placement(
        member_id=member_id,
        backend=check_enum("member_placements", key, "backend", row[prefix + "backend"], BACKENDS),
        mux_session=row[prefix + "mux_session"],
        mux_window_id=row[prefix + "mux_window_id"],
        mux_pane_id=row[prefix + "mux_pane_id"],
        coding_agent=check_enum(
            "member_placements", key, "coding_agent", row[prefix + "coding_agent"], CODING_AGENTS
        ),
        created_at=row[prefix + "created_at"],
        lost_at=_optional(row, prefix + "lost_at"),
    )


def member_from_row(row: Row) -> Member:
    """Decode a member row carrying `kind` and optional `p_*` placement columns."""
    member_id = row["member_id"]
    placement = None
    if _optional(row, "p_member_id") is not None:
        placement = placement_from_row(row, "p_")
    return Member(
        member_id=member_id,
        fleet_id=row["fleet_id"],
        name=row["name"],
        description=row["description"],
        status=check_enum(
            "members", f"member_id {member_id}", "status", row["status"], MEMBER_STATUSES
        ),
        registered_at=row["registered_at"],
        deregistered_at=row["deregistered_at"],
        kind=row["kind"],
        skills=decode_skills(row["member_card_json"]),
        placement=placement,
    )


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


def monitor_runtime_from_row(row: Row) -> MonitorRuntime:
    return MonitorRuntime(
        fleet_id=row["fleet_id"],
        pid=row["pid"],
        started_at=row["started_at"],
        last_tick_at=row["last_tick_at"],
        tick_seconds=row["tick_seconds"],
        last_wake_at=row["last_wake_at"],
        wake_interval_seconds=row["wake_interval_seconds"],
        wake_requested_at=row["wake_requested_at"],
    )


def asset_install_from_row(row: Row) -> AssetInstall:
    return AssetInstall(
        coding_agent=check_enum(
            "asset_installs",
            f"path '{row['path']}'",
            "coding_agent",
            row["coding_agent"],
            CODING_AGENTS,
        ),
        path=row["path"],
        cafleet_version=row["cafleet_version"],
        installed_at=row["installed_at"],
    )
