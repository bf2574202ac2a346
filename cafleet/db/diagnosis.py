"""Diagnosis of the file at P (docs/storage.md §5), shared by the guard, `setup` and `doctor`.

Diagnosis only reads. It never creates anything: an absent path is `missing` without a
connection being opened. The guard path imports this module, so it must never import Alembic.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from cafleet.config import is_postgres
from cafleet.db.classify import FoundIndex, FoundTable, classify, shape_diffs
from cafleet.db.runtime import close_connection, is_postgres_connection, open_connection, tx
from cafleet.db.shapes import (
    HEAD_VERSION,
    ForeignKeyShape,
    SchemaShape,
    has_autoincrement,
    index_predicate,
    normalise_default,
    normalise_type,
)

if TYPE_CHECKING:
    from sqlalchemy import Connection as SAConnection

    from cafleet.db.runtime import Connection as RuntimeConnection

    # The guard's runtime connection, or setup's SQLAlchemy one (inside its migration
    # transaction): both offer `in_transaction()` and `exec_driver_sql(...)`.
    Connection = RuntimeConnection | SAConnection

State = Literal["missing", "current", "behind", "ahead", "foreign", "damaged", "unreadable"]


@dataclass(frozen=True)
class Diagnosis:
    state: State
    path: str | None
    revision: str | None  # ledger text as stored
    schema_version: int | None
    head_version: int = HEAD_VERSION
    reason: str | None = None  # foreign reason / unreadable cause
    differences: tuple[str, ...] = field(default_factory=tuple)  # damaged only

    @property
    def ok(self) -> bool:
        return self.state == "current"


def render_differences(differences: tuple[str, ...] | list[str]) -> str:
    """The first three differences joined by `; `, then `; …` when more exist (§5.3)."""
    shown = "; ".join(differences[:3])
    if len(differences) > 3:
        shown += "; …"
    return shown


def guard_text(d: Diagnosis) -> str | None:
    """The schema guard's exact refusal text for every class but `current` (None); `setup` and
    `doctor` print the same text."""
    n = d.head_version
    if d.state == "current":
        return None
    if d.state == "missing":
        return "no cafleet database; run 'cafleet setup'"
    if d.state == "behind":
        return f"database schema is outdated (schema {d.schema_version}, head {n}); run 'cafleet setup'"
    if d.state == "ahead":
        return f"database schema {d.schema_version} is newer than this cafleet (head {n}); upgrade cafleet"
    if d.state == "foreign":
        return f"{d.path} is not a cafleet database ({d.reason}); cafleet will not use or modify it"
    if d.state == "damaged":
        m = "unknown" if d.schema_version is None else str(d.schema_version)
        return (
            f"{d.path} is damaged (schema {m}): {render_differences(d.differences)}; "
            "cafleet will not use or modify it"
        )
    if d.state == "unreadable":
        return f"cannot read database {d.path}: {d.reason}"
    raise ValueError(f"unknown diagnosis state {d.state!r}")  # pragma: no cover


def sqlite_error(e: BaseException) -> sqlite3.Error | None:
    """The SQLite error behind `e`: itself, or the one SQLAlchemy wrapped (`.orig`)."""
    if isinstance(e, sqlite3.Error):
        return e
    orig = getattr(e, "orig", None)
    return orig if isinstance(orig, sqlite3.Error) else None


def make_diagnosis(path: str, state: State, **kw: Any) -> Diagnosis:
    """A `Diagnosis` of `path` (revision and schema version default to None)."""
    return _d(path, state, **kw)


def _d(path: str, state: State, **kw: Any) -> Diagnosis:
    kw.setdefault("revision", None)
    kw.setdefault("schema_version", None)
    return Diagnosis(state=state, path=path, **kw)


# --- public entry points -----------------------------------------------------------------------


def diagnose(path: str, conn: Connection | None = None) -> Diagnosis:
    """Classify the file at `path` (docs/storage.md §5.2).

    With `conn`, diagnose through that connection: inside its open transaction when it has one
    (`setup`'s in-transaction checks), else inside a fresh `tx.read`. Without `conn`, open and
    close a connection of its own (`diagnose_path`).
    """
    if conn is None:
        return diagnose_path(path)
    if is_postgres_connection(conn):
        from cafleet.db.pg.diagnosis import diagnose as pg_diagnose

        return pg_diagnose(path, conn, _d)  # type: ignore[arg-type, no-any-return]
    if not os.path.exists(path):
        return _d(path, "missing")
    try:
        if conn.in_transaction():
            return _diagnose_in_tx(path, conn)
        with tx.read(conn):
            return _diagnose_in_tx(path, conn)
    except Exception as e:
        cause = sqlite_error(e)
        if cause is None:
            raise
        return _d(path, "unreadable", reason=str(cause))


def diagnose_path(path: str, *, for_doctor: bool = False) -> Diagnosis:
    """Open, diagnose and close (docs/storage.md §5.5); never creates anything.

    The close is guarded (no checkpoint on our behalf) for `doctor` and for every class but
    `current`, whenever a `-wal`/`-shm` existed at open.
    """
    if is_postgres(path):
        from cafleet.db.pg.diagnosis import diagnose_path as pg_diagnose_path

        return pg_diagnose_path(path, _d)  # type: ignore[no-any-return]
    if not os.path.exists(path):
        return _d(path, "missing")
    try:
        conn = open_connection(path, mode="rw", purpose="command")
    except sqlite3.Error as e:
        return _d(path, "unreadable", reason=str(e))
    result: Diagnosis | None = None
    try:
        result = diagnose(path, conn)
        return result
    finally:
        close_connection(conn, guarded=for_doctor or result is None or not result.ok)


# --- the algorithm -----------------------------------------------------------------------------


def _scalar(conn: Connection, sql: str, params: tuple[Any, ...] = ()) -> Any:
    return conn.exec_driver_sql(sql, params).scalar()


def _rows(conn: Connection, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in conn.exec_driver_sql(sql, params).all()]


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _diagnose_in_tx(path: str, conn: Connection) -> Diagnosis:
    return classify(path, _FileCatalogue(conn), _d)  # type: ignore[no-any-return]


class _FileCatalogue:
    """§5.2's reads of a file (`cafleet.db.classify.Catalogue`)."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def identity(self) -> int:
        return int(_scalar(self.conn, "PRAGMA main.application_id") or 0)

    def has_objects(self) -> bool:
        return bool(
            _scalar(
                self.conn,
                "SELECT count(*) FROM main.sqlite_master "
                "WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\'",
            )
        )

    def has_ledger(self) -> bool:
        return bool(
            _scalar(
                self.conn,
                "SELECT count(*) FROM main.sqlite_master "
                "WHERE type = 'table' AND name = 'alembic_version'",
            )
        )

    def ledger_columns(self) -> list[str]:
        return [r[1] for r in _rows(self.conn, "PRAGMA main.table_xinfo('alembic_version')")]

    def ledger_rows(self) -> list[tuple[Any, ...]]:
        return _rows(self.conn, "SELECT version_num FROM main.alembic_version")

    def compare(self, shape: SchemaShape) -> list[str]:
        return compare_shape(self.conn, shape)


def compare_shape(conn: Connection, shape: SchemaShape) -> list[str]:
    """Differences between the catalogue behind `conn` and `shape`, in a stable order (§5.3).

    Reads the catalogue, not DDL text, except for AUTOINCREMENT and index predicates.
    """
    return shape_diffs(
        shape, lambda name: _found_table(conn, name), lambda name: _found_index(conn, name)
    )


def _found_table(conn: Connection, name: str) -> FoundTable | Literal["view"] | None:
    kind = _rows(conn, "SELECT type, sql FROM main.sqlite_master WHERE name = ?", (name,))
    if not kind or kind[0][0] != "table":
        return "view" if kind and kind[0][0] == "view" else None
    xinfo = _rows(conn, f"PRAGMA main.table_xinfo({_q(name)})")
    return FoundTable(
        columns={
            r[1]: (normalise_type(r[2] or ""), bool(r[3]), normalise_default(r[4])) for r in xinfo
        },
        primary_key=tuple(r[1] for r in sorted(xinfo, key=lambda r: r[5]) if r[5]),
        autoincrement=has_autoincrement(kind[0][1]),
        foreign_keys=_foreign_keys(conn, name),
    )


def _found_index(conn: Connection, name: str) -> FoundIndex | None:
    rows = _rows(
        conn,
        "SELECT tbl_name, sql FROM main.sqlite_master WHERE type = 'index' AND name = ?",
        (name,),
    )
    if not rows:
        return None
    table_name, sql = rows[0]
    columns = tuple(
        r[2] if r[2] is not None else "<expression>"
        for r in sorted(_rows(conn, f"PRAGMA main.index_info({_q(name)})"), key=lambda r: r[0])
    )
    unique = any(
        bool(r[2]) for r in _rows(conn, f"PRAGMA main.index_list({_q(table_name)})") if r[1] == name
    )
    return FoundIndex(table_name, columns, unique, index_predicate(sql))


def _foreign_keys(conn: Connection, table: str) -> list[ForeignKeyShape | str]:
    found: list[ForeignKeyShape | str] = []
    groups: dict[int, list[tuple[Any, ...]]] = {}
    for r in _rows(conn, f"PRAGMA main.foreign_key_list({_q(table)})"):
        groups.setdefault(int(r[0]), []).append(r)
    for fk_id in sorted(groups):
        rows = sorted(groups[fk_id], key=lambda r: r[1])
        if len(rows) > 1:
            cols = ", ".join(str(r[3]) for r in rows)
            found.append(f"{table}: unexpected composite foreign key ({cols}) -> {rows[0][2]}")
            continue
        _id, _seq, target, column, target_column, on_update, on_delete, _match = rows[0]
        if target_column is None:
            pk = [
                r[1]
                for r in sorted(
                    _rows(conn, f"PRAGMA main.table_xinfo({_q(target)})"), key=lambda r: r[5]
                )
                if r[5]
            ]
            target_column = pk[0] if len(pk) == 1 else ",".join(pk) or "rowid"
        found.append(
            ForeignKeyShape(
                str(column),
                str(target).lower(),
                str(target_column).lower(),
                str(on_delete).upper(),
                str(on_update).upper(),
            )
        )
    return found


def duplicate_monitors_text(rows: Iterable[Sequence[Any]]) -> str | None:
    """Setup's refusal for fleets with two or more active monitors, from `(fleet_id, member_id)`
    rows (each dialect's own query); None when there are none (docs/storage.md §3.3)."""
    by_fleet: dict[int, list[int]] = {}
    for fleet_id, member_id in rows:
        by_fleet.setdefault(fleet_id, []).append(member_id)
    duplicates = [(f, m) for f, m in sorted(by_fleet.items()) if len(m) >= 2]
    if not duplicates:
        return None
    return (
        "active monitor duplicates prevent migration: "
        + "; ".join(f"fleet {f}: members " + ", ".join(str(i) for i in m) for f, m in duplicates)
        + "; deregister all but one active monitor per fleet, then run 'cafleet setup' again"
    )
