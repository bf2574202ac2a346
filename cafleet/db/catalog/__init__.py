"""The compiled statement catalog, one package per dialect (`cafleet.db.catalog.sqlite`).

Generated from `cafleet.db.statements` by `python -m cafleet.db.catalog --write`; checked in,
and checked by tests/test_catalog.py (`--check`). Importing a generated module imports nothing
but the standard library: each statement is a `(sql, parameter names in placeholder order)`
tuple that `cafleet.db.runtime.Connection.execute` runs.
"""

# The catalog's modules, one per statements module: what `--write` generates for each dialect
# and what the PostgreSQL runtime pairs with the SQLite entries (one list, so a new module
# reaches both).
MODULES: tuple[str, ...] = (
    "assets",
    "fleets",
    "members",
    "messages",
    "monitor",
    "notifications",
    "recovery",
    "sessions",
    "tasks",
    "transfer",
    "views",
)
