"""Answer links (docs/cli.md §2.35): a single-use token for the phone answer page, bound to one
member's prompt by its digest and expiring after `LINK_TTL`. Only the token's SHA-256 is stored,
so the database never holds a working link; the server token is never in one."""

from __future__ import annotations

import secrets
from datetime import timedelta
from typing import TYPE_CHECKING

from cafleet import broker
from cafleet.db.timefmt import utcnow
from cafleet.digest import sha256

if TYPE_CHECKING:
    from cafleet.db.runtime import Connection

LINK_TTL = timedelta(hours=1)


def token_hash(token: str) -> str:
    return str(sha256(token.encode()).hexdigest())


def new_link(conn: Connection, base: str, member_id: int, digest: str) -> str:
    """Store a new link for ``member_id``'s prompt ``digest``; returns its URL under ``base``."""
    token = secrets.token_urlsafe(24)
    now = utcnow()
    broker.create_answer_link(
        conn,
        token_hash=token_hash(token),
        member_id=member_id,
        digest=digest,
        expires_at=now + LINK_TTL,
        now=now,
    )
    return f"{base.rstrip('/')}/answer/{token}"


__all__ = ["LINK_TTL", "new_link", "token_hash"]
