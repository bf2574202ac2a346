"""The phone answer page's workflow (docs/cli.md §2.35): an answer link's token opens one
member's prompt, once, for an hour, and only while the screen still shows that prompt (its
digest). The page answers through `cafleet.workflows.answering`, the path `member answer` and the
WebUI take, so the digest is checked again under the pane lock before a key is pressed."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from cafleet import broker
from cafleet.db.timefmt import parse_ts, utcnow
from cafleet.errors import CafleetError
from cafleet.monitor.answerlinks import token_hash
from cafleet.workflows.answering import Answered, Showing, showing
from cafleet.workflows.answering import answer as answer_prompt

if TYPE_CHECKING:
    from cafleet.config import Settings
    from cafleet.db.runtime import Connection
    from cafleet.records import Member


class Refused(NamedTuple):
    """The link cannot answer: the page's HTTP status and what it says."""

    status: int
    text: str


class LinkView(NamedTuple):
    member: Member
    showing: Showing


def _check(conn: Connection, token: str) -> tuple[str, LinkView] | Refused:
    hashed = token_hash(token)
    link = broker.answer_link(conn, hashed) if 16 <= len(token) <= 100 else None
    if link is None:
        return Refused(404, "This answer link is not valid.")
    if link.used_at is not None:
        return Refused(410, "This answer link was already used: it works once.")
    expires = parse_ts(link.expires_at)
    if expires is None or utcnow() >= expires:
        return Refused(410, "This answer link has expired (links last one hour).")
    member = broker.get_member(conn, link.member_id)
    try:
        now = showing(conn, link.member_id)
    except CafleetError as exc:
        return Refused(409, f"The member's screen cannot be read now: {exc}")
    if now.prompt is None or now.prompt.digest != link.prompt_digest:
        return Refused(
            409,
            f"The screen of member {member.member_id} ({member.name}) no longer shows this "
            "prompt: it was answered elsewhere or changed.",
        )
    return hashed, LinkView(member, now)


def open_link(conn: Connection, token: str) -> LinkView | Refused:
    """What the page shows; refuses a link that is unknown, used, expired or stale."""
    checked = _check(conn, token)
    return checked if isinstance(checked, Refused) else checked[1]


def use_link(conn: Connection, settings: Settings, token: str, choice: str) -> Answered | Refused:
    """Answer with ``choice`` and spend the link (it works once, even when the answer then
    fails: the page says why)."""
    checked = _check(conn, token)
    if isinstance(checked, Refused):
        return checked
    hashed, view = checked
    if not broker.use_answer_link(conn, hashed):
        return Refused(410, "This answer link was already used: it works once.")
    assert view.showing.prompt is not None
    try:
        return answer_prompt(
            conn, settings, view.member.member_id, choice, prompt_id=view.showing.prompt.digest
        )
    except CafleetError as exc:
        return Refused(409, str(exc))


__all__ = ["LinkView", "Refused", "open_link", "use_link"]
