"""The phone answer page's workflow (docs/webui.md §7): an answer link's token opens one
member's prompt, once, for an hour, and only while the screen still shows that prompt (its
digest). The page answers through `cafleet.workflows.answering`, the path `member answer` and the
WebUI take, so the digest is checked again under the pane lock before a key is pressed."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from cafleet import broker
from cafleet.db.timefmt import parse_ts, utcnow
from cafleet.errors import CafleetError
from cafleet.workflows.answering import Answered, Showing, showing
from cafleet.workflows.answering import answer as answer_prompt
from cafleet.workflows.errors import WorkflowError

if TYPE_CHECKING:
    from cafleet.config import Settings
    from cafleet.db.runtime import Connection
    from cafleet.records import Member


class LinkRefused(WorkflowError):
    """The link cannot answer: ``status`` is the page's HTTP status."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(text)
        self.status = status


class LinkView(NamedTuple):
    member: Member
    showing: Showing


def _check(conn: Connection, token: str) -> tuple[str, LinkView]:
    from cafleet.monitor.answerlinks import token_hash

    hashed = token_hash(token)
    link = broker.answer_link(conn, hashed) if 16 <= len(token) <= 100 else None
    if link is None:
        raise LinkRefused(404, "This answer link is not valid.")
    if link.used_at is not None:
        raise LinkRefused(410, "This answer link was already used: it works once.")
    expires = parse_ts(link.expires_at)
    if expires is None or utcnow() >= expires:
        raise LinkRefused(410, "This answer link has expired (links last one hour).")
    member = broker.get_member(conn, link.member_id)
    try:
        now = showing(conn, link.member_id)
    except CafleetError as exc:
        raise LinkRefused(409, f"The member's screen cannot be read now: {exc}") from None
    if now.prompt is None or now.prompt.digest != link.prompt_digest:
        raise LinkRefused(
            409,
            f"The screen of member {member.member_id} ({member.name}) no longer shows this "
            "prompt: it was answered elsewhere or changed.",
        )
    return hashed, LinkView(member, now)


def open_link(conn: Connection, token: str) -> LinkView:
    """What the page shows; refuses a link that is unknown, used, expired or stale."""
    return _check(conn, token)[1]


def use_link(conn: Connection, settings: Settings, token: str, choice: str) -> Answered:
    """Answer with ``choice`` and spend the link (it works once, even when the answer then
    fails: the page says why)."""
    hashed, view = _check(conn, token)
    if not broker.use_answer_link(conn, hashed):
        raise LinkRefused(410, "This answer link was already used: it works once.")
    assert view.showing.prompt is not None
    try:
        return answer_prompt(
            conn, settings, view.member.member_id, choice, prompt_id=view.showing.prompt.digest
        )
    except CafleetError as exc:
        raise LinkRefused(409, str(exc)) from None


__all__ = ["LinkRefused", "LinkView", "open_link", "use_link"]
