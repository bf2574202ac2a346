"""Recorded shape of every revision of the Alembic chain (docs/storage.md §3.1).

A shape entry lands with its revision and is never edited afterwards. Shapes live in the package
so that the schema guard, which runs before every command, never imports Alembic.

`reflect_shape(conn)` reads a live file's catalogue into a `SchemaShape` (used by tests and by
nothing on the guard path; diagnosis compares the catalogue directly), and
`metadata_shape(metadata)` converts the head `MetaData` (the drift test).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from sqlalchemy import Connection, MetaData

REVISIONS: tuple[str, ...] = (
    "0001",
    "0002",
    "0003",
    "0004",
    "0005",
    "0006",
    "0007",
    "0008",
    "0009",
)
HEAD_REVISION: str = REVISIONS[-1]
HEAD_VERSION: int = int(HEAD_REVISION)


@dataclass(frozen=True)
class ColumnShape:
    name: str
    type: str
    notnull: bool
    default: str | None
    pk: int


@dataclass(frozen=True)
class ForeignKeyShape:
    column: str
    target_table: str
    target_column: str
    on_delete: str
    on_update: str = "NO ACTION"


@dataclass(frozen=True)
class TableShape:
    name: str
    columns: tuple[ColumnShape, ...]
    autoincrement: bool
    foreign_keys: frozenset[ForeignKeyShape]


@dataclass(frozen=True)
class IndexShape:
    name: str
    table: str
    columns: tuple[str, ...]
    unique: bool
    where: str | None


@dataclass(frozen=True)
class SchemaShape:
    revision: str
    tables: tuple[TableShape, ...]
    indexes: tuple[IndexShape, ...]

    def table(self, name: str) -> TableShape | None:
        for t in self.tables:
            if t.name == name:
                return t
        return None


def _c(
    name: str, type_: str, notnull: bool, default: str | None = None, pk: int = 0
) -> ColumnShape:
    return ColumnShape(name, type_, notnull, default, pk)


_INT = "INTEGER"
_TEXT = "TEXT"

# --- revision 0001 `baseline` (never edit) -----------------------------------------------------

_FLEETS_0001 = TableShape(
    "fleets",
    (
        _c("fleet_id", _INT, True, pk=1),
        _c("name", _TEXT, False),
        _c("created_at", _TEXT, True),
        _c("deleted_at", _TEXT, False),
        _c("director_member_id", _INT, False),
    ),
    True,
    frozenset({ForeignKeyShape("director_member_id", "members", "member_id", "RESTRICT")}),
)
_MEMBERS_0001 = TableShape(
    "members",
    (
        _c("member_id", _INT, True, pk=1),
        _c("fleet_id", _INT, True),
        _c("name", _TEXT, True),
        _c("description", _TEXT, True),
        _c("status", _TEXT, True),
        _c("registered_at", _TEXT, True),
        _c("deregistered_at", _TEXT, False),
        _c("member_card_json", _TEXT, True),
    ),
    True,
    frozenset({ForeignKeyShape("fleet_id", "fleets", "fleet_id", "RESTRICT")}),
)
_PLACEMENTS_0001 = TableShape(
    "member_placements",
    (
        _c("member_id", _INT, True, pk=1),
        _c("mux_session", _TEXT, True),
        _c("mux_window_id", _TEXT, True),
        _c("mux_pane_id", _TEXT, False),
        _c("backend", _TEXT, True, "'tmux'"),
        _c("coding_agent", _TEXT, True),
        _c("created_at", _TEXT, True),
    ),
    False,
    frozenset({ForeignKeyShape("member_id", "members", "member_id", "CASCADE")}),
)
_MESSAGES_0001 = TableShape(
    "messages",
    (
        _c("message_id", _INT, True, pk=1),
        _c("owner_member_id", _INT, True),
        _c("from_member_id", _INT, True),
        _c("to_member_id", _INT, False),
        _c("type", _TEXT, True),
        _c("created_at", _TEXT, True),
        _c("status_state", _TEXT, True),
        _c("status_timestamp", _TEXT, True),
        _c("origin_message_id", _INT, False),
        _c("text", _TEXT, True),
        _c("notified_at", _TEXT, False),
    ),
    True,
    frozenset({ForeignKeyShape("owner_member_id", "members", "member_id", "RESTRICT")}),
)
_RUNTIME_0001 = TableShape(
    "monitor_runtime",
    (
        _c("fleet_id", _INT, True, pk=1),
        _c("pid", _INT, False),
        _c("started_at", _TEXT, False),
        _c("last_tick_at", _TEXT, False),
        _c("tick_seconds", _INT, True, "5"),
        _c("last_wake_at", _TEXT, False),
        _c("wake_interval_seconds", _INT, False),
        _c("wake_requested_at", _TEXT, False),
    ),
    False,
    frozenset({ForeignKeyShape("fleet_id", "fleets", "fleet_id", "RESTRICT")}),
)
_ASSETS_0001 = TableShape(
    "asset_installs",
    (
        _c("coding_agent", _TEXT, True, pk=1),
        _c("path", _TEXT, True, pk=2),
        _c("cafleet_version", _TEXT, True),
        _c("installed_at", _TEXT, True),
    ),
    False,
    frozenset(),
)
_INDEXES_0001 = (
    IndexShape("idx_members_fleet_status", "members", ("fleet_id", "status"), False, None),
    IndexShape(
        "idx_messages_to_member_status_ts",
        "messages",
        ("to_member_id", "status_timestamp"),
        False,
        None,
    ),
    IndexShape(
        "idx_messages_from_member_status_ts",
        "messages",
        ("from_member_id", "status_timestamp"),
        False,
        None,
    ),
    IndexShape(
        "idx_messages_owner_type_state_ts",
        "messages",
        ("owner_member_id", "type", "status_state", "status_timestamp"),
        False,
        None,
    ),
    IndexShape(
        "idx_messages_owner_type_created",
        "messages",
        ("owner_member_id", "type", "created_at"),
        False,
        None,
    ),
    IndexShape(
        "idx_messages_from_created", "messages", ("from_member_id", "created_at"), False, None
    ),
    IndexShape(
        "idx_messages_pending_notification",
        "messages",
        ("owner_member_id", "created_at", "message_id"),
        False,
        "notified_at IS NULL AND status_state = 'input_required' AND type = 'unicast'",
    ),
)
_TABLES_0001 = (
    _FLEETS_0001,
    _MEMBERS_0001,
    _PLACEMENTS_0001,
    _MESSAGES_0001,
    _RUNTIME_0001,
    _ASSETS_0001,
)

# --- revision 0002 `unique_active_monitor` (never edit) ----------------------------------------

_INDEXES_0002 = (
    *_INDEXES_0001,
    IndexShape(
        "idx_members_one_active_monitor_per_fleet",
        "members",
        ("fleet_id",),
        True,
        "status = 'active' AND json_extract(member_card_json, '$.cafleet.kind') = 'monitor'",
    ),
)

# --- revision 0003 `member_spawns_and_pane_loss` (never edit) ---------------------------------

_PLACEMENTS_0003 = TableShape(
    "member_placements",
    (*_PLACEMENTS_0001.columns, _c("lost_at", _TEXT, False)),
    False,
    _PLACEMENTS_0001.foreign_keys,
)
_SPAWNS_0003 = TableShape(
    "member_spawns",
    (
        _c("member_id", _INT, True, pk=1),
        _c("prompt", _TEXT, False),
        _c("model", _TEXT, False),
        _c("effort", _TEXT, False),
    ),
    False,
    frozenset({ForeignKeyShape("member_id", "members", "member_id", "CASCADE")}),
)
_TABLES_0003 = (
    _FLEETS_0001,
    _MEMBERS_0001,
    _PLACEMENTS_0003,
    _MESSAGES_0001,
    _RUNTIME_0001,
    _ASSETS_0001,
    _SPAWNS_0003,
)

# --- revision 0004 `placement_socket` (never edit) ---------------------------------------------

_PLACEMENTS_0004 = TableShape(
    "member_placements",
    (*_PLACEMENTS_0003.columns, _c("mux_socket", _TEXT, False)),
    False,
    _PLACEMENTS_0003.foreign_keys,
)
_TABLES_0004 = tuple(_PLACEMENTS_0004 if t.name == "member_placements" else t for t in _TABLES_0003)

# --- revision 0005 `wave3_columns` (never edit) ------------------------------------------------

_ADDED_0005: dict[str, tuple[str, ...]] = {
    "fleets": ("member_defaults_json",),
    "member_placements": ("host_id",),
    "member_spawns": ("permissions", "worktree_json", "agent_session_id"),
}
_TABLES_0005 = tuple(
    TableShape(
        t.name,
        (*t.columns, *(_c(name, _TEXT, False) for name in _ADDED_0005[t.name])),
        t.autoincrement,
        t.foreign_keys,
    )
    if t.name in _ADDED_0005
    else t
    for t in _TABLES_0004
)

# --- revision 0006 `host_loops` (never edit) ---------------------------------------------------

_HOST_LOOPS_0006 = TableShape(
    "host_loops",
    (
        _c("host_id", _TEXT, True, pk=1),
        _c("pid", _INT, False),
        _c("started_at", _TEXT, False),
        _c("last_tick_at", _TEXT, False),
        _c("tick_seconds", _INT, True, "5"),
    ),
    False,
    frozenset(),
)
_TABLES_0006 = (*_TABLES_0005, _HOST_LOOPS_0006)

# --- revision 0007 `message_tokens` (never edit) -----------------------------------------------

_MESSAGES_0007 = TableShape(
    "messages",
    (*_MESSAGES_0001.columns, _c("client_token", _TEXT, False)),
    True,
    _MESSAGES_0001.foreign_keys,
)
_TABLES_0007 = tuple(_MESSAGES_0007 if t.name == "messages" else t for t in _TABLES_0006)
_INDEXES_0007 = (
    *_INDEXES_0002,
    IndexShape(
        "idx_messages_client_token",
        "messages",
        ("from_member_id", "client_token"),
        True,
        "client_token IS NOT NULL",
    ),
)

# --- revision 0008 `placement_server` (never edit) ---------------------------------------------

_ADDED_0008 = ("mux_server_pid", "mux_server_start", "mux_pane_pid")
_TABLES_0008 = tuple(
    TableShape(
        t.name,
        (*t.columns, *(_c(name, _INT, False) for name in _ADDED_0008)),
        t.autoincrement,
        t.foreign_keys,
    )
    if t.name == "member_placements"
    else t
    for t in _TABLES_0007
)

# --- revision 0009 `tasks` (never edit) -------------------------------------------------------

_TASKS_0009 = TableShape(
    "tasks",
    (
        _c("task_id", _INT, True, pk=1),
        _c("fleet_id", _INT, True),
        _c("title", _TEXT, True),
        _c("body", _TEXT, True),
        _c("state", _TEXT, True),
        _c("creator_member_id", _INT, False),
        _c("assignee_member_id", _INT, False),
        _c("reason", _TEXT, False),
        _c("result", _TEXT, False),
        _c("created_at", _TEXT, True),
        _c("started_at", _TEXT, False),
        _c("finished_at", _TEXT, False),
        _c("state_since", _TEXT, True),
    ),
    True,
    frozenset(
        {
            ForeignKeyShape("fleet_id", "fleets", "fleet_id", "RESTRICT"),
            ForeignKeyShape("creator_member_id", "members", "member_id", "RESTRICT"),
            ForeignKeyShape("assignee_member_id", "members", "member_id", "RESTRICT"),
        }
    ),
)
_TASK_DEPS_0009 = TableShape(
    "task_deps",
    (
        _c("task_id", _INT, True, pk=1),
        _c("after_task_id", _INT, True, pk=2),
    ),
    False,
    frozenset(
        {
            ForeignKeyShape("task_id", "tasks", "task_id", "RESTRICT"),
            ForeignKeyShape("after_task_id", "tasks", "task_id", "RESTRICT"),
        }
    ),
)
_TASK_EVENTS_0009 = TableShape(
    "task_events",
    (
        _c("event_id", _INT, True, pk=1),
        _c("task_id", _INT, True),
        _c("state", _TEXT, True),
        _c("at", _TEXT, True),
        _c("member_id", _INT, False),
    ),
    True,
    frozenset({ForeignKeyShape("task_id", "tasks", "task_id", "RESTRICT")}),
)
_MESSAGES_0009 = TableShape(
    "messages",
    (
        *_MESSAGES_0007.columns,
        _c("task_id", _INT, False),
        _c("reply_to_message_id", _INT, False),
    ),
    True,
    _MESSAGES_0007.foreign_keys,
)
_TABLES_0009 = (
    *(_MESSAGES_0009 if t.name == "messages" else t for t in _TABLES_0008),
    _TASKS_0009,
    _TASK_DEPS_0009,
    _TASK_EVENTS_0009,
)
_INDEXES_0009 = (
    *_INDEXES_0007,
    IndexShape("idx_tasks_fleet_state", "tasks", ("fleet_id", "state"), False, None),
    IndexShape("idx_tasks_assignee_state", "tasks", ("assignee_member_id", "state"), False, None),
    IndexShape("idx_task_deps_after", "task_deps", ("after_task_id",), False, None),
    IndexShape("idx_task_events_task", "task_events", ("task_id", "event_id"), False, None),
    IndexShape("idx_messages_task", "messages", ("task_id", "message_id"), False, None),
    IndexShape("idx_messages_reply_to", "messages", ("reply_to_message_id",), False, None),
)

SHAPES: dict[str, SchemaShape] = {
    "0001": SchemaShape("0001", _TABLES_0001, _INDEXES_0001),
    "0002": SchemaShape("0002", _TABLES_0001, _INDEXES_0002),
    "0003": SchemaShape("0003", _TABLES_0003, _INDEXES_0002),
    "0004": SchemaShape("0004", _TABLES_0004, _INDEXES_0002),
    "0005": SchemaShape("0005", _TABLES_0005, _INDEXES_0002),
    "0006": SchemaShape("0006", _TABLES_0006, _INDEXES_0002),
    "0007": SchemaShape("0007", _TABLES_0007, _INDEXES_0007),
    "0008": SchemaShape("0008", _TABLES_0008, _INDEXES_0007),
    "0009": SchemaShape("0009", _TABLES_0009, _INDEXES_0009),
}


# --- helpers shared with diagnosis -------------------------------------------------------------


def _fk_text(fk: ForeignKeyShape) -> str:
    text = f"{fk.target_table}({fk.target_column}) ON DELETE {fk.on_delete}"
    if fk.on_update != "NO ACTION":
        text += f" ON UPDATE {fk.on_update}"
    return text


def foreign_key_diffs(
    table: str, recorded: frozenset[ForeignKeyShape], actual: list[ForeignKeyShape]
) -> list[str]:
    """How a table's foreign keys differ from its recorded ones (both dialects' diagnosis): a
    changed key on a column, a missing one, an unexpected one."""
    diffs: list[str] = []
    unmatched = [fk for fk in actual if fk not in recorded]
    for fk in sorted(recorded, key=lambda f: (f.column, f.target_table, f.target_column)):
        if fk in actual:
            continue
        same_column = [a for a in unmatched if a.column == fk.column]
        if same_column:
            other = same_column[0]
            unmatched.remove(other)
            diffs.append(
                f"{table}.{fk.column}: foreign key {_fk_text(other)} (expected {_fk_text(fk)})"
            )
        else:
            diffs.append(f"missing foreign key {table}.{fk.column} -> {_fk_text(fk)}")
    for fk in unmatched:
        diffs.append(f"unexpected foreign key {table}.{fk.column} -> {_fk_text(fk)}")
    return diffs


_WS = re.compile(r"\s+")
_WHERE = re.compile(r"\sWHERE\s", re.IGNORECASE)
_AUTOINCREMENT = re.compile(r"\bAUTOINCREMENT\b", re.IGNORECASE)

# Tables never part of a recorded shape (docs/storage.md §2.7, §5.3).
IGNORED_TABLE_PREFIXES = ("sqlite_", "_alembic_tmp_")
IGNORED_TABLES = frozenset({"alembic_version"})


def normalise_type(type_: str) -> str:
    return _WS.sub(" ", type_.strip()).upper()


def normalise_default(default: Any) -> str | None:
    if default is None:
        return None
    return str(default).strip()


def index_predicate(sql: str | None) -> str | None:
    """Text after the first ` WHERE ` (any case) of an index's stored SQL, whitespace collapsed."""
    if not sql:
        return None
    match = _WHERE.search(sql)
    if match is None:
        return None
    return _WS.sub(" ", sql[match.end() :]).strip() or None


def has_autoincrement(sql: str | None) -> bool:
    return bool(sql) and _AUTOINCREMENT.search(sql or "") is not None


# --- reflection (tests, tools) -----------------------------------------------------------------


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def reflect_shape(conn: Connection, revision: str = "") -> SchemaShape:
    """The recorded-shape view of the file behind `conn` (application tables only).

    Runs its statements on `conn` as is: the caller provides the transaction (`tx.read`).
    """

    def rows(sql: str) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in conn.exec_driver_sql(sql).all()]

    tables: list[TableShape] = []
    table_rows = rows("SELECT name, sql FROM sqlite_master WHERE type = 'table' ORDER BY name")
    for name, sql in table_rows:
        if name in IGNORED_TABLES or name.startswith(IGNORED_TABLE_PREFIXES):
            continue
        cols = tuple(
            ColumnShape(
                r[1], normalise_type(r[2] or ""), bool(r[3]), normalise_default(r[4]), int(r[5])
            )
            for r in rows(f"PRAGMA table_xinfo({_q(name)})")
        )
        fks: set[ForeignKeyShape] = set()
        for r in rows(f"PRAGMA foreign_key_list({_q(name)})"):
            # id, seq, table, from, to, on_update, on_delete, match
            target_col = r[4]
            if target_col is None:
                target_pk = [
                    t[1]
                    for t in sorted(rows(f"PRAGMA table_xinfo({_q(r[2])})"), key=lambda t: t[5])
                    if t[5]
                ]
                target_col = target_pk[0] if len(target_pk) == 1 else ",".join(target_pk)
            fks.add(ForeignKeyShape(r[3], r[2], target_col, r[6], r[5]))
        tables.append(TableShape(name, cols, has_autoincrement(sql), frozenset(fks)))

    indexes: list[IndexShape] = []
    for name, table, sql in rows(
        "SELECT name, tbl_name, sql FROM sqlite_master WHERE type = 'index' "
        "AND name NOT LIKE 'sqlite\\_autoindex\\_%' ESCAPE '\\' ORDER BY name"
    ):
        if table in IGNORED_TABLES or table.startswith(IGNORED_TABLE_PREFIXES):
            continue
        info = sorted(rows(f"PRAGMA index_info({_q(name)})"))
        columns = tuple(r[2] if r[2] is not None else "<expression>" for r in info)
        unique = any(bool(r[2]) for r in rows(f"PRAGMA index_list({_q(table)})") if r[1] == name)
        indexes.append(IndexShape(name, table, columns, unique, index_predicate(sql)))
    return SchemaShape(revision, tuple(tables), tuple(indexes))


def metadata_shape(metadata: MetaData, revision: str = "") -> SchemaShape:
    """Convert a SQLAlchemy `MetaData` into a `SchemaShape` as SQLite would reflect it."""
    from sqlalchemy import Integer, Text
    from sqlalchemy.dialects import sqlite

    dialect = sqlite.dialect()
    tables: list[TableShape] = []
    indexes: list[IndexShape] = []
    for table in sorted(metadata.tables.values(), key=lambda t: t.name):
        pk_names = [c.name for c in table.primary_key.columns]
        columns: list[ColumnShape] = []
        for col in table.columns:
            if isinstance(col.type, Integer):
                type_ = "INTEGER"
            elif isinstance(col.type, Text):
                type_ = "TEXT"
            else:
                type_ = normalise_type(col.type.compile(dialect=dialect))
            default: str | None = None
            if col.server_default is not None:
                arg = col.server_default.arg  # type: ignore[attr-defined]
                if isinstance(arg, str):
                    default = "'" + arg.replace("'", "''") + "'"
                else:
                    default = str(arg.compile(dialect=dialect)).strip()
            pk = pk_names.index(col.name) + 1 if col.name in pk_names else 0
            notnull = not col.nullable
            columns.append(ColumnShape(col.name, type_, notnull, default, pk))
        fks = frozenset(
            ForeignKeyShape(
                fk.parent.name,
                fk.column.table.name,
                fk.column.name,
                (fk.ondelete or "NO ACTION").upper(),
                (fk.onupdate or "NO ACTION").upper(),
            )
            for fk in table.foreign_keys
        )
        autoinc = bool(table.dialect_options["sqlite"].get("autoincrement"))
        tables.append(TableShape(table.name, tuple(columns), autoinc, fks))
        for index in table.indexes:
            where = index.dialect_options["sqlite"].get("where")
            where_text = None
            if where is not None:
                where_text = _WS.sub(" ", str(where.compile(dialect=dialect))).strip()
            indexes.append(
                IndexShape(
                    index.name or "",
                    table.name,
                    tuple(c.name for c in index.columns),
                    bool(index.unique),
                    where_text,
                )
            )
    return SchemaShape(revision, tuple(tables), tuple(sorted(indexes, key=lambda i: i.name)))


def canonical(shape: SchemaShape) -> SchemaShape:
    """Order-insensitive form for equality checks: tables, columns and indexes sorted by name
    (column order is not part of a recorded shape's comparison, docs/storage.md §5.3)."""
    return SchemaShape(
        shape.revision,
        tuple(
            TableShape(
                t.name,
                tuple(sorted(t.columns, key=lambda c: c.name)),
                t.autoincrement,
                t.foreign_keys,
            )
            for t in sorted(shape.tables, key=lambda t: t.name)
        ),
        tuple(sorted(shape.indexes, key=lambda i: i.name)),
    )
