"""Head schema as SQLAlchemy Core MetaData (docs/storage.md §2.8).

This MetaData builds queries only. It never creates tables: the Alembic chain alone defines
what a database looks like, and `metadata.create_all` is forbidden everywhere.
"""

from __future__ import annotations

from sqlalchemy import (
    Column,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    Table,
    Text,
    text,
)

from cafleet.db.predicates import (  # re-exported: docs/storage.md §2.8 names them here
    ACTIVE_MONITOR_PREDICATE,
    APPLICATION_ID,
    CLIENT_TOKEN_PREDICATE,
    PENDING_NOTIFICATION_PREDICATE,
)

__all__ = [
    "ACTIVE_MONITOR_PREDICATE",
    "APPLICATION_ID",
    "CLIENT_TOKEN_PREDICATE",
    "PENDING_NOTIFICATION_PREDICATE",
    "answer_links",
    "asset_installs",
    "fleet_budgets",
    "fleets",
    "host_loops",
    "member_budgets",
    "member_placements",
    "member_spawns",
    "members",
    "messages",
    "metadata",
    "monitor_runtime",
    "notify_channels",
    "notify_outbox",
    "task_deps",
    "task_events",
    "tasks",
]

metadata = MetaData()

fleets = Table(
    "fleets",
    metadata,
    Column("fleet_id", Integer, primary_key=True),
    Column("name", Text, nullable=True),
    Column("created_at", Text, nullable=False),
    Column("deleted_at", Text, nullable=True),
    Column(
        "director_member_id",
        Integer,
        ForeignKey("members.member_id", ondelete="RESTRICT", use_alter=True),
        nullable=True,
    ),
    # Revision 0005: the fleet's defaults for new members (JSON object; NULL: none).
    Column("member_defaults_json", Text, nullable=True),
    # Revision 0012: the gate command `task merge` runs (docs/cli.md §2.37).
    Column("merge_gate", Text, nullable=True),
    sqlite_autoincrement=True,
)

members = Table(
    "members",
    metadata,
    Column("member_id", Integer, primary_key=True),
    Column("fleet_id", Integer, ForeignKey("fleets.fleet_id", ondelete="RESTRICT"), nullable=False),
    Column("name", Text, nullable=False),
    Column("description", Text, nullable=False),
    Column("status", Text, nullable=False),
    Column("registered_at", Text, nullable=False),
    Column("deregistered_at", Text, nullable=True),
    Column("member_card_json", Text, nullable=False),
    # Revision 0013: the state the member's last hook reported, when, its text and its event
    # (NULL: no hook has reported).
    Column("hook_state", Text, nullable=True),
    Column("hook_at", Text, nullable=True),
    Column("hook_text", Text, nullable=True),
    Column("hook_event", Text, nullable=True),
    Index("idx_members_fleet_status", "fleet_id", "status"),
    Index(
        "idx_members_one_active_monitor_per_fleet",
        "fleet_id",
        unique=True,
        sqlite_where=text(ACTIVE_MONITOR_PREDICATE),
    ),
    sqlite_autoincrement=True,
)

member_placements = Table(
    "member_placements",
    metadata,
    Column(
        "member_id",
        Integer,
        ForeignKey("members.member_id", ondelete="CASCADE"),
        primary_key=True,
        autoincrement=False,
    ),
    Column("mux_session", Text, nullable=False),
    Column("mux_window_id", Text, nullable=False),
    Column("mux_pane_id", Text, nullable=True),
    Column("backend", Text, nullable=False, server_default="tmux"),
    Column("coding_agent", Text, nullable=False),
    Column("created_at", Text, nullable=False),
    Column("lost_at", Text, nullable=True),
    # Revision 0004: the socket path of the tmux server the pane was made on (NULL: unknown).
    Column("mux_socket", Text, nullable=True),
    # Revision 0005: the host the pane lives on (NULL: this host, before multi-host fleets).
    Column("host_id", Text, nullable=True),
    # Revision 0008: the tmux server the pane is on (pid, start time) and the pane's own
    # process (NULL: not recorded; the root Director's pane records no process).
    Column("mux_server_pid", Integer, nullable=True),
    Column("mux_server_start", Integer, nullable=True),
    Column("mux_pane_pid", Integer, nullable=True),
)

member_spawns = Table(
    "member_spawns",
    metadata,
    Column(
        "member_id",
        Integer,
        ForeignKey("members.member_id", ondelete="CASCADE"),
        primary_key=True,
        autoincrement=False,
    ),
    Column("prompt", Text, nullable=True),
    Column("model", Text, nullable=True),
    Column("effort", Text, nullable=True),
    # Revision 0005: permission profile, worktree (JSON) and the agent's own session id.
    Column("permissions", Text, nullable=True),
    Column("worktree_json", Text, nullable=True),
    Column("agent_session_id", Text, nullable=True),
)

messages = Table(
    "messages",
    metadata,
    Column("message_id", Integer, primary_key=True),
    Column(
        "owner_member_id",
        Integer,
        ForeignKey("members.member_id", ondelete="RESTRICT"),
        nullable=False,
    ),
    Column("from_member_id", Integer, nullable=False),
    Column("to_member_id", Integer, nullable=True),
    Column("type", Text, nullable=False),
    Column("created_at", Text, nullable=False),
    Column("status_state", Text, nullable=False),
    Column("status_timestamp", Text, nullable=False),
    Column("origin_message_id", Integer, nullable=True),
    Column("text", Text, nullable=False),
    Column("notified_at", Text, nullable=True),
    # Revision 0007: the token of the send or broadcast that stored the row (NULL: none).
    Column("client_token", Text, nullable=True),
    # Revision 0009: the task a message is about and the message it answers (NULL: none).
    Column("task_id", Integer, nullable=True),
    Column("reply_to_message_id", Integer, nullable=True),
    # Revision 0013: when the recipient's hook reported the notification line in its context.
    Column("received_at", Text, nullable=True),
    Index("idx_messages_to_member_status_ts", "to_member_id", "status_timestamp"),
    Index("idx_messages_from_member_status_ts", "from_member_id", "status_timestamp"),
    Index(
        "idx_messages_owner_type_state_ts",
        "owner_member_id",
        "type",
        "status_state",
        "status_timestamp",
    ),
    Index("idx_messages_owner_type_created", "owner_member_id", "type", "created_at"),
    Index("idx_messages_from_created", "from_member_id", "created_at"),
    Index(
        "idx_messages_pending_notification",
        "owner_member_id",
        "created_at",
        "message_id",
        sqlite_where=text(PENDING_NOTIFICATION_PREDICATE),
    ),
    Index(
        "idx_messages_client_token",
        "from_member_id",
        "client_token",
        unique=True,
        sqlite_where=text(CLIENT_TOKEN_PREDICATE),
    ),
    Index("idx_messages_task", "task_id", "message_id"),
    Index("idx_messages_reply_to", "reply_to_message_id"),
    sqlite_autoincrement=True,
)

monitor_runtime = Table(
    "monitor_runtime",
    metadata,
    Column(
        "fleet_id",
        Integer,
        ForeignKey("fleets.fleet_id", ondelete="RESTRICT"),
        primary_key=True,
        autoincrement=False,
    ),
    Column("pid", Integer, nullable=True),
    Column("started_at", Text, nullable=True),
    Column("last_tick_at", Text, nullable=True),
    Column("tick_seconds", Integer, nullable=False, server_default=text("5")),
    Column("last_wake_at", Text, nullable=True),
    Column("wake_interval_seconds", Integer, nullable=True),
    Column("wake_requested_at", Text, nullable=True),
)

asset_installs = Table(
    "asset_installs",
    metadata,
    Column("coding_agent", Text, nullable=False),
    Column("path", Text, nullable=False),
    Column("cafleet_version", Text, nullable=False),
    Column("installed_at", Text, nullable=False),
    PrimaryKeyConstraint("coding_agent", "path"),
)

# Revision 0006: each host's delivery loop, its slot and heartbeat (docs/storage.md §2.11).
host_loops = Table(
    "host_loops",
    metadata,
    Column("host_id", Text, primary_key=True),
    Column("pid", Integer, nullable=True),
    Column("started_at", Text, nullable=True),
    Column("last_tick_at", Text, nullable=True),
    Column("tick_seconds", Integer, nullable=False, server_default=text("5")),
)

# Revision 0009: tasks, their dependencies and the states each entered (docs/storage.md §2.12).
tasks = Table(
    "tasks",
    metadata,
    Column("task_id", Integer, primary_key=True),
    Column("fleet_id", Integer, ForeignKey("fleets.fleet_id", ondelete="RESTRICT"), nullable=False),
    Column("title", Text, nullable=False),
    Column("body", Text, nullable=False),
    Column("state", Text, nullable=False),
    Column(
        "creator_member_id",
        Integer,
        ForeignKey("members.member_id", ondelete="RESTRICT"),
        nullable=True,
    ),
    Column(
        "assignee_member_id",
        Integer,
        ForeignKey("members.member_id", ondelete="RESTRICT"),
        nullable=True,
    ),
    Column("reason", Text, nullable=True),
    Column("result", Text, nullable=True),
    Column("created_at", Text, nullable=False),
    Column("started_at", Text, nullable=True),
    Column("finished_at", Text, nullable=True),
    Column("state_since", Text, nullable=False),
    # Revision 0012: the assignee's worktree branch at `task done`, and the merge (§3.15).
    Column("git_repo", Text, nullable=True),
    Column("git_branch", Text, nullable=True),
    Column("git_base", Text, nullable=True),
    Column("git_head", Text, nullable=True),
    Column("merge_commit", Text, nullable=True),
    Index("idx_tasks_fleet_state", "fleet_id", "state"),
    Index("idx_tasks_assignee_state", "assignee_member_id", "state"),
    sqlite_autoincrement=True,
)

task_deps = Table(
    "task_deps",
    metadata,
    Column("task_id", Integer, ForeignKey("tasks.task_id", ondelete="RESTRICT"), nullable=False),
    Column(
        "after_task_id", Integer, ForeignKey("tasks.task_id", ondelete="RESTRICT"), nullable=False
    ),
    PrimaryKeyConstraint("task_id", "after_task_id"),
    Index("idx_task_deps_after", "after_task_id"),
)

task_events = Table(
    "task_events",
    metadata,
    Column("event_id", Integer, primary_key=True),
    Column("task_id", Integer, ForeignKey("tasks.task_id", ondelete="RESTRICT"), nullable=False),
    Column("state", Text, nullable=False),
    Column("at", Text, nullable=False),
    Column("member_id", Integer, nullable=True),
    Index("idx_task_events_task", "task_id", "event_id"),
    sqlite_autoincrement=True,
)

# Revision 0011 (docs/storage.md §3.14): notification channels, their outbox, answer links and
# budgets.
notify_channels = Table(
    "notify_channels",
    metadata,
    Column("channel_id", Integer, primary_key=True),
    Column("fleet_id", Integer, ForeignKey("fleets.fleet_id", ondelete="RESTRICT"), nullable=False),
    Column("kind", Text, nullable=False),
    Column("target", Text, nullable=True),
    Column("events", Text, nullable=True),
    Column("answer_base", Text, nullable=True),
    Column("created_at", Text, nullable=False),
    Column("failures", Integer, nullable=False),
    Column("failing_since", Text, nullable=True),
    Column("last_error", Text, nullable=True),
    Index("idx_notify_channels_fleet", "fleet_id"),
    sqlite_autoincrement=True,
)

notify_outbox = Table(
    "notify_outbox",
    metadata,
    Column("outbox_id", Integer, primary_key=True),
    Column(
        "channel_id",
        Integer,
        ForeignKey("notify_channels.channel_id", ondelete="RESTRICT"),
        nullable=False,
    ),
    Column("event_key", Text, nullable=False),
    Column("event", Text, nullable=False),
    Column("payload_json", Text, nullable=False),
    Column("created_at", Text, nullable=False),
    Column("attempts", Integer, nullable=False),
    Column("next_at", Text, nullable=True),
    Column("sent_at", Text, nullable=True),
    Column("last_error", Text, nullable=True),
    Index("idx_notify_outbox_key", "channel_id", "event_key", unique=True),
    Index("idx_notify_outbox_due", "next_at"),
    sqlite_autoincrement=True,
)

answer_links = Table(
    "answer_links",
    metadata,
    Column("token_hash", Text, primary_key=True),
    Column(
        "member_id", Integer, ForeignKey("members.member_id", ondelete="RESTRICT"), nullable=False
    ),
    Column("prompt_digest", Text, nullable=False),
    Column("created_at", Text, nullable=False),
    Column("expires_at", Text, nullable=False),
    Column("used_at", Text, nullable=True),
)

member_budgets = Table(
    "member_budgets",
    metadata,
    Column(
        "member_id",
        Integer,
        ForeignKey("members.member_id", ondelete="RESTRICT"),
        primary_key=True,
        autoincrement=False,
    ),
    Column("tokens", Integer, nullable=True),
    Column("usd_micros", Integer, nullable=True),
    Column("paused_at", Text, nullable=True),
    Column("paused_reason", Text, nullable=True),
)

fleet_budgets = Table(
    "fleet_budgets",
    metadata,
    Column(
        "fleet_id",
        Integer,
        ForeignKey("fleets.fleet_id", ondelete="RESTRICT"),
        primary_key=True,
        autoincrement=False,
    ),
    Column("tokens", Integer, nullable=True),
    Column("usd_micros", Integer, nullable=True),
)
