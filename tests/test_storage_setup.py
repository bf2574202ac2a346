"""The database half of `setup` (docs/storage.md §6, §3.3–3.5; §9 items 31–42, 64 and the
checkout half of §9 item 43)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection

import cafleet.db.migrate as migrate
from cafleet.db.diagnosis import diagnose_path
from cafleet.db.errors import SetupFailed
from cafleet.db.migrate import run_setup, upgrade_to
from cafleet.db.shapes import HEAD_REVISION, HEAD_VERSION
from tests.storage_helpers import (
    MONITOR_CARD,
    REPO_ROOT,
    TS,
    TS2,
    Templates,
    assert_unchanged,
    card,
    companions,
    dump,
    hold_lock,
    ledger,
    populate_0001,
    query,
    sha256,
    snapshot,
    sql,
    start_python,
    templates_fixture,  # noqa: F401
    wait_line,
)

DUPLICATE_TEXT = (
    "active monitor duplicates prevent migration: fleet 3: members 2, 8; fleet 20: members 30, 90; "
    "deregister all but one active monitor per fleet, then run 'cafleet setup' again"
)


def created(db: Path) -> str:
    return f"Created {db} and applied migrations to head ({HEAD_VERSION})."


def has_monitor_index(db: Path) -> bool:
    return bool(
        query(
            db,
            "SELECT 1 FROM sqlite_master WHERE name = 'idx_members_one_active_monitor_per_fleet'",
        )
    )


# --- §9 items 31–33 -------------------------------------------------------------------------------


def test_setup_creates_parents_and_the_file(tmp_path: Path) -> None:
    db = tmp_path / "a" / "b" / "c" / "cafleet.db"
    assert run_setup(str(db)) == created(db)
    assert query(db, "PRAGMA journal_mode") == [("wal",)]
    assert diagnose_path(str(db)).state == "current"
    assert companions(db) == []
    assert sorted(os.listdir(db.parent)) == ["cafleet.db", "locks"]
    assert sorted(os.listdir(db.parent / "locks")) == ["db-write.lock", "setup.lock"]


def test_setup_initialises_an_empty_identity_0_file(db_path: Path) -> None:
    db_path.parent.mkdir(parents=True)
    db_path.write_bytes(b"")
    assert run_setup(str(db_path)) == created(db_path)
    assert query(db_path, "PRAGMA application_id") == [(1128351288,)]


def test_rerun_is_a_no_op(db_path: Path) -> None:
    run_setup(str(db_path))
    before = snapshot(db_path)
    mtime = db_path.stat().st_mtime_ns
    assert run_setup(str(db_path)) == f"Already at head ({HEAD_VERSION}); nothing to do."
    assert_unchanged(before, db_path)
    assert db_path.stat().st_mtime_ns == mtime


def test_setup_cannot_create_directory(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    db = blocker / "sub" / "cafleet.db"
    with pytest.raises(SetupFailed) as e:
        run_setup(str(db))
    assert str(e.value) == (
        f"cannot create directory {blocker / 'sub'}: not a directory; a component of the path "
        "is a file, not a directory; fix the path"
    )


def test_missing_migration_scripts(
    db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = tmp_path / "nowhere1", tmp_path / "nowhere2"
    monkeypatch.setattr(migrate, "_candidates", lambda: (first, second))
    with pytest.raises(SetupFailed) as e:
        run_setup(str(db_path))
    assert str(e.value) == (
        "cafleet installation is incomplete: migration scripts not found "
        f"(looked in {first}, {second})"
    )
    assert not db_path.exists()


# --- §9 item 34 -----------------------------------------------------------------------------------


def test_upgrade_from_0001_keeps_every_row(db_path: Path, templates: Templates) -> None:
    templates.copy("0001", db_path)
    populate_0001(db_path)
    before = dump(db_path)
    assert all(before[t] for t in before), before  # rows in every table
    assert run_setup(str(db_path)) == f"Upgraded from 1 to {HEAD_VERSION}."
    after = dump(db_path)
    # 0003 adds an empty member_spawns; 0003, 0004 and 0005 add member_placements.lost_at,
    # .mux_socket and .host_id, 0005 fleets.member_defaults_json, 0007 messages.client_token,
    # 0008 the placement's three server and process columns (NULL everywhere).
    assert after.pop("member_spawns") == []
    assert after.pop("host_loops") == []  # 0006
    for table in ("tasks", "task_deps", "task_events"):  # 0009
        assert after.pop(table) == []
    for table in NOTIFY_TABLES:  # 0011
        assert after.pop(table) == []
    # 0008 adds three placement columns, 0009 two message columns, 0012 fleets.merge_gate,
    # 0013 one message and four member columns (NULL everywhere).
    added = {"member_placements": 6, "fleets": 2, "messages": 4, "members": 4}
    assert _without_added(after, added) == before
    assert has_monitor_index(db_path)
    assert ledger(db_path) == [(HEAD_REVISION,)]
    assert diagnose_path(str(db_path)).state == "current"
    assert query(db_path, "PRAGMA foreign_key_check") == []


def test_upgrade_from_0002_adds_member_spawns_and_lost_at(
    db_path: Path, templates: Templates
) -> None:
    """Revision 0003 (docs/storage.md §3.6): every row kept, the new column NULL, the new table
    empty and usable."""
    templates.copy("0001", db_path)
    populate_0001(db_path)
    upgrade_to(str(db_path), "0002")
    before = dump(db_path)
    placements = query(db_path, "PRAGMA table_xinfo(member_placements)")
    assert [r[1] for r in placements][-1] == "created_at"
    assert diagnose_path(str(db_path)).state == "behind"
    upgrade_to(str(db_path), "0003")  # the real driver, stopped at 0003 (setup goes on to head)
    after = dump(db_path)
    assert after.pop("member_spawns") == []
    assert after["member_placements"] == [(*row, None) for row in before["member_placements"]]
    after["member_placements"] = before["member_placements"]
    assert after == before
    assert ledger(db_path) == [("0003",)]
    assert query(db_path, "PRAGMA foreign_key_check") == []
    sql(
        db_path,
        "PRAGMA foreign_keys = ON; "
        "INSERT INTO member_spawns VALUES (3, 'hello {member_id}', NULL, 'high'); "
        "UPDATE member_placements SET lost_at = 'x' WHERE member_id = 3;",
    )
    assert query(db_path, "SELECT * FROM member_spawns") == [(3, "hello {member_id}", None, "high")]
    assert query(db_path, "PRAGMA foreign_key_check") == []


def _without_added(tables: dict[str, Any], added: dict[str, int]) -> dict[str, Any]:
    """The dump without the last ``added[table]`` columns of each named table, which an upgrade
    adds as NULL to every row (asserted)."""
    out = dict(tables)
    for table, count in added.items():
        rows = out[table]
        assert all(row[-count:] == (None,) * count for row in rows), rows
        out[table] = [row[:-count] for row in rows]
    return out


# Columns revision 0005 appends (docs/storage.md §3.8), per table.
_ADDED_0005 = {"fleets": 1, "member_placements": 1, "member_spawns": 3}


def test_upgrade_from_0003_adds_the_placement_socket_and_keeps_every_row(
    db_path: Path, templates: Templates
) -> None:
    """Revision 0004 (docs/storage.md §3.7, docs/runtime.md §1.8): one nullable column; old placements
    read as "socket not recorded" and still work (their pane key and lock file are unchanged)."""
    from cafleet.broker.members import get_member
    from cafleet.db.guard import open_validated_connection
    from cafleet.db.runtime import close_connection
    from cafleet.mux.locks import lock_file_name
    from cafleet.records import PaneKey

    templates.copy("0001", db_path)
    populate_0001(db_path)
    upgrade_to(str(db_path), "0003")
    sql(db_path, "INSERT INTO member_spawns VALUES (3, 'hello {member_id}', NULL, 'high')")
    sql(db_path, "UPDATE member_placements SET lost_at = 'x' WHERE member_id = 3")
    before = dump(db_path)
    assert diagnose_path(str(db_path)).state == "behind"
    upgrade_to(str(db_path), "0004")
    assert _without_added(dump(db_path), {"member_placements": 1}) == before
    assert ledger(db_path) == [("0004",)]
    assert run_setup(str(db_path)) == f"Upgraded from 4 to {HEAD_VERSION}."
    assert diagnose_path(str(db_path)).state == "current"
    conn = open_validated_connection(str(db_path))
    try:
        placement = get_member(conn, 3).placement
    finally:
        close_connection(conn)
    assert placement is not None and placement.mux_socket is None and placement.lost_at == "x"
    assert placement.pane_key == PaneKey("tmux", "main", "%3")  # the same lock file as before
    assert lock_file_name(placement.pane_key) == lock_file_name(PaneKey("tmux", "main", "%3"))
    assert run_setup(str(db_path)) == f"Already at head ({HEAD_VERSION}); nothing to do."


def test_upgrade_from_0004_adds_the_wave3_columns_and_keeps_every_row(
    db_path: Path, templates: Templates
) -> None:
    """Revision 0005 (docs/storage.md §3.8): five nullable columns on three tables; every row kept
    and the new columns NULL."""
    templates.copy("0001", db_path)
    populate_0001(db_path)
    upgrade_to(str(db_path), "0004")
    sql(db_path, "INSERT INTO member_spawns VALUES (3, 'hello {member_id}', NULL, 'high')")
    before = dump(db_path)
    assert diagnose_path(str(db_path)).state == "behind"
    upgrade_to(str(db_path), "0005")
    assert _without_added(dump(db_path), _ADDED_0005) == before
    assert ledger(db_path) == [("0005",)]
    assert query(db_path, "PRAGMA foreign_key_check") == []


def test_upgrade_from_0005_adds_host_loops_and_keeps_every_row(
    db_path: Path, templates: Templates
) -> None:
    """Revision 0006 (docs/storage.md §3.9): one new, empty table; every row kept, a recorded
    placement `host_id` included; the table takes a host's row."""
    templates.copy("0001", db_path)
    populate_0001(db_path)
    upgrade_to(str(db_path), "0005")
    sql(db_path, "UPDATE member_placements SET host_id = 'gpu-1' WHERE member_id = 3")
    before = dump(db_path)
    assert "host_loops" not in before
    assert diagnose_path(str(db_path)).state == "behind"
    upgrade_to(str(db_path), "0006")
    after = dump(db_path)
    assert after.pop("host_loops") == []
    assert after == before
    assert ledger(db_path) == [("0006",)]
    sql(db_path, "INSERT INTO host_loops (host_id, pid) VALUES ('gpu-1', 42)")
    assert query(db_path, "SELECT host_id, pid, tick_seconds FROM host_loops") == [("gpu-1", 42, 5)]
    assert query(db_path, "PRAGMA foreign_key_check") == []


def test_upgrade_from_0006_adds_message_tokens_and_keeps_every_row(
    db_path: Path, templates: Templates
) -> None:
    """Revision 0007 (docs/storage.md §3.10): `messages.client_token`, NULL on every existing
    row; the partial unique index then keeps one token per sender, and any number of rows
    without one."""
    templates.copy("0001", db_path)
    populate_0001(db_path)
    upgrade_to(str(db_path), "0006")
    sql(db_path, "INSERT INTO host_loops (host_id, pid) VALUES ('gpu-1', 42)")
    before = dump(db_path)
    assert len(before["messages"]) >= 2
    assert diagnose_path(str(db_path)).state == "behind"
    upgrade_to(str(db_path), "0007")
    assert _without_added(dump(db_path), {"messages": 1}) == before
    assert ledger(db_path) == [("0007",)]
    assert query(db_path, "PRAGMA foreign_key_check") == []
    first, second = (r[0] for r in before["messages"][:2])
    sql(db_path, f"UPDATE messages SET client_token = 'k' WHERE message_id = {first}")
    sender = query(db_path, f"SELECT from_member_id FROM messages WHERE message_id = {first}")
    with pytest.raises(sqlite3.IntegrityError, match="UNIQUE"):
        sql(
            db_path,
            f"UPDATE messages SET client_token = 'k', from_member_id = {sender[0][0]} "
            f"WHERE message_id = {second}",
        )
    sql(db_path, f"UPDATE messages SET client_token = 'other' WHERE message_id = {second}")


def test_upgrade_from_0007_adds_the_placement_server_and_keeps_every_row(
    db_path: Path, templates: Templates
) -> None:
    """Revision 0008 (docs/storage.md §3.11): three nullable columns appended to
    `member_placements`, NULL on every row kept (a placement without them is checked as
    before); a placement then records its server and process."""
    templates.copy("0001", db_path)
    populate_0001(db_path)
    upgrade_to(str(db_path), "0007")
    sql(
        db_path,
        "UPDATE member_placements SET host_id = 'gpu-1', mux_socket = '/tmp/s' "
        "WHERE member_id = 3; INSERT INTO host_loops (host_id, pid) VALUES ('gpu-1', 7)",
    )
    before = dump(db_path)
    assert diagnose_path(str(db_path)).state == "behind"
    upgrade_to(str(db_path), "0008")
    assert _without_added(dump(db_path), {"member_placements": 3}) == before
    assert ledger(db_path) == [("0008",)]
    sql(
        db_path,
        "UPDATE member_placements SET mux_server_pid = 4242, mux_server_start = 1796301178, "
        "mux_pane_pid = 4243 WHERE member_id = 3",
    )
    assert query(
        db_path,
        "SELECT mux_server_pid, mux_server_start, mux_pane_pid FROM member_placements "
        "WHERE member_id = 3",
    ) == [(4242, 1796301178, 4243)]
    assert query(db_path, "PRAGMA foreign_key_check") == []


def test_upgrade_from_0008_adds_tasks_and_keeps_every_row(
    db_path: Path, templates: Templates
) -> None:
    """Revision 0009 (docs/storage.md §3.12): the task tables, empty; `messages.task_id` and
    `reply_to_message_id` NULL on every existing row; the new foreign keys hold."""
    templates.copy("0001", db_path)
    populate_0001(db_path)
    upgrade_to(str(db_path), "0008")
    before = dump(db_path)
    assert len(before["messages"]) >= 2
    upgrade_to(str(db_path), "0009")
    after = dump(db_path)
    for table in ("tasks", "task_deps", "task_events"):
        assert after.pop(table) == []
    assert _without_added(after, {"messages": 2}) == before
    assert query(db_path, "SELECT count(*) FROM messages WHERE task_id IS NOT NULL") == [(0,)]
    assert ledger(db_path) == [("0009",)]
    assert query(db_path, "PRAGMA foreign_key_check") == []
    fleet, member = query(db_path, "SELECT fleet_id, member_id FROM members LIMIT 1")[0]
    sql(
        db_path,
        "INSERT INTO tasks (fleet_id, title, body, state, assignee_member_id, created_at, "
        f"state_since) VALUES ({fleet}, 't', '', 'ready', {member}, '{TS}', '{TS}')",
    )
    with pytest.raises(sqlite3.IntegrityError, match="FOREIGN KEY"):
        sql(db_path, "INSERT INTO task_deps VALUES (1, 999)", fk=True)


def test_upgrade_from_0009_indexes_every_message_and_task_and_keeps_every_row(
    db_path: Path, templates: Templates
) -> None:
    """Revision 0010 (docs/storage.md §3.13): the search index is filled from the rows already
    there (a broadcast once, as its first delivery) and every row is kept."""
    templates.copy("0001", db_path)
    populate_0001(db_path)
    upgrade_to(str(db_path), "0009")
    fleet, member = query(db_path, "SELECT fleet_id, member_id FROM members LIMIT 1")[0]
    sql(
        db_path,
        "INSERT INTO tasks (fleet_id, title, body, state, result, created_at, state_since) "
        f"VALUES ({fleet}, 'Fix walrus', 'the body', 'done', 'walrus fixed', '{TS}', '{TS}')",
    )
    before = dump(db_path)
    upgrade_to(str(db_path), "0010")
    assert dump(db_path) == before
    assert ledger(db_path) == [("0010",)]
    assert query(db_path, "SELECT rowid, body FROM search_messages ORDER BY rowid") == [
        (m[0], m[9]) for m in before["messages"] if m[0] in (1, 2, 4, 6)
    ]
    assert query(
        db_path, "SELECT rowid FROM search_messages WHERE search_messages MATCH 'hands'"
    ) == [(4,)]
    assert query(db_path, "SELECT rowid FROM search_tasks WHERE search_tasks MATCH 'walrus'") == [
        (1,)
    ]
    # written with each later row, in its transaction
    sql(
        db_path,
        "INSERT INTO messages (owner_member_id, from_member_id, to_member_id, type, created_at, "
        f"status_state, status_timestamp, text) VALUES ({member}, {member}, {member}, 'unicast', "
        f"'{TS}', 'input_required', '{TS}', 'narwhal')",
    )
    assert query(
        db_path, "SELECT count(*) FROM search_messages WHERE search_messages MATCH 'narwhal'"
    ) == [(1,)]
    assert query(db_path, "PRAGMA foreign_key_check") == []


NOTIFY_TABLES = (
    "notify_channels",
    "notify_outbox",
    "answer_links",
    "member_budgets",
    "fleet_budgets",
)


def test_upgrade_from_0010_adds_notify_and_budget_tables_and_keeps_every_row(
    db_path: Path, templates: Templates
) -> None:
    """Revision 0011 (docs/storage.md §3.14): five empty tables, every row kept, their foreign
    keys enforced."""
    templates.copy("0001", db_path)
    populate_0001(db_path)
    upgrade_to(str(db_path), "0010")
    before = dump(db_path)
    upgrade_to(str(db_path), "0011")
    assert dump(db_path) == {**before, **{table: [] for table in NOTIFY_TABLES}}
    assert ledger(db_path) == [("0011",)]
    fleet, member = query(db_path, "SELECT fleet_id, member_id FROM members LIMIT 1")[0]
    sql(
        db_path,
        "INSERT INTO notify_channels (fleet_id, kind, created_at, failures) "
        f"VALUES ({fleet}, 'desktop', '{TS}', 0)",
        fk=True,
    )
    sql(db_path, f"INSERT INTO member_budgets (member_id, tokens) VALUES ({member}, 10)", fk=True)
    with pytest.raises(sqlite3.IntegrityError):
        sql(db_path, "INSERT INTO member_budgets (member_id, tokens) VALUES (999, 1)", fk=True)


def test_upgrade_from_0011_adds_the_review_columns_and_keeps_every_row(
    db_path: Path, templates: Templates
) -> None:
    """Revision 0012 (docs/storage.md §3.15): five task columns and `fleets.merge_gate`, NULL
    on every existing row; the search triggers on `tasks` still index later changes."""
    templates.copy("0001", db_path)
    populate_0001(db_path)
    upgrade_to(str(db_path), "0011")
    fleet = query(db_path, "SELECT fleet_id FROM members LIMIT 1")[0][0]
    sql(
        db_path,
        "INSERT INTO tasks (fleet_id, title, body, state, created_at, state_since) "
        f"VALUES ({fleet}, 'Fix walrus', 'the body', 'done', '{TS}', '{TS}')",
    )
    before = dump(db_path)
    upgrade_to(str(db_path), "0012")
    after = dump(db_path)
    assert _without_added(after, {"tasks": 5, "fleets": 1}) == before
    assert [row[-5:] for row in after["tasks"]] == [(None,) * 5]
    assert ledger(db_path) == [("0012",)]
    sql(db_path, "UPDATE tasks SET result = 'narwhal done', git_branch = 'b'")
    assert query(
        db_path, "SELECT count(*) FROM search_tasks WHERE search_tasks MATCH 'narwhal'"
    ) == [(1,)]


def test_upgrade_from_0012_adds_the_hook_columns_and_keeps_every_row(
    db_path: Path, templates: Templates
) -> None:
    """Revision 0013 (docs/storage.md §3.16): five nullable columns; every row kept, the new
    columns NULL (no hook has reported)."""
    templates.copy("0001", db_path)
    populate_0001(db_path)
    upgrade_to(str(db_path), "0012")
    before = dump(db_path)
    upgrade_to(str(db_path), "0013")
    assert _without_added(dump(db_path), {"members": 4, "messages": 1}) == before
    assert ledger(db_path) == [("0013",)]
    assert query(db_path, "PRAGMA foreign_key_check") == []


def test_upgrade_from_0002_runs_both_revisions(db_path: Path, templates: Templates) -> None:
    """A 0002 file goes through every later revision in one `setup`: every row kept, the
    placement, fleet and message columns NULL, `member_spawns` empty."""
    templates.copy("0002", db_path)
    populate_0001(db_path)
    before = dump(db_path)
    assert run_setup(str(db_path)) == f"Upgraded from 2 to {HEAD_VERSION}."
    after = dump(db_path)
    assert after.pop("member_spawns") == []
    assert after.pop("host_loops") == []  # 0006
    for table in ("tasks", "task_deps", "task_events"):  # 0009
        assert after.pop(table) == []
    for table in NOTIFY_TABLES:  # 0011
        assert after.pop(table) == []
    # 0008 adds three placement columns, 0009 two message columns, 0012 fleets.merge_gate,
    # 0013 one message and four member columns (NULL everywhere).
    added = {"member_placements": 6, "fleets": 2, "messages": 4, "members": 4}
    assert _without_added(after, added) == before
    assert ledger(db_path) == [(HEAD_REVISION,)]
    assert diagnose_path(str(db_path)).state == "current"
    assert query(db_path, "PRAGMA foreign_key_check") == []


# --- §9 items 35–40 refusals ----------------------------------------------------------------------


def _fleet(db: Path, fleet_id: int, director_id: int) -> None:
    sql(
        db,
        f"INSERT INTO fleets VALUES ({fleet_id}, 'f{fleet_id}', '{TS}', NULL, {director_id}); "
        f"INSERT INTO members VALUES ({director_id}, {fleet_id}, 'Director', 'root', 'active', "
        f"'{TS}', NULL, '{card('Director')}');",
    )


def _member(
    db: Path, member_id: int, fleet_id: int, member_card: str, status: str = "active"
) -> None:
    deregistered = "NULL" if status == "active" else f"'{TS2}'"
    sql(
        db,
        f"INSERT INTO members VALUES ({member_id}, {fleet_id}, 'm{member_id}', 'd', '{status}', "
        f"'{TS}', {deregistered}, '{member_card}')",
    )


def _duplicates_at_0001(db: Path, templates: Templates) -> None:
    templates.copy("0001", db)
    _fleet(db, 3, 1)
    _fleet(db, 20, 10)
    _fleet(db, 7, 11)
    for member_id, fleet_id in ((90, 20), (8, 3), (30, 20), (2, 3), (12, 7)):
        _member(db, member_id, fleet_id, MONITOR_CARD)
        sql(
            db,
            f"INSERT INTO member_placements VALUES ({member_id}, 's', '@1', '%{member_id}', "
            f"'tmux', 'claude', '{TS}')",
        )
    _member(db, 40, 3, MONITOR_CARD, status="deregistered")  # not counted
    _member(db, 41, 7, MONITOR_CARD.replace('"monitor"}', '"Monitor"}'))  # case-sensitive
    _member(db, 42, 7, MONITOR_CARD.replace('"monitor"}', "null}"))


def test_duplicate_monitors_refuse_then_recover(db_path: Path, templates: Templates) -> None:
    _duplicates_at_0001(db_path, templates)
    before = snapshot(db_path)
    with pytest.raises(SetupFailed) as e:
        run_setup(str(db_path))
    assert str(e.value) == DUPLICATE_TEXT
    assert_unchanged(before, db_path)
    assert ledger(db_path) == [("0001",)]

    # Manual recovery (b) of docs/storage.md §3.3
    sql(
        db_path,
        """
        BEGIN IMMEDIATE;
        UPDATE members SET status = 'deregistered',
               deregistered_at = strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000+00:00'
         WHERE member_id IN (8, 90) AND status = 'active';
        DELETE FROM member_placements WHERE member_id IN (8, 90);
        COMMIT;
        """,
    )
    assert run_setup(str(db_path)) == f"Upgraded from 1 to {HEAD_VERSION}."
    assert has_monitor_index(db_path)
    deregistered_at = query(db_path, "SELECT deregistered_at FROM members WHERE member_id = 8")
    assert len(deregistered_at[0][0]) == 32


def test_concurrent_writer_adds_a_duplicate_while_setup_waits(
    db_path: Path, templates: Templates
) -> None:
    templates.copy("0001", db_path)
    _fleet(db_path, 1, 1)
    _member(db_path, 2, 1, MONITOR_CARD)
    other = start_python(
        f"""
        import sqlite3, time
        con = sqlite3.connect({str(db_path)!r}, isolation_level=None)
        con.execute("BEGIN IMMEDIATE")
        con.execute(
            "INSERT INTO members VALUES (3, 1, 'm3', 'd', 'active', ?, NULL, ?)",
            ({TS!r}, {MONITOR_CARD!r}),
        )
        print("locked", flush=True)
        time.sleep(1)
        con.execute("COMMIT")
        con.close()
        """
    )
    try:
        wait_line(other, "locked")
        start = time.monotonic()
        with pytest.raises(SetupFailed) as e:
            run_setup(str(db_path))
        elapsed = time.monotonic() - start
    finally:
        other.wait(timeout=10)
    assert other.returncode == 0
    assert str(e.value) == (
        "active monitor duplicates prevent migration: fleet 1: members 2, 3; "
        "deregister all but one active monitor per fleet, then run 'cafleet setup' again"
    )
    assert 0.5 <= elapsed < 5.0, elapsed
    assert ledger(db_path) == [("0001",)]
    assert query(db_path, "SELECT member_id FROM members ORDER BY member_id") == [(1,), (2,), (3,)]
    assert not has_monitor_index(db_path)
    assert diagnose_path(str(db_path)).state == "behind"


def test_index_failure_backstop_maps_to_the_duplicate_text(
    db_path: Path, templates: Templates, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A revision without pre-checks: the index DDL itself fails inside the transaction."""
    _duplicates_at_0001(db_path, templates)

    def index_only(conn: Connection, target: str) -> None:
        conn.exec_driver_sql(
            "CREATE UNIQUE INDEX idx_members_one_active_monitor_per_fleet ON members (fleet_id) "
            "WHERE status = 'active' AND json_extract(member_card_json, '$.cafleet.kind') = 'monitor'"
        )

    monkeypatch.setattr(migrate, "_alembic_upgrade", index_only)
    before = snapshot(db_path)
    with pytest.raises(SetupFailed) as e:
        run_setup(str(db_path))
    assert str(e.value) == DUPLICATE_TEXT
    assert_unchanged(before, db_path)


def test_malformed_card_refusal(db_path: Path, templates: Templates) -> None:
    templates.copy("0001", db_path)
    _fleet(db_path, 1, 1)
    _member(db_path, 4, 1, "{not json")
    _member(db_path, 5, 1, "{also bad", status="deregistered")  # inactive: ignored
    _member(db_path, 9, 1, "[1, 2")
    before = snapshot(db_path)
    with pytest.raises(SetupFailed) as e:
        run_setup(str(db_path))
    assert str(e.value) == (
        "active members with malformed member_card_json prevent migration: members 4, 9; "
        "repair or deregister them, then run 'cafleet setup' again"
    )
    assert_unchanged(before, db_path)


def test_existing_index_name_fails_without_duplicate_wording(
    db_path: Path, templates: Templates
) -> None:
    templates.copy("0001", db_path)
    sql(db_path, "CREATE INDEX idx_members_one_active_monitor_per_fleet ON members (name)")
    assert diagnose_path(str(db_path)).state == "behind"  # an auxiliary index is tolerated
    before = snapshot(db_path)
    with pytest.raises(SetupFailed) as e:
        run_setup(str(db_path))
    assert str(e.value) == (
        "migration failed: index idx_members_one_active_monitor_per_fleet already exists; "
        f"{db_path} was left unchanged"
    )
    assert_unchanged(before, db_path)


def test_foreign_key_violation_fails_the_check(db_path: Path, templates: Templates) -> None:
    templates.copy("0001", db_path)
    _fleet(db_path, 1, 1)
    sql(
        db_path,
        f"INSERT INTO member_placements VALUES (77, 's', '@1', '%7', 'tmux', 'codex', '{TS}')",
    )
    before = snapshot(db_path)
    with pytest.raises(SetupFailed) as e:
        run_setup(str(db_path))
    assert str(e.value) == (
        "migration failed: foreign key check found 1 violation(s); first: member_placements "
        f"rowid 77 references missing members row; {db_path} was left unchanged"
    )
    assert_unchanged(before, db_path)


# --- §9 item 41 -----------------------------------------------------------------------------------


def test_failed_initialisation_leaves_missing_then_succeeds(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def half_then_boom(conn: Connection, target: str) -> None:
        conn.exec_driver_sql("CREATE TABLE fleets (fleet_id INTEGER PRIMARY KEY)")
        conn.exec_driver_sql("PRAGMA application_id = 1128351288")
        raise RuntimeError("boom")

    monkeypatch.setattr(migrate, "_alembic_upgrade", half_then_boom)
    with pytest.raises(SetupFailed) as e:
        run_setup(str(db_path))
    assert str(e.value) == f"migration failed: boom; {db_path} was left unchanged"
    assert db_path.exists()
    assert diagnose_path(str(db_path)).state == "missing"
    monkeypatch.undo()
    assert run_setup(str(db_path)) == created(db_path)


def test_resulting_schema_mismatch_is_rolled_back(
    db_path: Path, templates: Templates, monkeypatch: pytest.MonkeyPatch
) -> None:
    templates.copy("0001", db_path)
    real = migrate._alembic_upgrade

    def upgrade_then_drop(conn: Connection, target: str) -> None:
        real(conn, target)
        conn.exec_driver_sql("DROP INDEX idx_messages_from_created")

    monkeypatch.setattr(migrate, "_alembic_upgrade", upgrade_then_drop)
    before = snapshot(db_path)
    with pytest.raises(SetupFailed) as e:
        run_setup(str(db_path))
    assert str(e.value) == (
        f"migration failed: resulting schema does not match schema {HEAD_VERSION} (missing index "
        f"idx_messages_from_created); {db_path} was left unchanged"
    )
    assert_unchanged(before, db_path)


# --- §9 item 42 concurrent setups -----------------------------------------------------------------


def _setup_processes(db: Path, count: int) -> list[subprocess.Popen[str]]:
    code = f"from cafleet.db.migrate import run_setup; print(run_setup({str(db)!r}))"
    return [
        subprocess.Popen(
            [sys.executable, "-c", code],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=str(REPO_ROOT),
        )
        for _ in range(count)
    ]


@pytest.mark.parametrize("count", [2, 8])
def test_concurrent_setups_take_turns(tmp_path: Path, count: int) -> None:
    db = tmp_path / "fresh" / "cafleet.db"
    procs = _setup_processes(db, count)
    outputs = []
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        outputs.append(out.strip())
    assert outputs.count(created(db)) == 1
    assert outputs.count(f"Already at head ({HEAD_VERSION}); nothing to do.") == count - 1
    assert diagnose_path(str(db)).state == "current"


# --- §9 item 64 the setup lock --------------------------------------------------------------------


def test_setup_waits_for_the_setup_lock(db_path: Path) -> None:
    holder = hold_lock(migrate.setup_lock_path(str(db_path)), -1)
    proc = start_python(
        f"""
        from cafleet.db.migrate import run_setup
        print("ready", flush=True)
        print(run_setup({str(db_path)!r}))
        """
    )
    try:
        wait_line(proc, "ready")  # imports done: the child is at (or right before) the lock
        deadline = time.monotonic() + 0.8
        while time.monotonic() < deadline:
            assert proc.poll() is None
            assert not db_path.exists()
            time.sleep(0.05)
        assert sorted(os.listdir(db_path.parent)) == ["locks"]
    finally:
        assert holder.stdin is not None
        holder.stdin.close()  # release
        holder.wait(timeout=10)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert out.strip() == created(db_path)


def test_a_signal_stops_the_setup_lock_wait(db_path: Path) -> None:
    holder = hold_lock(migrate.setup_lock_path(str(db_path)), -1)
    proc = start_python(
        f"""
        from cafleet import signals
        from cafleet.db.migrate import run_setup
        signals.install()
        print("waiting", flush=True)
        try:
            run_setup({str(db_path)!r})
        except signals.Interrupted:
            print("interrupted", flush=True)
        """
    )
    try:
        wait_line(proc, "waiting")
        time.sleep(0.2)  # let it reach the lock wait (not an assertion)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=10)
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=10)
    assert proc.returncode == 0, err
    assert out.strip() == "interrupted"
    assert not db_path.exists()


# --- §9 item 43, checkout half: the alembic command -----------------------------------------------


def _alembic(*args: str, db: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, CAFLEET_DATABASE_URL=f"sqlite:///{db}")
    return subprocess.run(
        [sys.executable, "-m", "alembic", *args],
        capture_output=True,
        text=True,
        cwd=str(REPO_ROOT),
        env=env,
        timeout=60,
    )


def test_alembic_history_and_current_from_the_checkout(db_path: Path, templates: Templates) -> None:
    history = _alembic("history", db=db_path)
    assert history.returncode == 0, history.stderr
    assert "0001" in history.stdout and "0002" in history.stdout
    assert "<base> -> 0001, baseline" in history.stdout
    assert "0001 -> 0002, unique_active_monitor" in history.stdout
    assert "0002 -> 0003, member_spawns_and_pane_loss" in history.stdout
    assert "0003 -> 0004, placement_socket" in history.stdout
    assert "0004 -> 0005, wave3_columns" in history.stdout
    assert "0005 -> 0006, host_loops" in history.stdout
    assert "0006 -> 0007, message_tokens" in history.stdout
    assert "0007 -> 0008, placement_server" in history.stdout
    assert "0009 -> 0010, search" in history.stdout
    assert "0011 -> 0012, task_review" in history.stdout
    assert "0012 -> 0013 (head), hooks" in history.stdout
    assert not db_path.exists()

    templates.copy(HEAD_REVISION, db_path)
    before = sha256(db_path)
    current = _alembic("current", db=db_path)
    assert current.returncode == 0, current.stderr
    assert current.stdout.strip().splitlines()[-1] == f"{HEAD_REVISION} (head)"
    assert sha256(db_path) == before


def test_alembic_upgrade_fails_on_the_read_only_connection(
    db_path: Path, templates: Templates
) -> None:
    templates.copy("0001", db_path)
    before = sha256(db_path)
    result = _alembic("upgrade", "head", db=db_path)
    assert result.returncode != 0
    assert "readonly database" in result.stderr
    assert sha256(db_path) == before
    assert ledger(db_path) == [("0001",)]
