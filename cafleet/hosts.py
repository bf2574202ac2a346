"""Host ids (docs/runtime.md §10.1): which machine a pane lives on, and whose panes a process types
into.

A placement records the host id of the process that made its pane (`member_placements.host_id`).
A process types only into panes on its own host; a line for a pane on another host waits for
that host's delivery loop (`cafleet monitor host`). A placement written before hosts were
recorded (NULL) is on its fleet's root Director's host, and one whose Director's placement has no
host either is on whatever host reads it: the behaviour of one-host fleets, unchanged.

Standard library only: every short command may ask which host it is on.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from cafleet.errors import CafleetError

HOST_ID_VAR = "CAFLEET_HOST_ID"


class HostIdError(CafleetError):
    """An unusable `CAFLEET_HOST_ID`, or a hostname that gives no usable id; str() is the
    message (`load_settings` raises it as a SettingsError: exit 1 like every CAFLEET_* value)."""


MAX_HOST_ID_LEN = 253  # a DNS name's longest
_HOST_ID = r"[A-Za-z0-9][A-Za-z0-9._-]*"  # compiled on first use (re's cache)
_ACCEPTED = "letters, digits, '.', '_' and '-', starting with a letter or digit, at most 253"


def valid_host_id(value: str) -> bool:
    return len(value) <= MAX_HOST_ID_LEN and re.fullmatch(_HOST_ID, value) is not None


def check_host_id_env(env: Mapping[str, str]) -> str | None:
    """`CAFLEET_HOST_ID` validated (None when unset or empty); `load_settings` calls it so every
    command refuses a bad value up front (docs/cli.md §1.6)."""
    raw = env.get(HOST_ID_VAR)
    if not raw:
        return None
    if not valid_host_id(raw):
        raise HostIdError(f"{HOST_ID_VAR} must be a host id ({_ACCEPTED}); got {raw!r}")
    return raw


def host_id_of(env: Mapping[str, str]) -> str:
    """The host id ``env`` gives: `CAFLEET_HOST_ID`, else the hostname (its first label when the
    whole name is not a usable id). A hostname that gives no usable id raises HostIdError."""
    given = check_host_id_env(env)
    if given is not None:
        return given
    name = _hostname()
    for candidate in (name, name.split(".")[0]):
        if candidate and valid_host_id(candidate):
            return candidate
    raise HostIdError(
        f"the hostname {name!r} is not a usable host id; set {HOST_ID_VAR} ({_ACCEPTED})"
    )


def _hostname() -> str:
    """`socket.gethostname()`'s answer without importing `socket` (~6 ms a command)."""
    return os.uname().nodename


_cached: tuple[str | None, str] | None = None


def current_host() -> str:
    """This process's host id (`os.environ`), computed once per value of `CAFLEET_HOST_ID`."""
    global _cached
    raw = os.environ.get(HOST_ID_VAR) or None
    if _cached is None or _cached[0] != raw:
        _cached = (raw, host_id_of(os.environ))
    return _cached[1]


def effective_host(placement_host: str | None, director_host: str | None) -> str | None:
    """The host a pane is on: its placement's, else its fleet's root Director's (a placement
    written before hosts were recorded); None: not recorded anywhere, any host's (one host)."""
    return placement_host if placement_host is not None else director_host


def is_local(placement_host: str | None, director_host: str | None, me: str) -> bool:
    """True when this host (``me``) may type into the pane (docs/runtime.md §10.2)."""
    host = effective_host(placement_host, director_host)
    return host is None or host == me


__all__ = [
    "HOST_ID_VAR",
    "HostIdError",
    "check_host_id_env",
    "current_host",
    "effective_host",
    "host_id_of",
    "is_local",
    "valid_host_id",
]
