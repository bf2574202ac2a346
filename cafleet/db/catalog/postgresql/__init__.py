"""The catalog for PostgreSQL (generated modules; see `cafleet.db.catalog`)."""
