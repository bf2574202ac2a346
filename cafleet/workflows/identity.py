"""One identity per pane (docs/cli.md §1.5): a command run from a pane that is an active member's
placement acts as that member only.

Agents confuse ids; a member that sends as another, reads another's inbox or ACKs another's
message is refused before anything is written, with the pane's own member named. The CLI runs
these checks (only when `TMUX_PANE` and `TMUX` are set); the WebUI and plain shells do not.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from cafleet import status
from cafleet.workflows.errors import WorkflowError

if TYPE_CHECKING:
    from cafleet.db.runtime import Connection


# (member id, name); a plain tuple: every message command from a pane imports this module.
PaneMember = tuple[int, str]


class NotThisPanesMember(WorkflowError):
    """A command from a member's pane named another member (exit 1, nothing written)."""

    error_code = status.CODE_CONFLICT


def _named(members: Sequence[PaneMember]) -> str:
    return " and ".join(f"member {member_id} ({name})" for member_id, name in members)


def _same_socket(current: str, recorded: str | None) -> bool:
    """Whether the socket in `TMUX` is the one the placement recorded (None: not recorded)."""
    if recorded is None or current == recorded:
        return True
    return os.path.realpath(current) == os.path.realpath(recorded)


def pane_members(conn: Connection, env: Mapping[str, str]) -> list[PaneMember]:
    """The active members whose live placement is the pane ``env`` runs in (`TMUX_PANE` on the
    server `TMUX` names, on this host); [] outside a pane or in a pane no member is placed in."""
    pane, tmux = env.get("TMUX_PANE"), env.get("TMUX")
    if not pane or not tmux:
        return []
    from cafleet import broker

    rows = broker.pane_members(conn, pane)
    if not rows:
        return []
    socket = tmux.split(",", 1)[0]
    here: str | None = None
    if any(host is not None for *_, host in rows):
        from cafleet.hosts import current_host

        here = current_host()
    return [
        (member_id, name)
        for member_id, name, recorded, host in rows
        if _same_socket(socket, recorded) and host in (None, here)
    ]


def require_acting_as(conn: Connection, env: Mapping[str, str], member_id: int) -> None:
    """Refuse ``member_id`` as the acting member when the pane is another member's."""
    members = pane_members(conn, env)
    if members and member_id not in {m[0] for m in members}:
        acts = f"member {members[0][0]}" if len(members) == 1 else "one of them"
        raise NotThisPanesMember(
            f"this pane is {_named(members)}; a command run here acts as {acts} only, "
            f"not as member {member_id}"
        )


def require_own_message(conn: Connection, env: Mapping[str, str], message_id: int) -> None:
    """Refuse to ACK a message that is not in the inbox of the pane's member."""
    members = pane_members(conn, env)
    if not members:
        return
    from cafleet import broker

    owner = broker.get_message(conn, message_id).owner_member_id  # unknown: `message … not found`
    if owner not in {m[0] for m in members}:
        raise NotThisPanesMember(
            f"message {message_id} is addressed to member {owner}, not to {_named(members)} "
            f"whose pane this is; ACK only your own messages (cafleet message poll "
            f"{members[0][0]})"
        )


__all__ = [
    "NotThisPanesMember",
    "PaneMember",
    "pane_members",
    "require_acting_as",
    "require_own_message",
]
