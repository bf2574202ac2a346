"""The member lock (docs/runtime.md §5.11): what makes the check-and-spawn of `member respawn`,
`fleet adopt` and `fleet restore` one at a time per member, whatever runs at once.

Held across tmux calls and a spawn, so it is not the writer lock (every write in the database
would wait for the spawn, and the lock order puts pane locks before it): on SQLite a `flock`ed
file per member under `locks/` (a SQLite file serves one machine); on PostgreSQL a row lock on
the member's `members` row (`FOR NO KEY UPDATE`, which a message's foreign-key check does not
wait for), held by a connection of its own, so every host queues on it. Either goes with the
process: a killed command never leaves it taken.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from cafleet.errors import CafleetError

# The row lock's statement: PostgreSQL only (SQLite has no row locks).
_ROW_LOCK = "SELECT member_id FROM members WHERE member_id = %s FOR NO KEY UPDATE"


class MemberLockTimeout(CafleetError):
    """Another command held the member's lock for the whole wait (the workflows word it)."""

    def __init__(self, member_id: int) -> None:
        super().__init__(f"member {member_id}'s lock is taken")
        self.member_id = member_id


def member_lock_path(db_dir: str, member_id: int) -> str:
    from cafleet.config import locks_dir

    return os.path.join(locks_dir(db_dir), f"member-{member_id}.lock")


@contextlib.contextmanager
def member_lock(conn: Any, db_dir: str, member_id: int, *, timeout: float) -> Iterator[None]:
    """Hold ``member_id``'s lock (waiting up to ``timeout`` seconds, else `MemberLockTimeout`)
    for the body. ``conn`` is the command's connection (its dialect and database);
    ``db_dir`` the database's local directory (`Settings.db_dir`)."""
    from cafleet.db.runtime import is_postgres_connection

    if is_postgres_connection(conn):
        with _row_lock(conn.info["cafleet.path"], member_id, timeout):
            yield
        return
    from cafleet.db.writelock import flock_with_timeout, lock_file_fd, unlock

    fd = lock_file_fd(member_lock_path(db_dir, member_id))
    try:
        if not flock_with_timeout(fd, timeout):
            raise MemberLockTimeout(member_id)
        try:
            yield
        finally:
            unlock(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def _row_lock(path: str, member_id: int, timeout: float) -> Iterator[None]:
    import sqlite3

    from cafleet.db.errors import DatabaseBusy
    from cafleet.db.pg.runtime import as_sqlite_error, connect_driver

    millis = max(1, int(timeout * 1000))
    driver = connect_driver(path, lock_timeout=f"{millis}ms")
    try:
        try:
            driver.execute("BEGIN")
            driver.execute(_ROW_LOCK, (member_id,))
        except Exception as exc:
            error = as_sqlite_error(exc)
            if isinstance(error, DatabaseBusy):
                raise MemberLockTimeout(member_id) from None
            if isinstance(error, sqlite3.Error):
                raise error from None
            raise
        yield
    finally:
        with contextlib.suppress(Exception):
            driver.execute("ROLLBACK")
        driver.close()


__all__ = ["MemberLockTimeout", "member_lock", "member_lock_path"]
