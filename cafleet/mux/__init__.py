"""Multiplexer protocol, value types, errors and backend registry (docs/runtime.md §1.1, §1.2).

Importing this module is cheap: it never imports libtmux (docs/runtime.md §0.3). Each error's
``str()`` is its user-facing message, worded exactly as docs/cli.md §1.11's tmux messages.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, Protocol, runtime_checkable

from cafleet import status
from cafleet.errors import CafleetError
from cafleet.records import PaneKey  # re-exported: the lock layer's key

if TYPE_CHECKING:
    from cafleet.mux.tmux import TmuxBackend
    from cafleet.records import Placement

# docs/cli.md §1.11, exact.
MSG_TMUX_NOT_FOUND = "tmux binary not found on PATH"
MSG_TMUX_UNSET = "not inside a tmux session (TMUX is not set)"
MSG_TMUX_PANE_UNSET = "not inside a tmux pane (TMUX_PANE is not set)"
MSG_PANE_NOT_FOUND = "pane not found"
MSG_NO_PANE_ID = "printed no pane id"
# docs/runtime.md §1.8: a pane id names a pane only on one server, and ids are reused.
MSG_NOT_OURS = "pane {pane_id} belongs to another tmux server or was reused"
SPAWN_LIMIT_BYTES = 16000


def msg_tmux_too_old(output: str) -> str:
    return f"tmux 3.0 or newer is required (found '{output}')"


def msg_unreachable(detail: str) -> str:
    return f"cannot reach tmux: {detail}"


def msg_unsupported_backend(name: str) -> str:
    return f"placement backend '{name}' is not supported by this cafleet"


def msg_spawn_too_long(size: int) -> str:
    return (
        f"spawn command is too long for tmux ({size} bytes; limit {SPAWN_LIMIT_BYTES}); "
        "shorten the spawn prompt"
    )


# --------------------------------------------------------------------------- value types


# NamedTuples, not dataclasses: every command that asks tmux imports these, and a dataclass
# costs its class several exec'd methods at import.


class ServerId(NamedTuple):
    """One tmux server's identity (docs/runtime.md §1.8): its pid and start time (epoch
    seconds, `#{pid}` and `#{start_time}`). A server started again on the same socket has
    another, whatever ids it hands out."""

    pid: int
    start: int


class PaneContext(NamedTuple):
    """The pane the calling process runs in, or a pane just spawned."""

    session: str  # tmux session name, verbatim
    window_id: str  # "@3"
    pane_id: str  # "%7"
    server: ServerId | None = None  # the server it is on (None: not asked)
    pane_pid: int | None = None  # the process tmux started in it


class PaneOwner(NamedTuple):
    """Where a placement's pane must be: the server (its socket path, None when the placement
    predates recording it) and the session and window the placement names; which server and
    process it must be (docs/runtime.md §1.8; None: not recorded), and when the placement was
    made (epoch seconds: a placement without a recorded server is older than a server that
    started after it)."""

    socket_path: str | None
    session: str
    window_id: str
    server: ServerId | None = None
    pane_pid: int | None = None
    made_at: float | None = None


def server_env(socket_path: str | None, env: Mapping[str, str]) -> dict[str, str] | None:
    """The environment that reaches the tmux server at ``socket_path`` (the one a placement
    records, `member_placements.mux_socket`): ``env`` itself when its ``TMUX`` already names that
    server, else ``env`` with ``TMUX`` naming the socket and no ``TMUX_PANE`` (this process is in
    no pane of that server), so a command run from a plain shell, or from another server, reaches
    the fleet's panes (docs/runtime.md §1.3). A placement that recorded no socket gives ``env``
    when ``TMUX`` is set, else None (nothing names a server)."""
    current = env.get("TMUX") or None
    if socket_path is None:
        return dict(env) if current else None
    if current and same_server(current.split(",", 1)[0], socket_path):
        return dict(env)
    reached = {k: v for k, v in env.items() if k != "TMUX_PANE"}
    reached["TMUX"] = f"{socket_path},,"  # only the socket part is ever read
    return reached


# What a placement's pane is doing, seen from one listing of the server's panes: the one answer
# `member list`, `fleet show`, `doctor`, the WebUI roster and the monitor's lost-pane check give
# (docs/cli.md §2.5). A live pane's agent state (the delivery classifier's) comes on top of it.
PaneState = Literal["alive", "gone", "pending", "none", "unknown"]


class Listing(frozenset[str]):
    """The pane ids of one `list-panes -a`, with the server that answered and each pane's
    process: what tells a placement's own pane from a pane of a later server that reuses its
    id (`holds`)."""

    server: ServerId | None
    pids: Mapping[str, int]

    def __new__(
        cls,
        panes: Iterable[str] = (),
        server: ServerId | None = None,
        pids: Mapping[str, int] | None = None,
    ) -> Listing:
        listing = super().__new__(cls, panes)
        listing.server = server
        listing.pids = {} if pids is None else pids
        return listing


def holds(live: Collection[str], placement: Placement) -> bool:
    """Whether ``live`` (one listing of the placement's server) has the placement's own pane:
    its id, on the server and running the process the placement records (docs/runtime.md
    §1.8). A plain collection of ids can only say the id is there."""
    pane_id = placement.mux_pane_id
    if pane_id is None or pane_id not in live:
        return False
    server = getattr(live, "server", None)
    pids: Mapping[str, int] = getattr(live, "pids", {})
    return not replaced(owner_of(placement), server, pids.get(pane_id))


def replaced(owner: PaneOwner, server: ServerId | None, pane_pid: int | None) -> bool:
    """Whether a pane seen on ``server`` running ``pane_pid`` is not ``owner``'s although it has
    its id: the placement recorded another server (one that was restarted on the same socket
    hands out the same ids) or another process (the pane was respawned). Without a recorded
    server, a server that started after the placement was made cannot be its. What was not
    recorded or not seen is not compared."""
    if server is None:
        return False
    if owner.server is not None:
        if owner.server != server:
            return True
    elif owner.made_at is not None and owner.made_at < server.start:
        return True
    return owner.pane_pid is not None and pane_pid is not None and owner.pane_pid != pane_pid


def pane_state(placement: Placement | None, live: Collection[str] | None) -> PaneState:
    """``none`` without a placement, ``pending`` without a pane id, ``unknown`` when the server
    could not be asked (``live`` None), else ``alive`` or ``gone`` by ``live`` (the pane ids of
    one `list-panes -a`; a `Listing` or `Places` also tells a pane of a later server or
    another process that reuses the id, which is ``gone``: `holds`). A listed pane that sits
    elsewhere than the placement (another session or window) still counts as ``alive``; it is
    only never captured."""
    if placement is None:
        return "none"
    pane_id = placement.mux_pane_id
    if pane_id is None:
        return "pending"
    if live is None:
        return "unknown"
    return "alive" if holds(live, placement) else "gone"


class Places(dict[str, frozenset[tuple[str, str]]]):
    """`Multiplexer.pane_places`: every live pane and each ``(session, window_id)`` it is in,
    with the server that answered and each pane's process (as a `Listing`)."""

    def __init__(
        self,
        places: Mapping[str, frozenset[tuple[str, str]]] | None = None,
        server: ServerId | None = None,
        pids: Mapping[str, int] | None = None,
    ) -> None:
        super().__init__(places or {})
        self.server = server
        self.pids: Mapping[str, int] = {} if pids is None else pids


def owner_of(placement: Placement) -> PaneOwner:
    """Where ``placement``'s pane must be (docs/runtime.md §1.8, the pane is ours)."""
    from cafleet.db.timefmt import parse_ts

    server = None
    if placement.mux_server_pid is not None and placement.mux_server_start is not None:
        server = ServerId(placement.mux_server_pid, placement.mux_server_start)
    made = parse_ts(placement.created_at)
    return PaneOwner(
        placement.mux_socket,
        placement.mux_session,
        placement.mux_window_id,
        server,
        placement.mux_pane_pid,
        None if made is None else made.timestamp(),
    )


class PaneStatus(NamedTuple):
    pane_id: str
    mode: str | None  # "copy-mode", "view-mode", ...; None when in no mode
    dead: bool  # process exited (remain-on-exit panes)
    session: str | None = None  # the session and window the pane is in now
    window_id: str | None = None
    server: ServerId | None = None  # the server that answered
    pane_pid: int | None = None  # the process tmux started in the pane

    def problem(self) -> str | None:
        """docs/cli.md §1.11's probe detail (`pane is in <mode>`, `pane has exited`) or None."""
        if self.mode is not None:
            return f"pane is in {self.mode}"
        if self.dead:
            return "pane has exited"
        return None


# --------------------------------------------------------------------------- errors


class MultiplexerError(CafleetError):
    """Base of the tree; ``str()`` is the user-facing message."""

    error_code = status.CODE_TMUX

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class MultiplexerUnavailable(MultiplexerError):
    """tmux missing, too old, unreachable, TMUX/TMUX_PANE unset, or an unknown backend."""


class PaneGone(MultiplexerError):
    """The targeted pane does not exist. Carries the pane id; the message never names it."""

    def __init__(self, pane_id: str) -> None:
        super().__init__(MSG_PANE_NOT_FOUND)
        self.pane_id = pane_id


class MuxCommandFailed(MultiplexerError):
    """`tmux <command> failed: <detail>`."""

    def __init__(self, command: str, detail: str) -> None:
        super().__init__(f"tmux {command} failed: {detail}")
        self.command = command
        self.detail = detail


class MuxTimeout(MultiplexerError):
    """`tmux <command> failed: timed out after <n> s`."""

    def __init__(self, command: str, seconds: float) -> None:
        shown = int(seconds) if float(seconds).is_integer() else seconds
        super().__init__(f"tmux {command} failed: timed out after {shown} s")
        self.command = command
        self.seconds = seconds


# --------------------------------------------------------------------------- protocol


@runtime_checkable
class Multiplexer(Protocol):
    name: str

    def ensure_available(self) -> None: ...

    def discover_context(self) -> PaneContext: ...

    def split_window(
        self,
        *,
        window_id: str,
        argv: Sequence[str],
        cwd: str,
        env: Mapping[str, str],
        layout: str = "main-vertical",
    ) -> str: ...

    def pane_status(self, pane_id: str) -> PaneStatus: ...

    def type_line(
        self,
        pane_id: str,
        line: str,
        *,
        settle: float | None = None,
        paste: bool = False,
        before_enter: Callable[[], object] | None = None,
    ) -> None: ...

    def type_text(self, pane_id: str, text: str) -> None: ...

    def send_key(self, pane_id: str, key: str) -> None: ...

    def capture(self, pane_id: str, lines: int, *, ansi: bool = False) -> str: ...

    def screen(self, pane_id: str) -> str: ...

    def list_panes(self) -> frozenset[str]: ...

    def pane_places(self) -> Places: ...

    def pane_pids(self) -> dict[str, int]: ...

    def kill_pane(self, pane_id: str, *, ignore_missing: bool = True) -> bool: ...


def probe_for_typing(mux: Multiplexer, pane_id: str, owner: PaneOwner | None = None) -> str | None:
    """Probe a pane before typing (docs/runtime.md §1.8, §4.3 step 6), in one tmux call.

    Returns None when the pane may be typed into, else the detail for
    `typing into pane <pane_id> failed: <detail>`: `pane not found`, `pane is in <mode>`,
    `pane has exited`, the tmux message of the failing call, or (``owner`` given, docs/runtime.md
    item 7) `MSG_NOT_OURS` when the pane is not the placement's.
    """
    if owner is not None and not same_server(getattr(mux, "socket_path", None), owner.socket_path):
        return MSG_NOT_OURS.format(pane_id=pane_id)
    try:
        status = mux.pane_status(pane_id)
    except MultiplexerError as exc:
        return str(exc)
    if owner is not None and _elsewhere(status, owner):
        return MSG_NOT_OURS.format(pane_id=pane_id)
    return status.problem()


class OwnedPane:
    """``mux`` for the keystrokes into one placement's pane: every call that sends keys (and
    the Enter that ends a typed line) first probes the pane as `probe_for_typing` does with
    ``owner``, and a problem raises `MultiplexerError` with its detail before anything is
    pressed (docs/runtime.md §1.8). A line is typed, settled and verified over seconds: a
    server restarted meanwhile never gets the next key. Everything else is ``mux``'s."""

    def __init__(self, mux: Multiplexer, owner: PaneOwner | None) -> None:
        self._mux = mux
        self._owner = owner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._mux, name)

    def check(self, pane_id: str) -> None:
        problem = probe_for_typing(self._mux, pane_id, self._owner)
        if problem is not None:
            raise MultiplexerError(problem)

    def send_key(self, pane_id: str, key: str) -> None:
        self.check(pane_id)
        self._mux.send_key(pane_id, key)

    def type_text(self, pane_id: str, text: str) -> None:
        self.check(pane_id)
        self._mux.type_text(pane_id, text)

    def type_line(self, pane_id: str, line: str, **typing: Any) -> None:
        self.check(pane_id)
        self._mux.type_line(pane_id, line, before_enter=lambda: self.check(pane_id), **typing)


def same_server(socket_a: str | None, socket_b: str | None) -> bool:
    """Whether two socket paths name one server (a path not recorded matches any)."""
    if socket_a is None or socket_b is None:
        return True
    return os.path.realpath(socket_a) == os.path.realpath(socket_b)


def _elsewhere(status: PaneStatus, owner: PaneOwner) -> bool:
    if replaced(owner, status.server, status.pane_pid):
        return True
    if status.session is None or status.window_id is None:
        return False  # a backend that cannot tell: nothing to compare
    return (status.session, status.window_id) != (owner.session, owner.window_id)


def is_owners_place(
    mux: Multiplexer, owner: PaneOwner, places: Collection[tuple[str, str]]
) -> bool:
    """`owner_problem` for a pane already found at ``places`` (each session and window it is
    in, from `Multiplexer.pane_places`; the server and process of that listing were checked
    by `pane_state`): True when it is the owner's, without asking tmux again."""
    if not same_server(getattr(mux, "socket_path", None), owner.socket_path):
        return False
    return (owner.session, owner.window_id) in places


def pane_replaced(mux: Multiplexer, pane_id: str, owner: PaneOwner) -> bool:
    """Whether ``pane_id`` on ``mux``'s server is a pane of a later server or another process
    than the one ``owner`` records (`replaced`): the placement's own pane is gone, whatever
    pane has its id now. False when the pane is missing or tmux cannot be asked."""
    try:
        status = mux.pane_status(pane_id)
    except MultiplexerError:
        return False
    return replaced(owner, status.server, status.pane_pid)


def owner_problem(mux: Multiplexer, pane_id: str, owner: PaneOwner | None) -> str | None:
    """docs/runtime.md §1.8: None when ``pane_id`` is the placement's pane (``owner``: its server,
    session and window), else `MSG_NOT_OURS`, or the tmux message when the probe fails.

    Runs before a placement's pane is captured or killed (typing probes with
    `probe_for_typing`): a pane id of another server, or one tmux reused for a pane in another
    session or window, is not ours, and nothing is done to it.
    """
    if owner is None:
        return None
    if not same_server(getattr(mux, "socket_path", None), owner.socket_path):
        return MSG_NOT_OURS.format(pane_id=pane_id)
    try:
        status = mux.pane_status(pane_id)
    except PaneGone:
        return None  # nothing there to mistake: the caller's own call reports it gone
    except MultiplexerError as exc:
        return str(exc)
    return MSG_NOT_OURS.format(pane_id=pane_id) if _elsewhere(status, owner) else None


# --------------------------------------------------------------------------- registry

TMUX = "tmux"


def _make_tmux(**kwargs: Any) -> Multiplexer:
    from cafleet.mux.tmux import TmuxBackend

    return TmuxBackend(**kwargs)


_REGISTRY: dict[str, Callable[..., Multiplexer]] = {TMUX: _make_tmux}


def backend_names() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def get_backend(name: str, **kwargs: Any) -> Multiplexer:
    """Build the backend a placement names; unknown names raise MultiplexerUnavailable.

    ``kwargs`` go to the constructor (``env=`` for the tmux backend).
    """
    factory = _REGISTRY.get(name)
    if factory is None:
        raise MultiplexerUnavailable(msg_unsupported_backend(name))
    return factory(**kwargs)


def placement_backend(
    backend: str, socket_path: str | None, env: Mapping[str, str] | None = None
) -> Multiplexer:
    """The backend that reaches a placement's pane from this process, whatever shell it runs
    in: its server is the socket the placement records (`server_env`), else ``TMUX``."""
    base = os.environ if env is None else env
    reached = server_env(socket_path, base)
    return get_backend(backend, env=base if reached is None else reached)


def usable_backend(name: str = "tmux", env: Mapping[str, str] | None = None) -> Multiplexer:
    """The backend ``name`` names (a placement's; default tmux), built for ``env`` (default: this
    process's environment) and checked available: the one way every caller gets a backend it
    can use. MultiplexerError (its ``str()`` the tmux message) when it cannot be used."""
    backend = get_backend(name) if env is None else get_backend(name, env=env)
    backend.ensure_available()
    return backend


def tmux_backend(env: Mapping[str, str] | None = None) -> TmuxBackend:
    """The backend for context discovery and new panes (always tmux)."""
    from cafleet.mux.tmux import TmuxBackend

    return TmuxBackend(env=env)


__all__ = [
    "MSG_NOT_OURS",
    "MSG_NO_PANE_ID",
    "MSG_PANE_NOT_FOUND",
    "MSG_TMUX_NOT_FOUND",
    "MSG_TMUX_PANE_UNSET",
    "MSG_TMUX_UNSET",
    "SPAWN_LIMIT_BYTES",
    "TMUX",
    "Multiplexer",
    "MultiplexerError",
    "MultiplexerUnavailable",
    "MuxCommandFailed",
    "Listing",
    "MuxTimeout",
    "OwnedPane",
    "PaneContext",
    "PaneGone",
    "PaneKey",
    "PaneOwner",
    "PaneState",
    "PaneStatus",
    "Places",
    "ServerId",
    "backend_names",
    "get_backend",
    "holds",
    "is_owners_place",
    "msg_spawn_too_long",
    "msg_tmux_too_old",
    "msg_unreachable",
    "msg_unsupported_backend",
    "owner_of",
    "server_env",
    "owner_problem",
    "placement_backend",
    "pane_replaced",
    "pane_state",
    "probe_for_typing",
    "replaced",
    "same_server",
    "tmux_backend",
    "usable_backend",
]
