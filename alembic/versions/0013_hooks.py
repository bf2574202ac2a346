"""hooks

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-04 00:00:00

What the agents' own hooks report (docs/storage.md §3.16); NULL everywhere means "no hook has
said so" (or written before this revision):

- `messages.received_at`: when the recipient's hook reported a prompt holding the message's
  notification line entering its context (set only by `cafleet hook`, never from the screen);
- `members.hook_state`, `members.hook_at`, `members.hook_text`, `members.hook_event`: the state
  the member's last hook reported (`working`, `ready`, `awaiting_user`), when, its text, and the
  event that reported it.

Five ADD COLUMNs (through `op.batch_alter_table`, storage.md §3.1); no row is rewritten.

A landed revision file is never edited (storage.md §3.1). Its recorded shape is
SHAPES["0013"] in cafleet/db/shapes.py and its line is in tests/revision_manifest.txt.
"""

from __future__ import annotations

import sqlalchemy as sa

from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("messages") as batch:
        batch.add_column(sa.Column("received_at", sa.Text, nullable=True))
    with op.batch_alter_table("members") as batch:
        batch.add_column(sa.Column("hook_state", sa.Text, nullable=True))
        batch.add_column(sa.Column("hook_at", sa.Text, nullable=True))
        batch.add_column(sa.Column("hook_text", sa.Text, nullable=True))
        batch.add_column(sa.Column("hook_event", sa.Text, nullable=True))


def downgrade() -> None:
    raise NotImplementedError("cafleet revisions are forward-only")
