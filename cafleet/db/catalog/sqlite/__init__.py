"""The catalog for SQLite (generated modules; see `cafleet.db.catalog`)."""
