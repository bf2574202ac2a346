"""The schema guard (docs/cli.md §1.7, docs/storage.md §5.4): renders a `Diagnosis` as the exact error.

The guard diagnoses the very connection the command body then uses, so writes reach the
diagnosed file. It never creates the file or its directory and never imports Alembic. A file at
head is recognised by `cafleet.db.current` (its catalogue equals head's, read in one statement),
a PostgreSQL database at head by `cafleet.db.pg.current` (one statement whose fingerprint of the
schema's shape equals head's); only another database loads the full diagnosis and the recorded
shapes of every revision.
"""

from __future__ import annotations

import os
import sqlite3
from typing import TYPE_CHECKING, Any

from cafleet import status
from cafleet.config import is_postgres
from cafleet.db.catalog.sqlite.heads import HEAD_REVISION
from cafleet.db.current import is_current
from cafleet.db.runtime import (
    Connection,
    close_connection,
    is_postgres_connection,
    mark_validated,
    open_connection,
)
from cafleet.errors import CafleetError

if TYPE_CHECKING:
    from cafleet.db.diagnosis import Diagnosis

SCHEMA_VERSION_KEY = "cafleet.schema_version_pragma"


class GuardRefused(CafleetError):
    """The file is not `current`; str() is the guard's text (printed as `Error: <text>`)."""

    error_code = status.CODE_DATABASE

    def __init__(self, text: str, diagnosis: Diagnosis | None = None) -> None:
        self.text = text
        self.diagnosis = diagnosis
        super().__init__(text)


def guard_text(d: Diagnosis) -> str | None:
    """`cafleet.db.diagnosis.guard_text`, imported only when a file is refused."""
    from cafleet.db.diagnosis import guard_text as text

    return text(d)


def _refusal(d: Diagnosis) -> GuardRefused:
    return GuardRefused(guard_text(d) or "", d)


def _refused(path: str, state: str, **kw: Any) -> GuardRefused:
    """The refusal of a file classified without reading its catalogue (missing, unreadable)."""
    from cafleet.db.diagnosis import Diagnosis

    kw.setdefault("revision", None)
    kw.setdefault("schema_version", None)
    return _refusal(Diagnosis(state=state, path=path, **kw))  # type: ignore[arg-type]


def _unreadable(path: str, cause: str) -> GuardRefused:
    return _refused(path, "unreadable", reason=cause)


def _diagnose(path: str, conn: Connection) -> GuardRefused | None:
    """Inside a read transaction: None when the file is current, else its refusal."""
    if is_postgres_connection(conn):
        from cafleet.db.diagnosis import make_diagnosis
        from cafleet.db.pg.diagnosis import diagnose_in_tx

        d = diagnose_in_tx(path, conn, make_diagnosis)  # type: ignore[arg-type]
        return None if d.ok else _refusal(d)
    if is_current(conn):
        return None
    from cafleet.db.diagnosis import diagnose

    d = diagnose(path, conn)
    return None if d.ok else _refusal(d)


def open_validated_connection(path: str) -> Connection:
    """Open the command's one connection and validate it (docs/storage.md §4.4).

    Absent `path`: refuses without opening anything (nothing is created). Otherwise opens the
    file read-write, diagnoses on that connection and, for any class but `current`, closes it
    with the guarded close (§5.5) and raises `GuardRefused`. On `current` the connection is
    marked validated for `HEAD_REVISION` and returned. A PostgreSQL database first gets the
    one-statement fast check outside a transaction (§10.2); only a database it does not pass
    is diagnosed in a read transaction.
    """
    from cafleet.db import tx

    if not is_postgres(path) and not os.path.exists(path):
        raise _refused(path, "missing")
    try:
        conn = open_connection(path, mode="rw", purpose="command")
    except sqlite3.Error as e:
        raise _unreadable(path, str(e)) from None
    schema_version: int | str | None = None
    try:
        if is_postgres_connection(conn):
            # PostgreSQL's fast check: one statement, outside a transaction (§10.2).
            from cafleet.db.pg.current import current_schema_version

            schema_version = current_schema_version(conn)  # type: ignore[arg-type]
            if schema_version is not None:
                mark_validated(conn, HEAD_REVISION)
                conn.info[SCHEMA_VERSION_KEY] = schema_version
                return conn
        try:
            with tx.read(conn):
                refusal = _diagnose(path, conn)
                if refusal is None:
                    schema_version = _schema_version(conn)
        except sqlite3.Error as e:
            refusal = _unreadable(path, str(e))
    except BaseException:
        close_connection(conn, guarded=True)
        raise
    if refusal is not None:
        close_connection(conn, guarded=True)
        raise refusal
    mark_validated(conn, HEAD_REVISION)
    conn.info[SCHEMA_VERSION_KEY] = schema_version
    return conn


def recheck_schema(conn: Connection) -> None:
    """For long-running commands, once per cycle (docs/cli.md §1.7, docs/storage.md §4.4).

    Compares `PRAGMA schema_version` with the value remembered at validation; when it changed,
    re-diagnoses on the same connection and raises `GuardRefused` unless the file is still
    `current` (at head, the revision every connection is validated for). A refused connection
    is marked `cafleet.refused`, and the invocation closes it the guarded way
    (`cafleet.cli.context.Invocation.close`).
    """
    from cafleet.db import tx

    path = conn.info["cafleet.path"]
    try:
        with tx.read(conn):
            now = _schema_version(conn)
            if now == conn.info.get(SCHEMA_VERSION_KEY):
                return
            refusal = _diagnose(path, conn)
    except sqlite3.Error as e:
        refusal = _unreadable(path, str(e))
    if refusal is None:
        conn.info[SCHEMA_VERSION_KEY] = now
        return
    conn.info["cafleet.refused"] = True
    raise refusal


def _schema_version(conn: Connection) -> int | str:
    """`PRAGMA schema_version`, or PostgreSQL's schema fingerprint (docs/storage.md §10.2)."""
    if is_postgres_connection(conn):
        from cafleet.db.pg.diagnosis import schema_fingerprint

        return schema_fingerprint(conn)  # type: ignore[arg-type]
    return int(conn.exec_driver_sql("PRAGMA main.schema_version").scalar_one())


def open_revalidated_connection(path: str, schema_version: int | str | None) -> Connection:
    """A further connection to a file this process validated at start-up (the WebUI server
    opens one per request, docs/storage.md §8).

    Opened by the factory and marked validated for `HEAD_REVISION` without a new diagnosis,
    remembering the start-up `PRAGMA schema_version`; `recheck_schema` then re-runs the guard
    only if the schema changed since, and a file that is no longer `current` is refused with
    the guard's text (the connection closed the guarded way). A file gone since start-up is
    refused as `missing`.
    """
    if not is_postgres(path) and not os.path.exists(path):
        raise _refused(path, "missing")
    try:
        conn = open_connection(path, mode="rw", purpose="command")
    except sqlite3.Error as e:
        raise _unreadable(path, str(e)) from None
    mark_validated(conn, HEAD_REVISION)
    conn.info[SCHEMA_VERSION_KEY] = schema_version
    try:
        recheck_schema(conn)
    except BaseException:
        close_connection(conn, guarded=True)
        raise
    return conn


__all__ = [
    "SCHEMA_VERSION_KEY",
    "GuardRefused",
    "guard_text",
    "open_revalidated_connection",
    "open_validated_connection",
    "recheck_schema",
]
