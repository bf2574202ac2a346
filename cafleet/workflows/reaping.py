"""Everything a member's agent started, found before its pane is killed and ended after
(docs/runtime.md §1.10): `member delete` and `fleet delete`; and what a pane that is gone or
dead left running, ended before `member respawn` and `fleet restore` start its agent again.

Killing a pane sends SIGHUP to what runs in it; a child that ignores it, or one that left the
pane's process tree (Codex's app-server daemon and its `pid-update-loop`: double fork, setsid),
outlives the kill. Such a process still carries the pane's environment (`TMUX`, `TMUX_PANE`),
which is how it is found, on the run of the tmux server that made the pane only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from cafleet.db.timefmt import parse_ts
from cafleet.mux import MultiplexerError, same_server
from cafleet.procs import end_processes, pane_processes, server_pid_of

if TYPE_CHECKING:
    from cafleet.procs import Proc
    from cafleet.records import Placement


def pane_leftovers(
    backend: Any, panes: Sequence[str], searchable: Callable[[str], bool] = lambda _: False
) -> set[Proc]:
    """The running processes of ``panes`` on ``backend``'s server: each live pane's process
    tree and every process whose environment names it; for a pane no longer on the server, the
    processes whose environment names it on this run of the server, when ``searchable(pane)``
    says the pane was made on this run (`made_on_this_server`). Asks tmux once (the panes' pids)."""
    socket_path = getattr(backend, "socket_path", None)
    if not socket_path:
        return set()
    every = backend.pane_pids()
    live = {pane: every[pane] for pane in panes if pane in every}
    gone = [pane for pane in panes if pane not in every and searchable(pane)]
    found: set[Proc] = set()
    by_pane = pane_processes(socket_path, live, gone=gone, server_pid=server_pid_of(every.values()))
    for procs in by_pane.values():
        found |= procs
    return found


def made_on_this_server(backend: Any, placement: Placement) -> bool:
    """Whether ``placement``'s pane was made by the server running now on its socket: the
    placement was written after that server started. An earlier server's pane ids are handed
    out again, so without that answer nothing is searched."""
    if not same_server(getattr(backend, "socket_path", None), placement.mux_socket):
        return False
    created = parse_ts(placement.created_at)
    try:
        started = backend.server_started_at()
    except MultiplexerError:
        return False
    return created is not None and started is not None and created.timestamp() >= started


def run_of(backend: Any, placement: Placement) -> int | None:
    """The pid of the run of the tmux server that made ``placement``'s pane, when it can be
    told: the server the placement records (docs/runtime.md §1.8), unless the server now on
    its socket has that pid with another start time (a reused pid: nothing is told); for a
    placement that records none, the server running now when the placement was made on it
    (`made_on_this_server`)."""

    server_id = getattr(backend, "server_id", lambda: None)
    if placement.mux_server_pid is None or placement.mux_server_start is None:
        if not made_on_this_server(backend, placement):
            return None
        try:
            now = server_id()
        except MultiplexerError:
            return None
        return None if now is None else int(now.pid)
    if same_server(getattr(backend, "socket_path", None), placement.mux_socket):
        try:
            now = server_id()
        except MultiplexerError:
            now = None  # no server answers there now: the recorded run is gone
        reused = now is not None and now.pid == placement.mux_server_pid
        if reused and now is not None and now.start != placement.mux_server_start:
            return None  # the recorded pid, taken by a later server: cannot tell them apart
    return placement.mux_server_pid


def left_running(backend: Any, placement: Placement, *, dead: bool = False) -> set[Proc]:
    """What ``placement``'s pane left running, its pane gone or dead (`member respawn`,
    `fleet restore`): every process whose environment names that pane on the run of the tmux
    server that made it (`run_of`), and, while the pane is still listed on that run (``dead``:
    its agent exited), its process tree. Nothing when the run cannot be told, or when the pane
    is listed there running (moved elsewhere, or another process than the recorded one: what
    runs there is not for this command to end)."""

    socket_path = placement.mux_socket or getattr(backend, "socket_path", None)
    pane = placement.mux_pane_id
    run = run_of(backend, placement)
    if not socket_path or pane is None or run is None:
        return set()
    try:
        every = backend.pane_pids()
    except MultiplexerError:
        every = {}
    live: dict[str, int] = {}
    if pane in every and server_pid_of(every.values()) == run:
        if not dead or placement.mux_pane_pid not in (None, every[pane]):
            return set()  # the pane still runs (moved, or respawned in place): not ours to end
        live = {pane: every[pane]}
    gone = [] if live else [pane]
    found: set[Proc] = set()
    for procs in pane_processes(socket_path, live, gone=gone, server_pid=run).values():
        found |= procs
    return found


def kill_pane_and_leftovers(backend: Any, pane_id: str, placement: Placement) -> bool:
    """Kill the placement's pane (True: killed, False: already gone), then make sure every
    process found for it beforehand has ended (`cafleet.procs.end_processes`), even when the
    kill fails."""
    procs = pane_leftovers(backend, [pane_id], lambda _: made_on_this_server(backend, placement))
    try:
        return bool(backend.kill_pane(pane_id, ignore_missing=True))
    finally:
        end_processes(procs)


__all__ = [
    "kill_pane_and_leftovers",
    "left_running",
    "made_on_this_server",
    "pane_leftovers",
    "run_of",
]
