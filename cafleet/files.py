"""Files on disk (docs/operations.md §2): what cafleet reads and what it creates.

- Reading a file someone else may have put in place (the price table, an agent's session
  record) opens it without blocking and reads it only if it is a regular file, so a FIFO or a
  device there never hangs a command; `read_regular` also bounds the size.
- What cafleet creates (the database and its companions, logs, caches, locks, holds) is the
  user's alone: files `0600` in directories `0700`, whatever the umask.
"""

from __future__ import annotations

import os
import stat

FILE_MODE = 0o600
DIR_MODE = 0o700
NOT_REGULAR = "not a regular file"


def open_regular(path: str) -> int:
    """A read-only descriptor of ``path``, opened without blocking (a FIFO opens at once) and
    checked to be a regular file; raises `OSError` (`NOT_REGULAR` for a FIFO, a device, a
    directory or a socket)."""
    if not stat.S_ISREG(os.stat(path).st_mode):  # a device is never even opened
        raise OSError(NOT_REGULAR)
    # O_NONBLOCK: what was swapped in since is a FIFO at worst, and opens at once; fstat decides.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(NOT_REGULAR)
        # Reads on a regular file never block; clear the flag anyway so reads behave normally.
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular(path: str, limit: int) -> bytes:
    """The bytes of regular file ``path``; `OSError` when it holds more than ``limit``."""
    fd = open_regular(path)
    try:
        chunks: list[bytes] = []
        size = 0
        while True:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise OSError(f"larger than {limit} bytes")
    finally:
        os.close(fd)
    return b"".join(chunks)


def private_dirs(path: str) -> None:
    """Create directory ``path`` and any missing parents, each new one `0700` whatever the
    umask; an existing directory is left as it is (it may be the user's own, like `~/.local`)."""
    if os.path.isdir(path):
        return
    parent = os.path.dirname(path)
    if parent and parent != path and not os.path.lexists(parent):
        private_dirs(parent)  # a parent that is a file fails below, naming this path
    try:
        os.mkdir(path, DIR_MODE)
    except FileExistsError:
        if not os.path.isdir(path):
            raise
        return
    os.chmod(path, DIR_MODE)  # mkdir's mode went through the umask


def create_private(path: str, flags: int = os.O_RDWR) -> int:
    """Open ``path``, creating it `0600` whatever the umask when it does not exist (an existing
    file keeps its mode); the directory must exist."""
    try:
        fd = os.open(path, flags | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, FILE_MODE)
    except FileExistsError:
        return os.open(path, flags | os.O_CLOEXEC)
    try:
        os.fchmod(fd, FILE_MODE)
    except BaseException:
        os.close(fd)
        raise
    return fd


def write_private(path: str, text: str) -> None:
    """Replace the contents of ``path`` with ``text``, creating it `0600` (see `create_private`)."""
    with os.fdopen(create_private(path, os.O_WRONLY | os.O_TRUNC), "w", encoding="utf-8") as fh:
        fh.write(text)


def tighten(path: str) -> int | None:
    """Make existing regular file ``path`` `0600` when it grants anything to group or others;
    its mode before when it changed (None: already private, missing, or not ours to change)."""
    try:
        st = os.stat(path)  # a symlinked database: its file is what others could read
    except OSError:
        return None
    mode = stat.S_IMODE(st.st_mode)
    if not stat.S_ISREG(st.st_mode) or mode & 0o077 == 0:
        return None
    try:
        os.chmod(path, FILE_MODE)
    except OSError:
        return None
    return mode


__all__ = [
    "DIR_MODE",
    "FILE_MODE",
    "NOT_REGULAR",
    "create_private",
    "open_regular",
    "private_dirs",
    "read_regular",
    "tighten",
    "write_private",
]
