"""Shared helpers of the repository (private). Its SQL is authored in `cafleet.db.statements`."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from cafleet.broker.errors import PaneDirectsFleet
from cafleet.db.catalog import fleets as q
from cafleet.db.timefmt import format_ts, utcnow
from cafleet.records import BACKENDS

if TYPE_CHECKING:
    from cafleet.db.runtime import Connection
    from cafleet.records import Fleet, PaneKey


def stamp(now: datetime | None) -> str:
    """The one timestamp a call writes; read right after BEGIN IMMEDIATE (docs/storage.md §7.1)."""
    return format_ts(now if now is not None else utcnow())


def identity(pane: object, *, spawned: bool = True) -> dict[str, int | None]:
    """The server and process parameters of a placement written for ``pane`` (a mux
    `PaneContext`; an object without them records none): ``server_pid``, ``server_start`` and,
    for a pane cafleet ``spawned``, ``pane_pid`` (docs/runtime.md §1.8)."""
    server = getattr(pane, "server", None)
    return {
        "server_pid": None if server is None else server[0],
        "server_start": None if server is None else server[1],
        "pane_pid": getattr(pane, "pane_pid", None) if spawned else None,
    }


def check_backend(backend: str) -> None:
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r} (expected one of: {', '.join(BACKENDS)})")


def check_coding_agent(coding_agent: str) -> None:
    # Here, not at the top: the commands that read (poll, list) never load the agents package.
    from cafleet.agents.registry import agent_names

    if coding_agent not in agent_names():
        raise ValueError(
            f"unknown coding agent {coding_agent!r} (expected one of: {', '.join(agent_names())})"
        )


def directed_from(conn: Connection, key: PaneKey, host: str) -> Fleet | None:
    """Inside the caller's transaction: the live fleet whose active root Director's placement
    names ``key`` on ``host`` (or records no host), or None: the same key on another host
    names another pane (docs/runtime.md §10.2). Here, not in `fleets`, because `recovery`
    needs it too."""
    from cafleet.records import fleet_from_row

    rows = (
        conn.execute(q.FLEET_DIRECTED_FROM, {"backend": key[0], "session": key[1], "pane": key[2]})
        .mappings()
        .all()
    )
    for row in rows:
        if row["director_host_id"] in (None, host):
            return fleet_from_row(row)
    return None


def refuse_directed_pane(conn: Connection, key: PaneKey, host: str) -> None:
    """`PaneDirectsFleet` when ``key`` is a live fleet's root Director pane on ``host``."""
    fleet = directed_from(conn, key, host)
    if fleet is not None:
        raise PaneDirectsFleet(key[2], fleet.fleet_id, fleet.name)
