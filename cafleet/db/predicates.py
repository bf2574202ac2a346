"""SQL predicate texts and the file identity, shared by the schema, the Alembic-independent
diagnosis and the repository queries.

Kept apart from `cafleet.db.schema` so the repository's hot paths do not build the whole head
MetaData (about 15 ms of start-up) just to read two strings.
"""

APPLICATION_ID = 1128351288  # 0x43414638, ASCII "CAF8"

# The partial unique index's predicate; the active-monitor lookup uses this text literally.
ACTIVE_MONITOR_PREDICATE = (
    "status = 'active' AND json_extract(member_card_json, '$.cafleet.kind') = 'monitor'"
)
# The pending-notification index's predicate; a partial index is usable only when a query
# repeats its terms literally.
PENDING_NOTIFICATION_PREDICATE = (
    "notified_at IS NULL AND status_state = 'input_required' AND type = 'unicast'"
)
# The client-token index's predicate (revision 0007): rows without a token stay out of it.
CLIENT_TOKEN_PREDICATE = "client_token IS NOT NULL"
