"""Members and their placements (docs/storage.md §2.2, §2.3)."""

from typing import Any, NamedTuple

from cafleet.records import (
    BACKENDS,
    MEMBER_STATUSES,
    PaneKey,
    Row,
    _optional,
    check_enum,
    decode_skills,
)

# What the pane-is-ours check records (the server the pane was made on, that server's run, the
# pane's own process): never shown by the CLI's JSON or the WebUI.
PANE_CHECK = ("mux_socket", "mux_server_pid", "mux_server_start", "mux_pane_pid")


class Placement(NamedTuple):
    member_id: int
    backend: str
    mux_session: str
    mux_window_id: str
    mux_pane_id: str | None
    coding_agent: str
    created_at: str
    lost_at: str | None = None  # when the monitor loop found the pane gone (reported once)
    mux_socket: str | None = None  # the server the pane was made on; None: not recorded
    host_id: str | None = (
        None  # the host the pane is on; None: its fleet Director's (cafleet.hosts)
    )
    # The tmux server the pane is on (pid, start time) and the pane's own process; None: not
    # recorded (docs/runtime.md §1.8).
    mux_server_pid: int | None = None
    mux_server_start: int | None = None
    mux_pane_pid: int | None = None

    @staticmethod
    def pane_check() -> tuple[str, ...]:
        """The fields of the pane-is-ours check (`PANE_CHECK`), for layers that hold a record."""
        return PANE_CHECK

    @property
    def is_concrete(self) -> bool:
        return self.mux_pane_id is not None

    @property
    def pane_key(self) -> PaneKey | None:
        """`(backend, mux_session, mux_pane_id)`, or None while pending."""
        if self.mux_pane_id is None:
            return None
        return PaneKey(self.backend, self.mux_session, self.mux_pane_id)


class Member(NamedTuple):
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


def placement_from_row(row: Row, prefix: str = "") -> Placement:
    """Decode a placement; `prefix` selects aliased columns (e.g. ``p_member_id``)."""
    from cafleet.agents.registry import agent_names  # not at the top: `message poll` needs none

    member_id = row[prefix + "member_id"]
    key = f"member_id {member_id}"
    return Placement(
        member_id=member_id,
        backend=check_enum("member_placements", key, "backend", row[prefix + "backend"], BACKENDS),
        mux_session=row[prefix + "mux_session"],
        mux_window_id=row[prefix + "mux_window_id"],
        mux_pane_id=row[prefix + "mux_pane_id"],
        coding_agent=check_enum(
            "member_placements", key, "coding_agent", row[prefix + "coding_agent"], agent_names()
        ),
        created_at=row[prefix + "created_at"],
        lost_at=_optional(row, prefix + "lost_at"),
        mux_socket=_optional(row, prefix + "mux_socket"),
        host_id=_optional(row, prefix + "host_id"),
        mux_server_pid=_optional(row, prefix + "mux_server_pid"),
        mux_server_start=_optional(row, prefix + "mux_server_start"),
        mux_pane_pid=_optional(row, prefix + "mux_pane_pid"),
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
