"""placement_socket

Revision ID: 0003
Revises: 0002
Create Date: 2025-01-01 00:00:02

Issue 10 item 7: a pane id names a pane on one tmux server only, so a placement records the
socket path of the server its pane was made on (`member_placements.mux_socket`, nullable: rows
written before this revision keep NULL, which matches any server). One ADD COLUMN; no row is
rewritten. A landed revision file is never edited.
"""

from __future__ import annotations

import sqlalchemy as sa

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("member_placements", sa.Column("mux_socket", sa.Text, nullable=True))


def downgrade() -> None:
    raise NotImplementedError("cafleet revisions are forward-only")
