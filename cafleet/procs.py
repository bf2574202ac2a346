"""Processes seen through /proc (Linux): which processes run in a tmux pane, and ending them.

`member delete` and `fleet delete` kill members' panes; an agent's child that ignores SIGHUP (or
left the pane's process tree, as Codex's app-server daemon does) outlives `kill-pane`, so the
delete finds every process of a pane before killing it and makes sure each has ended
afterwards (docs/runtime.md §1.10). A process is named
by its pid and its start time, so a pid reused meanwhile is never signalled.

Standard library only. Where /proc is missing every query returns nothing.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import NamedTuple

PROC = "/proc"
# The floor of a loop's liveness window (docs/runtime.md §10.4's decision): a live loop writes no
# heartbeat while one attempt waits for its line to be seen taken, so the window is never
# shorter than that wait (delivery.policy.VERIFY_TIMEOUT).
MIN_STALE_SECONDS = 15
POLL = 0.05


class Proc(NamedTuple):  # not a dataclass: cheaper to define, and `member list` imports it
    pid: int
    start: int  # field 22 of /proc/<pid>/stat, in clock ticks since boot


def stale_after(tick_seconds: int | None) -> int:
    """Seconds after its last heartbeat a loop (a fleet's, a host's) stops counting as live:
    3 ticks, at least ``MIN_STALE_SECONDS``."""
    return max(3 * (tick_seconds or 5), MIN_STALE_SECONDS)


def pid_alive(pid: int) -> bool:
    """os.kill(pid, 0) succeeds or raises PermissionError, and the process is not a zombie
    (an exited loop whose parent never reaped it, e.g. under a container init that does not
    reap, still answers kill(0))."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except PermissionError:
        return True
    except (ProcessLookupError, OverflowError, OSError):
        return False
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return False  # no /proc to ask (not Linux), or it just went: kill(0) said it exists
    # `pid (comm) S ...`: the state follows the last ')' (comm may hold spaces and parens)
    state = stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3]
    return state in (b"Z", b"X")


def _stat(pid: int, proc: str = PROC) -> tuple[str, int, int] | None:
    """(state, ppid, start time) of ``pid``, or None when it is gone."""
    try:
        with open(f"{proc}/{pid}/stat", "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    try:
        fields = data.rsplit(b")", 1)[1].split()
        return fields[0].decode(), int(fields[1]), int(fields[19])
    except (IndexError, ValueError):
        return None


def _pids(proc: str = PROC) -> list[int]:
    try:
        return [int(name) for name in os.listdir(proc) if name.isdigit()]
    except OSError:
        return []


def identify(pid: int, proc: str = PROC) -> Proc | None:
    """The running process ``pid`` (None when it is gone or a zombie)."""
    stat = _stat(pid, proc)
    if stat is None or stat[0] in ("Z", "X"):
        return None
    return Proc(pid, stat[2])


def alive(p: Proc, proc: str = PROC) -> bool:
    """Whether ``p`` still runs: the same pid with the same start time, and not a zombie."""
    stat = _stat(p.pid, proc)
    return stat is not None and stat[0] not in ("Z", "X") and stat[2] == p.start


def _environ(pid: int, proc: str = PROC) -> list[bytes]:
    try:
        with open(f"{proc}/{pid}/environ", "rb") as fh:
            return fh.read().split(b"\0")
    except OSError:
        return []


def env_value(pid: int, name: str, proc: str = PROC) -> str | None:
    """The value of ``name`` in the environment ``pid`` started with, or None."""
    prefix = name.encode() + b"="
    for entry in _environ(pid, proc):
        if entry.startswith(prefix):
            return entry[len(prefix) :].decode("utf-8", "surrogateescape")
    return None


def server_pid_of(pane_pids: Iterable[int], proc: str = PROC) -> int | None:
    """The tmux server's pid: the parent of a pane's own process (tmux forks each one); None
    when no pane process runs."""
    for pid in pane_pids:
        stat = _stat(pid, proc)
        if stat is not None and stat[0] not in ("Z", "X"):
            return stat[1]
    return None


def _server_matcher(socket_path: str, server_pid: int | None) -> Callable[[bytes], bool]:
    """Whether a `TMUX=<socket>,<server pid>,<session>` entry names the server at
    ``socket_path`` (the same file under another spelling too) and, with ``server_pid``,
    that run of it."""
    seen: dict[bytes, bool] = {}
    real = os.path.realpath(socket_path)

    def matches(entry: bytes) -> bool:
        if not entry.startswith(b"TMUX="):
            return False
        path, _, rest = entry[5:].partition(b",")
        if server_pid is not None and rest.partition(b",")[0] != str(server_pid).encode():
            return False
        if path not in seen:
            text = os.fsdecode(path)
            seen[path] = text == socket_path or os.path.realpath(text) == real
        return seen[path]

    return matches


def pane_processes(
    socket_path: str,
    pane_pids: Mapping[str, int],
    proc: str = PROC,
    *,
    gone: Collection[str] = (),
    server_pid: int | None = None,
) -> dict[str, set[Proc]]:
    """Every running process of each pane in ``pane_pids`` (pane id -> the pane's own pid):
    the pane's process tree, plus every process whose environment names that pane of the
    server at ``socket_path`` (``TMUX_PANE`` and ``TMUX``; with ``server_pid``, of that run of
    the server), which catches a child that left the tree (double fork, setsid, reparenting).
    Panes in ``gone`` (no longer on the server) are found by their environment only, and only
    with ``server_pid``: a server never hands a pane id out twice, but the next server on the
    socket does. One pass over /proc for all panes."""
    me = os.getpid()
    children: dict[int, list[int]] = {}
    starts: dict[int, int] = {}
    searched = [*pane_pids, *(gone if server_pid is not None else ())]
    by_pane: dict[str, set[Proc]] = {pane: set() for pane in [*pane_pids, *gone]}
    wanted_panes = {f"TMUX_PANE={pane}".encode(): pane for pane in searched}
    on_server = _server_matcher(socket_path, server_pid)
    for pid in _pids(proc):
        stat = _stat(pid, proc)
        if stat is None or stat[0] in ("Z", "X") or pid == me:
            continue
        starts[pid] = stat[2]
        children.setdefault(stat[1], []).append(pid)
        env = _environ(pid, proc)
        if not any(on_server(entry) for entry in env):
            continue
        for entry in env:
            pane = wanted_panes.get(entry)
            if pane is not None:
                by_pane[pane].add(Proc(pid, stat[2]))
    for pane, root in pane_pids.items():
        stack = [root]
        while stack:
            pid = stack.pop()
            if pid in starts and pid != me:
                by_pane[pane].add(Proc(pid, starts[pid]))
            stack.extend(children.get(pid, ()))
    return by_pane


def panes_with_env(pane_pids: Mapping[str, int], entry: str, proc: str = PROC) -> list[str]:
    """The panes of ``pane_pids`` (pane id -> the pane's own pid) whose process was started
    with ``entry`` (`NAME=value`) in its environment: the agents cafleet spawned for one
    member (docs/runtime.md §5.11)."""
    wanted = entry.encode()
    return sorted(pane for pane, pid in pane_pids.items() if wanted in _environ(pid, proc))


def end_processes(
    procs: Iterable[Proc],
    *,
    grace: float = 2.0,
    term_grace: float = 2.0,
    kill_grace: float = 1.0,
    sleep: Callable[[float], object] = time.sleep,
    proc: str = PROC,
) -> list[Proc]:
    """Make sure every process in ``procs`` ends: wait ``grace`` seconds (killing a pane sends
    SIGHUP), then SIGTERM the survivors and wait ``term_grace``, then SIGKILL and wait
    ``kill_grace``. Returns the processes still running after all that (normally none)."""
    left = [p for p in procs if alive(p, proc)]
    for sig, wait in ((None, grace), (signal.SIGTERM, term_grace), (signal.SIGKILL, kill_grace)):
        if not left:
            return []
        if sig is not None:
            for p in left:
                if alive(p, proc):  # re-checked right before: never signal a reused pid
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(p.pid, sig)
        deadline = time.monotonic() + wait
        while True:
            left = [p for p in left if alive(p, proc)]
            if not left or time.monotonic() >= deadline:
                break
            sleep(POLL)
    return left


def cmdline(pid: int, proc: str = PROC) -> list[str]:
    """The argv of ``pid`` ([] when it is gone or unreadable)."""
    try:
        with open(f"{proc}/{pid}/cmdline", "rb") as fh:
            raw = fh.read()
    except OSError:
        return []
    return [part.decode("utf-8", "replace") for part in raw.split(b"\0") if part]


__all__ = [
    "MIN_STALE_SECONDS",
    "Proc",
    "alive",
    "cmdline",
    "env_value",
    "end_processes",
    "identify",
    "pane_processes",
    "panes_with_env",
    "server_pid_of",
    "stale_after",
]
