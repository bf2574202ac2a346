"""task_review

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-04 00:00:00

What review and merge record (docs/storage.md §3.15); NULL everywhere means "none recorded":

- `tasks.git_repo`, `tasks.git_branch`, `tasks.git_base`, `tasks.git_head`: the checkout the
  assignee's worktree was added from, its branch, the base that branch started from, and the
  branch's HEAD commit when `task done` ran;
- `tasks.merge_commit`: the commit `task merge` moved the target to;
- `fleets.merge_gate`: the fleet's gate command for `task merge`.

Six ADD COLUMNs (through `op.batch_alter_table`, which adds a column in place, so the search
triggers on `tasks` stay); no row is rewritten.

A landed revision file is never edited (storage.md §3.1). Its recorded shape is
SHAPES["0012"] in cafleet/db/shapes.py and its line is in tests/revision_manifest.txt.
"""

from __future__ import annotations

import sqlalchemy as sa

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("tasks") as batch:
        for name in ("git_repo", "git_branch", "git_base", "git_head", "merge_commit"):
            batch.add_column(sa.Column(name, sa.Text, nullable=True))
    with op.batch_alter_table("fleets") as batch:
        batch.add_column(sa.Column("merge_gate", sa.Text, nullable=True))


def downgrade() -> None:
    raise NotImplementedError("cafleet revisions are forward-only")
