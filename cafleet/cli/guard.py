"""The schema guard's home is `cafleet.db.guard` (the WebUI server opens its connections through
it too); the commands import it from here."""

from cafleet.db.guard import (
    SCHEMA_VERSION_KEY,
    GuardRefused,
    guard_text,
    open_validated_connection,
    recheck_schema,
)

__all__ = [
    "SCHEMA_VERSION_KEY",
    "GuardRefused",
    "guard_text",
    "open_validated_connection",
    "recheck_schema",
]
