"""Exit statuses, error codes and the shared error sentences: the one map (docs/cli.md §1.4).

Every layer names its failures with the codes below (an exception class's ``error_code``); the
CLI turns a code into its exit status here and nowhere else, and renders it as ``Error: <text>``
or, under ``--json``, as one ``{"error": {"code", "message"}}`` object on stderr. The not-found
and deregistered sentences are built here so every command words them alike.

Standard library only: the storage, broker, monitor and CLI layers all import it.
"""

from __future__ import annotations

import errno
import os

from cafleet.errors import CafleetError

# --- exit statuses ---------------------------------------------------------------------------

OK = 0
ERROR = 1  # a runtime error; doctor found issues
USAGE = 2
INTERNAL = 70  # a bug: an exception nothing maps (EX_SOFTWARE of sysexits.h)
UNKNOWN = 75  # a send could not tell whether its message was stored (EX_TEMPFAIL: check, retry)
TIMEOUT = 124  # `message wait` saw no message before its deadline (as timeout(1) exits)
SIGINT = 130
BROKEN_PIPE = 141
SIGTERM = 143

# --- error codes (the "code" of the --json error object) -------------------------------------

CODE_USAGE = "usage"
CODE_NOT_FOUND = "not_found"  # no such fleet, member or message
CODE_DEREGISTERED = "deregistered"  # the member exists but is no longer active
CODE_DELETED = "deleted"  # the fleet is soft-deleted
CODE_CONFLICT = "conflict"  # a slot or a state forbids it (monitor taken, cannot ACK, ...)
CODE_BUSY = "busy"  # the database or a pane lock stayed taken
CODE_TMUX = "tmux"  # tmux is missing, unreachable, or a call failed
CODE_DATABASE = "database"  # the schema guard refused the file, or SQLite failed
CODE_OS = "os"  # a file-system call failed (the message names the path and the remedy)
CODE_TIMEOUT = "timeout"
CODE_UNKNOWN = "unknown"  # a send lost the database and could not tell what it stored
CODE_INTERRUPTED = "interrupted"
CODE_OUTPUT = "output"  # writing stdout failed
CODE_ERROR = "error"  # a cafleet error without a code of its own
CODE_INTERNAL = "internal"  # anything unmapped: a bug in cafleet, not a user error

_EXIT_FOR_CODE = {
    CODE_USAGE: USAGE,
    CODE_TIMEOUT: TIMEOUT,
    CODE_UNKNOWN: UNKNOWN,
    CODE_INTERNAL: INTERNAL,
}


def exit_status(code: str) -> int:
    """The exit status of an error code: 2 for usage, 70 for a bug, 75 for an unknown send
    outcome, 124 for a timeout, else 1."""
    return _EXIT_FOR_CODE.get(code, ERROR)


def error_code(exc: BaseException) -> str:
    """The code of an exception: its class's ``error_code``, ``os`` for an OSError, an SQLite
    error's ``database``, ``error`` for any other cafleet error, else ``internal`` (a bug)."""
    code = getattr(exc, "error_code", None)
    if isinstance(code, str):
        return code
    if isinstance(exc, OSError):
        return CODE_OS
    orig = getattr(exc, "orig", None)
    if orig is not None and type(orig).__module__ == "sqlite3":
        return CODE_DATABASE
    if type(exc).__module__ == "sqlite3":
        return CODE_DATABASE
    return CODE_ERROR if isinstance(exc, CafleetError) else CODE_INTERNAL


# --- the shared sentences --------------------------------------------------------------------


def not_found(entity: str, ident: object) -> str:
    """`member 999 not found`, `fleet 999 not found`, `message 999 not found`."""
    return f"{entity} {ident} not found"


def deregistered(member_id: object) -> str:
    """`member 5 is deregistered`: the member exists but an active one is needed."""
    return f"member {member_id} is deregistered"


_ELSEWHERE = "set CAFLEET_DATABASE_URL=sqlite:///<absolute path> to a writable location"
_REMEDIES = {
    errno.EROFS: f"the database needs a writable file system: {_ELSEWHERE}",
    errno.EACCES: f"fix the path's permissions or {_ELSEWHERE}",
    errno.EPERM: f"fix the path's permissions or {_ELSEWHERE}",
    errno.ENOSPC: "free some disk space, then re-run the command",
    errno.EDQUOT: "free some space within your disk quota, then re-run the command",
    errno.ENOENT: "create the missing directory or fix the path",
    errno.ENOTDIR: "a component of the path is a file, not a directory; fix the path",
    errno.EISDIR: "the path is a directory; name a file instead",
    errno.EMFILE: "too many open files; close some programs, then re-run the command",
    errno.ENFILE: "too many open files; close some programs, then re-run the command",
}


def os_error_text(exc: OSError, action: str | None = None) -> str:
    """An OSError as a sentence naming the path and the remedy.

    `cannot create /ro/locks: read-only file system; the database needs a writable …`.
    ``action`` is the verb phrase (default: `use`).
    """
    reason = (exc.strerror or str(exc) or type(exc).__name__).strip()
    reason = reason[:1].lower() + reason[1:]
    paths = [p for p in (exc.filename, exc.filename2) if p not in (None, "")]
    shown = " -> ".join(os.fsdecode(p) if isinstance(p, bytes) else str(p) for p in paths)
    head = f"cannot {action or 'use'} {shown}: {reason}" if shown else reason
    remedy = _REMEDIES.get(exc.errno or 0)
    return f"{head}; {remedy}" if remedy else head


__all__ = [
    "BROKEN_PIPE",
    "CODE_BUSY",
    "CODE_CONFLICT",
    "CODE_DATABASE",
    "CODE_DELETED",
    "CODE_DEREGISTERED",
    "CODE_ERROR",
    "CODE_INTERNAL",
    "CODE_INTERRUPTED",
    "CODE_NOT_FOUND",
    "CODE_OS",
    "CODE_OUTPUT",
    "CODE_TIMEOUT",
    "CODE_TMUX",
    "CODE_UNKNOWN",
    "CODE_USAGE",
    "ERROR",
    "INTERNAL",
    "OK",
    "SIGINT",
    "SIGTERM",
    "TIMEOUT",
    "UNKNOWN",
    "USAGE",
    "deregistered",
    "error_code",
    "exit_status",
    "not_found",
    "os_error_text",
]
