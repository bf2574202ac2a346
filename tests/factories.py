"""The one place tests build fleets, members and messages.

Everything is built through the repository functions on a validated connection, so no monitor
loop runs unless a test starts one (docs/runtime.md §6.4: drain tests keep the loop out of the
way). Without tmux, placements name pane ids that exist nowhere (`fresh_pane`); with the private
tmux harness, `build_world` gives every placed member a fresh fake-agent pane.

- `make_fleet(conn, ...)`, `add_member(conn, fleet_id, ...)`, `send`/`broadcast`/`ack`: one
  repository call each, on a connection the test holds (the broker tests' `conn` fixture).
- `Db(path)`: a connection of its own with the same builders as methods, closed before a command
  whose "unchanged" check matters (the CLI tests).
- `build_world(db_path, ...)`: a whole fleet (Director, monitor, named members) as a `World`,
  against the harness's panes or made-up ones (the delivery tests).
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from cafleet.db.runtime import Connection
from cafleet.records import Broadcast, FleetBootstrap, Member, Message, PaneKey
from tests.harness import util


@dataclass(frozen=True)
class FakePane:
    """Stands in for the mux layer's PaneContext (`records` accepts any such object)."""

    session: str
    window_id: str
    pane_id: str


# One counter for every made-up pane id, far above the ids tests spell out themselves.
_pane_ids = itertools.count(10_001)


def fresh_pane(session: str = "s", window_id: str = "@1") -> FakePane:
    """A pane id no other call of this process returned."""
    return FakePane(session, window_id, f"%{next(_pane_ids)}")


def spawn_returning(pane: FakePane | None = None) -> Callable[[int, int, int], FakePane]:
    """A `create_fleet` spawn callback that returns ``pane`` (default: a fresh one each call) and
    records its calls in ``.calls``."""
    calls: list[tuple[int, int, int]] = []

    def spawn(fleet_id: int, director_id: int, monitor_id: int) -> FakePane:
        calls.append((fleet_id, director_id, monitor_id))
        return pane if pane is not None else fresh_pane()

    spawn.calls = calls  # type: ignore[attr-defined]
    return spawn


@contextlib.contextmanager
def connect(db_path: Path | str) -> Iterator[Connection]:
    """A validated connection in this process (what the guard hands a command), closed after."""
    from cafleet.cli.guard import open_validated_connection
    from cafleet.db.runtime import close_connection

    conn = open_validated_connection(str(db_path))
    try:
        yield conn
    finally:
        close_connection(conn)


# --- one repository call each ---------------------------------------------------------------------


def make_fleet(
    conn: Connection,
    *,
    name: str = "fleet",
    director_pane: Any = None,
    monitor_pane: Any = None,
    coding_agent: str = "claude",
    now: datetime | None = None,
) -> FleetBootstrap:
    """A fleet with its root Director (default pane `s @1 %0`) and monitor (default: a fresh
    pane)."""
    from cafleet import broker

    if director_pane is None:
        # `%0` for a test's first fleet; one live fleet per Director pane, so later fleets of
        # the same test get panes of their own.
        director_pane = FakePane("s", "@1", "%0")
        if broker.fleet_directed_from(conn, PaneKey("tmux", "s", "%0")) is not None:
            director_pane = fresh_pane()
    return broker.create_fleet(
        conn,
        name=name,
        backend="tmux",
        coding_agent=coding_agent,
        director_pane=director_pane,
        spawn_monitor=spawn_returning(monitor_pane),
        now=now,
    )


def add_member(
    conn: Connection,
    fleet_id: int,
    *,
    name: str = "worker",
    description: str = "does work",
    pane_id: str | None = "auto",
    role: str = "member",
    coding_agent: str = "codex",
    placed: bool = True,
    session: str = "s",
    window_id: str = "@1",
    skills: tuple[object, ...] = (),
    now: datetime | None = None,
) -> Member:
    """Register a member; placed by default, with a fresh concrete pane id ("auto"), the given
    one, or none (``pane_id=None``: a pending placement). ``placed=False``: no placement."""
    from cafleet import broker
    from cafleet.records import PlacementSpec

    member = broker.register_member(
        conn,
        fleet_id=fleet_id,
        name=name,
        description=description,
        role=role,  # type: ignore[arg-type]
        placement=PlacementSpec(session, window_id, coding_agent) if placed else None,
        require_monitor=False,
        skills=skills,
        now=now,
    )
    if placed and pane_id is not None:
        pane = fresh_pane().pane_id if pane_id == "auto" else pane_id
        broker.set_placement_pane(conn, member_id=member.member_id, pane_id=pane)
    return broker.get_member(conn, member.member_id)


def send(
    conn: Connection, from_id: int, to_id: int, text: str, *, now: datetime | None = None
) -> Message:
    from cafleet import broker

    return broker.send_message(conn, from_member_id=from_id, to_member_id=to_id, text=text, now=now)


def broadcast(
    conn: Connection, from_id: int, text: str, *, now: datetime | None = None
) -> Broadcast:
    from cafleet import broker

    return broker.broadcast_message(conn, from_member_id=from_id, text=text, now=now)


def ack(conn: Connection, message_id: int, *, now: datetime | None = None) -> Message:
    from cafleet import broker

    return broker.ack_message(conn, message_id=message_id, now=now)


# --- a connection of its own (the CLI tests) ------------------------------------------------------


class Db:
    """A validated connection to the test database for building rows; `close()` it before
    running a command whose "unchanged" check matters."""

    def __init__(self, path: Path) -> None:
        from cafleet.cli.guard import open_validated_connection

        self.path = path
        self.conn = open_validated_connection(str(path))

    def close(self) -> None:
        from cafleet.db.runtime import close_connection

        close_connection(self.conn)

    def __enter__(self) -> Db:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def fleet(
        self,
        name: str = "fleet",
        *,
        director_pane: FakePane | None = None,
        monitor_pane: FakePane | None = None,
        now: datetime | None = None,
    ) -> FleetBootstrap:
        """A fleet whose Director and monitor get fresh panes unless given."""
        monitor = monitor_pane or fresh_pane()
        return make_fleet(
            self.conn,
            name=name,
            director_pane=director_pane or fresh_pane(),
            monitor_pane=monitor,
            now=now,
        )

    def member(
        self,
        fleet_id: int,
        name: str = "worker",
        *,
        description: str = "does work",
        pane: str | None = "auto",
        placed: bool = True,
        agent: str = "codex",
        now: datetime | None = None,
    ) -> Member:
        """A member of kind `member`; `pane=None` leaves a pending placement."""
        return add_member(
            self.conn,
            fleet_id,
            name=name,
            description=description,
            pane_id=pane,
            placed=placed,
            coding_agent=agent,
            now=now,
        )

    def send(self, from_id: int, to_id: int, text: str, *, now: datetime | None = None) -> Message:
        return send(self.conn, from_id, to_id, text, now=now)

    def broadcast(self, from_id: int, text: str, *, now: datetime | None = None) -> Broadcast:
        return broadcast(self.conn, from_id, text, now=now)

    def ack(self, message_id: int, *, now: datetime | None = None) -> Message:
        return ack(self.conn, message_id, now=now)

    def deregister(self, member_id: int) -> Member:
        from cafleet import broker

        return broker.deregister_member(self.conn, member_id=member_id)


# --- a whole fleet, with or without the tmux harness (the delivery tests) -------------------------


@dataclass
class World:
    db_path: Path
    fleet_id: int
    director: int
    monitor: int
    monitor_pane: str | None
    director_pane: str
    session: str
    members: dict[str, int] = field(default_factory=dict)
    panes: dict[int, str | None] = field(default_factory=dict)

    def pane(self, member_id: int) -> str:
        pane = self.panes[member_id]
        assert pane is not None
        return pane

    def key(self, member_id: int) -> Any:
        from cafleet.mux import PaneKey

        return PaneKey("tmux", self.session, self.pane(member_id))


def build_world(
    db_path: Path | str,
    *,
    members: Sequence[str] = ("alice", "bob"),
    harness: Any = None,
    pending: Sequence[str] = (),
    unplaced: Sequence[str] = (),
    fleet_name: str = "demo",
    screen: str | None = None,
) -> World:
    """A fleet (Director, monitor, ``members``) built through the repository, no loop.

    With ``harness`` every placed member gets a fresh fake-agent pane; names in ``pending`` keep a
    pending placement and names in ``unplaced`` get none. Without a harness pane ids are made up
    (the same ones in every world: `%900` for the Director, then `%901`, `%902`, ...).
    ``screen`` puts those fakes in screen mode (``CAFLEET_FAKE_SCREEN``, e.g. ``""``: a ready
    Claude Code screen), so the delivery gate sees a real agent's screens instead of
    ``unknown``.
    """
    db_path = db_path if isinstance(db_path, str) and "://" in db_path else Path(db_path)
    if harness is not None:
        session, window, director_pane = (
            harness.session_name,
            harness.window_id,
            harness.director_pane,
        )
        wanted = 1 + sum(1 for n in members if n not in pending and n not in unplaced)
        env = None if screen is None else {"CAFLEET_FAKE_SCREEN": screen}
        spawned = [harness.spawn_fake(wait=False, env=env) for _ in range(wanted)]
        for pane in spawned:
            util.start_record(pane, timeout=20)
        if screen is not None and "start=" not in screen:
            # A fake logs its start before its first screen is drawn: under load the gate could
            # still read `starting` and hold a line the test means to type.
            for pane in spawned:
                util.wait_drawn(pane, harness.env)
    else:
        session, window, director_pane = "fake session", "@1", "%900"
        wanted = 1 + len(members)
        spawned = [f"%{901 + i}" for i in range(wanted)]
    panes = iter(spawned)
    monitor_pane = next(panes)
    with connect(db_path) as conn:
        from cafleet import broker

        if broker.fleet_directed_from(conn, PaneKey("tmux", session, director_pane)):
            # A second world: one live fleet per Director pane, so it gets a pane of its own.
            if harness is not None:
                director_pane = harness.spawn_fake()
            else:
                director_pane = fresh_pane(session, window).pane_id
        boot = make_fleet(
            conn,
            name=fleet_name,
            director_pane=FakePane(session, window, director_pane),
            monitor_pane=FakePane(session, window, monitor_pane),
        )
        world = World(
            db_path=Path(db_path),
            fleet_id=boot.fleet.fleet_id,
            director=boot.director.member_id,
            monitor=boot.monitor.member_id,
            monitor_pane=monitor_pane,
            director_pane=director_pane,
            session=session,
        )
        world.panes[world.director] = director_pane
        world.panes[world.monitor] = monitor_pane
        for name in members:
            placed = name not in unplaced
            concrete = placed and name not in pending
            member = add_member(
                conn,
                world.fleet_id,
                name=name,
                description=f"{name} member",
                pane_id=next(panes) if concrete else None,
                coding_agent="claude",
                placed=placed,
                session=session,
                window_id=window,
            )
            world.members[name] = member.member_id
            world.panes[member.member_id] = (
                member.placement.mux_pane_id if member.placement is not None else None
            )
    return world


__all__ = [
    "Db",
    "FakePane",
    "World",
    "ack",
    "add_member",
    "broadcast",
    "build_world",
    "connect",
    "fresh_pane",
    "make_fleet",
    "send",
    "spawn_returning",
]
