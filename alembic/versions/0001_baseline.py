"""baseline

Revision ID: 0001
Revises:
Create Date: 2025-01-01 00:00:00

The seed-000 baseline: six application tables, seven indexes and the cafleet identity
(storage.md §3.2). A landed revision file is never edited.
"""

from __future__ import annotations

import sqlalchemy as sa

from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    # fleets -> members is a forward reference; SQLite checks foreign keys when rows change.
    op.create_table(
        "fleets",
        sa.Column("fleet_id", sa.Integer, primary_key=True),
        sa.Column("name", sa.Text, nullable=True),
        sa.Column("created_at", sa.Text, nullable=False),
        sa.Column("deleted_at", sa.Text, nullable=True),
        sa.Column("director_member_id", sa.Integer, nullable=True),
        sa.ForeignKeyConstraint(["director_member_id"], ["members.member_id"], ondelete="RESTRICT"),
        sqlite_autoincrement=True,
    )

    op.create_table(
        "members",
        sa.Column("member_id", sa.Integer, primary_key=True),
        sa.Column("fleet_id", sa.Integer, nullable=False),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("description", sa.Text, nullable=False),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("registered_at", sa.Text, nullable=False),
        sa.Column("deregistered_at", sa.Text, nullable=True),
        sa.Column("member_card_json", sa.Text, nullable=False),
        sa.ForeignKeyConstraint(["fleet_id"], ["fleets.fleet_id"], ondelete="RESTRICT"),
        sqlite_autoincrement=True,
    )
    op.create_index("idx_members_fleet_status", "members", ["fleet_id", "status"])

    op.create_table(
        "member_placements",
        sa.Column("member_id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("mux_session", sa.Text, nullable=False),
        sa.Column("mux_window_id", sa.Text, nullable=False),
        sa.Column("mux_pane_id", sa.Text, nullable=True),
        sa.Column("backend", sa.Text, nullable=False, server_default="tmux"),
        sa.Column("coding_agent", sa.Text, nullable=False),
        sa.Column("created_at", sa.Text, nullable=False),
        sa.ForeignKeyConstraint(["member_id"], ["members.member_id"], ondelete="CASCADE"),
    )

    op.create_table(
        "messages",
        sa.Column("message_id", sa.Integer, primary_key=True),
        sa.Column("owner_member_id", sa.Integer, nullable=False),
        sa.Column("from_member_id", sa.Integer, nullable=False),
        sa.Column("to_member_id", sa.Integer, nullable=True),
        sa.Column("type", sa.Text, nullable=False),
        sa.Column("created_at", sa.Text, nullable=False),
        sa.Column("status_state", sa.Text, nullable=False),
        sa.Column("status_timestamp", sa.Text, nullable=False),
        sa.Column("origin_message_id", sa.Integer, nullable=True),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("notified_at", sa.Text, nullable=True),
        sa.ForeignKeyConstraint(["owner_member_id"], ["members.member_id"], ondelete="RESTRICT"),
        sqlite_autoincrement=True,
    )
    op.create_index(
        "idx_messages_to_member_status_ts", "messages", ["to_member_id", "status_timestamp"]
    )
    op.create_index(
        "idx_messages_from_member_status_ts", "messages", ["from_member_id", "status_timestamp"]
    )
    op.create_index(
        "idx_messages_owner_type_state_ts",
        "messages",
        ["owner_member_id", "type", "status_state", "status_timestamp"],
    )
    op.create_index(
        "idx_messages_owner_type_created", "messages", ["owner_member_id", "type", "created_at"]
    )
    op.create_index("idx_messages_from_created", "messages", ["from_member_id", "created_at"])
    op.create_index(
        "idx_messages_pending_notification",
        "messages",
        ["owner_member_id", "created_at", "message_id"],
        sqlite_where=sa.text(
            "notified_at IS NULL AND status_state = 'input_required' AND type = 'unicast'"
        ),
    )

    op.create_table(
        "monitor_runtime",
        sa.Column("fleet_id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("pid", sa.Integer, nullable=True),
        sa.Column("started_at", sa.Text, nullable=True),
        sa.Column("last_tick_at", sa.Text, nullable=True),
        sa.Column("tick_seconds", sa.Integer, nullable=False, server_default=sa.text("5")),
        sa.Column("last_wake_at", sa.Text, nullable=True),
        sa.Column("wake_interval_seconds", sa.Integer, nullable=True),
        sa.Column("wake_requested_at", sa.Text, nullable=True),
        sa.ForeignKeyConstraint(["fleet_id"], ["fleets.fleet_id"], ondelete="RESTRICT"),
    )
    op.create_table(
        "asset_installs",
        sa.Column("coding_agent", sa.Text, nullable=False),
        sa.Column("path", sa.Text, nullable=False),
        sa.Column("cafleet_version", sa.Text, nullable=False),
        sa.Column("installed_at", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("coding_agent", "path"),
    )

    # The identity stamp is part of the migration transaction: a rollback restores 0.
    op.execute("PRAGMA application_id = 1128351288")


def downgrade() -> None:
    raise NotImplementedError("cafleet revisions are forward-only")
