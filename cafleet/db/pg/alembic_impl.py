"""The PostgreSQL reading of cafleet's landed revisions (docs/storage.md §10.2).

The revisions are written for SQLite and never edited (§3.1), so the same chain runs on
PostgreSQL through this Alembic implementation, which gives the three SQLite-only details their
PostgreSQL form:

- revision 0001's forward foreign key `fleets.director_member_id -> members` is added with
  `ALTER TABLE` once `members` exists (PostgreSQL checks a reference when it is created);
- an index's `sqlite_where` predicate becomes its `postgresql_where` (a partial index, the same
  text: the monitor index calls `json_extract`, which cafleet installs, below);
- `PRAGMA application_id = N` becomes the identity step: cafleet's two SQLite-compatible JSON
  functions (`json_valid`, `json_extract`, §10.3) and the schema comment
  `cafleet application_id N` (§10.2's identity), all inside the migration transaction.

Importing this module registers the implementation for the `postgresql` dialect; only
`cafleet setup` on PostgreSQL and the `alembic` command against it import it.
"""

from __future__ import annotations

import re
from typing import Any

from alembic.ddl.postgresql import PostgresqlImpl
from sqlalchemy import ForeignKeyConstraint, Index, Table, text
from sqlalchemy.schema import AddConstraint

from cafleet.db.pg.current import IDENTITY_PREFIX

_APPLICATION_ID = re.compile(r"^\s*PRAGMA\s+application_id\s*=\s*([0-9]+)\s*$", re.IGNORECASE)

# SQLite's JSON functions as cafleet uses them (docs/storage.md §10.3): `json_valid(text)` and
# `json_extract(text, '$.a.b')`, NULL for malformed JSON (a partial index's predicate must not
# fail on an inactive row). IMMUTABLE: the monitor index's predicate calls json_extract.
JSON_FUNCTIONS = (
    """
CREATE FUNCTION json_valid(doc text) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $cafleet$
BEGIN
    PERFORM doc::json;
    RETURN true;
EXCEPTION WHEN others THEN
    RETURN false;
END
$cafleet$
""",
    """
CREATE FUNCTION json_extract(doc text, path text) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $cafleet$
BEGIN
    RETURN doc::jsonb #>> string_to_array(substr(path, 3), '.');
EXCEPTION WHEN others THEN
    RETURN NULL;
END
$cafleet$
""",
)


def identity_statements(application_id: int) -> list[str]:
    return [
        *JSON_FUNCTIONS,
        "DO $cafleet$ BEGIN EXECUTE format('COMMENT ON SCHEMA %I IS %L', current_schema(), "
        f"'{IDENTITY_PREFIX}{application_id}'); END $cafleet$",
    ]


class CafleetPostgresqlImpl(PostgresqlImpl):
    __dialect__ = "postgresql"

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self._deferred: list[ForeignKeyConstraint] = []
        self._created: set[str] = set()

    def create_table(self, table: Table, **kw: Any) -> None:
        for fk in list(table.foreign_key_constraints):
            target = fk.referred_table.name
            if target != table.name and target not in self._created and not self._exists(target):
                table.constraints.discard(fk)
                self._deferred.append(fk)
        super().create_table(table, **kw)
        self._created.add(table.name)
        for fk in list(self._deferred):
            if fk.referred_table.name in self._created:
                self._deferred.remove(fk)
                table_of = fk.parent
                table_of.constraints.add(fk)
                self._exec(AddConstraint(fk))

    def _exists(self, name: str) -> bool:
        bind = self.connection
        assert bind is not None
        found = bind.execute(
            text("SELECT to_regclass(current_schema() || '.' || :name) IS NOT NULL"),
            {"name": name},
        ).scalar()
        return bool(found)

    def create_index(self, index: Index, **kw: Any) -> None:
        sqlite_where = index.dialect_options["sqlite"].get("where")
        if sqlite_where is not None and index.dialect_options["postgresql"].get("where") is None:
            index.dialect_options["postgresql"]["where"] = sqlite_where
        super().create_index(index, **kw)

    def execute(self, sql: Any, execution_options: Any = None) -> None:
        if isinstance(sql, str):
            match = _APPLICATION_ID.match(sql)
            if match:
                for statement in identity_statements(int(match.group(1))):
                    super().execute(text(statement))
                return
        super().execute(sql, execution_options)


__all__ = ["JSON_FUNCTIONS", "CafleetPostgresqlImpl", "identity_statements"]
