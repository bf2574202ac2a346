"""The writer lock (docs/storage.md §4.3): one `flock`ed file under locks/, taken before every
BEGIN IMMEDIATE so writers queue in turn instead of spinning in SQLite's busy handler.

Standard library only: the runtime connection and SQLAlchemy's migration connection share it.
"""

from __future__ import annotations

import errno
import fcntl
import os
import signal
import threading
import time

from cafleet.config import locks_dir
from cafleet.errors import CafleetError

WRITER_LOCK_TIMEOUT = 5.0  # seconds; the same bound as busy_timeout


class _LockTimeout(CafleetError):
    pass


def lock_file_fd(path: str) -> int:
    """Open (creating) a lock file under locks/, 0o600, in a 0o700 directory (whatever the
    umask)."""
    from cafleet.files import create_private, private_dirs

    private_dirs(os.path.dirname(path))
    return create_private(path)


def flock_with_timeout(fd: int, timeout: float) -> bool:
    """Blocking exclusive flock bounded by `timeout`; True when taken.

    A blocked flock is woken the moment the holder releases, so waiters take turns (SQLite's
    busy handler is not a queue). In the main thread an interval timer bounds the wait; other
    threads cannot take signals, so they poll instead.
    """
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        pass
    if timeout <= 0:
        return False
    if threading.current_thread() is not threading.main_thread():
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            time.sleep(0.005)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                continue
        return False

    def _alarm(_signum: int, _frame: object) -> None:
        raise _LockTimeout

    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return True
    except _LockTimeout:
        return False
    except OSError as e:  # pragma: no cover - EINTR is retried by Python itself
        if e.errno == errno.EINTR:
            return False
        raise
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def writer_lock_path(db_path: str) -> str:
    return os.path.join(locks_dir(os.path.dirname(db_path)), "db-write.lock")


def unlock(fd: int) -> None:
    fcntl.flock(fd, fcntl.LOCK_UN)
