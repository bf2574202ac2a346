"""${message}

Revision ID: ${up_revision}
Revises: ${down_revision | comma,n}
Create Date: ${create_date}

A landed revision file is never edited (docs/storage.md §3.1). With this revision, also add:
  - its recorded shape to cafleet/db/shapes.py (REVISIONS, SHAPES[<rev>]);
  - its line to tests/revision_manifest.txt (sha256 of this file, \r\n normalised to \n).
Never import cafleet.db.schema here; write the literals you need into this file.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
${imports if imports else ""}

revision = ${repr(up_revision)}
down_revision = ${repr(down_revision)}
branch_labels = ${repr(branch_labels)}
depends_on = ${repr(depends_on)}


def upgrade() -> None:
    ${upgrades if upgrades else "pass"}


def downgrade() -> None:
    raise NotImplementedError("cafleet revisions are forward-only")
