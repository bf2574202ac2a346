"""What a send or broadcast stored when its write failed (docs/cli.md §2.14): every send carries
a client token, stored with its row; after a failure that may have followed the COMMIT (a lost
connection, an I/O error), the token is looked up on a reconnected session, so the command
says `sent` or `not sent` truthfully, or `unknown` (exit 75) when the database stays away.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from cafleet import signals, status
from cafleet.workflows.errors import WorkflowError

if TYPE_CHECKING:
    from cafleet.db.runtime import Connection

T = TypeVar("T")

SETTLE_SECONDS = 5.0  # how long a send tries to reach the database again after a failure
RETRY_PAUSE = 0.25
TOKEN_BYTES = 10  # a generated token: 20 hex digits
MAX_KEY_LEN = 200


class NotSent(WorkflowError):
    """The send's write failed and its token stored nothing: sending again is safe."""

    error_code = status.CODE_DATABASE

    def __init__(self, detail: str) -> None:
        super().__init__(
            f"not sent: {detail}; nothing was stored (checked by the send's token), so sending "
            "it again is safe"
        )


class SendUnknown(WorkflowError):
    """The send's write failed and the database stayed away: what it stored is not known."""

    error_code = status.CODE_UNKNOWN

    def __init__(self, detail: str, token: str) -> None:
        self.token = token
        super().__init__(
            f"unknown: {detail}, and it did not answer again within {SETTLE_SECONDS:g} s, so "
            "whether the message was stored is not known; check by running the same command "
            f"again with --key {token} (it stores the message only if it was not stored)"
        )


def new_token() -> str:
    import secrets

    return secrets.token_hex(TOKEN_BYTES)


def key_problem(key: str) -> str | None:
    """Why ``key`` cannot be a send's key (`--key`), or None."""
    if not key:
        return "a key must not be empty"
    if len(key) > MAX_KEY_LEN:
        return f"a key has at most {MAX_KEY_LEN} characters"
    if any(not ch.isprintable() for ch in key):
        return "a key must not contain control characters"
    return None


def doubtful(exc: BaseException) -> bool:
    """A write failure after which the write may have committed: a connection or I/O error.
    Constraint, data and usage errors, `database is locked` and a changed schema are
    definite refusals (nothing was written)."""
    return isinstance(exc, sqlite3.OperationalError) or type(exc) is sqlite3.DatabaseError


def named(conn: Connection, detail: str) -> str:
    """``detail`` naming the database (`P`: never its password)."""
    path = str(conn.info.get("cafleet.path"))
    return detail if path in detail else f"{detail} (database {path})"


def settle(
    conn: Connection, failure: BaseException, session: int | None, token: str, find: Callable[[], T]
) -> T:
    """After ``failure`` (`doubtful`), ``find()`` what the token stored, on a connection that
    works again: a lost PostgreSQL session is replaced, and the look-up waits until the old
    session has ended (then nothing it began can still commit). Tries for `SETTLE_SECONDS`;
    then, or on a signal, `SendUnknown`."""
    from cafleet.db import lost
    from cafleet.db.errors import StorageError
    from cafleet.errors import error_text

    detail = named(conn, error_text(failure))
    deadline = time.monotonic() + SETTLE_SECONDS
    while not signals.stop_requested():
        left = deadline - time.monotonic()
        try:
            if lost.is_lost(conn):
                lost.reconnect(conn, max(left, 0.0))
            if lost.session_ended(conn, session):
                return find()
        except (sqlite3.Error, StorageError):
            pass  # still away: try again until the deadline
        if time.monotonic() + RETRY_PAUSE >= deadline:
            break
        time.sleep(RETRY_PAUSE)
    raise SendUnknown(detail, token)


__all__ = [
    "SETTLE_SECONDS",
    "NotSent",
    "SendUnknown",
    "doubtful",
    "key_problem",
    "named",
    "new_token",
    "settle",
]
