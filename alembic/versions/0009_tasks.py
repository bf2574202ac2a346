"""tasks

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-03 00:00:00

Tasks (docs/storage.md §3.11): a fleet's work as rows. `tasks` holds each task (title, body,
creator, assignee, state, the blocked reason or the result, its times); `task_deps` its
dependencies (`--after`, a DAG); `task_events` every state it entered and when, for the time
spent in each. `messages` gains `task_id` (the task a message is about) and
`reply_to_message_id` (the message it answers: a thread). Both are NULL on every existing row.

Three CREATE TABLEs, two ADD COLUMNs (through `op.batch_alter_table`, storage.md §3.1) and
their indexes; no row is rewritten.

A landed revision file is never edited (storage.md §3.1). Its recorded shape is
SHAPES["0009"] in cafleet/db/shapes.py and its line is in tests/revision_manifest.txt.
"""

from __future__ import annotations

import sqlalchemy as sa

from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tasks",
        sa.Column("task_id", sa.Integer, primary_key=True),
        sa.Column(
            "fleet_id",
            sa.Integer,
            sa.ForeignKey("fleets.fleet_id", ondelete="RESTRICT"),
            nullable=False,
        ),
        sa.Column("title", sa.Text, nullable=False),
        sa.Column("body", sa.Text, nullable=False),
        sa.Column("state", sa.Text, nullable=False),
        sa.Column(
            "creator_member_id",
            sa.Integer,
            sa.ForeignKey("members.member_id", ondelete="RESTRICT"),
            nullable=True,
        ),
        sa.Column(
            "assignee_member_id",
            sa.Integer,
            sa.ForeignKey("members.member_id", ondelete="RESTRICT"),
            nullable=True,
        ),
        sa.Column("reason", sa.Text, nullable=True),
        sa.Column("result", sa.Text, nullable=True),
        sa.Column("created_at", sa.Text, nullable=False),
        sa.Column("started_at", sa.Text, nullable=True),
        sa.Column("finished_at", sa.Text, nullable=True),
        sa.Column("state_since", sa.Text, nullable=False),
        sqlite_autoincrement=True,
    )
    op.create_index("idx_tasks_fleet_state", "tasks", ["fleet_id", "state"])
    op.create_index("idx_tasks_assignee_state", "tasks", ["assignee_member_id", "state"])
    op.create_table(
        "task_deps",
        sa.Column(
            "task_id",
            sa.Integer,
            sa.ForeignKey("tasks.task_id", ondelete="RESTRICT"),
            nullable=False,
        ),
        sa.Column(
            "after_task_id",
            sa.Integer,
            sa.ForeignKey("tasks.task_id", ondelete="RESTRICT"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("task_id", "after_task_id"),
    )
    op.create_index("idx_task_deps_after", "task_deps", ["after_task_id"])
    op.create_table(
        "task_events",
        sa.Column("event_id", sa.Integer, primary_key=True),
        sa.Column(
            "task_id",
            sa.Integer,
            sa.ForeignKey("tasks.task_id", ondelete="RESTRICT"),
            nullable=False,
        ),
        sa.Column("state", sa.Text, nullable=False),
        sa.Column("at", sa.Text, nullable=False),
        sa.Column("member_id", sa.Integer, nullable=True),
        sqlite_autoincrement=True,
    )
    op.create_index("idx_task_events_task", "task_events", ["task_id", "event_id"])
    with op.batch_alter_table("messages") as batch:
        batch.add_column(sa.Column("task_id", sa.Integer, nullable=True))
        batch.add_column(sa.Column("reply_to_message_id", sa.Integer, nullable=True))
    op.create_index("idx_messages_task", "messages", ["task_id", "message_id"])
    op.create_index("idx_messages_reply_to", "messages", ["reply_to_message_id"])


def downgrade() -> None:
    raise NotImplementedError("cafleet revisions are forward-only")
