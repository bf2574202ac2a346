"""notify_budgets

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-04 00:00:00

Notifications and budgets (docs/storage.md §3.14). `notify_channels` holds a fleet's channels
(kind, target URL, the events it takes, its failure count); `notify_outbox` every event recorded
for a channel, one row per (channel, event key), sent by the monitor loop with retries;
`answer_links` the single-use tokens of the phone answer page, bound to one prompt's digest;
`member_budgets` and `fleet_budgets` the ceilings (tokens, micro-dollars) and a member's pause.

Five CREATE TABLEs and their indexes; no existing row is touched.

A landed revision file is never edited (storage.md §3.1). Its recorded shape is
SHAPES["0011"] in cafleet/db/shapes.py and its line is in tests/revision_manifest.txt.
"""

from __future__ import annotations

import sqlalchemy as sa

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "notify_channels",
        sa.Column("channel_id", sa.Integer, primary_key=True),
        sa.Column(
            "fleet_id",
            sa.Integer,
            sa.ForeignKey("fleets.fleet_id", ondelete="RESTRICT"),
            nullable=False,
        ),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("target", sa.Text, nullable=True),
        sa.Column("events", sa.Text, nullable=True),
        sa.Column("answer_base", sa.Text, nullable=True),
        sa.Column("created_at", sa.Text, nullable=False),
        sa.Column("failures", sa.Integer, nullable=False),
        sa.Column("failing_since", sa.Text, nullable=True),
        sa.Column("last_error", sa.Text, nullable=True),
        sqlite_autoincrement=True,
    )
    op.create_index("idx_notify_channels_fleet", "notify_channels", ["fleet_id"])
    op.create_table(
        "notify_outbox",
        sa.Column("outbox_id", sa.Integer, primary_key=True),
        sa.Column(
            "channel_id",
            sa.Integer,
            sa.ForeignKey("notify_channels.channel_id", ondelete="RESTRICT"),
            nullable=False,
        ),
        sa.Column("event_key", sa.Text, nullable=False),
        sa.Column("event", sa.Text, nullable=False),
        sa.Column("payload_json", sa.Text, nullable=False),
        sa.Column("created_at", sa.Text, nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("next_at", sa.Text, nullable=True),
        sa.Column("sent_at", sa.Text, nullable=True),
        sa.Column("last_error", sa.Text, nullable=True),
        sqlite_autoincrement=True,
    )
    op.create_index(
        "idx_notify_outbox_key", "notify_outbox", ["channel_id", "event_key"], unique=True
    )
    op.create_index("idx_notify_outbox_due", "notify_outbox", ["next_at"])
    op.create_table(
        "answer_links",
        sa.Column("token_hash", sa.Text, primary_key=True),
        sa.Column(
            "member_id",
            sa.Integer,
            sa.ForeignKey("members.member_id", ondelete="RESTRICT"),
            nullable=False,
        ),
        sa.Column("prompt_digest", sa.Text, nullable=False),
        sa.Column("created_at", sa.Text, nullable=False),
        sa.Column("expires_at", sa.Text, nullable=False),
        sa.Column("used_at", sa.Text, nullable=True),
    )
    op.create_table(
        "member_budgets",
        sa.Column(
            "member_id",
            sa.Integer,
            sa.ForeignKey("members.member_id", ondelete="RESTRICT"),
            primary_key=True,
        ),
        sa.Column("tokens", sa.Integer, nullable=True),
        sa.Column("usd_micros", sa.Integer, nullable=True),
        sa.Column("paused_at", sa.Text, nullable=True),
        sa.Column("paused_reason", sa.Text, nullable=True),
    )
    op.create_table(
        "fleet_budgets",
        sa.Column(
            "fleet_id",
            sa.Integer,
            sa.ForeignKey("fleets.fleet_id", ondelete="RESTRICT"),
            primary_key=True,
        ),
        sa.Column("tokens", sa.Integer, nullable=True),
        sa.Column("usd_micros", sa.Integer, nullable=True),
    )


def downgrade() -> None:
    raise NotImplementedError("cafleet revisions are forward-only")
