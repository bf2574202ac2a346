"""Every host's delivery loop as the database records it (`cafleet monitor host status`,
docs/cli.md §2.29): live when its heartbeat is fresh (and, on this host, its pid runs)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from cafleet import broker, signals
from cafleet.db.timefmt import parse_ts, utcnow
from cafleet.monitor.hostloop import HostScope, ensure_host_loop
from cafleet.text import idle_text

if TYPE_CHECKING:
    from cafleet.db.runtime import Connection


class HostLoopView(NamedTuple):
    host_id: str
    live: bool
    pid: int | None
    heartbeat_age: int | None  # whole seconds since the last heartbeat
    held: bool | None  # `monitor host stop` holds it (None: another host's, unknown here)
    here: bool  # this process's host

    @property
    def line(self) -> str:
        """`host B (this host): live (pid 77, last heartbeat 2s ago)`, `host B: not running`,
        `host B: stopped by 'cafleet monitor host stop'`."""

        name = f"host {self.host_id}{' (this host)' if self.here else ''}"
        beat = (
            "no heartbeat"
            if self.heartbeat_age is None
            else f"last heartbeat {idle_text(self.heartbeat_age)} ago"
        )
        if self.live:
            return f"{name}: live (pid {self.pid}, {beat})"
        if self.held:
            return f"{name}: stopped by 'cafleet monitor host stop'"
        return f"{name}: not running ({beat})"

    def as_dict(self) -> dict[str, Any]:
        return {
            "host_id": self.host_id,
            "live": self.live,
            "pid": self.pid,
            "heartbeat_age": self.heartbeat_age,
            "held": self.held,
            "this_host": self.here,
        }


def host_loop_views(conn: Connection, here: str) -> list[HostLoopView]:
    """Every `host_loops` row, by host id: one read."""
    from cafleet.monitor.supervisor import is_held

    now = utcnow()
    views: list[HostLoopView] = []
    for row in broker.host_loops(conn):
        beat = parse_ts(row.last_tick_at)
        age = None if beat is None else max(0, int((now - beat).total_seconds()))
        live = broker.host_loop_live(row, here, now)
        mine = row.host_id == here
        views.append(
            HostLoopView(
                row.host_id,
                live,
                row.pid if live else None,
                age,
                is_held(HostScope(conn, row.host_id)) if mine else None,
                mine,
            )
        )
    return views


def start_on_demand(
    conn: Connection, host_id: str, whom: str = "this member"
) -> tuple[int | None, str | None]:
    """This host's delivery loop for a member just placed here, away from its root Director
    (`member create`, `member respawn`, `fleet restore`; docs/runtime.md §10.3): (its pid, None), or (None, the
    warning) when `monitor host stop` holds it or it does not start; the member's lines wait."""
    from cafleet.monitor.supervisor import LoopNotStarted, is_held

    if is_held(HostScope(conn, host_id)):
        return None, (
            f"the delivery loop for host {host_id} is stopped by 'cafleet monitor host stop'; "
            f"lines for {whom} wait for 'cafleet monitor host start'"
        )
    try:
        pid, _started = ensure_host_loop(conn, host_id, keep_waiting=signals.keep_waiting)
    except LoopNotStarted as exc:
        return None, f"{exc} ({exc.detail}); lines for {whom} wait for it"
    return pid, None


__all__ = ["HostLoopView", "host_loop_views", "start_on_demand"]
