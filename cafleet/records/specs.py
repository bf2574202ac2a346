"""What a caller hands the repository to insert: a pending placement, a spawn."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PlacementSpec:
    """A placement to insert pending (no pane id yet), for `register_member`."""

    mux_session: str
    mux_window_id: str
    coding_agent: str
    backend: str = "tmux"
    mux_socket: str | None = None  # the tmux server's socket path (revision 0004)


@dataclass(frozen=True, slots=True)
class SpawnSpec:
    """What a member is spawned with (`member_spawns`, revisions 0003 and 0005): its spawn-prompt
    template (None: the bundled prompt), model, effort and permission profile (None: recorded
    before profiles existed, or the monitor). `member respawn` starts it again."""

    prompt: str | None
    model: str | None
    effort: str | None
    permissions: str | None = None
