"""A `member create` that did not finish (docs/cli.md §2.7): found, reported, finished or removed.

`member create` holds a *creation lock* (a flock'ed file beside the pane locks, one per fleet and
member name) from before it registers the member until the pane id is patched in or the
registration is undone. The kernel drops a flock when its holder dies, so an active member whose
placement is still pending while nobody holds that lock was left by a create that was killed:
it is *half-made*. `fleet show`, `member list` and `doctor` report it with the command that
finishes it; `member respawn` and the same `member create` run again finish it; `member delete`
removes it. The agent the killed create may already have started is found by
`CAFLEET_PLACEMENT` in its pane's environment and kept, never started twice.

Only this host's lock files are asked: a pending placement made on another host (PostgreSQL)
is judged there.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

from cafleet import broker
from cafleet.config import db_dir_of
from cafleet.hosts import HostIdError, current_host
from cafleet.mux import MultiplexerError, PaneContext, PaneKey, placement_backend, same_server
from cafleet.mux.locks import lock_busy, pane_lock_path, read_holder, try_pane_lock
from cafleet.procs import env_value
from cafleet.workflows.errors import PaneUnavailable, WorkflowError
from cafleet.workflows.locking import wait_for_lock

if TYPE_CHECKING:
    from cafleet.config import Settings
    from cafleet.db.runtime import Connection
    from cafleet.mux import PaneContext, PaneKey
    from cafleet.mux.locks import PaneLockTimeout
    from cafleet.records import Member, Placement

PLACEMENT_VARIABLE = "CAFLEET_PLACEMENT"


def creation_key(fleet_id: int, name: str) -> PaneKey:
    """The creation lock's key: a lock file of its own (no backend is called "create")."""
    return PaneKey("create", str(fleet_id), name)


def placement_token(placement: Placement) -> str:
    """`CAFLEET_PLACEMENT` of the pane `member create` spawns: the member and its placement's
    creation time, which no other database's pane shares."""
    return f"{placement.member_id} {placement.created_at}"


class HalfMade(NamedTuple):
    member: Member  # active, its placement pending
    pid: int | None  # the interrupted command's, from its lock record (None: not recorded)

    @property
    def text(self) -> str:
        m = self.member
        pid = "" if self.pid is None else f" (pid {self.pid})"
        return (
            f"member {m.member_id} ({m.name}) has no pane: the 'cafleet member create'{pid} "
            "that registered it was interrupted"
        )

    @property
    def fix(self) -> str:
        return f"cafleet member respawn {self.member.member_id}"

    @property
    def alternative(self) -> str:
        return f" (or remove it: 'cafleet member delete {self.member.member_id}')"

    @property
    def line(self) -> str:
        return f"{self.text}; run '{self.fix}'{self.alternative}"


def _pending_here(member: Member) -> bool:
    """Pending, and made on this host (whose lock files this process can ask)."""
    placement = member.placement
    if not member.is_active or placement is None or placement.mux_pane_id is not None:
        return False
    if placement.host_id is None:
        return True
    try:
        return placement.host_id == current_host()
    except HostIdError:
        return False


def _holder_pid(db_dir: str, key: PaneKey) -> int | None:
    holder = read_holder(pane_lock_path(db_dir, key))
    return None if holder is None else holder.pid


def half_made(conn: Connection, db_dir: str, members: Iterable[Member]) -> list[HalfMade]:
    """The half-made ones of ``members``: pending here, their creation lock free, and still
    pending when read again (a create that finished meanwhile released the lock too). Creates
    no file; costs nothing without a pending member."""
    found: list[HalfMade] = []
    for member in members:
        if not _pending_here(member):
            continue
        key = creation_key(member.fleet_id, member.name)
        pid = _holder_pid(db_dir, key)
        if lock_busy(db_dir, key):
            continue  # its create is running
        fresh = broker.get_member(conn, member.member_id)
        if _pending_here(fresh):
            found.append(HalfMade(fresh, pid))
    return found


def refuse(conn: Connection, member: Member) -> None:
    """Commands that need the member's pane (ping, prompt, capture, the WebUI's): a half-made
    member is refused with its line (what happened, and the command that finishes it)."""
    for left in half_made(conn, db_dir_of(conn.info["cafleet.path"]), [member]):
        raise PaneUnavailable(left.line)


def _acquire(settings: Settings, fleet_id: int, name: str, *, wait: bool, purpose: str) -> Any:
    """The creation lock, or None when ``wait`` is False and it is busy. Waiting runs out after
    the pane-lock timeout: `WorkflowError` naming the holder."""
    key = creation_key(fleet_id, name)
    if not wait:
        return try_pane_lock(settings.db_dir, key, purpose=purpose)

    def busy(exc: PaneLockTimeout) -> str:
        pid = "" if exc.holder is None else f" (pid {exc.holder.pid})"
        return (
            f"another 'cafleet member create' of '{name}' in fleet {fleet_id}{pid} is still "
            "running; retry when it has finished"
        )

    return wait_for_lock(settings, key, purpose, busy)


@contextlib.contextmanager
def creating(settings: Settings, fleet_id: int, name: str) -> Iterator[None]:
    """`member create`'s creation lock, held for the body."""
    lock = _acquire(
        settings, fleet_id, name, wait=True, purpose=f"member create {name} (fleet {fleet_id})"
    )
    with lock:
        yield


@contextlib.contextmanager
def claimed(
    conn: Connection, settings: Settings, member: Member, *, wait: bool
) -> Iterator[HalfMade | None]:
    """Hold ``member``'s creation lock and yield it re-read when it is half-made; None when its
    create finished meanwhile or (``wait`` False) is still running. The caller finishes or
    removes it under the lock, so no create of the same name runs meanwhile."""
    if not _pending_here(member):
        yield None
        return
    key = creation_key(member.fleet_id, member.name)
    pid = _holder_pid(settings.db_dir, key)
    purpose = f"half-made member {member.member_id}"
    lock = _acquire(settings, member.fleet_id, member.name, wait=wait, purpose=purpose)
    if lock is None:
        yield None
        return
    with lock:
        fresh = broker.get_member(conn, member.member_id)
        yield HalfMade(fresh, pid) if _pending_here(fresh) else None


def of_name(conn: Connection, fleet_id: int, name: str) -> HalfMade | None:
    """With the creation lock of (fleet, name) held: the oldest active member of that name
    whose placement is still pending here (its create was interrupted), or None."""
    for entry in broker.member_roster(conn, fleet_id=fleet_id):
        if entry.member.name == name and _pending_here(entry.member):
            return HalfMade(entry.member, None)
    return None


def orphan_pane(backend: Any, placement: Placement) -> PaneContext | None:
    """The pane the interrupted create already spawned for ``placement`` (its environment holds
    the placement's token), on the placement's tmux server; None when there is none."""
    if not same_server(getattr(backend, "socket_path", None), placement.mux_socket):
        return None
    token = placement_token(placement)
    try:
        pids = backend.pane_pids()
    except MultiplexerError:
        return None
    for pane_id, pid in sorted(pids.items()):
        if env_value(pid, PLACEMENT_VARIABLE) != token:
            continue
        try:
            status = backend.pane_status(pane_id)
        except MultiplexerError:
            continue
        if status.dead or status.session is None or status.window_id is None:
            continue
        return PaneContext(
            status.session, status.window_id, pane_id, status.server, status.pane_pid
        )
    return None


def kill_orphan(placement: Placement) -> str | None:
    """Kill the pane the interrupted create spawned, if there is one; its id, or None."""
    try:
        backend = placement_backend(placement.backend, placement.mux_socket)
        backend.ensure_available()
    except MultiplexerError:
        return None  # no server: no pane either
    pane = orphan_pane(backend, placement)
    if pane is None:
        return None
    try:
        backend.kill_pane(pane.pane_id, ignore_missing=True)
    except MultiplexerError as exc:
        from cafleet.workflows.spawning import MSG_KILL_FAILED

        raise WorkflowError(MSG_KILL_FAILED.format(pane_id=pane.pane_id, detail=exc)) from exc
    return pane.pane_id


__all__ = [
    "PLACEMENT_VARIABLE",
    "HalfMade",
    "claimed",
    "creating",
    "creation_key",
    "half_made",
    "kill_orphan",
    "of_name",
    "orphan_pane",
    "placement_token",
    "refuse",
]
