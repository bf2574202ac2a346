"""Room kept in the loop's log file for its last words (docs/runtime.md §5.9).

A loop that stops because the disk is full still has to log why: the probe found a log cut
mid-traceback at 4,096 bytes. The detached loop's log is a regular file (its stdout and stderr),
so the loop keeps `RESERVE_BYTES` of blocks allocated past the file's end
(`fallocate(FALLOC_FL_KEEP_SIZE)`): appends land in blocks the file system already gave it.
Where the call is missing (not Linux) or refused (a file system without it, a terminal), there
is simply no reserve.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import stat
from collections.abc import Callable

RESERVE_BYTES = 64 * 1024
FALLOC_FL_KEEP_SIZE = 0x01

_Fallocate = Callable[[int, int, int, int], int]


def _libc_fallocate() -> _Fallocate | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        fn = libc.fallocate
    except (OSError, AttributeError):
        return None
    fn.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong)
    fn.restype = ctypes.c_int
    return fn


class LogReserve:
    """Keeps `RESERVE_BYTES` allocated past the end of the file behind ``fd``."""

    def __init__(self, fd: int, fallocate: _Fallocate | None = None) -> None:
        self.fd: int | None = None
        self._fallocate = fallocate
        try:
            if stat.S_ISREG(os.fstat(fd).st_mode):
                self.fd = fd
        except OSError:
            return
        if self.fd is not None and self._fallocate is None:
            self._fallocate = _libc_fallocate()

    @property
    def active(self) -> bool:
        return self.fd is not None and self._fallocate is not None

    def refresh(self) -> bool:
        """Top the reserve up to `RESERVE_BYTES` past the current end; True when it holds.

        Cheap when nothing was written since the last call (the blocks are already there).
        A full disk makes it fail: the reserve left from earlier calls is what remains.
        """
        if self.fd is None or self._fallocate is None:
            return False
        try:
            size = os.fstat(self.fd).st_size
        except OSError:
            return False
        return self._fallocate(self.fd, FALLOC_FL_KEEP_SIZE, size, RESERVE_BYTES) == 0


def reserve_for(stream: object) -> LogReserve | None:
    """The reserve for a stream's file, or None when it has no file descriptor."""
    try:
        fd = stream.fileno()  # type: ignore[attr-defined]
    except (AttributeError, OSError, ValueError):
        return None
    return LogReserve(fd)


__all__ = ["RESERVE_BYTES", "LogReserve", "reserve_for"]
