"""The types of a schema shape (docs/storage.md §3.1) and the helpers that read and compare them.

The recorded shape of every revision is generated (`cafleet.db.shapes`). `reflect_shape(conn)`
reads a live file's catalogue into a `SchemaShape` (the generator, tests; nothing on the guard
path: diagnosis compares the catalogue directly), and `metadata_shape(metadata)` converts the
head `MetaData` (the drift test).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from sqlalchemy import Connection, MetaData


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

# Tables never part of a recorded shape (docs/storage.md §2.7, §5.3); `search_` holds the FTS5
# search index and its shadow tables, derived data that the catalogue check covers (§3.13).
IGNORED_TABLE_PREFIXES = ("sqlite_", "_alembic_tmp_", "search_")
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
