"""The phone answer page (docs/cli.md §2.35): `GET /answer/<token>` shows one member's prompt
with a button per choice, `POST /answer/<token>` answers it. Served without the server token
(the single-use link token is the credential); plain HTML, no script."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse
from starlette.concurrency import run_in_threadpool

from cafleet.workflows.answer_links import Refused, open_link, use_link

if TYPE_CHECKING:
    from cafleet.web.pool import Connections

STYLE = (
    "body{font-family:system-ui,sans-serif;margin:1rem;max-width:36rem}"
    "pre{white-space:pre-wrap;background:#f4f4f4;padding:.5rem}"
    "button{display:block;width:100%;margin:.5rem 0;padding:1rem;font-size:1.1rem}"
)


def _page(title: str, body: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(
        "<!doctype html><html><head><meta charset=utf-8>"
        '<meta name=viewport content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(title)}</title><style>{STYLE}</style></head>"
        f"<body><h1>{html.escape(title)}</h1>{body}</body></html>",
        status_code=status,
    )


def _refused(why: Refused) -> HTMLResponse:
    return _page(
        "Cannot answer", f'<p data-testid="refused">{html.escape(why.text)}</p>', why.status
    )


def _with_conn(pool: Connections, fn: Any, *args: Any) -> Any:
    conn = pool.take()
    try:
        return fn(conn, *args)
    finally:
        pool.give(conn)


def answer_routes(app: FastAPI) -> None:
    @app.get("/answer/{token}", include_in_schema=False)
    async def answer_page(request: Request, token: str) -> HTMLResponse:
        view = await run_in_threadpool(_with_conn, request.app.state.connections, open_link, token)
        if isinstance(view, Refused):
            return _refused(view)
        prompt = view.showing.prompt
        assert prompt is not None
        member = view.member
        asked = [*prompt.details]
        asked.insert(0 if prompt.question_first else len(asked), prompt.question)
        buttons = "".join(
            f'<button name="choice" value="{c.number}" data-testid="choice">'
            f"{c.number}. {html.escape(c.label)}</button>"
            for c in prompt.choices
        )
        body = (
            f"<p>Member {member.member_id} ({html.escape(member.name)}) asks:</p>"
            f'<pre data-testid="prompt">{html.escape(chr(10).join(asked))}</pre>'
            f'<form method="post">{buttons}</form>'
        )
        return _page(f"Answer {member.name}", body)

    @app.post("/answer/{token}", include_in_schema=False)
    async def answer_post(request: Request, token: str) -> HTMLResponse:
        form = parse_qs((await request.body()).decode("utf-8", "replace"))
        choice = form.get("choice", [""])[-1][:20]
        settings = request.app.state.config.settings
        done = await run_in_threadpool(
            _with_conn,
            request.app.state.connections,
            lambda conn: use_link(conn, settings, token, choice),
        )
        if isinstance(done, Refused):
            return _refused(done)
        text = f"{done.choice.number}. {done.choice.label}"
        return _page("Answered", f'<p data-testid="answered">Answered: {html.escape(text)}</p>')


__all__ = ["answer_routes"]
