"""Alembic environment for cafleet (docs/storage.md §3.4, §3.5).

Two paths:

- Driven by cafleet (`config.attributes["connection"]` set by cafleet.db.migrate): the
  connection is already inside `setup`'s one write transaction (writer lock + BEGIN IMMEDIATE,
  foreign keys off), so Alembic treats it as external and neither begins nor commits. Logging
  is left alone.
- Driven by the `alembic` command: the database is resolved exactly like cafleet does and opened
  read-only; all work happens inside `tx.read`. `history` and `current` work; `upgrade`, `stamp`
  and `downgrade` fail on the read-only connection without changing the file. People migrate
  with `cafleet setup`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from alembic import context
from cafleet.db.schema import metadata

if TYPE_CHECKING:
    from sqlalchemy import Connection

config = context.config


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=True,
        transaction_per_migration=False,
    )


def run_driven_by_cafleet(connection: Connection) -> None:
    _configure(connection)
    with context.begin_transaction():
        context.run_migrations()


def run_from_alembic_command() -> None:
    import os
    from logging.config import fileConfig

    from cafleet.config import resolve_database_path
    from cafleet.db import tx
    from cafleet.db.engine import close_connection, open_connection

    if config.config_file_name is not None:
        fileConfig(config.config_file_name)
    if context.is_offline_mode():
        raise SystemExit("cafleet: offline (--sql) mode is not supported; use 'cafleet setup'")
    path = resolve_database_path(os.environ)
    if path.startswith(("postgresql://", "postgres://")):
        run_against_postgresql(path)
        return
    if not os.path.exists(path):
        raise SystemExit(f"cafleet: no database at {path}; run 'cafleet setup'")
    connection = open_connection(path, mode="ro", purpose="readonly")
    try:
        with tx.read(connection):
            _configure(connection)
            with context.begin_transaction():
                context.run_migrations()
    finally:
        close_connection(connection, guarded=True)


def run_against_postgresql(path: str) -> None:
    """The `alembic` command against PostgreSQL (docs/storage.md §10.2): inside one READ ONLY
    transaction, so `history` and `current` work and `upgrade` or `stamp` fail, changing
    nothing."""
    import cafleet.db.pg.alembic_impl  # noqa: F401 - the PostgreSQL reading of the revisions
    from cafleet.db.pg.migrate import sa_connection

    with sa_connection(path) as connection, connection.begin() as trans:
        connection.exec_driver_sql("SET TRANSACTION READ ONLY")
        _configure(connection)
        with context.begin_transaction():
            context.run_migrations()
        trans.rollback()


_connection = config.attributes.get("connection")
if _connection is not None:
    run_driven_by_cafleet(_connection)
else:
    run_from_alembic_command()
