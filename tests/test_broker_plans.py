"""docs/storage.md §9 item 61: on a file with 100,000 messages for one member, the poll, activity,
unacked-count and pending-notification queries are index searches (`SEARCH` of `messages` with
the index §2.7 names) and never `SCAN messages`.

The statements checked are the ones the repository functions actually execute, captured from
the connection, then explained with their own parameters.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cafleet import broker
from cafleet.db.migrate import run_setup
from cafleet.db.runtime import Connection, close_connection
from tests.broker_helpers import raw_connect
from tests.factories import add_member, make_fleet
from tests.storage_helpers import recording_statements

HEAVY_ROWS = 100_000


class Plans:
    def __init__(
        self, path: Path, conn: Connection, heavy: int, light: int, fleet: int, director: int
    ) -> None:
        self.director = director
        self.path = path
        self.conn = conn
        self.heavy = heavy
        self.light = light
        self.fleet = fleet


@pytest.fixture(scope="module")
def plans_db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plans]:
    from cafleet.cli.guard import open_validated_connection

    path = tmp_path_factory.mktemp("plans") / "cafleet.db"
    run_setup(str(path))
    conn = open_validated_connection(str(path))
    boot = make_fleet(conn)
    heavy = add_member(conn, boot.fleet.fleet_id, name="heavy")
    light = add_member(conn, boot.fleet.fleet_id, name="light")
    director = boot.director.member_id
    # 100,000 messages for `heavy` (mostly ACKed and notified, some pending), a handful for
    # `light`; plain SQL executemany in one transaction.
    rows: list[tuple[Any, ...]] = []
    for i in range(HEAVY_ROWS):
        created = f"2025-01-01T00:00:00.{i % 1_000_000:06d}+00:00"
        done = i % 10 != 0
        rows.append(
            (
                heavy.member_id,
                director,
                heavy.member_id,
                "unicast",
                created,
                "completed" if done else "input_required",
                created,
                None,
                f"m{i}",
                created if done or i % 20 == 0 else None,
            )
        )
    for i in range(5):
        created = f"2025-01-02T00:00:0{i}.000000+00:00"
        rows.append(
            (
                light.member_id,
                heavy.member_id,
                light.member_id,
                "unicast",
                created,
                "input_required",
                created,
                None,
                f"l{i}",
                None,
            )
        )
    db = raw_connect(path)
    db.execute("BEGIN IMMEDIATE")
    db.executemany(
        "INSERT INTO messages (owner_member_id, from_member_id, to_member_id, type, created_at, "
        "status_state, status_timestamp, origin_message_id, text, notified_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        rows,
    )
    db.execute("COMMIT")
    assert (
        db.execute(
            "SELECT COUNT(*) FROM messages WHERE owner_member_id = ?", (heavy.member_id,)
        ).fetchone()[0]
        == HEAVY_ROWS
    )
    db.close()
    yield Plans(path, conn, heavy.member_id, light.member_id, boot.fleet.fleet_id, director)
    close_connection(conn)


def captured(conn: Connection, call: Callable[[], object]) -> list[tuple[str, Any]]:
    """Run `call` and return the (statement, parameters) it executed that read `messages`."""
    seen: list[tuple[str, Any]] = []

    def record(statement: str, parameters: Any) -> None:
        if re.search(r"\bmessages\b", statement):
            seen.append((statement, parameters))

    with recording_statements(conn, record):
        call()
    assert seen, "the call executed no statement on messages"
    return seen


def explain(path: Path, statement: str, parameters: Any) -> list[str]:
    db = sqlite3.connect(str(path))
    try:
        return [row[3] for row in db.execute("EXPLAIN QUERY PLAN " + statement, parameters)]
    finally:
        db.close()


_MESSAGE_ALIASES = ("messages", "x")


def assert_index_search(lines: list[str], index: str) -> None:
    text = "\n".join(lines)
    assert any(line.startswith("SEARCH ") and f"INDEX {index} " in line + " " for line in lines), (
        f"no SEARCH using {index}:\n{text}"
    )
    for line in lines:
        for alias in _MESSAGE_ALIASES:
            assert not re.match(rf"SCAN {alias}\b", line), f"full scan of messages:\n{text}"


def plans_of(p: Plans, call: Callable[[], object]) -> list[str]:
    lines: list[str] = []
    for statement, parameters in captured(p.conn, call):
        lines.extend(explain(p.path, statement, parameters))
    return lines


@pytest.mark.parametrize("member", ["heavy", "light"])
def test_poll_inbox_searches_owner_type_state_index(plans_db: Plans, member: str) -> None:
    member_id = getattr(plans_db, member)
    lines = plans_of(plans_db, lambda: broker.poll_inbox(plans_db.conn, member_id))
    assert_index_search(lines, "idx_messages_owner_type_state_ts")
    # the index order already gives ORDER BY status_timestamp DESC, message_id DESC
    assert not any("TEMP B-TREE" in line for line in lines), lines


@pytest.mark.parametrize("after", [None, 50_000])
def test_unacked_deliveries_searches_owner_type_state_index(
    plans_db: Plans, after: int | None
) -> None:
    lines = plans_of(
        plans_db,
        lambda: broker.unacked_deliveries(plans_db.conn, plans_db.heavy, after_message_id=after),
    )
    assert_index_search(lines, "idx_messages_owner_type_state_ts")


def test_roster_activity_subqueries_each_search_their_index(plans_db: Plans) -> None:
    lines = plans_of(plans_db, lambda: broker.member_roster(plans_db.conn, fleet_id=plans_db.fleet))
    assert_index_search(lines, "idx_messages_from_created")  # last_sent
    assert_index_search(lines, "idx_messages_owner_type_created")  # last_recv
    assert_index_search(lines, "idx_messages_owner_type_state_ts")  # last_ack
    assert any("idx_members_fleet_status" in line for line in lines), lines
    assert sum(1 for line in lines if "CORRELATED SCALAR SUBQUERY" in line) == 3, lines


@pytest.mark.parametrize("member", ["heavy", "light", "director"])
def test_history_view_searches_its_indexes_in_their_order(plans_db: Plans, member: str) -> None:
    """`message history` (docs/cli.md §2.31): what the member owns, by type, and what it sent,
    each read newest first from its index, never sorted nor scanned."""
    member_id = getattr(plans_db, member)
    lines = plans_of(
        plans_db, lambda: broker.history_view(plans_db.conn, member_id=member_id, limit=50)
    )
    assert_index_search(lines, "idx_messages_owner_type_created")
    assert_index_search(lines, "idx_messages_from_created")
    assert not any("TEMP B-TREE" in line for line in lines), lines
    shown = broker.history_view(plans_db.conn, member_id=member_id, limit=50)
    assert len(shown) == (5 if member == "light" else 50)
    assert shown == sorted(shown, key=lambda m: (m.created_at, m.message_id))


def test_wake_roster_unacked_count_searches_owner_type_state_index(plans_db: Plans) -> None:
    lines = plans_of(plans_db, lambda: broker.wake_roster(plans_db.conn, fleet_id=plans_db.fleet))
    assert_index_search(lines, "idx_messages_owner_type_state_ts")


@pytest.mark.parametrize("scope", ["recipient", "fleet"])
@pytest.mark.parametrize("exclude", [(), (1, 2, 3)])
def test_next_pending_notification_searches_pending_index(
    plans_db: Plans, scope: str, exclude: tuple[int, ...]
) -> None:
    kwargs: dict[str, Any] = (
        {"recipient_id": plans_db.heavy} if scope == "recipient" else {"fleet_id": plans_db.fleet}
    )
    lines = plans_of(
        plans_db,
        lambda: broker.next_pending_notification(plans_db.conn, exclude=exclude, **kwargs),
    )
    assert_index_search(lines, "idx_messages_pending_notification")
    if scope == "recipient":
        # one range search of the pending index, in its own order: no sort
        assert not any("TEMP B-TREE" in line for line in lines), lines
    else:
        assert any("idx_members_fleet_status" in line for line in lines), lines


@pytest.mark.parametrize("scope", ["fleet", "members"])
def test_oldest_pending_by_recipient_searches_pending_index_once_per_member(
    plans_db: Plans, scope: str
) -> None:
    """docs/runtime.md §4.4: a fleet drain's one selection; a correlated search of the pending index per
    member, each member's row fetched by primary key."""
    kwargs: dict[str, Any] = (
        {"fleet_id": plans_db.fleet}
        if scope == "fleet"
        else {"recipient_ids": [plans_db.heavy, plans_db.light]}
    )
    lines = plans_of(
        plans_db,
        lambda: broker.oldest_pending_by_recipient(plans_db.conn, exclude=(1, 2), **kwargs),
    )
    assert_index_search(lines, "idx_messages_pending_notification")
    assert any("CORRELATED SCALAR SUBQUERY" in line for line in lines), lines
    heads = broker.oldest_pending_by_recipient(plans_db.conn, **kwargs)
    assert {h.recipient.member_id for h in heads} == {plans_db.heavy, plans_db.light}
    for head in heads:
        one = broker.next_pending_notification(plans_db.conn, recipient_id=head.recipient.member_id)
        assert one is not None and one.message.message_id == head.message.message_id


def test_pending_selection_returns_the_oldest_pending_row_of_the_heavy_member(
    plans_db: Plans,
) -> None:
    got = broker.next_pending_notification(plans_db.conn, recipient_id=plans_db.heavy)
    assert got is not None
    db = raw_connect(plans_db.path)
    expected = db.execute(
        "SELECT message_id FROM messages WHERE owner_member_id = ? AND notified_at IS NULL "
        "AND status_state = 'input_required' AND type = 'unicast' "
        "ORDER BY created_at, message_id LIMIT 1",
        (plans_db.heavy,),
    ).fetchone()[0]
    db.close()
    assert got.message.message_id == expected


def vm_steps(path: Path, statement: str, parameters: Any) -> int:
    """SQLite virtual-machine instructions (in thousands) a statement takes to run to the end."""
    db = sqlite3.connect(str(path))
    steps = [0]

    def tick() -> int:
        steps[0] += 1
        return 0

    db.set_progress_handler(tick, 1000)
    try:
        db.execute(statement, parameters).fetchall()
    finally:
        db.close()
    return steps[0]


@pytest.mark.parametrize("which", ["roster", "pending_by_recipient", "pending_heads"])
def test_cost_does_not_follow_history(plans_db: Plans, which: str) -> None:
    """The heavy member's 100,000 rows are not walked: a full walk of any messages index costs
    millions of VM instructions, these statements a few thousand."""
    call: Callable[[], object]
    if which == "roster":
        call = lambda: broker.member_roster(plans_db.conn, fleet_id=plans_db.fleet)  # noqa: E731
    elif which == "pending_heads":
        call = lambda: broker.oldest_pending_by_recipient(  # noqa: E731
            plans_db.conn, fleet_id=plans_db.fleet
        )
    else:
        call = lambda: broker.next_pending_notification(  # noqa: E731
            plans_db.conn, recipient_id=plans_db.heavy
        )
    for statement, parameters in captured(plans_db.conn, call):
        assert vm_steps(plans_db.path, statement, parameters) < 20  # < 20,000 instructions
    # the same measure does see a walk of the heavy member's history
    walk = "SELECT COUNT(created_at) FROM messages WHERE from_member_id = ?"
    assert vm_steps(plans_db.path, walk, (plans_db.director,)) > 200
