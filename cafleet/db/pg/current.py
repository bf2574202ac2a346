"""Is a PostgreSQL database current? The guard's fast answer on PostgreSQL (docs/storage.md
§10.2), the counterpart of `cafleet.db.current` for a file; psycopg only.

One statement, sent outside any transaction (a single statement reads one snapshot), returns
the identity comment, the ledger, a fingerprint of the schema's shape that the server computes
from pg_catalog, and the schema-change fingerprint long-running commands compare later
(`schema_fingerprint_sql`). The fingerprint is the md5 of a text that reads back one way only
(rows in their quoted text form, sorted byte-wise whatever the database's collation) and holds
every value the full diagnosis reads (`cafleet.db.pg.diagnosis`), and more: each relation of the
schema with its kind; each column with its number, type, NOT NULL, default and identity or
generation; each index with its table, key columns, uniqueness, expressions and predicate; each
constraint as the server words it (a foreign key with its columns, target and actions); each
function with its types and body. Equal fingerprints therefore mean the diagnosis would read the
catalogue of a database that `cafleet setup` brought to head, which it classifies `current`.
The fingerprints of head are recorded in `cafleet.db.catalog.postgresql.heads` (generated
against a real server, `python -m tests.pg_heads`). Any other answer, an error included (no
`alembic_version` table, a server too old for the statement), means "ask the full diagnosis",
never "not current": an auxiliary index, or another server version's wording, only costs the
full diagnosis.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cafleet.db.predicates import APPLICATION_ID

if TYPE_CHECKING:
    from cafleet.db.pg.runtime import PgConnection as Connection

# SQLite's application_id on PostgreSQL: the comment on the database's schema (§10.2).
IDENTITY_PREFIX = "cafleet application_id "
IDENTITY_COMMENT = f"{IDENTITY_PREFIX}{APPLICATION_ID}"


def schema_fingerprint_sql(ns: str) -> str:
    """PostgreSQL's `PRAGMA schema_version` for the schema whose oid is `ns`: changes whenever a
    relation of the schema is created, altered or dropped, or the identity comment changes."""
    return (
        "SELECT md5(coalesce(string_agg(c.oid::text || ':' || c.xmin::text, ',' "
        f"ORDER BY c.oid), '') || coalesce(obj_description({ns}, 'pg_namespace'), '')) "
        f"FROM pg_class c WHERE c.relnamespace = {ns}"
    )


_C = 'COLLATE "C"'
# Each section is one `string_agg` of rows in their text form (`ROW(...)::text` quotes any value
# holding a separator, a quote or white space, and writes NULL as nothing), so the whole text
# reads back one way only; a missing section counts as empty, never as skipped.
_SECTIONS = (
    # every relation of the schema, with its kind
    f"""SELECT string_agg(ROW(c.relname, c.relkind)::text, ',' ORDER BY c.relname {_C})
    FROM pg_class c WHERE c.relnamespace = n.oid""",
    # every column of its tables and views: number, name, type, NOT NULL, default, generation
    f"""SELECT string_agg(ROW(c.relname, a.attnum, a.attname, format_type(a.atttypid, a.atttypmod),
    a.attnotnull, pg_get_expr(d.adbin, d.adrelid), a.attidentity, a.attgenerated)::text, ','
    ORDER BY c.relname {_C}, a.attnum)
    FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid
    LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
    WHERE c.relnamespace = n.oid AND a.attnum > 0 AND NOT a.attisdropped
    AND c.relkind IN ('r', 'p', 'v', 'm', 'f')""",
    # every index: its table, uniqueness, key columns by number, expressions, predicate
    f"""SELECT string_agg(ROW(i.relname, t.relname, x.indisunique, x.indisprimary, x.indnkeyatts,
    x.indkey, pg_get_expr(x.indexprs, x.indrelid), pg_get_expr(x.indpred, x.indrelid))::text,
    ',' ORDER BY i.relname {_C})
    FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid
    WHERE i.relnamespace = n.oid""",
    # every constraint of its tables as the server words it (a foreign key names its columns,
    # its target and its actions)
    f"""SELECT string_agg(ROW(c.relname, k.conname, k.contype, pg_get_constraintdef(k.oid))::text,
    ',' ORDER BY c.relname {_C}, k.conname {_C})
    FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid WHERE c.relnamespace = n.oid""",
    # every function of the schema: name, argument and result types, body
    f"""SELECT string_agg(ROW(p.proname, p.proargtypes, p.prorettype, md5(p.prosrc))::text, ','
    ORDER BY p.proname {_C}, p.proargtypes::text {_C})
    FROM pg_proc p WHERE p.pronamespace = n.oid""",
)
_SHAPE = "md5(" + " || E'\\n' || ".join(f"coalesce(({q}), '')" for q in _SECTIONS) + ")"

# identity comment, ledger (a JSON array of its rows), shape fingerprint, schema fingerprint
CURRENT_SQL = (
    "SELECT obj_description(n.oid, 'pg_namespace'), "
    "(SELECT json_agg(version_num::text)::text FROM alembic_version), "
    f"{_SHAPE}, ({schema_fingerprint_sql('n.oid')}) "
    "FROM pg_namespace n WHERE n.oid = current_schema()::regnamespace"
)


def read_current(conn: Connection) -> tuple[object, ...] | None:
    """The row of `CURRENT_SQL`, or None when the statement failed (outside a transaction)."""
    import psycopg

    from cafleet.db.errors import StorageUsageError

    if conn.in_transaction():
        raise StorageUsageError("the fast check runs outside a transaction")
    try:
        cursor = conn.driver.execute(CURRENT_SQL)
        try:
            row = cursor.fetchone()
        finally:
            cursor.close()
    except psycopg.Error:
        return None
    return None if row is None else tuple(row)


def current_schema_version(conn: Connection) -> str | None:
    """Outside a transaction: the schema fingerprint (`schema_fingerprint_sql`, what the guard
    remembers for `recheck_schema`) when the database is certainly at head with head's exact
    shape; None means "ask the full diagnosis", never "not current"."""
    from cafleet.db.catalog.postgresql.heads import FINGERPRINTS
    from cafleet.db.catalog.postgresql.heads import HEAD_REVISION as RECORDED
    from cafleet.db.catalog.sqlite.heads import HEAD_REVISION

    row = read_current(conn)
    if row is None or RECORDED != HEAD_REVISION:
        return None
    identity, ledger, shape, schema_version = row
    if identity != IDENTITY_COMMENT or ledger != f'["{HEAD_REVISION}"]':
        return None
    if shape not in FINGERPRINTS:
        return None
    return str(schema_version)


__all__ = [
    "CURRENT_SQL",
    "IDENTITY_COMMENT",
    "IDENTITY_PREFIX",
    "current_schema_version",
    "read_current",
    "schema_fingerprint_sql",
]
