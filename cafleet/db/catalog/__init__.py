"""The compiled statement catalog: per module, the statements' names (`cafleet.db.catalog.<module>`,
what the repository runs) and one package per dialect (`cafleet.db.catalog.sqlite`, ...).

Generated from `cafleet.db.statements` by `python -m cafleet.db.catalog --write`; checked in,
and checked by tests/test_catalog.py (`--check`). Importing a generated module imports nothing
but the standard library: a name is a `cafleet.db.connection.Statement`, which a connection
resolves to its dialect's `(sql, parameter names in placeholder order)` entry.
"""

# The catalog's modules, one per statements module: what `--write` generates names and each
# dialect's entries for (one list, so a new module reaches every dialect).
MODULES: tuple[str, ...] = (
    "assets",
    "budgets",
    "fleets",
    "hooks",
    "members",
    "messages",
    "monitor",
    "notifications",
    "notify",
    "recovery",
    "search",
    "sessions",
    "tasks",
    "transfer",
    "views",
)
