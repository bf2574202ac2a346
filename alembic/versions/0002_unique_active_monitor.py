"""unique_active_monitor

Revision ID: 0002
Revises: 0001
Create Date: 2025-01-01 00:00:01

At most one active monitor per fleet: a partial unique index (storage.md §3.3). Runs inside the
migration transaction, which already holds the write locks, so no writer can add a conflicting
row between the checks and the DDL. A landed revision file is never edited.
"""

from __future__ import annotations

import sqlalchemy as sa

from alembic import op
from cafleet.db.errors import MigrationRefused

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    bind = op.get_bind()

    malformed = [
        row[0]
        for row in bind.exec_driver_sql(
            "SELECT member_id FROM members WHERE status = 'active' "
            "AND NOT json_valid(member_card_json) ORDER BY member_id"
        )
    ]
    if malformed:
        raise MigrationRefused(
            "active members with malformed member_card_json prevent migration: members "
            + ", ".join(str(m) for m in malformed)
            + "; repair or deregister them, then run 'cafleet setup' again"
        )

    by_fleet: dict[int, list[int]] = {}
    for fleet_id, member_id in bind.exec_driver_sql(
        "SELECT fleet_id, member_id FROM members WHERE status = 'active' "
        "AND CASE WHEN json_valid(member_card_json) "
        "THEN json_extract(member_card_json, '$.cafleet.kind') END = 'monitor' "
        "ORDER BY fleet_id, member_id"
    ):
        by_fleet.setdefault(fleet_id, []).append(member_id)
    duplicates = [(f, m) for f, m in sorted(by_fleet.items()) if len(m) >= 2]
    if duplicates:
        raise MigrationRefused(
            "active monitor duplicates prevent migration: "
            + "; ".join(
                f"fleet {f}: members " + ", ".join(str(i) for i in m) for f, m in duplicates
            )
            + "; deregister all but one active monitor per fleet, then run 'cafleet setup' again"
        )

    op.create_index(
        "idx_members_one_active_monitor_per_fleet",
        "members",
        ["fleet_id"],
        unique=True,
        sqlite_where=sa.text(
            "status = 'active' AND json_extract(member_card_json, '$.cafleet.kind') = 'monitor'"
        ),
    )


def downgrade() -> None:
    raise NotImplementedError("cafleet revisions are forward-only")
