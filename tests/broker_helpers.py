"""Shared builders for the broker tests: real files, no tmux (a fake spawn callback)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import Connection

from cafleet import broker
from cafleet.records import FleetBootstrap, Member, PlacementSpec
from tests.storage_helpers import APP_TABLES


@dataclass(frozen=True)
class FakePane:
    """Stands in for the mux layer's PaneContext."""

    session: str
    window_id: str
    pane_id: str


_pane_counter = [100]


def next_pane(session: str = "s", window_id: str = "@1") -> FakePane:
    _pane_counter[0] += 1
    return FakePane(session, window_id, f"%{_pane_counter[0]}")


def fixed_spawn(pane: FakePane | None = None) -> Callable[[int, int, int], FakePane]:
    """A spawn callback that returns a fixed (or a fresh) pane and records its calls."""

    calls: list[tuple[int, int, int]] = []

    def spawn(fleet_id: int, director_id: int, monitor_id: int) -> FakePane:
        calls.append((fleet_id, director_id, monitor_id))
        return pane if pane is not None else next_pane()

    spawn.calls = calls  # type: ignore[attr-defined]
    return spawn


def make_fleet(
    conn: Connection,
    *,
    name: str = "fleet",
    director_pane: FakePane | None = None,
    monitor_pane: FakePane | None = None,
    coding_agent: str = "claude",
    now: datetime | None = None,
) -> FleetBootstrap:
    if director_pane is None:
        # `%0` for a test's first fleet; one live fleet per Director pane, so later fleets of
        # the same test get panes of their own.
        director_pane = FakePane("s", "@1", "%0")
        if broker.fleet_directed_from(conn, ("tmux", "s", "%0")) is not None:
            director_pane = next_pane()
    return broker.create_fleet(
        conn,
        name=name,
        backend="tmux",
        coding_agent=coding_agent,
        director_pane=director_pane,
        spawn_monitor=fixed_spawn(monitor_pane),
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
    skills: tuple[object, ...] = (),
    now: datetime | None = None,
) -> Member:
    """Register a member; by default place it and patch a fresh concrete pane id."""
    member = broker.register_member(
        conn,
        fleet_id=fleet_id,
        name=name,
        description=description,
        role=role,  # type: ignore[arg-type]
        placement=PlacementSpec("s", "@1", coding_agent) if placed else None,
        require_monitor=False,
        skills=skills,
        now=now,
    )
    if placed and pane_id is not None:
        pane = next_pane().pane_id if pane_id == "auto" else pane_id
        broker.set_placement_pane(conn, member_id=member.member_id, pane_id=pane)
    return broker.get_member(conn, member.member_id)


def raw_connect(path: Path | str) -> sqlite3.Connection:
    """A plain sqlite3 connection for direct SQL (autocommit, foreign keys on)."""
    db = sqlite3.connect(str(path), isolation_level=None, timeout=10)
    db.execute("PRAGMA foreign_keys = ON")
    return db


def table_counts(path: Path | str) -> dict[str, int]:
    db = raw_connect(path)
    try:
        return {t: db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in APP_TABLES}
    finally:
        db.close()


def ts(seconds: float = 0.0) -> datetime:
    """A fixed UTC moment, offset by `seconds`."""
    return datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC) + timedelta(seconds=seconds)


# --- a worker process for the concurrency tests ---------------------------------------------------

WORKER_CODE = "from tests.broker_helpers import worker_main; worker_main()"


def worker_main() -> None:
    """`python -c WORKER_CODE <db path> <from> <to> <count> <ack 0|1> <pin 0|1>`.

    Connects and validates like a command, prints `ready`, waits for a line on stdin, then runs
    `count` send_message calls (each followed by ack_message when asked) through the repository
    and prints one JSON line: the ids it got and every error it saw.
    """
    import json
    import os
    import sys
    import time

    from cafleet.cli.guard import open_validated_connection

    path, sender, recipient, count, ack, pin = sys.argv[1:7]
    if pin == "1":
        cpus = sorted(os.sched_getaffinity(0))[:2]
        os.sched_setaffinity(0, set(cpus))
    conn = open_validated_connection(path)
    print("ready", flush=True)
    sys.stdin.readline()
    ids: list[int] = []
    errors: list[str] = []
    started = time.monotonic()
    for i in range(int(count)):
        try:
            msg = broker.send_message(
                conn, from_member_id=int(sender), to_member_id=int(recipient), text=f"{i}"
            )
            ids.append(msg.message_id)
            if ack == "1":
                broker.ack_message(conn, message_id=msg.message_id)
        except Exception as exc:  # every error is a failure the parent reports
            errors.append(f"{type(exc).__name__}: {exc}")
    print(
        json.dumps({"ids": ids, "errors": errors, "seconds": time.monotonic() - started}),
        flush=True,
    )
