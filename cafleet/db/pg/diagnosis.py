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

from cafleet.db.predicates import APPLICATION_ID

if TYPE_CHECKING:
    from cafleet.db.pg.runtime import Connection
    from cafleet.db.shapes import ForeignKeyShape, SchemaShape

# `cafleet.db.diagnosis` builds its `Diagnosis` records and imports this module, so the caller
# passes its maker in (`make(path, state, **fields)`) and this module never imports it.
Make = Callable[..., Any]

IDENTITY_PREFIX = "cafleet application_id "
IDENTITY_COMMENT = f"{IDENTITY_PREFIX}{APPLICATION_ID}"
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
    from cafleet.db.shapes import HEAD_REVISION, HEAD_VERSION, REVISIONS, SHAPES

    ident = identity(conn)
    relations = _relations(conn)
    if ident == 0:
        if not relations:
            return _d(path, "missing")
        return _d(path, "foreign", reason="it has tables but no cafleet identity")
    if ident != APPLICATION_ID:
        return _d(path, "foreign", reason=f"application_id is {ident}, not {APPLICATION_ID}")
    if relations.get("alembic_version") not in ("r", "p"):
        return _d(path, "foreign", reason="it has the cafleet identity but no schema ledger")
    ledger_columns = [
        r[0]
        for r in _rows(
            conn,
            "SELECT attname FROM pg_attribute WHERE attrelid = "
            "(current_schema() || '.alembic_version')::regclass AND attnum > 0 "
            "AND NOT attisdropped",
        )
    ]
    if "version_num" not in ledger_columns:
        return _d(path, "damaged", differences=("alembic_version: no version_num column",))
    rows = _rows(conn, "SELECT version_num FROM alembic_version")
    if len(rows) != 1:
        return _d(
            path, "damaged", differences=(f"alembic_version: holds {len(rows)} rows (expected 1)",)
        )
    value = rows[0][0]
    revision = "NULL" if value is None else str(value)
    if revision not in REVISIONS:
        if _DIGITS.fullmatch(revision) and int(revision) > HEAD_VERSION:
            return _d(path, "ahead", revision=revision, schema_version=int(revision))
        return _d(
            path,
            "damaged",
            revision=revision,
            differences=(f"alembic_version: '{revision}' is not a cafleet revision",),
        )
    differences = compare_shape(conn, SHAPES[revision], relations)
    if differences:
        return _d(
            path,
            "damaged",
            revision=revision,
            schema_version=int(revision),
            differences=tuple(differences),
        )
    state = "current" if revision == HEAD_REVISION else "behind"
    return _d(path, state, revision=revision, schema_version=int(revision))


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
    """Differences between the schema behind `conn` and `shape`, in §5.3's words and order."""
    from cafleet.db.shapes import ForeignKeyShape

    relations = _relations(conn) if relations is None else relations
    columns: dict[str, dict[str, tuple[Any, ...]]] = {}
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
        columns.setdefault(table, {})[name] = (type_, notnull, default, ident)
        attnames.setdefault(table, {})[attnum] = name
    pks: dict[str, list[str]] = {}
    for table, key in _rows(
        conn,
        "SELECT c.relname, i.indkey::int2[] FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid "
        f"WHERE i.indisprimary AND c.relnamespace = {_NS}",
    ):
        pks[table] = [attnames.get(table, {}).get(int(n), "?") for n in key]
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

    diffs: list[str] = []
    for table in shape.tables:
        name = table.name
        kind = relations.get(name)
        if kind not in ("r", "p"):
            if kind == "v":
                diffs.append(f"missing table {name} (a view has that name)")
            else:
                diffs.append(f"missing table {name}")
            continue
        actual = columns.get(name, {})
        recorded_pk = tuple(c.name for c in sorted(table.columns, key=lambda c: c.pk) if c.pk)
        actual_pk = tuple(pks.get(name, []))
        if actual_pk != recorded_pk:
            diffs.append(
                f"{name}: primary key ({', '.join(actual_pk)}) "
                f"(expected ({', '.join(recorded_pk)}))"
            )
        autoinc = False
        for col in table.columns:
            row = actual.get(col.name)
            if row is None:
                diffs.append(f"missing column {name}.{col.name}")
                continue
            pg_type, notnull, default, ident = row
            if col.pk and ((default or "").startswith("nextval(") or ident in ("a", "d")):
                autoinc = True
            type_ = _type(pg_type)
            if type_ != col.type:
                diffs.append(f"{name}.{col.name}: type {type_ or 'none'} (expected {col.type})")
            if bool(notnull) != col.notnull:
                diffs.append(
                    f"{name}.{col.name}: {'NOT NULL' if notnull else 'nullable'} "
                    f"(expected {'NOT NULL' if col.notnull else 'nullable'})"
                )
            shown = _default(default)
            if shown != col.default:
                diffs.append(
                    f"{name}.{col.name}: default {shown if shown is not None else 'none'} "
                    f"(expected {col.default if col.default is not None else 'none'})"
                )
        recorded_names = {c.name for c in table.columns}
        for column in actual:
            if column not in recorded_names:
                diffs.append(f"unexpected column {name}.{column}")
        if autoinc != table.autoincrement:
            diffs.append(
                f"{name}: AUTOINCREMENT {'present' if autoinc else 'absent'} "
                f"(expected {'present' if table.autoincrement else 'absent'})"
            )
        diffs.extend(_compare_foreign_keys(name, table.foreign_keys, fks.get(name, [])))

    indexes = {
        str(r[0]): r[1:]
        for r in _rows(
            conn,
            "SELECT i.relname, t.relname, x.indisunique, pg_get_expr(x.indpred, x.indrelid), "
            "x.indkey::int2[] FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid "
            f"JOIN pg_class t ON t.oid = x.indrelid WHERE i.relnamespace = {_NS}",
        )
    }
    for index in shape.indexes:
        found = indexes.get(index.name)
        if found is None:
            diffs.append(f"missing index {index.name}")
            continue
        table_name, unique, predicate, key = found
        if table_name != index.table:
            diffs.append(f"index {index.name}: on table {table_name} (expected {index.table})")
            continue
        cols = tuple(
            attnames.get(table_name, {}).get(int(n), "?") if int(n) else "<expression>" for n in key
        )
        if cols != index.columns:
            diffs.append(
                f"index {index.name}: key columns ({', '.join(cols)}) "
                f"(expected ({', '.join(index.columns)}))"
            )
        if bool(unique) != index.unique:
            diffs.append(
                f"index {index.name}: unique (expected not unique)"
                if unique
                else f"index {index.name}: not unique (expected unique)"
            )
        where = normalise_predicate(predicate)
        if where != normalise_predicate(index.where):
            if index.where is None:
                diffs.append(f"index {index.name}: unexpected predicate")
            elif where is None:
                diffs.append(f"index {index.name}: no predicate (expected one)")
            else:
                diffs.append(f"index {index.name}: other predicate")
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


def _compare_foreign_keys(
    table: str, recorded: frozenset[ForeignKeyShape], found: list[ForeignKeyShape | str]
) -> list[str]:
    diffs = [f for f in found if isinstance(f, str)]
    actual = [f for f in found if not isinstance(f, str)]
    from cafleet.db.shapes import foreign_key_diffs

    return diffs + foreign_key_diffs(table, recorded, actual)


def schema_fingerprint(conn: Connection) -> str:
    """PostgreSQL's `PRAGMA schema_version`: changes whenever a relation of the schema is
    created, altered or dropped, or the identity comment changes (docs/storage.md §4.4)."""
    rows = _rows(
        conn,
        "SELECT md5(coalesce(string_agg(oid::text || ':' || xmin::text, ',' ORDER BY oid), '') "
        f"|| coalesce(obj_description({_NS}, 'pg_namespace'), '')) "
        f"FROM pg_class WHERE relnamespace = {_NS}",
    )
    return str(rows[0][0])


def diagnose(path: str, conn: Connection, _d: Make) -> Any:
    """Inside the connection's open transaction or a fresh read; a PostgreSQL error is
    `unreadable` with its first line."""
    from cafleet.db.pg.runtime import read

    try:
        if conn.in_transaction():
            return diagnose_in_tx(path, conn, _d)
        with read(conn):
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
