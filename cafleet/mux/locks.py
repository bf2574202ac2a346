"""The pane-input lock (docs/runtime.md §3): one flock'ed file per pane key.

File: ``<db dir>/locks/pane-<sha256 of backend NUL session NUL pane>.lock`` (0o600, never
deleted; ``locks/`` is created 0o700). Acquisition is ``flock(LOCK_EX | LOCK_NB)`` retried every
50 ms to a monotonic deadline; a timeout of 0 is a single try. Several locks are taken in
ascending file-name order.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from typing import NamedTuple

from cafleet.config import locks_dir
from cafleet.db.timefmt import now_ts
from cafleet.digest import sha256
from cafleet.errors import CafleetError
from cafleet.files import create_private, private_dirs
from cafleet.mux import PaneKey

RETRY_INTERVAL = 0.05


class LockHolder(NamedTuple):
    """A parsed holder record `<pid> <ts> <purpose>` (diagnostics only)."""

    pid: int
    ts: str
    purpose: str


class PaneLockTimeout(CafleetError):
    """The wait ran out. No user-facing text of its own; callers render docs/cli.md §1.11's."""

    def __init__(
        self, pane_id: str, waited: float, holder: LockHolder | None, key: PaneKey
    ) -> None:
        super().__init__(f"pane lock for {pane_id} not acquired after {waited:.2f} s")
        self.pane_id = pane_id
        self.waited = waited
        self.holder = holder
        self.key = key


class PaneLockAbandoned(CafleetError):
    """``keep_waiting`` returned False between tries; nothing is held. Not a failure."""

    def __init__(self, pane_id: str, key: PaneKey) -> None:
        super().__init__(f"pane lock wait for {pane_id} abandoned")
        self.pane_id = pane_id
        self.key = key


def lock_file_name(key: PaneKey) -> str:
    joined = "\x00".join([key.backend, key.session, key.pane_id])
    digest = sha256(joined.encode("utf-8", "surrogatepass")).hexdigest()
    return f"pane-{digest}.lock"


def pane_lock_path(db_dir: str, key: PaneKey) -> str:
    """`<db dir>/locks/pane-<h>.lock` (docs/runtime.md §3.1)."""
    return os.path.join(locks_dir(db_dir), lock_file_name(key))


def parse_holder(text: str) -> LockHolder | None:
    line = text.split("\n", 1)[0]
    parts = line.split(" ", 2)
    if len(parts) < 2:
        return None
    try:
        pid = int(parts[0])
    except ValueError:
        return None
    return LockHolder(pid=pid, ts=parts[1], purpose=parts[2] if len(parts) > 2 else "")


def read_holder(path: str) -> LockHolder | None:
    """The holder record currently in a lock file, or None (missing, empty, unparsable)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return parse_holder(fh.read(4096))
    except OSError:
        return None


def _open_lock_file(path: str) -> int:
    private_dirs(os.path.dirname(path))
    return create_private(path)


def _try_flock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError as exc:
        if exc.errno in (11, 35):  # EAGAIN / EWOULDBLOCK on some platforms
            return False
        raise
    return True


class PaneLock:
    """A held pane-input lock. ``release()`` is idempotent; also a context manager."""

    def __init__(self, key: PaneKey, path: str, fd: int, purpose: str) -> None:
        self.key = key
        self.path = path
        self.purpose = purpose
        self._fd: int | None = fd

    @property
    def held(self) -> bool:
        return self._fd is not None

    def _write_record(self) -> None:
        assert self._fd is not None
        record = f"{os.getpid()} {now_ts()} {self.purpose}\n".encode("utf-8", "surrogateescape")
        with suppress(OSError):  # the record is for diagnostics only
            os.ftruncate(self._fd, 0)
            os.pwrite(self._fd, record, 0)

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def __enter__(self) -> PaneLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __del__(self) -> None:  # pragma: no cover - safety net
        with suppress(Exception):
            self.release()


def try_pane_lock(db_dir: str, key: PaneKey, *, purpose: str = "try") -> PaneLock | None:
    """One non-blocking try (for fleet delete's in-transaction try). None when busy."""
    path = pane_lock_path(db_dir, key)
    fd = _open_lock_file(path)
    if not _try_flock(fd):
        os.close(fd)
        return None
    lock = PaneLock(key, path, fd, purpose)
    lock._write_record()
    return lock


def lock_busy(db_dir: str, key: PaneKey) -> bool:
    """Whether some process holds ``key``'s lock now. Creates nothing (doctor creates no lock
    file): a lock file that does not exist was never held."""
    try:
        fd = os.open(pane_lock_path(db_dir, key), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        if not _try_flock(fd):
            return True
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def acquire_pane_lock(
    db_dir: str,
    key: PaneKey,
    *,
    timeout: float,
    purpose: str,
    keep_waiting: Callable[[], bool] | None = None,
) -> PaneLock:
    """Take the lock or raise PaneLockTimeout / PaneLockAbandoned (holding nothing)."""
    path = pane_lock_path(db_dir, key)
    fd = _open_lock_file(path)
    start = time.monotonic()
    deadline = start + max(0.0, float(timeout))
    try:
        while True:
            if _try_flock(fd):
                break
            now = time.monotonic()
            if now >= deadline:
                raise PaneLockTimeout(key.pane_id, now - start, read_holder(path), key)
            if keep_waiting is not None and not keep_waiting():
                raise PaneLockAbandoned(key.pane_id, key)
            time.sleep(min(RETRY_INTERVAL, max(0.0, deadline - time.monotonic())))
    except BaseException:
        os.close(fd)
        raise
    lock = PaneLock(key, path, fd, purpose)
    lock._write_record()
    return lock


@contextmanager
def pane_input_lock(
    db_dir: str,
    key: PaneKey,
    *,
    timeout: float,
    purpose: str,
    keep_waiting: Callable[[], bool] | None = None,
) -> Iterator[PaneLock]:
    """Context manager form of `acquire_pane_lock` (docs/runtime.md §3.2)."""
    lock = acquire_pane_lock(
        db_dir, key, timeout=timeout, purpose=purpose, keep_waiting=keep_waiting
    )
    try:
        yield lock
    finally:
        lock.release()


class PaneLockSet:
    """Several held pane locks (fleet delete). ``try_add`` is the `try_lock(key) -> bool`
    callback for `delete_fleet`: one non-blocking try on a key not yet held."""

    def __init__(self, db_dir: str, purpose: str) -> None:
        self.db_dir = db_dir
        self.purpose = purpose
        self._locks: dict[PaneKey, PaneLock] = {}

    @property
    def keys(self) -> frozenset[PaneKey]:
        return frozenset(self._locks)

    @property
    def locks(self) -> list[PaneLock]:
        return list(self._locks.values())

    def __contains__(self, key: object) -> bool:
        return key in self._locks

    def add(self, lock: PaneLock) -> None:
        self._locks[lock.key] = lock

    def try_add(self, key: PaneKey) -> bool:
        if key in self._locks:
            return True
        lock = try_pane_lock(self.db_dir, key, purpose=self.purpose)
        if lock is None:
            return False
        self._locks[key] = lock
        return True

    def release_all(self) -> None:
        locks = list(self._locks.values())
        self._locks.clear()
        for lock in reversed(locks):
            lock.release()

    def __enter__(self) -> PaneLockSet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release_all()


def sort_keys_by_lock_file(keys: Iterable[PaneKey]) -> list[PaneKey]:
    """Distinct keys in ascending lock-file-name order (docs/runtime.md §3.4)."""
    unique = {lock_file_name(key): key for key in keys}
    return [unique[name] for name in sorted(unique)]


def acquire_pane_locks(
    db_dir: str,
    keys: Iterable[PaneKey],
    *,
    timeout: float,
    purpose: str,
    keep_waiting: Callable[[], bool] | None = None,
) -> PaneLockSet:
    """Take every key's lock in ascending file-name order, waiting at most ``timeout`` for
    each. On any timeout or abandon, release everything taken so far and re-raise (the
    exception names the busy key)."""
    held = PaneLockSet(db_dir, purpose)
    try:
        for key in sort_keys_by_lock_file(keys):
            held.add(
                acquire_pane_lock(
                    db_dir, key, timeout=timeout, purpose=purpose, keep_waiting=keep_waiting
                )
            )
    except BaseException:
        held.release_all()
        raise
    return held


__all__ = [
    "LockHolder",
    "PaneLock",
    "PaneLockAbandoned",
    "PaneLockSet",
    "PaneLockTimeout",
    "acquire_pane_lock",
    "acquire_pane_locks",
    "lock_busy",
    "lock_file_name",
    "pane_input_lock",
    "pane_lock_path",
    "parse_holder",
    "read_holder",
    "sort_keys_by_lock_file",
    "try_pane_lock",
]
