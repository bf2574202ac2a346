"""The one timestamp format (docs/storage.md §2.6): fixed-width UTC text, lenient parsing."""

from __future__ import annotations

from datetime import UTC, datetime


def format_ts(moment: datetime) -> str:
    """`YYYY-MM-DDTHH:MM:SS.ffffff+00:00`, always 32 characters."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def now_ts() -> str:
    return format_ts(datetime.now(UTC))


def utcnow() -> datetime:
    return datetime.now(UTC)


def parse_ts(text: str | None) -> datetime | None:
    """Strip, fromisoformat, naive means UTC; any failure gives None."""
    if text is None:
        return None
    try:
        parsed = datetime.fromisoformat(text.strip())
    except (ValueError, TypeError):
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed
