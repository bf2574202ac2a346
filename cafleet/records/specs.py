"""What a caller hands the repository to insert: a pending placement, a spawn."""

from __future__ import annotations

import json
from typing import NamedTuple


class PlacementSpec(NamedTuple):
    """A placement to insert pending (no pane id yet), for `register_member`."""

    mux_session: str
    mux_window_id: str
    coding_agent: str
    backend: str = "tmux"
    mux_socket: str | None = None  # the tmux server's socket path (revision 0004)
    host_id: str | None = None  # the pane's host (revision 0005); None: this process's


class SpawnSpec(NamedTuple):
    """What a member is spawned with (`member_spawns`, revisions 0003 and 0005): its spawn-prompt
    template (None: the bundled prompt), model, effort and permission profile (None: recorded
    before profiles existed, or the monitor). `member respawn` starts it again."""

    prompt: str | None
    model: str | None
    effort: str | None
    worktree: WorktreeSpec | None = None  # `member create --worktree` (docs/worktrees.md)
    permissions: str | None = None  # the permission profile (docs/permissions.md)


class WorktreeSpec(NamedTuple):
    """A member's git worktree (`member_spawns.worktree_json`, docs/worktrees.md): its
    directory, the branch cafleet created for it, the base that branch started from (a branch
    name, or a commit when the base was a detached HEAD), and the spawn directory's path inside
    the checkout (``subdir``, '' at its top: the member starts in the same place)."""

    path: str
    branch: str
    base: str
    subdir: str = ""

    def to_json(self) -> str:
        data = {"path": self.path, "branch": self.branch, "base": self.base}
        if self.subdir:
            data["subdir"] = self.subdir
        return json.dumps(data, ensure_ascii=False, sort_keys=True)

    @classmethod
    def from_json(cls, text: str | None) -> WorktreeSpec | None:
        """The stored JSON, or None (NULL, or not a worktree object)."""
        if not text:
            return None
        try:
            data = json.loads(text)
        except ValueError:
            return None
        if not isinstance(data, dict):
            return None
        path, branch, base = data.get("path"), data.get("branch"), data.get("base")
        subdir = data.get("subdir", "")
        if not all(isinstance(v, str) and v for v in (path, branch, base)):
            return None
        return cls(str(path), str(branch), str(base), subdir if isinstance(subdir, str) else "")


class RecordedWorktree(NamedTuple):
    """A worktree some member of some fleet was created with (`cafleet worktree list`), with
    whether that member is still active and its fleet deleted."""

    member_id: int
    fleet_id: int
    member_name: str
    member_active: bool
    fleet_deleted: bool
    spec: WorktreeSpec
