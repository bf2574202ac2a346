"""message_tokens

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-03 00:00:00

A send's client token (docs/storage.md §3.10): `messages.client_token` holds the token of the
`message send` or `broadcast` that stored the row (a broadcast's on its summary), generated per
invocation or given with `--key`. A partial unique index on (from_member_id, client_token)
makes one sender's token store at most one message, and finds it again after a lost
connection. Existing rows keep NULL (no token), which the index leaves out.

One ADD COLUMN (through `op.batch_alter_table`, storage.md §3.1) and one index; no row is
rewritten.

A landed revision file is never edited (storage.md §3.1). Its recorded shape is
SHAPES["0007"] in cafleet/db/shapes.py and its line is in tests/revision_manifest.txt.
"""

from __future__ import annotations

import sqlalchemy as sa

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("messages") as batch:
        batch.add_column(sa.Column("client_token", sa.Text, nullable=True))
    op.create_index(
        "idx_messages_client_token",
        "messages",
        ["from_member_id", "client_token"],
        unique=True,
        sqlite_where=sa.text("client_token IS NOT NULL"),
    )


def downgrade() -> None:
    raise NotImplementedError("cafleet revisions are forward-only")
