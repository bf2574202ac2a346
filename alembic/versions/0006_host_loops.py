"""host_loops

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-02 00:00:00

Fleets across machines (docs/storage.md §3.9): `host_loops` is the slot and heartbeat of each
host's delivery loop (`cafleet monitor host`), one row per host id. Its liveness is read from
other hosts, which cannot signal its pid: the heartbeat (`last_tick_at`) is the authority. The
table starts empty; no existing row changes.

A landed revision file is never edited (storage.md §3.1). Its recorded shape is
SHAPES["0006"] in cafleet/db/shapes.py and its line is in tests/revision_manifest.txt.
"""

from __future__ import annotations

import sqlalchemy as sa

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "host_loops",
        sa.Column("host_id", sa.Text, primary_key=True),
        sa.Column("pid", sa.Integer, nullable=True),
        sa.Column("started_at", sa.Text, nullable=True),
        sa.Column("last_tick_at", sa.Text, nullable=True),
        sa.Column("tick_seconds", sa.Integer, nullable=False, server_default=sa.text("5")),
    )


def downgrade() -> None:
    raise NotImplementedError("cafleet revisions are forward-only")
