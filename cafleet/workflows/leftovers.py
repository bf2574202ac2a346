"""Every worktree cafleet recorded, any fleet's, deleted ones too (docs/worktrees.md §3): listed
(`cafleet worktree list`), the ones *left behind* found (`fleet show`, `member list`, `doctor`),
one removed (`cafleet worktree remove`).

A worktree is left behind when its directory still exists while its member is deregistered
(a worktree `member delete`/`fleet delete` kept because it held work, or one an interrupted
`member delete` never reached). A path recorded for several members (a branch name used again)
belongs to its active member if it has one, else to the latest.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, NamedTuple

from cafleet import broker
from cafleet.workflows.errors import WorkflowError

if TYPE_CHECKING:
    from cafleet.db.runtime import Connection
    from cafleet.records import RecordedWorktree
    from cafleet.workflows.worktrees import Report, Retired


def _owners(conn: Connection) -> dict[str, RecordedWorktree]:
    """path -> the record that owns it: an active member's, else the latest member's."""
    owners: dict[str, RecordedWorktree] = {}
    for rec in broker.recorded_worktrees(conn):  # by member id: a later one replaces
        path = os.path.realpath(rec.spec.path)
        held = owners.get(path)
        if held is None or not held.member_active:
            owners[path] = rec
    return owners


def _left(rec: RecordedWorktree) -> bool:
    return not rec.member_active and os.path.isdir(rec.spec.path)


def left_behind(conn: Connection, fleet_id: int | None = None) -> list[RecordedWorktree]:
    """The worktrees left behind (of ``fleet_id``'s members, or of any fleet), by member id.
    Reads one query and asks only whether each directory exists (no git)."""
    found = [
        rec
        for rec in _owners(conn).values()
        if (fleet_id is None or rec.fleet_id == fleet_id) and _left(rec)
    ]
    return sorted(found, key=lambda r: r.member_id)


class Listed(NamedTuple):
    """One existing worktree, its owner and its state now."""

    recorded: RecordedWorktree
    report: Report

    @property
    def left_behind(self) -> bool:
        return not self.recorded.member_active

    def as_dict(self) -> dict[str, Any]:
        rec = self.recorded
        return {
            **self.report.as_dict(),
            "fleet_id": rec.fleet_id,
            "fleet_deleted": rec.fleet_deleted,
            "member_id": rec.member_id,
            "member_name": rec.member_name,
            "member_active": rec.member_active,
            "left_behind": self.left_behind,
        }


def listing(conn: Connection) -> list[Listed]:
    """Every recorded worktree whose directory exists, by path, with its git state (all the
    git calls at once)."""
    from cafleet.workflows.worktrees import reports

    found = sorted(
        (rec for rec in _owners(conn).values() if os.path.isdir(rec.spec.path)),
        key=lambda r: r.spec.path,
    )
    states = reports({i: rec.spec for i, rec in enumerate(found)})
    return [Listed(rec, states[i]) for i, rec in enumerate(found)]


def remove(conn: Connection, path: str, *, discard: bool) -> Retired:
    """Remove the left-behind worktree at ``path`` (docs/worktrees.md §3: only when git shows
    no change and its HEAD is on a branch, unless ``discard``), then its branch when it has no
    commit beyond its base. Refused: a path cafleet did not record, an active member's
    worktree, one it keeps (why, and what `--discard` would lose)."""
    from cafleet.workflows.worktrees import retire

    wanted = os.path.realpath(os.path.abspath(path))
    rec = _owners(conn).get(wanted)
    if rec is None:
        raise WorkflowError(
            f"{path} is not a worktree cafleet made; 'cafleet worktree list' shows them"
        )
    spec = rec.spec
    if rec.member_active:
        raise WorkflowError(
            f"{spec.path} is the worktree of member {rec.member_id} ({rec.member_name}), which "
            f"is active; delete the member instead: 'cafleet member delete {rec.member_id}'"
        )
    retired = retire(rec.member_id, spec, discard=discard)
    if retired.status == "kept":
        more = (
            " (--discard removes it anyway; its changes are lost)" if retired.discard_helps else ""
        )
        raise WorkflowError(
            f"kept {spec.path} (branch {spec.branch}): {retired.reason}; nothing was removed{more}"
        )
    return retired


__all__ = ["Listed", "left_behind", "listing", "remove"]
