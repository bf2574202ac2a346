"""Decoding, foreign keys, ids and all-or-nothing writes (docs/storage.md §7.2; §9 items 16, 18, 19,
20, 57)."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cafleet import broker
from cafleet.broker.errors import BootstrapAborted, StorageIntegrityError
from cafleet.db import tx
from cafleet.db.runtime import Connection
from cafleet.records import PlacementSpec, decode_skills
from tests.broker_helpers import raw_connect, table_counts
from tests.factories import FakePane, add_member, make_fleet
from tests.pg_server import PgDb
from tests.storage_helpers import APP_TABLES

TS = "2026-01-01T00:00:00.000000+00:00"

# --- §9 item 57 unknown enum values ---------------------------------------------------------------


def test_unknown_enum_values_raise_integrity_errors(conn: Connection, head_db: Path) -> None:
    boot = make_fleet(conn)
    w = add_member(conn, boot.fleet.fleet_id)
    wid = w.member_id
    msg = broker.send_message(
        conn, from_member_id=boot.director.member_id, to_member_id=wid, text="x"
    )
    broker.record_asset_install(conn, coding_agent="codex", path="/p", cafleet_version="1")
    db = raw_connect(head_db)

    def expect(
        table: str,
        column: str,
        key: tuple[str, object],
        bad: str,
        call: Callable[[], object],
        text: str,
    ) -> None:
        where = f"WHERE {key[0]} = ?"
        original = db.execute(f"SELECT {column} FROM {table} {where}", (key[1],)).fetchone()[0]
        db.execute(f"UPDATE {table} SET {column} = ? {where}", (bad, key[1]))
        try:
            with pytest.raises(StorageIntegrityError) as info:
                call()
            assert str(info.value) == text
            assert (info.value.table, info.value.column, info.value.value) == (table, column, bad)
        finally:
            db.execute(f"UPDATE {table} SET {column} = ? {where}", (original, key[1]))

    get_w = lambda: broker.get_member(conn, wid)  # noqa: E731
    get_m = lambda: broker.get_message(conn, msg.message_id)  # noqa: E731
    mid = ("message_id", msg.message_id)
    member = ("member_id", wid)
    expect(
        "members",
        "status",
        member,
        "paused",
        get_w,
        f"integrity error: members.status is 'paused' for member_id {wid} "
        "(expected one of: active, deregistered)",
    )
    expect(
        "members",
        "status",
        member,
        "Active",
        get_w,
        f"integrity error: members.status is 'Active' for member_id {wid} "
        "(expected one of: active, deregistered)",
    )
    expect(
        "messages",
        "type",
        mid,
        "multicast",
        get_m,
        f"integrity error: messages.type is 'multicast' for message_id {msg.message_id} "
        "(expected one of: unicast, broadcast_summary)",
    )
    expect(
        "messages",
        "status_state",
        mid,
        "done",
        get_m,
        f"integrity error: messages.status_state is 'done' for message_id {msg.message_id} "
        "(expected one of: input_required, completed)",
    )
    expect(
        "member_placements",
        "backend",
        member,
        "zellij",
        get_w,
        f"integrity error: member_placements.backend is 'zellij' for member_id {wid} "
        "(expected one of: tmux, herdr)",
    )
    expect(
        "member_placements",
        "coding_agent",
        member,
        "aider",
        get_w,
        f"integrity error: member_placements.coding_agent is 'aider' for member_id {wid} "
        "(expected one of: claude, codex, opencode, gemini)",
    )
    expect(
        "asset_installs",
        "coding_agent",
        ("path", "/p"),
        "aider",
        lambda: broker.asset_installs_for(conn, "aider"),
        "integrity error: asset_installs.coding_agent is 'aider' for path '/p' "
        "(expected one of: claude, codex, opencode, gemini)",
    )
    # the roster, the inbox, the ACK and the pending selection decode too
    expect(
        "member_placements",
        "backend",
        member,
        "zellij",
        lambda: broker.member_roster(conn, fleet_id=boot.fleet.fleet_id),
        f"integrity error: member_placements.backend is 'zellij' for member_id {wid} "
        "(expected one of: tmux, herdr)",
    )
    expect(
        "member_placements",
        "coding_agent",
        member,
        "x",
        lambda: broker.next_pending_notification(conn, recipient_id=wid),
        f"integrity error: member_placements.coding_agent is 'x' for member_id {wid} "
        "(expected one of: claude, codex, opencode, gemini)",
    )
    expect(
        "messages",
        "status_state",
        mid,
        "paused",
        lambda: broker.ack_message(conn, message_id=msg.message_id),
        f"integrity error: messages.status_state is 'paused' for message_id {msg.message_id} "
        "(expected one of: input_required, completed)",
    )
    db.close()
    # nothing was coerced or written: the rows read back are the originals
    assert broker.get_member(conn, wid) == w
    assert broker.get_message(conn, msg.message_id) == msg


def test_herdr_backend_decodes(conn: Connection, head_db: Path) -> None:
    boot = make_fleet(conn)
    w = add_member(conn, boot.fleet.fleet_id)
    db = raw_connect(head_db)
    db.execute("UPDATE member_placements SET backend = 'herdr' WHERE member_id = ?", (w.member_id,))
    db.close()
    placement = broker.get_member(conn, w.member_id).placement
    assert placement is not None and placement.backend == "herdr"


def test_skills_decoding_never_raises() -> None:
    assert decode_skills('{"skills":["a",{"b":[1,2]},3,null]}') == ["a", {"b": [1, 2]}, 3, None]
    assert decode_skills('{"skills":"a"}') == []
    assert decode_skills('{"name":"x"}') == []
    assert decode_skills("[1,2]") == []
    assert decode_skills("{bad") == []
    assert decode_skills("") == []
    assert decode_skills("[" * 100_000) == []


# --- §9 item 18 foreign keys ----------------------------------------------------------------------


def _sql(conn: Connection, statement: str, params: tuple[Any, ...] = ()) -> Any:
    with tx.write(conn):
        return conn.exec_driver_sql(statement, params)


def test_foreign_keys_enforced_on_factory_connections(conn: Connection) -> None:
    boot = make_fleet(conn)
    fid, d = boot.fleet.fleet_id, boot.director.member_id
    failing = [
        (
            "INSERT INTO members (fleet_id, name, description, status, registered_at, "
            "member_card_json) VALUES (999, 'n', 'd', 'active', ?, '{}')",
            (TS,),
        ),
        (
            "INSERT INTO member_placements (member_id, mux_session, mux_window_id, coding_agent, "
            "created_at) VALUES (999, 's', '@1', 'claude', ?)",
            (TS,),
        ),
        (
            "INSERT INTO messages (owner_member_id, from_member_id, to_member_id, type, created_at, "
            "status_state, status_timestamp, text) VALUES (999, ?, ?, 'unicast', ?, "
            "'input_required', ?, 'x')",
            (d, d, TS, TS),
        ),
        ("INSERT INTO monitor_runtime (fleet_id) VALUES (999)", ()),
    ]
    before = None
    for statement, params in failing:
        with pytest.raises(sqlite3.IntegrityError) as info:
            _sql(conn, statement, params)
        assert str(info.value) == "FOREIGN KEY constraint failed"
    # from, to and origin are plain integers: history may outlive its sender
    _sql(
        conn,
        "INSERT INTO messages (owner_member_id, from_member_id, to_member_id, type, created_at, "
        "status_state, status_timestamp, origin_message_id, text) VALUES (?, 777, 778, "
        "'unicast', ?, 'input_required', ?, 779, 'x')",
        (d, TS, TS),
    )
    assert before is None and fid >= 1


def test_restrict_and_cascade(conn: Connection, head_db: Path) -> None:
    boot = make_fleet(conn)
    fid = boot.fleet.fleet_id
    owner = add_member(conn, fid, name="owner")
    bare = add_member(conn, fid, name="bare")
    broker.send_message(
        conn, from_member_id=boot.director.member_id, to_member_id=owner.member_id, text="x"
    )
    for statement, params in [
        ("DELETE FROM fleets WHERE fleet_id = ?", (fid,)),
        ("DELETE FROM members WHERE member_id = ?", (owner.member_id,)),
    ]:
        with pytest.raises(sqlite3.IntegrityError) as info:
            _sql(conn, statement, params)
        assert str(info.value) == "FOREIGN KEY constraint failed"
    before = table_counts(head_db)
    _sql(conn, "DELETE FROM members WHERE member_id = ?", (bare.member_id,))
    after = table_counts(head_db)
    assert after["members"] == before["members"] - 1
    assert after["member_placements"] == before["member_placements"] - 1  # CASCADE


# --- §9 item 20 ids are never reused --------------------------------------------------------------


def test_ids_grow_after_hard_deletes(conn: Connection) -> None:
    first = make_fleet(conn, name="first")
    second = make_fleet(conn, name="second")
    msg = broker.send_message(
        conn,
        from_member_id=first.director.member_id,
        to_member_id=first.monitor.member_id,
        text="x",
    )
    fid2 = second.fleet.fleet_id
    top_member = second.monitor.member_id
    # test-only hard deletes of the highest rows of fleets, members and messages
    _sql(conn, "DELETE FROM messages WHERE message_id = ?", (msg.message_id,))
    _sql(conn, "UPDATE fleets SET director_member_id = NULL WHERE fleet_id = ?", (fid2,))
    _sql(conn, "DELETE FROM members WHERE fleet_id = ?", (fid2,))
    _sql(conn, "DELETE FROM fleets WHERE fleet_id = ?", (fid2,))
    third = make_fleet(conn, name="third")
    again = broker.send_message(
        conn,
        from_member_id=third.director.member_id,
        to_member_id=third.monitor.member_id,
        text="y",
    )
    assert third.fleet.fleet_id > fid2
    assert third.director.member_id > top_member
    assert again.message_id > msg.message_id
    assert min(first.fleet.fleet_id, first.director.member_id, msg.message_id) >= 1


# --- §9 item 16 all-or-nothing writes -------------------------------------------------------------

_FAIL_TRIGGERS = {
    "placement_insert": "BEFORE INSERT ON member_placements",
    "monitor_placement_insert": "BEFORE INSERT ON member_placements WHEN NEW.mux_pane_id = '%5'",
    "placement_update": "BEFORE UPDATE ON member_placements",
    "member_insert": "BEFORE INSERT ON members",
    "fleet_update": "BEFORE UPDATE ON fleets",
    "member_update": "BEFORE UPDATE ON members",
    "placement_delete": "BEFORE DELETE ON member_placements",
    "runtime_delete": "BEFORE DELETE ON monitor_runtime",
    "delivery_insert": "BEFORE INSERT ON messages WHEN NEW.type = 'unicast'",
    "message_update": "BEFORE UPDATE ON messages",
    "runtime_write": "BEFORE UPDATE ON monitor_runtime",
    "asset_insert": "BEFORE INSERT ON asset_installs",
}


def _arm(path: Path, which: str) -> None:
    db = raw_connect(path)  # an auxiliary trigger keeps the file current (§9 item 29)
    if isinstance(path, PgDb):  # the same trigger in PostgreSQL's words
        when, _, condition = _FAIL_TRIGGERS[which].partition(" WHEN ")
        db.execute(
            "CREATE FUNCTION test_fail() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'boom'; END $$"
        )
        db.execute(
            f"CREATE TRIGGER test_fail {when} FOR EACH ROW "
            + (f"WHEN ({condition}) " if condition else "")
            + "EXECUTE FUNCTION test_fail()"
        )
    else:
        db.execute(
            f"CREATE TRIGGER test_fail {_FAIL_TRIGGERS[which]} "
            "BEGIN SELECT RAISE(ABORT, 'boom'); END"
        )
    db.close()


def _disarm(path: Path, which: str) -> None:
    db = raw_connect(path)
    if isinstance(path, PgDb):
        table = _FAIL_TRIGGERS[which].split(" ON ")[1].split()[0]
        db.execute(f"DROP TRIGGER test_fail ON {table}")
    else:
        db.execute("DROP TRIGGER test_fail")
    db.close()


def _snapshot(path: Path) -> list[tuple[Any, ...]]:
    db = raw_connect(path)
    try:
        rows: list[tuple[Any, ...]] = []
        # PostgreSQL's sequences are not transactional: a failed insert leaves a gap in the ids,
        # never a reused id (docs/storage.md §10.4), so only SQLite's counters are compared.
        counters = () if isinstance(path, PgDb) else ("sqlite_sequence",)
        for table in (*APP_TABLES, *counters):
            rows.extend((table, *r) for r in db.execute(f"SELECT * FROM {table} ORDER BY 1, 2"))
        return rows
    finally:
        db.close()


def _setup(conn: Connection) -> dict[str, int]:
    boot = make_fleet(conn)
    fid = boot.fleet.fleet_id
    w = add_member(conn, fid, name="w")
    pend = add_member(conn, fid, name="pend", pane_id=None)
    m = broker.send_message(
        conn, from_member_id=boot.director.member_id, to_member_id=w.member_id, text="x"
    )
    broker.claim_monitor(
        conn, fleet_id=fid, pid=os.getpid(), tick_seconds=5, wake_interval_seconds=60
    )
    return {
        "fleet": fid,
        "director": boot.director.member_id,
        "w": w.member_id,
        "pend": pend.member_id,
        "msg": m.message_id,
    }


_WRITES: dict[str, tuple[str, Callable[[Connection, dict[str, int]], object]]] = {
    "create_fleet": ("placement_insert", lambda c, ids: make_fleet(c)),
    "create_fleet_after_spawn": (
        "monitor_placement_insert",
        lambda c, ids: broker.create_fleet(
            c,
            name="n",
            backend="tmux",
            coding_agent="claude",
            director_pane=FakePane("s", "@1", "%1000"),
            spawn_monitor=lambda f, d, m: FakePane("s", "@1", "%5"),
        ),
    ),
    "register_member": (
        "placement_insert",
        lambda c, ids: broker.register_member(
            c,
            fleet_id=ids["fleet"],
            name="n",
            description="d",
            role="member",
            placement=PlacementSpec("s", "@1", "claude"),
            require_monitor=True,
        ),
    ),
    "set_placement_pane": (
        "placement_update",
        lambda c, ids: broker.set_placement_pane(c, member_id=ids["pend"], pane_id="%9"),
    ),
    "deregister_member": (
        "placement_delete",
        lambda c, ids: broker.deregister_member(c, member_id=ids["w"]),
    ),
    "delete_fleet": (
        "runtime_delete",
        lambda c, ids: broker.delete_fleet(
            c, fleet_id=ids["fleet"], locked_panes=set(), try_lock=lambda k: True
        ),
    ),
    "send_message": (
        "delivery_insert",
        lambda c, ids: broker.send_message(
            c, from_member_id=ids["director"], to_member_id=ids["w"], text="y"
        ),
    ),
    "broadcast_message": (
        "delivery_insert",
        lambda c, ids: broker.broadcast_message(c, from_member_id=ids["w"], text="y"),
    ),
    "ack_message": ("message_update", lambda c, ids: broker.ack_message(c, message_id=ids["msg"])),
    "stamp_notified": (
        "message_update",
        lambda c, ids: broker.stamp_notified(c, message_id=ids["msg"]),
    ),
    "heartbeat": (
        "runtime_write",
        lambda c, ids: broker.heartbeat(c, fleet_id=ids["fleet"], pid=os.getpid()),
    ),
    "claim_monitor": (
        "runtime_write",
        lambda c, ids: broker.claim_monitor(
            c,
            fleet_id=ids["fleet"],
            pid=1,
            tick_seconds=None,
            wake_interval_seconds=1,
            is_live=lambda r, n: False,
        ),
    ),
    "record_asset_install": (
        "asset_insert",
        lambda c, ids: broker.record_asset_install(
            c, coding_agent="claude", path="/p", cafleet_version="1"
        ),
    ),
}


@pytest.mark.parametrize("name", sorted(_WRITES))
def test_a_failing_write_leaves_no_partial_rows(conn: Connection, head_db: Path, name: str) -> None:
    trigger, call = _WRITES[name]
    ids = _setup(conn)
    _arm(head_db, trigger)
    before = _snapshot(head_db)
    with pytest.raises(Exception) as info:
        call(conn, ids)
    assert "boom" in str(info.value)
    if name == "create_fleet_after_spawn":
        assert isinstance(info.value, BootstrapAborted)
        assert info.value.spawned_pane == FakePane("s", "@1", "%5")
        assert str(info.value) == "boom"
    assert _snapshot(head_db) == before
    assert not conn.in_transaction()
    if not isinstance(head_db, PgDb):
        assert not conn.driver.in_transaction
    # the writer lock was released: another write goes through at once
    _disarm(head_db, trigger)
    call(conn, ids)
