"""wave3_columns (PLACEHOLDER on branch h23 until the lead's revision 0005 lands on main)

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02 00:00:00

The lead's planned wave-3 columns, all nullable (NULL: written before wave 3).
"""

from __future__ import annotations

import sqlalchemy as sa

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("member_spawns") as batch:
        batch.add_column(sa.Column("permissions", sa.Text, nullable=True))
        batch.add_column(sa.Column("worktree_json", sa.Text, nullable=True))
        batch.add_column(sa.Column("agent_session_id", sa.Text, nullable=True))
    with op.batch_alter_table("member_placements") as batch:
        batch.add_column(sa.Column("host_id", sa.Text, nullable=True))
    with op.batch_alter_table("fleets") as batch:
        batch.add_column(sa.Column("member_defaults_json", sa.Text, nullable=True))


def downgrade() -> None:
    raise NotImplementedError("cafleet revisions are forward-only")
