"""search

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-03 00:00:00

Full-text search over message bodies and tasks' titles, bodies and results (docs/storage.md
§3.13). Derived data only: no recorded table changes, so SHAPES["0010"] equals 0009's.

- SQLite: two FTS5 tables, `search_messages` (rowid = message_id) and `search_tasks` (rowid =
  task_id, with the fleet as an UNINDEXED column), filled from the existing rows here and kept
  in step by triggers, so an index entry is written in the transaction of its row. A broadcast
  is indexed once, as its first delivery. The triggers read no other table: a trigger naming
  `members` would make a later rebuild of `members` (`op.batch_alter_table`) fail.
- PostgreSQL: GIN expression indexes on `to_tsvector('simple', ...)` of the same columns, which
  the server maintains with each row.

A landed revision file is never edited (storage.md §3.1). Its recorded shape is
SHAPES["0010"] in cafleet/db/shapes.py and its line is in tests/revision_manifest.txt.
"""

from __future__ import annotations

from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

# A message the index holds: a unicast send, or a broadcast's first delivery (its summary's text
# is cafleet's own line; the other deliveries repeat the first). A broadcast's deliveries share
# sender, stamp and origin (`idx_messages_from_created` finds them).
_INDEXED_MESSAGE = (
    "{m}.type = 'unicast' AND ({m}.origin_message_id IS NULL OR NOT EXISTS ("
    "SELECT 1 FROM messages AS o WHERE o.from_member_id = {m}.from_member_id "
    "AND o.created_at = {m}.created_at AND o.origin_message_id = {m}.origin_message_id "
    "AND o.type = 'unicast' AND o.message_id < {m}.message_id))"
)

SQLITE = (
    "CREATE VIRTUAL TABLE search_messages USING fts5(body)",
    "CREATE VIRTUAL TABLE search_tasks USING fts5(title, body, result, fleet_id UNINDEXED)",
    "INSERT INTO search_messages (rowid, body) "
    f"SELECT m.message_id, m.text FROM messages AS m WHERE {_INDEXED_MESSAGE.format(m='m')}",
    "INSERT INTO search_tasks (rowid, title, body, result, fleet_id) "
    "SELECT task_id, title, body, result, fleet_id FROM tasks",
    "CREATE TRIGGER search_messages_insert AFTER INSERT ON messages "
    f"WHEN {_INDEXED_MESSAGE.format(m='new')} BEGIN "
    "INSERT INTO search_messages (rowid, body) VALUES (new.message_id, new.text); END",
    "CREATE TRIGGER search_messages_update AFTER UPDATE OF text ON messages "
    "WHEN new.text IS NOT old.text BEGIN "
    "UPDATE search_messages SET body = new.text WHERE rowid = new.message_id; END",
    "CREATE TRIGGER search_messages_delete AFTER DELETE ON messages BEGIN "
    "DELETE FROM search_messages WHERE rowid = old.message_id; END",
    "CREATE TRIGGER search_tasks_insert AFTER INSERT ON tasks BEGIN "
    "INSERT INTO search_tasks (rowid, title, body, result, fleet_id) "
    "VALUES (new.task_id, new.title, new.body, new.result, new.fleet_id); END",
    "CREATE TRIGGER search_tasks_update AFTER UPDATE OF title, body, result ON tasks "
    "WHEN new.title IS NOT old.title OR new.body IS NOT old.body "
    "OR new.result IS NOT old.result BEGIN "
    "UPDATE search_tasks SET title = new.title, body = new.body, result = new.result "
    "WHERE rowid = new.task_id; END",
    "CREATE TRIGGER search_tasks_delete AFTER DELETE ON tasks BEGIN "
    "DELETE FROM search_tasks WHERE rowid = old.task_id; END",
)

POSTGRESQL = (
    "CREATE INDEX search_messages ON messages USING gin (to_tsvector('simple', text))",
    "CREATE INDEX search_tasks ON tasks USING gin "
    "(to_tsvector('simple', title || ' ' || body || ' ' || coalesce(result, '')))",
)


def upgrade() -> None:
    statements = POSTGRESQL if op.get_bind().dialect.name == "postgresql" else SQLITE
    for statement in statements:
        op.execute(statement)


def downgrade() -> None:
    raise NotImplementedError("cafleet revisions are forward-only")
