"""member_spawns_and_pane_loss

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01 00:00:00

Recovery (storage.md §3.6): `member_spawns` keeps what each member was spawned with (its
spawn-prompt template, model and effort) so `member respawn` can re-create its pane, and
`member_placements.lost_at` records when the monitor loop found a member's pane gone (the
loss is reported once). Both start empty: existing rows gain NULLs only.

A landed revision file is never edited (storage.md §3.1). Its recorded shape is
SHAPES["0003"] in cafleet/db/shapes.py and its line is in tests/revision_manifest.txt.
"""

from __future__ import annotations

import sqlalchemy as sa

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "member_spawns",
        sa.Column("member_id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("prompt", sa.Text, nullable=True),
        sa.Column("model", sa.Text, nullable=True),
        sa.Column("effort", sa.Text, nullable=True),
        sa.ForeignKeyConstraint(["member_id"], ["members.member_id"], ondelete="CASCADE"),
    )
    with op.batch_alter_table("member_placements") as batch:
        batch.add_column(sa.Column("lost_at", sa.Text, nullable=True))


def downgrade() -> None:
    raise NotImplementedError("cafleet revisions are forward-only")
