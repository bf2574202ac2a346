"""Where a new member pane goes (docs/runtime.md §1.11): no member pane below the usable minimum
(`CAFLEET_MIN_PANE_COLUMNS` × `CAFLEET_MIN_PANE_ROWS`, default 40 × 8).

`auto` (the default) splits the root Director's window (`main-vertical`) while its stacked panes
stay at or above the minimum; then the fleet's overflow windows in turn (`tiled`); then opens a
new window of the Director's session, named after the fleet, right after the fleet's last window.
`current` always splits the Director's window (the wave-1 placement); `new` always opens a window.
The choice is made from the windows' sizes just before the spawn; two creates racing for the last
free slot may both take it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from cafleet.hosts import effective_host
from cafleet.mux import MultiplexerError, PaneContext
from cafleet.mux.layout import Size, main_vertical_member, tiled_member
from cafleet.records import Placement
from cafleet.workflows.errors import WorkflowError

if TYPE_CHECKING:
    from cafleet.config import Settings
    from cafleet.mux import PaneContext
    from cafleet.mux.layout import Size
    from cafleet.records import Member, Placement

WindowMode = Literal["auto", "new", "current"]
DIRECTOR_LAYOUT = "main-vertical"
OVERFLOW_LAYOUT = "tiled"


@dataclass(frozen=True, slots=True)
class Target:
    window_id: str  # the window to split, or (new_window) the one the new window follows
    new_window: bool
    layout: str


def window_mode(option: str | None) -> WindowMode:
    """`--window new|current`, or None for `auto`."""
    if option == "new":
        return "new"
    if option == "current":
        return "current"
    return "auto"


def minimum(settings: Settings) -> Size:
    return Size(settings.min_pane_columns, settings.min_pane_rows)


def fleet_windows(members: Iterable[Member], director: Placement, *, exclude: int = 0) -> list[str]:
    """The overflow windows: windows of the fleet's placed members in the Director's session
    other than the Director's own, in member order (``exclude``: a member to leave out)."""
    windows: list[str] = []
    for member in members:
        p = member.placement
        if p is None or p.mux_pane_id is None or member.member_id == exclude:
            continue
        if p.mux_session != director.mux_session or p.mux_window_id == director.mux_window_id:
            continue
        if p.mux_window_id not in windows:
            windows.append(p.mux_window_id)
    return windows


def choose(
    backend: Any,
    *,
    director_window: str,
    overflow: Sequence[str],
    smallest: Size,
    mode: WindowMode = "auto",
) -> Target:
    """The target for one new pane. tmux errors reading the Director's window propagate."""
    last = overflow[-1] if overflow else director_window
    if mode == "current":
        return Target(director_window, False, DIRECTOR_LAYOUT)
    if mode == "new":
        return Target(last, True, OVERFLOW_LAYOUT)
    geometry = backend.window_geometry(director_window)
    if main_vertical_member(geometry, geometry.panes + 1).at_least(smallest):
        return Target(director_window, False, DIRECTOR_LAYOUT)
    for window_id in overflow:
        try:
            geometry = backend.window_geometry(window_id)
        except MultiplexerError:
            continue  # the window closed meanwhile
        if tiled_member(geometry, geometry.panes + 1).at_least(smallest):
            return Target(window_id, False, OVERFLOW_LAYOUT)
    return Target(last, True, OVERFLOW_LAYOUT)


def spawn_at(
    backend: Any,
    target: Target,
    *,
    session: str,
    window_name: str,
    argv: Sequence[str],
    cwd: str,
    env: Mapping[str, str],
) -> PaneContext:
    """Split the target window, or open the new window; the new pane's context, with the
    server it is on and the process tmux started in it (what its placement records,
    docs/runtime.md §1.8)."""
    if target.new_window:
        window_id, pane_id = backend.new_window(
            after_window_id=target.window_id, name=window_name, argv=argv, cwd=cwd, env=env
        )
    else:
        window_id = target.window_id
        pane_id = backend.split_window(
            window_id=target.window_id, argv=argv, cwd=cwd, env=env, layout=target.layout
        )
    server, pid = identify(backend, pane_id)
    return PaneContext(session, window_id, pane_id, server, pid)


def identify(backend: Any, pane_id: str) -> tuple[Any, int | None]:
    """The server and process of a pane just spawned: (None, None) when tmux cannot say (its
    agent already exited, or a backend without them): its placement then records none."""

    try:
        status = backend.pane_status(pane_id)
    except MultiplexerError:
        return None, None
    return getattr(status, "server", None), getattr(status, "pane_pid", None)


# --- a pane on a host other than the root Director's (docs/runtime.md §10.3) --------------------


def on_host_of(
    members: Iterable[Member], director_host: str | None, anchor: Placement
) -> list[Member]:
    """The members whose panes are on the host of ``anchor`` (the pane a new one goes next to);
    ``director_host``: the fleet's root Director's host (a placement without its own)."""
    host = effective_host(anchor.host_id, director_host)
    return [
        m
        for m in members
        if m.placement is not None and effective_host(m.placement.host_id, director_host) == host
    ]


def local_anchor(backend: Any, director_placement: Placement, here: str, command: str) -> Placement:
    """The pane a member's pane made on a host other than its root Director's is placed next
    to: the pane ``command`` runs in (its session and window take the Director's place in the
    layout rules), on this host's tmux server. Without a tmux pane here (a plain shell, no
    server) it is refused naming what to do: the Director's window is on another machine."""
    try:
        backend.ensure_available()
        context = backend.discover_context()
    except MultiplexerError as exc:
        raise WorkflowError(
            f"the fleet's root Director is on host {director_placement.host_id}, not this host "
            f"({here}): run '{command}' in a tmux pane on this host ({exc})"
        ) from exc
    return Placement(
        member_id=director_placement.member_id,
        backend="tmux",
        mux_session=context.session,
        mux_window_id=context.window_id,
        mux_pane_id=context.pane_id,
        coding_agent=director_placement.coding_agent,
        created_at=director_placement.created_at,
        mux_socket=backend.socket_path,
        host_id=here,
    )


def window_name(fleet_id: int, name: str | None) -> str:
    """An overflow window is named after its fleet."""
    return name if name else f"fleet {fleet_id}"


__all__ = [
    "Target",
    "WindowMode",
    "choose",
    "fleet_windows",
    "local_anchor",
    "minimum",
    "on_host_of",
    "spawn_at",
    "window_mode",
    "window_name",
]
