"""Everything a member's agent started, found before its pane is killed and ended after
(docs/runtime.md §1.10): `member delete` and `fleet delete`.

Killing a pane sends SIGHUP to what runs in it; a child that ignores it, or one that left the
pane's process tree (Codex's app-server daemon and its `pid-update-loop`: double fork, setsid),
outlives the kill. Such a process still carries the pane's environment (`TMUX`, `TMUX_PANE`),
which is how it is found, on this run of the tmux server only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

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
    from cafleet.procs import pane_processes, server_pid_of

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
    from cafleet.db.timefmt import parse_ts
    from cafleet.mux import MultiplexerError, same_server

    if not same_server(getattr(backend, "socket_path", None), placement.mux_socket):
        return False
    created = parse_ts(placement.created_at)
    try:
        started = backend.server_started_at()
    except MultiplexerError:
        return False
    return created is not None and started is not None and created.timestamp() >= started


def kill_pane_and_leftovers(backend: Any, pane_id: str, placement: Placement) -> bool:
    """Kill the placement's pane (True: killed, False: already gone), then make sure every
    process found for it beforehand has ended (`cafleet.procs.end_processes`), even when the
    kill fails."""
    from cafleet.procs import end_processes

    procs = pane_leftovers(backend, [pane_id], lambda _: made_on_this_server(backend, placement))
    try:
        return bool(backend.kill_pane(pane_id, ignore_missing=True))
    finally:
        end_processes(procs)


__all__ = ["kill_pane_and_leftovers", "made_on_this_server", "pane_leftovers"]
