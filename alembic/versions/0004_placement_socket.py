"""placement_socket

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01 00:00:01

Issue 10 item 7 (storage.md §3.7): a pane id names a pane on one tmux server only, so a
placement records the socket path of the server its pane was made on
(`member_placements.mux_socket`, nullable: rows written before this revision keep NULL, which
matches any server). One ADD COLUMN (through `op.batch_alter_table`, storage.md §3.1); no row
is rewritten.

A landed revision file is never edited (storage.md §3.1). Its recorded shape is
SHAPES["0004"] in cafleet/db/shapes.py and its line is in tests/revision_manifest.txt.
"""

from __future__ import annotations

import sqlalchemy as sa

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("member_placements") as batch:
        batch.add_column(sa.Column("mux_socket", sa.Text, nullable=True))


def downgrade() -> None:
    raise NotImplementedError("cafleet revisions are forward-only")
