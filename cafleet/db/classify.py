"""docs/storage.md §5.2's classification and §5.3's shape comparison, once for both dialects.

Each dialect's diagnosis (`cafleet/db/diagnosis.py` for a file, `cafleet/db/pg/diagnosis.py`
for PostgreSQL, §10.2) reads its own catalogue into the recorded-shape vocabulary: a `Catalogue`
answers the classification's questions in order (each read only when the previous step passed),
a `FoundTable` / `FoundIndex` is what the catalogue shows for a recorded table or index. The
steps, their order and every difference line are here. Reads only; standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from cafleet.db.predicates import APPLICATION_ID

if TYPE_CHECKING:
    from cafleet.db.shapes import ForeignKeyShape, SchemaShape

# `make(path, state, **fields)`: the caller's `Diagnosis` maker (cafleet.db.diagnosis._d).
Make = Callable[..., Any]

_DIGITS = re.compile(r"[0-9]+")


class Catalogue(Protocol):
    """One dialect's reads of a database, inside the caller's transaction."""

    def identity(self) -> int: ...  # application_id, 0 when there is none

    def has_objects(self) -> bool: ...  # any table, view, index… of the database

    def has_ledger(self) -> bool: ...  # an `alembic_version` table

    def ledger_columns(self) -> list[str]: ...

    def ledger_rows(self) -> list[tuple[Any, ...]]: ...

    def compare(self, shape: SchemaShape) -> list[str]: ...  # `shape_diffs` and any extras


def classify(path: str, catalogue: Catalogue, make: Make) -> Any:
    """§5.2: missing, foreign, damaged (ledger), ahead, damaged (shape), current or behind."""
    from cafleet.db.shapes import HEAD_REVISION, HEAD_VERSION, REVISIONS, SHAPES

    identity = catalogue.identity()
    if identity == 0:
        if not catalogue.has_objects():
            return make(path, "missing")
        return make(path, "foreign", reason="it has tables but no cafleet identity")
    if identity != APPLICATION_ID:
        return make(path, "foreign", reason=f"application_id is {identity}, not {APPLICATION_ID}")
    if not catalogue.has_ledger():
        return make(path, "foreign", reason="it has the cafleet identity but no schema ledger")
    if "version_num" not in catalogue.ledger_columns():
        return make(path, "damaged", differences=("alembic_version: no version_num column",))
    rows = catalogue.ledger_rows()
    if len(rows) != 1:
        return make(
            path, "damaged", differences=(f"alembic_version: holds {len(rows)} rows (expected 1)",)
        )
    value = rows[0][0]
    revision = "NULL" if value is None else str(value)
    if revision not in REVISIONS:
        if _DIGITS.fullmatch(revision) and int(revision) > HEAD_VERSION:
            return make(path, "ahead", revision=revision, schema_version=int(revision))
        return make(
            path,
            "damaged",
            revision=revision,
            differences=(f"alembic_version: '{revision}' is not a cafleet revision",),
        )
    differences = catalogue.compare(SHAPES[revision])
    if differences:
        return make(
            path,
            "damaged",
            revision=revision,
            schema_version=int(revision),
            differences=tuple(differences),
        )
    state = "current" if revision == HEAD_REVISION else "behind"
    return make(path, state, revision=revision, schema_version=int(revision))


@dataclass(frozen=True)
class FoundTable:
    """A table as the catalogue shows it: its columns in order, `name -> (type, NOT NULL,
    default)` with type and default in the recorded vocabulary; its primary key in key order;
    whether its key is AUTOINCREMENT (SQLite) or generated (a sequence or identity); its
    single-column foreign keys, and a composite one as its difference line already worded."""

    columns: dict[str, tuple[str, bool, str | None]]
    primary_key: tuple[str, ...]
    autoincrement: bool
    foreign_keys: list[ForeignKeyShape | str] = field(default_factory=list)


@dataclass(frozen=True)
class FoundIndex:
    """An index as the catalogue shows it (`<expression>` for an expression key column), its
    predicate as the dialect normalises it."""

    table: str
    columns: tuple[str, ...]
    unique: bool
    predicate: str | None


def shape_diffs(
    shape: SchemaShape,
    table_of: Callable[[str], FoundTable | Literal["view"] | None],
    index_of: Callable[[str], FoundIndex | None],
    normalise_predicate: Callable[[str | None], str | None] = lambda p: p,
) -> list[str]:
    """§5.3: the differences between what the catalogue shows and `shape`, in a stable order:
    per recorded table (missing, primary key, columns, unexpected columns, AUTOINCREMENT,
    foreign keys), then per recorded index. `table_of` / `index_of` read one name (None: no
    such table / index; "view": a view has the table's name); `normalise_predicate` brings a
    recorded predicate to the dialect's normal form."""
    from cafleet.db.shapes import foreign_key_diffs

    diffs: list[str] = []
    for table in shape.tables:
        name = table.name
        found = table_of(name)
        if found is None or found == "view":
            suffix = " (a view has that name)" if found == "view" else ""
            diffs.append(f"missing table {name}{suffix}")
            continue
        recorded_pk = tuple(c.name for c in sorted(table.columns, key=lambda c: c.pk) if c.pk)
        if found.primary_key != recorded_pk:
            diffs.append(
                f"{name}: primary key ({', '.join(found.primary_key)}) "
                f"(expected ({', '.join(recorded_pk)}))"
            )
        for col in table.columns:
            row = found.columns.get(col.name)
            if row is None:
                diffs.append(f"missing column {name}.{col.name}")
                continue
            type_, notnull, default = row
            if type_ != col.type:
                diffs.append(f"{name}.{col.name}: type {type_ or 'none'} (expected {col.type})")
            if notnull != col.notnull:
                diffs.append(
                    f"{name}.{col.name}: {'NOT NULL' if notnull else 'nullable'} "
                    f"(expected {'NOT NULL' if col.notnull else 'nullable'})"
                )
            if default != col.default:
                diffs.append(
                    f"{name}.{col.name}: default {default if default is not None else 'none'} "
                    f"(expected {col.default if col.default is not None else 'none'})"
                )
        recorded_names = {c.name for c in table.columns}
        diffs.extend(
            f"unexpected column {name}.{column}"
            for column in found.columns
            if column not in recorded_names
        )
        if found.autoincrement != table.autoincrement:
            diffs.append(
                f"{name}: AUTOINCREMENT {'present' if found.autoincrement else 'absent'} "
                f"(expected {'present' if table.autoincrement else 'absent'})"
            )
        worded = [f for f in found.foreign_keys if isinstance(f, str)]
        actual = [f for f in found.foreign_keys if not isinstance(f, str)]
        diffs.extend(worded + foreign_key_diffs(name, table.foreign_keys, actual))

    for index in shape.indexes:
        got = index_of(index.name)
        if got is None:
            diffs.append(f"missing index {index.name}")
            continue
        if got.table != index.table:
            diffs.append(f"index {index.name}: on table {got.table} (expected {index.table})")
            continue
        if got.columns != index.columns:
            diffs.append(
                f"index {index.name}: key columns ({', '.join(got.columns)}) "
                f"(expected ({', '.join(index.columns)}))"
            )
        if got.unique != index.unique:
            diffs.append(
                f"index {index.name}: unique (expected not unique)"
                if got.unique
                else f"index {index.name}: not unique (expected unique)"
            )
        if got.predicate != normalise_predicate(index.where):
            if index.where is None:
                diffs.append(f"index {index.name}: unexpected predicate")
            elif got.predicate is None:
                diffs.append(f"index {index.name}: no predicate (expected one)")
            else:
                diffs.append(f"index {index.name}: other predicate")
    return diffs


__all__ = ["Catalogue", "FoundIndex", "FoundTable", "Make", "classify", "shape_diffs"]
