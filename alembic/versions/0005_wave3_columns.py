"""wave3_columns

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02 00:00:00

Five nullable columns the wave-3 features record (docs/storage.md §3.8); NULL everywhere means
"written before this revision":

- `member_spawns.permissions`: the member's permission profile;
- `member_spawns.worktree_json`: the member's git worktree, JSON {"path", "branch", "base"};
- `member_spawns.agent_session_id`: the coding agent's own session id, learned after spawn;
- `member_placements.host_id`: the host the pane lives on;
- `fleets.member_defaults_json`: the fleet's defaults for new members (JSON object).

Five ADD COLUMNs (through `op.batch_alter_table`, storage.md §3.1); no row is rewritten.

A landed revision file is never edited (storage.md §3.1). Its recorded shape is
SHAPES["0005"] in cafleet/db/shapes.py and its line is in tests/revision_manifest.txt.
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
