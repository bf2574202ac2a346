"""Head schema and the Alembic chain (docs/storage.md §2, §3; §9 items 1–8)."""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import re
import sqlite3
from pathlib import Path

import pytest

from cafleet.db import schema
from cafleet.db.migrate import run_setup, script_location, upgrade_to
from cafleet.db.shapes import (
    HEAD_REVISION,
    HEAD_VERSION,
    REVISIONS,
    SHAPES,
    canonical,
    index_predicate,
    metadata_shape,
    reflect_shape,
)
from tests.storage_helpers import APP_TABLES, REPO_ROOT, query, templates_fixture  # noqa: F401

VERSIONS = REPO_ROOT / "alembic" / "versions"
MANIFEST = REPO_ROOT / "tests" / "revision_manifest.txt"


@pytest.fixture
def fresh(db_path: Path) -> Path:
    assert run_setup(str(db_path)) == (
        f"Created {db_path} and applied migrations to head ({HEAD_VERSION})."
    )
    return db_path


# --- §9 item 1 ------------------------------------------------------------------------------------


def test_fresh_setup_has_exactly_the_tables_and_no_rows(fresh: Path) -> None:
    objects = query(
        fresh, "SELECT type, name FROM sqlite_master WHERE type != 'index' ORDER BY name"
    )
    search = [  # revision 0010's FTS5 tables, each with its five shadow tables, and triggers
        ("table", f"search_{kind}{part}")
        for kind in ("messages", "tasks")
        for part in ("", "_config", "_content", "_data", "_docsize", "_idx")
    ] + [
        ("trigger", f"search_{kind}_{event}")
        for kind in ("messages", "tasks")
        for event in ("insert", "update", "delete")
    ]
    assert sorted(objects) == sorted(
        [("table", t) for t in (*APP_TABLES, "alembic_version", "sqlite_sequence")] + search
    )
    for table in APP_TABLES:
        assert query(fresh, f"SELECT count(*) FROM {table}") == [(0,)]
    assert query(fresh, "SELECT count(*) FROM sqlite_sequence") == [(0,)]


# --- §9 item 2 ------------------------------------------------------------------------------------

# (name, type, notnull, dflt_value, pk), written from docs/storage.md §2.1-2.5, not from SHAPES.
EXPECTED_COLUMNS = {
    "fleets": [
        ("fleet_id", "INTEGER", 1, None, 1),
        ("name", "TEXT", 0, None, 0),
        ("created_at", "TEXT", 1, None, 0),
        ("deleted_at", "TEXT", 0, None, 0),
        ("director_member_id", "INTEGER", 0, None, 0),
        ("member_defaults_json", "TEXT", 0, None, 0),  # revision 0005
        ("merge_gate", "TEXT", 0, None, 0),  # revision 0012
    ],
    "members": [
        ("member_id", "INTEGER", 1, None, 1),
        ("fleet_id", "INTEGER", 1, None, 0),
        ("name", "TEXT", 1, None, 0),
        ("description", "TEXT", 1, None, 0),
        ("status", "TEXT", 1, None, 0),
        ("registered_at", "TEXT", 1, None, 0),
        ("deregistered_at", "TEXT", 0, None, 0),
        ("member_card_json", "TEXT", 1, None, 0),
        ("hook_state", "TEXT", 0, None, 0),  # revision 0013
        ("hook_at", "TEXT", 0, None, 0),
        ("hook_text", "TEXT", 0, None, 0),
        ("hook_event", "TEXT", 0, None, 0),
    ],
    "member_placements": [
        ("member_id", "INTEGER", 1, None, 1),
        ("mux_session", "TEXT", 1, None, 0),
        ("mux_window_id", "TEXT", 1, None, 0),
        ("mux_pane_id", "TEXT", 0, None, 0),
        ("backend", "TEXT", 1, "'tmux'", 0),
        ("coding_agent", "TEXT", 1, None, 0),
        ("created_at", "TEXT", 1, None, 0),
        ("lost_at", "TEXT", 0, None, 0),
        ("mux_socket", "TEXT", 0, None, 0),  # revision 0004
        ("host_id", "TEXT", 0, None, 0),  # revision 0005
        ("mux_server_pid", "INTEGER", 0, None, 0),  # revision 0008
        ("mux_server_start", "INTEGER", 0, None, 0),
        ("mux_pane_pid", "INTEGER", 0, None, 0),
    ],
    "member_spawns": [
        ("member_id", "INTEGER", 1, None, 1),
        ("prompt", "TEXT", 0, None, 0),
        ("model", "TEXT", 0, None, 0),
        ("effort", "TEXT", 0, None, 0),
        ("permissions", "TEXT", 0, None, 0),  # revision 0005
        ("worktree_json", "TEXT", 0, None, 0),  # revision 0005
        ("agent_session_id", "TEXT", 0, None, 0),  # revision 0005
    ],
    "messages": [
        ("message_id", "INTEGER", 1, None, 1),
        ("owner_member_id", "INTEGER", 1, None, 0),
        ("from_member_id", "INTEGER", 1, None, 0),
        ("to_member_id", "INTEGER", 0, None, 0),
        ("type", "TEXT", 1, None, 0),
        ("created_at", "TEXT", 1, None, 0),
        ("status_state", "TEXT", 1, None, 0),
        ("status_timestamp", "TEXT", 1, None, 0),
        ("origin_message_id", "INTEGER", 0, None, 0),
        ("text", "TEXT", 1, None, 0),
        ("notified_at", "TEXT", 0, None, 0),
        ("client_token", "TEXT", 0, None, 0),  # revision 0007
        ("task_id", "INTEGER", 0, None, 0),  # revision 0009
        ("reply_to_message_id", "INTEGER", 0, None, 0),
        ("received_at", "TEXT", 0, None, 0),  # revision 0013
    ],
    "monitor_runtime": [
        ("fleet_id", "INTEGER", 1, None, 1),
        ("pid", "INTEGER", 0, None, 0),
        ("started_at", "TEXT", 0, None, 0),
        ("last_tick_at", "TEXT", 0, None, 0),
        ("tick_seconds", "INTEGER", 1, "5", 0),
        ("last_wake_at", "TEXT", 0, None, 0),
        ("wake_interval_seconds", "INTEGER", 0, None, 0),
        ("wake_requested_at", "TEXT", 0, None, 0),
    ],
    "asset_installs": [
        ("coding_agent", "TEXT", 1, None, 1),
        ("path", "TEXT", 1, None, 2),
        ("cafleet_version", "TEXT", 1, None, 0),
        ("installed_at", "TEXT", 1, None, 0),
    ],
    "host_loops": [  # revision 0006
        ("host_id", "TEXT", 1, None, 1),
        ("pid", "INTEGER", 0, None, 0),
        ("started_at", "TEXT", 0, None, 0),
        ("last_tick_at", "TEXT", 0, None, 0),
        ("tick_seconds", "INTEGER", 1, "5", 0),
    ],
    "tasks": [  # revision 0009
        ("task_id", "INTEGER", 1, None, 1),
        ("fleet_id", "INTEGER", 1, None, 0),
        ("title", "TEXT", 1, None, 0),
        ("body", "TEXT", 1, None, 0),
        ("state", "TEXT", 1, None, 0),
        ("creator_member_id", "INTEGER", 0, None, 0),
        ("assignee_member_id", "INTEGER", 0, None, 0),
        ("reason", "TEXT", 0, None, 0),
        ("result", "TEXT", 0, None, 0),
        ("created_at", "TEXT", 1, None, 0),
        ("started_at", "TEXT", 0, None, 0),
        ("finished_at", "TEXT", 0, None, 0),
        ("state_since", "TEXT", 1, None, 0),
        ("git_repo", "TEXT", 0, None, 0),  # revision 0012
        ("git_branch", "TEXT", 0, None, 0),
        ("git_base", "TEXT", 0, None, 0),
        ("git_head", "TEXT", 0, None, 0),
        ("merge_commit", "TEXT", 0, None, 0),
    ],
    "task_deps": [  # revision 0009
        ("task_id", "INTEGER", 1, None, 1),
        ("after_task_id", "INTEGER", 1, None, 2),
    ],
    "task_events": [  # revision 0009
        ("event_id", "INTEGER", 1, None, 1),
        ("task_id", "INTEGER", 1, None, 0),
        ("state", "TEXT", 1, None, 0),
        ("at", "TEXT", 1, None, 0),
        ("member_id", "INTEGER", 0, None, 0),
    ],
    "notify_channels": [  # revision 0011
        ("channel_id", "INTEGER", 1, None, 1),
        ("fleet_id", "INTEGER", 1, None, 0),
        ("kind", "TEXT", 1, None, 0),
        ("target", "TEXT", 0, None, 0),
        ("events", "TEXT", 0, None, 0),
        ("answer_base", "TEXT", 0, None, 0),
        ("created_at", "TEXT", 1, None, 0),
        ("failures", "INTEGER", 1, None, 0),
        ("failing_since", "TEXT", 0, None, 0),
        ("last_error", "TEXT", 0, None, 0),
    ],
    "notify_outbox": [
        ("outbox_id", "INTEGER", 1, None, 1),
        ("channel_id", "INTEGER", 1, None, 0),
        ("event_key", "TEXT", 1, None, 0),
        ("event", "TEXT", 1, None, 0),
        ("payload_json", "TEXT", 1, None, 0),
        ("created_at", "TEXT", 1, None, 0),
        ("attempts", "INTEGER", 1, None, 0),
        ("next_at", "TEXT", 0, None, 0),
        ("sent_at", "TEXT", 0, None, 0),
        ("last_error", "TEXT", 0, None, 0),
    ],
    "answer_links": [
        ("token_hash", "TEXT", 1, None, 1),
        ("member_id", "INTEGER", 1, None, 0),
        ("prompt_digest", "TEXT", 1, None, 0),
        ("created_at", "TEXT", 1, None, 0),
        ("expires_at", "TEXT", 1, None, 0),
        ("used_at", "TEXT", 0, None, 0),
    ],
    "member_budgets": [
        ("member_id", "INTEGER", 1, None, 1),
        ("tokens", "INTEGER", 0, None, 0),
        ("usd_micros", "INTEGER", 0, None, 0),
        ("paused_at", "TEXT", 0, None, 0),
        ("paused_reason", "TEXT", 0, None, 0),
    ],
    "fleet_budgets": [
        ("fleet_id", "INTEGER", 1, None, 1),
        ("tokens", "INTEGER", 0, None, 0),
        ("usd_micros", "INTEGER", 0, None, 0),
    ],
}


@pytest.mark.parametrize("table", sorted(EXPECTED_COLUMNS))
def test_columns_match_the_contract(fresh: Path, table: str) -> None:
    rows = query(fresh, f"PRAGMA table_xinfo({table})")
    got = [(r[1], r[2], r[3], r[4], r[5]) for r in rows]
    assert got == EXPECTED_COLUMNS[table]
    assert all(r[6] == 0 for r in rows)  # no hidden or generated columns


# --- §9 item 3 ------------------------------------------------------------------------------------


def test_autoincrement_exactly_on_seven_tables_and_no_check(fresh: Path) -> None:
    ddl = dict(query(fresh, "SELECT name, sql FROM sqlite_master WHERE type = 'table'"))
    with_autoinc = {
        name
        for name, text in ddl.items()
        if name in EXPECTED_COLUMNS and re.search(r"\bAUTOINCREMENT\b", text, re.I)
    }
    assert with_autoinc == {
        "fleets",
        "members",
        "messages",
        "tasks",
        "task_events",
        "notify_channels",
        "notify_outbox",
    }
    for name in EXPECTED_COLUMNS:
        assert not re.search(r"\bCHECK\b", ddl[name], re.I), name
        assert "ON UPDATE" not in ddl[name].upper()
    assert query(fresh, "SELECT count(*) FROM sqlite_master WHERE type = 'view'") == [(0,)]
    # the only triggers keep the search index in step (revision 0010)
    triggers = query(fresh, "SELECT name FROM sqlite_master WHERE type = 'trigger'")
    assert all(name.startswith("search_") for (name,) in triggers) and len(triggers) == 6


# --- §9 item 4 ------------------------------------------------------------------------------------

EXPECTED_INDEXES = {
    "idx_members_fleet_status": ("members", ["fleet_id", "status"], 0, 0),
    "idx_messages_to_member_status_ts": ("messages", ["to_member_id", "status_timestamp"], 0, 0),
    "idx_messages_from_member_status_ts": (
        "messages",
        ["from_member_id", "status_timestamp"],
        0,
        0,
    ),
    "idx_messages_owner_type_state_ts": (
        "messages",
        ["owner_member_id", "type", "status_state", "status_timestamp"],
        0,
        0,
    ),
    "idx_messages_owner_type_created": (
        "messages",
        ["owner_member_id", "type", "created_at"],
        0,
        0,
    ),
    "idx_messages_from_created": ("messages", ["from_member_id", "created_at"], 0, 0),
    "idx_messages_pending_notification": (
        "messages",
        ["owner_member_id", "created_at", "message_id"],
        0,
        1,
    ),
    "idx_members_one_active_monitor_per_fleet": ("members", ["fleet_id"], 1, 1),
    "idx_messages_client_token": ("messages", ["from_member_id", "client_token"], 1, 1),
    # revision 0009
    "idx_messages_task": ("messages", ["task_id", "message_id"], 0, 0),
    "idx_messages_reply_to": ("messages", ["reply_to_message_id"], 0, 0),
    "idx_tasks_fleet_state": ("tasks", ["fleet_id", "state"], 0, 0),
    "idx_tasks_assignee_state": ("tasks", ["assignee_member_id", "state"], 0, 0),
    "idx_task_deps_after": ("task_deps", ["after_task_id"], 0, 0),
    "idx_task_events_task": ("task_events", ["task_id", "event_id"], 0, 0),
    # revision 0011
    "idx_notify_channels_fleet": ("notify_channels", ["fleet_id"], 0, 0),
    "idx_notify_outbox_key": ("notify_outbox", ["channel_id", "event_key"], 1, 0),
    "idx_notify_outbox_due": ("notify_outbox", ["next_at"], 0, 0),
}


def test_exactly_the_contract_indexes(fresh: Path) -> None:
    rows = query(
        fresh,
        "SELECT name, tbl_name, sql FROM sqlite_master WHERE type = 'index' "
        "AND name NOT LIKE 'sqlite_autoindex_%'",
    )
    assert {r[0] for r in rows} == set(EXPECTED_INDEXES)
    autos = {
        r[0]
        for r in query(fresh, "SELECT name FROM sqlite_master WHERE name LIKE 'sqlite_autoindex_%'")
    }
    assert autos == {
        "sqlite_autoindex_asset_installs_1",
        "sqlite_autoindex_alembic_version_1",
        "sqlite_autoindex_host_loops_1",  # its TEXT primary key (revision 0006)
        "sqlite_autoindex_task_deps_1",  # its two-column primary key (revision 0009)
        "sqlite_autoindex_answer_links_1",  # its TEXT primary key (revision 0011)
    }
    sql_by_name = {r[0]: r[2] for r in rows}
    for name, (table, columns, unique, partial) in EXPECTED_INDEXES.items():
        info = query(fresh, f"PRAGMA index_info({name})")
        assert [r[2] for r in sorted(info)] == columns, name
        listed = [r for r in query(fresh, f"PRAGMA index_list({table})") if r[1] == name]
        assert len(listed) == 1
        assert (listed[0][2], listed[0][4]) == (unique, partial), name
    assert index_predicate(sql_by_name["idx_members_one_active_monitor_per_fleet"]) == (
        schema.ACTIVE_MONITOR_PREDICATE
    )
    assert index_predicate(sql_by_name["idx_messages_pending_notification"]) == (
        schema.PENDING_NOTIFICATION_PREDICATE
    )
    assert index_predicate(sql_by_name["idx_messages_client_token"]) == (
        schema.CLIENT_TOKEN_PREDICATE
    )
    assert schema.ACTIVE_MONITOR_PREDICATE == (
        "status = 'active' AND json_extract(member_card_json, '$.cafleet.kind') = 'monitor'"
    )
    assert schema.PENDING_NOTIFICATION_PREDICATE == (
        "notified_at IS NULL AND status_state = 'input_required' AND type = 'unicast'"
    )


# --- §9 item 5 ------------------------------------------------------------------------------------


def test_exactly_the_contract_foreign_keys(fresh: Path) -> None:
    found = set()
    for table in EXPECTED_COLUMNS:
        for r in query(fresh, f"PRAGMA foreign_key_list({table})"):
            found.add((table, r[3], r[2], r[4], r[6], r[5]))
    assert found == {
        ("fleets", "director_member_id", "members", "member_id", "RESTRICT", "NO ACTION"),
        ("members", "fleet_id", "fleets", "fleet_id", "RESTRICT", "NO ACTION"),
        ("member_placements", "member_id", "members", "member_id", "CASCADE", "NO ACTION"),
        ("member_spawns", "member_id", "members", "member_id", "CASCADE", "NO ACTION"),
        ("messages", "owner_member_id", "members", "member_id", "RESTRICT", "NO ACTION"),
        ("monitor_runtime", "fleet_id", "fleets", "fleet_id", "RESTRICT", "NO ACTION"),
        # revision 0009
        ("tasks", "fleet_id", "fleets", "fleet_id", "RESTRICT", "NO ACTION"),
        ("tasks", "creator_member_id", "members", "member_id", "RESTRICT", "NO ACTION"),
        ("tasks", "assignee_member_id", "members", "member_id", "RESTRICT", "NO ACTION"),
        ("task_deps", "task_id", "tasks", "task_id", "RESTRICT", "NO ACTION"),
        ("task_deps", "after_task_id", "tasks", "task_id", "RESTRICT", "NO ACTION"),
        ("task_events", "task_id", "tasks", "task_id", "RESTRICT", "NO ACTION"),
        # revision 0011
        ("notify_channels", "fleet_id", "fleets", "fleet_id", "RESTRICT", "NO ACTION"),
        ("notify_outbox", "channel_id", "notify_channels", "channel_id", "RESTRICT", "NO ACTION"),
        ("answer_links", "member_id", "members", "member_id", "RESTRICT", "NO ACTION"),
        ("member_budgets", "member_id", "members", "member_id", "RESTRICT", "NO ACTION"),
        ("fleet_budgets", "fleet_id", "fleets", "fleet_id", "RESTRICT", "NO ACTION"),
    }


# --- §9 item 6 ------------------------------------------------------------------------------------


def test_identity_ledger_and_wal(fresh: Path) -> None:
    assert query(fresh, "PRAGMA application_id") == [(1128351288,)]
    assert schema.APPLICATION_ID == 1128351288 == 0x43414638
    assert query(fresh, "SELECT version_num FROM alembic_version") == [(HEAD_REVISION,)]
    assert query(fresh, "PRAGMA journal_mode") == [("wal",)]


# --- §9 item 7 drift ------------------------------------------------------------------------------


@pytest.mark.parametrize("revision", REVISIONS)
def test_each_revision_reflects_its_recorded_shape(tmp_path: Path, revision: str) -> None:
    db = tmp_path / "r" / "cafleet.db"
    upgrade_to(str(db), revision)
    from cafleet.db import tx
    from cafleet.db.engine import close_connection, open_connection

    conn = open_connection(str(db), mode="rw", purpose="command")
    try:
        with tx.read(conn):
            reflected = reflect_shape(conn, revision)
    finally:
        close_connection(conn)
    assert canonical(reflected) == canonical(SHAPES[revision])
    assert query(db, "SELECT version_num FROM alembic_version") == [(revision,)]


def test_metadata_equals_head_shape() -> None:
    assert canonical(metadata_shape(schema.metadata, HEAD_REVISION)) == canonical(
        SHAPES[HEAD_REVISION]
    )


def test_shapes_of_0001_0002_and_0003() -> None:
    s1, s2, s3 = SHAPES["0001"], SHAPES["0002"], SHAPES["0003"]
    assert len(s1.tables) == 6 and len(s1.indexes) == 7
    assert s2.tables == s1.tables
    assert len(s2.indexes) == 8
    assert {i.name for i in s2.indexes} - {i.name for i in s1.indexes} == {
        "idx_members_one_active_monitor_per_fleet"
    }
    # 0003: one new table, one new nullable column, no new index.
    assert s3.indexes == s2.indexes
    assert {t.name for t in s3.tables} - {t.name for t in s2.tables} == {"member_spawns"}
    old, new = s2.table("member_placements"), s3.table("member_placements")
    assert old is not None and new is not None
    assert new.columns[: len(old.columns)] == old.columns
    assert [c.name for c in new.columns[len(old.columns) :]] == ["lost_at"]
    assert [t for t in s3.tables if t.name not in ("member_spawns", "member_placements")] == [
        t for t in s2.tables if t.name != "member_placements"
    ]


def test_shape_of_0004() -> None:
    s3, s4 = SHAPES["0003"], SHAPES["0004"]
    assert s4.indexes == s3.indexes
    changed = [(a, b) for a, b in zip(s3.tables, s4.tables, strict=True) if a != b]
    assert [a.name for a, _ in changed] == ["member_placements"]
    old, new = changed[0]
    assert new.columns[:-1] == old.columns and new.foreign_keys == old.foreign_keys
    assert new.columns[-1].name == "mux_socket" and not new.columns[-1].notnull


def test_shape_of_0005() -> None:
    """Five nullable TEXT columns appended to three tables; nothing else changes."""
    s4, s5 = SHAPES["0004"], SHAPES["0005"]
    assert s5.indexes == s4.indexes
    added: dict[str, list[tuple[str, str, bool]]] = {}
    for old, new in zip(s4.tables, s5.tables, strict=True):
        assert new.name == old.name and new.foreign_keys == old.foreign_keys
        assert new.columns[: len(old.columns)] == old.columns
        extra = new.columns[len(old.columns) :]
        if extra:
            added[new.name] = [(c.name, c.type, c.notnull) for c in extra]
    assert added == {
        "fleets": [("member_defaults_json", "TEXT", False)],
        "member_placements": [("host_id", "TEXT", False)],
        "member_spawns": [
            ("permissions", "TEXT", False),
            ("worktree_json", "TEXT", False),
            ("agent_session_id", "TEXT", False),
        ],
    }


def test_shape_of_0006() -> None:
    """One new table, `host_loops`, appended; every other table and index unchanged."""
    s5, s6 = SHAPES["0005"], SHAPES["0006"]
    assert s6.indexes == s5.indexes
    assert s6.tables[: len(s5.tables)] == s5.tables
    (added,) = s6.tables[len(s5.tables) :]
    assert added.name == "host_loops" and not added.foreign_keys and not added.autoincrement
    assert [(c.name, c.type, c.notnull, c.default, c.pk) for c in added.columns] == [
        ("host_id", "TEXT", True, None, 1),
        ("pid", "INTEGER", False, None, 0),
        ("started_at", "TEXT", False, None, 0),
        ("last_tick_at", "TEXT", False, None, 0),
        ("tick_seconds", "INTEGER", True, "5", 0),
    ]


def test_shape_of_0007() -> None:
    """One nullable TEXT column appended to `messages` and one partial unique index on
    (from_member_id, client_token); every other table and index unchanged."""
    s6, s7 = SHAPES["0006"], SHAPES["0007"]
    changed = [(a, b) for a, b in zip(s6.tables, s7.tables, strict=True) if a != b]
    assert [a.name for a, _ in changed] == ["messages"]
    old, new = changed[0]
    assert new.columns[:-1] == old.columns and new.foreign_keys == old.foreign_keys
    assert new.autoincrement == old.autoincrement
    added = new.columns[-1]
    assert (added.name, added.type, added.notnull, added.default) == (
        "client_token",
        "TEXT",
        False,
        None,
    )
    assert s7.indexes[: len(s6.indexes)] == s6.indexes
    (index,) = s7.indexes[len(s6.indexes) :]
    assert (index.name, index.table, index.columns, index.unique, index.where) == (
        "idx_messages_client_token",
        "messages",
        ("from_member_id", "client_token"),
        True,
        "client_token IS NOT NULL",
    )


def test_shape_of_0008() -> None:
    """Three nullable INTEGER columns appended to `member_placements`; every other table and
    every index unchanged."""
    s7, s8 = SHAPES["0007"], SHAPES["0008"]
    assert s8.indexes == s7.indexes
    assert [t.name for t in s8.tables] == [t.name for t in s7.tables]
    for before, after in zip(s7.tables, s8.tables, strict=True):
        if after.name != "member_placements":
            assert after == before
            continue
        assert after.columns[: len(before.columns)] == before.columns
        assert (after.foreign_keys, after.autoincrement) == (
            before.foreign_keys,
            before.autoincrement,
        )
        added = after.columns[len(before.columns) :]
        assert [(c.name, c.type, c.notnull, c.default, c.pk) for c in added] == [
            ("mux_server_pid", "INTEGER", False, None, 0),
            ("mux_server_start", "INTEGER", False, None, 0),
            ("mux_pane_pid", "INTEGER", False, None, 0),
        ]


def test_shape_of_0009() -> None:
    """Tasks: three new tables, two nullable INTEGER columns appended to `messages`, six new
    indexes; every other table and index unchanged."""
    s8, s9 = SHAPES["0008"], SHAPES["0009"]
    assert [t.name for t in s9.tables] == [
        *(t.name for t in s8.tables),
        "tasks",
        "task_deps",
        "task_events",
    ]
    changed = [(a, b) for a, b in zip(s8.tables, s9.tables, strict=False) if a != b]
    assert [a.name for a, _ in changed] == ["messages"]
    old, new = changed[0]
    assert new.columns[: len(old.columns)] == old.columns
    assert [(c.name, c.type, c.notnull) for c in new.columns[len(old.columns) :]] == [
        ("task_id", "INTEGER", False),
        ("reply_to_message_id", "INTEGER", False),
    ]
    assert s9.indexes[: len(s8.indexes)] == s8.indexes
    assert len(s9.indexes) == len(s8.indexes) + 6


def test_shape_of_0010() -> None:
    """Search: derived data only (FTS5 tables and triggers on SQLite, GIN indexes on
    PostgreSQL), none of it in a recorded shape; the catalogue check still sees it."""
    assert SHAPES["0010"].tables == SHAPES["0009"].tables
    assert SHAPES["0010"].indexes == SHAPES["0009"].indexes


def test_shape_of_0011() -> None:
    """Notifications and budgets: five new tables and three indexes; every other table and
    index unchanged."""
    s10, s11 = SHAPES["0010"], SHAPES["0011"]
    assert [t.name for t in s11.tables] == [
        *(t.name for t in s10.tables),
        "notify_channels",
        "notify_outbox",
        "answer_links",
        "member_budgets",
        "fleet_budgets",
    ]
    assert s11.tables[: len(s10.tables)] == s10.tables
    assert s11.indexes[: len(s10.indexes)] == s10.indexes
    assert len(s11.indexes) == len(s10.indexes) + 3


def test_shape_of_0012() -> None:
    """Review and merge: five nullable TEXT columns appended to `tasks`, one to `fleets`; every
    other table and every index unchanged."""
    before_s, after_s = SHAPES["0011"], SHAPES["0012"]
    assert after_s.indexes == before_s.indexes
    assert [t.name for t in after_s.tables] == [t.name for t in before_s.tables]
    added = {}
    for before, after in zip(before_s.tables, after_s.tables, strict=True):
        assert after.columns[: len(before.columns)] == before.columns
        assert (after.foreign_keys, after.autoincrement) == (
            before.foreign_keys,
            before.autoincrement,
        )
        new = after.columns[len(before.columns) :]
        if new:
            added[after.name] = [(c.name, c.type, c.notnull, c.default) for c in new]
    assert added == {
        "fleets": [("merge_gate", "TEXT", False, None)],
        "tasks": [
            (name, "TEXT", False, None)
            for name in ("git_repo", "git_branch", "git_base", "git_head", "merge_commit")
        ],
    }


def test_shape_of_0013() -> None:
    """Hooks: four nullable TEXT columns appended to `members`, one to `messages`; every other
    table and every index unchanged."""
    s10, s13 = SHAPES["0012"], SHAPES["0013"]
    changed = {b.name: (a, b) for a, b in zip(s10.tables, s13.tables, strict=True) if a != b}
    assert sorted(changed) == ["members", "messages"]
    for name, added in (
        ("members", ["hook_state", "hook_at", "hook_text", "hook_event"]),
        ("messages", ["received_at"]),
    ):
        old, new = changed[name]
        assert new.columns[: len(old.columns)] == old.columns
        assert new.foreign_keys == old.foreign_keys and new.autoincrement == old.autoincrement
        extra = new.columns[len(old.columns) :]
        assert [(c.name, c.type, c.notnull, c.default) for c in extra] == [
            (n, "TEXT", False, None) for n in added
        ]
    assert s13.indexes == s10.indexes


def test_drift_detection_is_not_vacuous(tmp_path: Path) -> None:
    """The reflected shape of a file missing one index differs from SHAPES (the test can fail)."""
    db = tmp_path / "d" / "cafleet.db"
    run_setup(str(db))
    con = sqlite3.connect(db)
    con.execute("DROP INDEX idx_messages_from_created")
    con.close()
    from cafleet.db import tx
    from cafleet.db.engine import close_connection, open_connection

    conn = open_connection(str(db), mode="rw", purpose="command")
    try:
        with tx.read(conn):
            reflected = reflect_shape(conn, HEAD_REVISION)
    finally:
        close_connection(conn)
    assert canonical(reflected) != canonical(SHAPES[HEAD_REVISION])


# --- §9 item 8 chain guard ------------------------------------------------------------------------


def _revision_ids(path: Path) -> tuple[str | None, str | None]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    values: dict[str, object] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name) and target.id in ("revision", "down_revision"):
                values[target.id] = ast.literal_eval(node.value)
    return values.get("revision"), values.get("down_revision")  # type: ignore[return-value]


def test_chain_is_contiguous_linear_and_matches_shapes() -> None:
    files = sorted(p for p in VERSIONS.glob("*.py"))
    assert files, "no revision files"
    ids = []
    for index, path in enumerate(files, start=1):
        assert re.fullmatch(r"\d{4}_[a-z0-9_]+\.py", path.name), path.name
        revision, down = _revision_ids(path)
        assert revision == f"{index:04d}" == path.name[:4]
        assert down == (None if index == 1 else f"{index - 1:04d}")
        ids.append(revision)
    assert tuple(ids) == REVISIONS
    assert ids[-1] == HEAD_REVISION
    assert tuple(SHAPES) == REVISIONS
    assert all(SHAPES[r].revision == r for r in REVISIONS)


def test_alembic_agrees_on_the_chain() -> None:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    cfg = Config()
    cfg.set_main_option("script_location", str(script_location()))
    scripts = ScriptDirectory.from_config(cfg)
    assert scripts.get_heads() == [HEAD_REVISION]
    assert scripts.get_bases() == ["0001"]
    walked = [s.revision for s in scripts.walk_revisions("base", "heads")]
    assert list(reversed(walked)) == list(REVISIONS)


def test_manifest_matches_revision_files() -> None:
    entries = {}
    for line in MANIFEST.read_text(encoding="utf-8").splitlines():
        if line.strip():
            digest, name = line.split()
            entries[name] = digest
    files = {f"alembic/versions/{p.name}": p for p in VERSIONS.glob("*.py")}
    assert set(entries) == set(files)
    for name, path in files.items():
        digest = hashlib.sha256(path.read_bytes().replace(b"\r\n", b"\n")).hexdigest()
        assert digest == entries[name], f"{name} changed: landed revisions are never edited"


def test_revisions_are_forward_only_and_never_import_the_head_schema() -> None:
    for path in sorted(VERSIONS.glob("*.py")):
        text = path.read_text(encoding="utf-8")
        assert "cafleet.db.schema" not in text, path.name
        spec = importlib.util.spec_from_file_location(f"_rev_{path.stem}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        with pytest.raises(NotImplementedError, match="^cafleet revisions are forward-only$"):
            module.downgrade()
    mako = (REPO_ROOT / "alembic" / "script.py.mako").read_text(encoding="utf-8")
    assert 'raise NotImplementedError("cafleet revisions are forward-only")' in mako
    assert "shapes.py" in mako and "revision_manifest.txt" in mako


def test_alembic_ini_and_script_location() -> None:
    ini = (REPO_ROOT / "alembic.ini").read_text(encoding="utf-8")
    assert "script_location = %(here)s/alembic" in ini
    assert "prepend_sys_path = ." in ini
    assert "file_template = %%(rev)s_%%(slug)s" in ini
    assert not re.search(r"^\s*sqlalchemy\.url", ini, re.M)
    # From a checkout (no `_migrations` inside the package), the driver falls back to the
    # checkout's scripts; never the current directory.
    assert not (REPO_ROOT / "cafleet" / "_migrations").exists()
    assert script_location() == REPO_ROOT / "alembic"


def test_metadata_create_all_is_never_called() -> None:
    offenders = []
    for path in [
        *(REPO_ROOT / "cafleet").rglob("*.py"),
        *(REPO_ROOT / "alembic").rglob("*.py"),
        *(REPO_ROOT / "tests").rglob("*.py"),
    ]:
        if re.search(r"\.create_all\(", path.read_text(encoding="utf-8")):
            offenders.append(str(path))
    assert offenders == []
