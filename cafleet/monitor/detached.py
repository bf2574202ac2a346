"""Starting and stopping a delivery loop as a detached child (docs/runtime.md §5.3 step 2): the
fleet's loop and a host's loop start and stop the same way, so they share these functions."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence

# Long-lived callers keep their children here and poll() them, so an exited loop never stays a
# zombie (docs/runtime.md §5.3).
_children: list[subprocess.Popen[bytes]] = []


def reap() -> None:
    for child in list(_children):
        if child.poll() is not None:
            _children.remove(child)


def spawn_detached(
    argv: Sequence[str], *, log_path: str, cwd: str, env: Mapping[str, str]
) -> subprocess.Popen[bytes]:
    """Start ``argv`` in its own session, stdin from /dev/null, stdout and stderr appended to
    ``log_path``, run from ``cwd`` (created first: PostgreSQL's local directory may not exist
    yet on this host, docs/storage.md §10.1). Raises OSError; does not wait."""
    from cafleet.files import create_private, private_dirs

    reap()
    private_dirs(cwd)
    private_dirs(os.path.dirname(log_path))
    log = create_private(log_path, os.O_WRONLY | os.O_APPEND)  # the loop's log is the user's
    try:
        child = subprocess.Popen(
            list(argv),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            env=dict(env),
            start_new_session=True,
            close_fds=True,
        )
    finally:
        os.close(log)
    _children.append(child)
    return child


STOP_TIMEOUT = 10.0  # a loop sees SIGTERM within 0.2 s, after at most one keystroke sequence
STOP_POLL = 0.05


def runs_cafleet(pid: int, *words: str) -> bool:
    """Whether ``pid``'s command line is cafleet's with every one of ``words`` among its
    arguments, so a recycled pid is never signalled; True when there is no /proc to ask (the
    live heartbeat vouches for it)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            argv = fh.read().split(b"\0")
    except FileNotFoundError:
        return False
    except OSError:
        return True
    return all(word.encode() in argv for word in ("cafleet", *words))


def terminate_and_wait(
    pid: int,
    is_ours: Callable[[int], bool],
    *,
    timeout: float = STOP_TIMEOUT,
    poll: float = STOP_POLL,
) -> bool:
    """SIGTERM ``pid`` and wait while it lives and is still ours (a recycled pid is never
    signalled or waited for); False when it outlived ``timeout`` seconds. A pending signal to
    this process interrupts the wait (`signals.check`)."""
    from cafleet import signals
    from cafleet.procs import pid_alive

    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while pid_alive(pid) and is_ours(pid):
        if time.monotonic() >= deadline:
            return False
        signals.check()
        time.sleep(poll)
    return True
