"""placement_server

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-03 00:00:00

Which tmux server and process a placement's pane is (docs/storage.md §3.11): a server started
again on the same socket hands out the same window and pane ids, so the socket, session and
window a placement records cannot tell its pane from a pane of the new server. Three nullable
INTEGER columns on `member_placements`; NULL means "not recorded" (every row written before this
revision):

- `mux_server_pid`: the tmux server's pid (`#{pid}`);
- `mux_server_start`: the tmux server's start time, epoch seconds (`#{start_time}`);
- `mux_pane_pid`: the process tmux started in the pane (`#{pane_pid}`), for a pane cafleet
  spawned (NULL for the root Director's pane, which cafleet did not spawn).

Three ADD COLUMNs (through `op.batch_alter_table`, storage.md §3.1); no row is rewritten.

A landed revision file is never edited (storage.md §3.1). Its recorded shape is
SHAPES["0008"] in cafleet/db/shapes.py and its line is in tests/revision_manifest.txt.
"""

from __future__ import annotations

import sqlalchemy as sa

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("member_placements") as batch:
        batch.add_column(sa.Column("mux_server_pid", sa.Integer, nullable=True))
        batch.add_column(sa.Column("mux_server_start", sa.Integer, nullable=True))
        batch.add_column(sa.Column("mux_pane_pid", sa.Integer, nullable=True))


def downgrade() -> None:
    raise NotImplementedError("cafleet revisions are forward-only")
