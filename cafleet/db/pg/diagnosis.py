"""Diagnosis of a PostgreSQL database (docs/storage.md §10.2), the same classes as a file's.

Identity: SQLite's `application_id` becomes the comment on the database's schema
(`current_schema()`), `cafleet application_id 1128351288`, written by revision 0001's identity
step inside the migration transaction. The ledger is Alembic's `alembic_version` as on SQLite.
The shape check reads PostgreSQL's catalogue into the recorded-shape vocabulary (`integer` is
`INTEGER`, a `nextval()` key is AUTOINCREMENT, `'tmux'::text` is `'tmux'`, a predicate without
PostgreSQL's parentheses and casts) and compares it with the same `SHAPES[rev]`, so a damaged
database gets the same difference lines. The two SQL functions cafleet installs (§10.3) are part
of the check. Reads only; the guard path imports this module, never Alembic or SQLAlchemy.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cafleet.db.pg.current import IDENTITY_COMMENT, IDENTITY_PREFIX, schema_fingerprint_sql

if TYPE_CHECKING:
    from cafleet.db.pg.runtime import PgConnection as Connection
    from cafleet.db.shapes import SchemaShape

# `cafleet.db.diagnosis` builds its `Diagnosis` records and imports this module, so the caller
# passes its maker in (`make(path, state, **fields)`) and this module never imports it.
Make = Callable[..., Any]

FUNCTIONS = ("json_extract", "json_valid")

_DIGITS = re.compile(r"[0-9]+")
_CAST = re.compile(r"::[a-z ]+(\[\])?")
_WS = re.compile(r"\s+")
_NS = "current_schema()::regnamespace"


def _rows(conn: Connection, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in conn.exec_driver_sql(sql, params).all()]


def identity(conn: Connection) -> int:
    """The schema comment as SQLite's application_id: the number after cafleet's prefix, 0
    when there is no comment or another one (PostgreSQL's `standard public schema`)."""
    rows = _rows(conn, f"SELECT obj_description({_NS}, 'pg_namespace')")
    comment = rows[0][0] if rows else None
    if not isinstance(comment, str) or not comment.startswith(IDENTITY_PREFIX):
        return 0
    rest = comment[len(IDENTITY_PREFIX) :]
    return int(rest) if _DIGITS.fullmatch(rest) else -1


def _relations(conn: Connection) -> dict[str, str]:
    return {
        str(name): str(kind)
        for name, kind in _rows(
            conn,
            f"SELECT relname, relkind FROM pg_class WHERE relnamespace = {_NS} "
            "AND relkind IN ('r', 'p', 'v', 'm', 'f')",
        )
    }


def diagnose_in_tx(path: str, conn: Connection, _d: Make) -> Any:
    """docs/storage.md §5.2's algorithm on PostgreSQL's catalogue (caller's transaction)."""
    from cafleet.db.classify import classify

    return classify(path, _PgCatalogue(conn), _d)


class _PgCatalogue:
    """§5.2's reads of a PostgreSQL database (`cafleet.db.classify.Catalogue`)."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.relations = _relations(conn)

    def identity(self) -> int:
        return identity(self.conn)

    def has_objects(self) -> bool:
        return bool(self.relations)

    def has_ledger(self) -> bool:
        return self.relations.get("alembic_version") in ("r", "p")

    def ledger_columns(self) -> list[str]:
        return [
            r[0]
            for r in _rows(
                self.conn,
                "SELECT attname FROM pg_attribute WHERE attrelid = "
                "(current_schema() || '.alembic_version')::regclass AND attnum > 0 "
                "AND NOT attisdropped",
            )
        ]

    def ledger_rows(self) -> list[tuple[Any, ...]]:
        return _rows(self.conn, "SELECT version_num FROM alembic_version")

    def compare(self, shape: SchemaShape) -> list[str]:
        return compare_shape(self.conn, shape, self.relations)


def normalise_predicate(text: str | None) -> str | None:
    """A predicate as both catalogues can agree on it: no parentheses, no `::type` casts,
    whitespace collapsed, lower case."""
    if not text:
        return None
    text = _CAST.sub("", text.lower()).replace("(", " ").replace(")", " ")
    return _WS.sub(" ", text).replace(" ,", ",").strip()


def _type(pg_type: str) -> str:
    return {"integer": "INTEGER", "text": "TEXT"}.get(pg_type, pg_type.upper())


def _default(expr: str | None) -> str | None:
    if expr is None or expr.startswith("nextval("):
        return None
    return _CAST.sub("", expr).strip()


_RULES = {"a": "NO ACTION", "r": "RESTRICT", "c": "CASCADE", "n": "SET NULL", "d": "SET DEFAULT"}


def compare_shape(
    conn: Connection, shape: SchemaShape, relations: dict[str, str] | None = None
) -> list[str]:
    """Differences between the schema behind `conn` and `shape`, in §5.3's words and order
    (`cafleet.db.classify.shape_diffs`), then the functions cafleet installs (§10.3). The
    catalogue is read in a handful of queries up front."""
    from cafleet.db.classify import shape_diffs

    relations = _relations(conn) if relations is None else relations
    tables, attnames = _found_tables(conn, relations)
    indexes = _found_indexes(conn, attnames)
    diffs = shape_diffs(shape, tables.get, indexes.get, normalise_predicate)
    present = {
        r[0]
        for r in _rows(
            conn,
            f"SELECT proname FROM pg_proc WHERE pronamespace = {_NS} AND proname IN (%s, %s)",
            FUNCTIONS,
        )
    }
    diffs.extend(f"missing function {f}" for f in FUNCTIONS if f not in present)
    return diffs


def _found_tables(
    conn: Connection, relations: dict[str, str]
) -> tuple[dict[str, Any], dict[str, dict[int, str]]]:
    """Every relation of the schema: a table's `FoundTable`, or "view"; and each table's
    column names by attribute number (an index's key names them)."""
    from cafleet.db.classify import FoundTable
    from cafleet.db.shapes import ForeignKeyShape

    columns: dict[str, dict[str, tuple[str, bool, str | None]]] = {}
    generated: dict[str, set[str]] = {}  # columns whose value a sequence or identity gives
    attnames: dict[str, dict[int, str]] = {}
    for table, attnum, name, type_, notnull, default, ident in _rows(
        conn,
        "SELECT c.relname, a.attnum, a.attname, format_type(a.atttypid, a.atttypmod), "
        "a.attnotnull, pg_get_expr(d.adbin, d.adrelid), a.attidentity "
        "FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
        "LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum "
        f"WHERE c.relnamespace = {_NS} AND c.relkind IN ('r', 'p') AND a.attnum > 0 "
        "AND NOT a.attisdropped ORDER BY c.relname, a.attnum",
    ):
        columns.setdefault(table, {})[name] = (_type(type_), bool(notnull), _default(default))
        if (default or "").startswith("nextval(") or ident in ("a", "d"):
            generated.setdefault(table, set()).add(name)
        attnames.setdefault(table, {})[attnum] = name
    pks: dict[str, tuple[str, ...]] = {}
    for table, key in _rows(
        conn,
        "SELECT c.relname, i.indkey::int2[] FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid "
        f"WHERE i.indisprimary AND c.relnamespace = {_NS}",
    ):
        pks[table] = tuple(attnames.get(table, {}).get(int(n), "?") for n in key)
    fks: dict[str, list[ForeignKeyShape | str]] = {}
    for table, key, target, target_key, on_delete, on_update in _rows(
        conn,
        "SELECT c.relname, k.conkey, t.relname, k.confkey, k.confdeltype, k.confupdtype "
        "FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid "
        "JOIN pg_class t ON t.oid = k.confrelid "
        f"WHERE k.contype = 'f' AND c.relnamespace = {_NS} ORDER BY k.conname",
    ):
        names = [attnames.get(table, {}).get(int(n), "?") for n in key]
        if len(names) > 1:
            fks.setdefault(table, []).append(
                f"{table}: unexpected composite foreign key ({', '.join(names)}) -> {target}"
            )
            continue
        target_names = [attnames.get(target, {}).get(int(n), "?") for n in target_key]
        fks.setdefault(table, []).append(
            ForeignKeyShape(names[0], target, target_names[0], _RULES[on_delete], _RULES[on_update])
        )
    found: dict[str, Any] = {}
    for name, kind in relations.items():
        if kind == "v":
            found[name] = "view"
        elif kind in ("r", "p"):
            pk = pks.get(name, ())
            found[name] = FoundTable(
                columns=columns.get(name, {}),
                primary_key=pk,
                autoincrement=any(c in generated.get(name, ()) for c in pk),
                foreign_keys=fks.get(name, []),
            )
    return found, attnames


def _found_indexes(conn: Connection, attnames: dict[str, dict[int, str]]) -> dict[str, Any]:
    """Every index of the schema as a `FoundIndex`."""
    from cafleet.db.classify import FoundIndex

    found: dict[str, Any] = {}
    for name, table, unique, predicate, key in _rows(
        conn,
        "SELECT i.relname, t.relname, x.indisunique, pg_get_expr(x.indpred, x.indrelid), "
        "x.indkey::int2[] FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid "
        f"JOIN pg_class t ON t.oid = x.indrelid WHERE i.relnamespace = {_NS}",
    ):
        names = attnames.get(table, {})
        columns = tuple(names.get(int(n), "?") if int(n) else "<expression>" for n in key)
        found[str(name)] = FoundIndex(
            str(table), columns, bool(unique), normalise_predicate(predicate)
        )
    return found


def schema_fingerprint(conn: Connection) -> str:
    """PostgreSQL's `PRAGMA schema_version`: changes whenever a relation of the schema is
    created, altered or dropped, or the identity comment changes (docs/storage.md §4.4)."""
    return str(_rows(conn, schema_fingerprint_sql(_NS))[0][0])


def diagnose(path: str, conn: Connection, _d: Make) -> Any:
    """Inside the connection's open transaction or a fresh read; a PostgreSQL error is
    `unreadable` with its first line."""
    try:
        if conn.in_transaction():
            return diagnose_in_tx(path, conn, _d)
        with conn.read():
            return diagnose_in_tx(path, conn, _d)
    except sqlite3.Error as e:
        return _d(path, "unreadable", reason=str(e))


def diagnose_path(path: str, _d: Make) -> Any:
    from cafleet.db.pg.runtime import close_connection, open_connection

    try:
        conn = open_connection(path)
    except sqlite3.Error as e:
        return _d(path, "unreadable", reason=str(e))
    try:
        return diagnose(path, conn, _d)
    finally:
        close_connection(conn)


__all__ = [
    "FUNCTIONS",
    "IDENTITY_COMMENT",
    "compare_shape",
    "diagnose",
    "diagnose_in_tx",
    "diagnose_path",
    "identity",
    "normalise_predicate",
    "schema_fingerprint",
]
