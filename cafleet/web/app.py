"""The WebUI's FastAPI app (docs/runtime.md §7.3).

Handlers are plain `def`s, so FastAPI runs them in its worker threads; each request holds its own
connection from `cafleet.web.pool` (docs/storage.md §8: validated once at start-up, one connection per
handler). cafleet's typed errors become `{"detail": <their text>}`
with the status of `ERROR_STATUS`.
"""

from __future__ import annotations

import functools
import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import Depends, FastAPI, Header, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import FileResponse, JSONResponse, PlainTextResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.staticfiles import StaticFiles

from cafleet import __version__, broker
from cafleet.broker import errors as be
from cafleet.broker import fleet_worktrees
from cafleet.broker.errors import FleetNotFound, MemberNotFound
from cafleet.broker.views import web_roster
from cafleet.config import MAX_ID
from cafleet.db.errors import DatabaseBusy, SchemaChanged
from cafleet.db.guard import GuardRefused
from cafleet.db.runtime import Connection
from cafleet.errors import CafleetError, error_text
from cafleet.output import dumps_json, message_dict, placement_dict
from cafleet.records import StorageIntegrityError
from cafleet.sessions.prices import cost, load
from cafleet.text import check_inline_body
from cafleet.web import models as m
from cafleet.web.answer_page import answer_routes
from cafleet.web.pool import Connections
from cafleet.web.security import Policy, SecurityMiddleware
from cafleet.web.timeline import ack_at, group
from cafleet.workflows import errors as we
from cafleet.workflows import messaging, review, task_costs
from cafleet.workflows import tasks as task_flows
from cafleet.workflows.answering import AnswerRefused, choice_problem, showing
from cafleet.workflows.answering import answer as answer_prompt  # the route below is `answer`
from cafleet.workflows.errors import WorkflowError
from cafleet.workflows.monitor import monitor_status, set_wake_interval, wake_now
from cafleet.workflows.panes import capture_member
from cafleet.workflows.sessions import usage
from cafleet.workflows.supervision import check_panes, classified_state, hosts_report, loop_status
from cafleet.workflows.worktrees import reports

if TYPE_CHECKING:
    from cafleet.config import Settings
    from cafleet.records import Fleet, Message
    from cafleet.records.tasks import Task

TIMELINE_LIMIT = 200  # the timeline page: the newest deliveries it shows (docs/webui.md)
MAX_BODY = 8 * 1_048_576  # a 1 MiB text (the CLI's limit) JSON-escaped, with room to spare
_INT_RE = re.compile(r"[0-9]+")


@dataclass(frozen=True)
class ServerConfig:
    db_path: str
    schema_version: int | None  # PRAGMA schema_version when the guard validated the file
    settings: Settings
    policy: Policy


class ApiError(CafleetError):
    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


def _error_status() -> dict[type[Exception], int]:
    return {
        be.MemberNotFound: 404,
        be.RecipientNotFound: 404,
        be.NotSameFleet: 404,
        be.MessageNotFound: 404,
        be.TaskNotFound: 404,
        be.TaskRefused: 409,
        be.SenderNotActive: 409,
        we.NoMonitorRuntime: 404,
        we.LoopNotLive: 404,
        we.PaneUnavailable: 409,
        AnswerRefused: 409,
        DatabaseBusy: 503,
        SchemaChanged: 503,
        GuardRefused: 503,
        StorageIntegrityError: 500,
    }


def _raw(handler: Callable[..., Any]) -> Callable[..., Any]:
    """Return a route's plain dicts and lists as JSON without a second pass through pydantic:
    `response_model` still documents the shape in the OpenAPI schema (whose conformance the
    tests check), but validating 200 timeline entries again would cost more than the query."""

    @functools.wraps(handler)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        value = handler(*args, **kwargs)
        if isinstance(value, Response):
            return value
        return Response(dumps_json(value).encode("utf-8"), media_type="application/json")

    return wrapped


def _json_error(status: int, detail: str) -> JSONResponse:
    return JSONResponse({"detail": detail}, status_code=status)


# --- per-request state -------------------------------------------------------------------------


@dataclass
class Ctx:
    conn: Connection
    fleet: Fleet
    config: ServerConfig


def _config(request: Request) -> ServerConfig:
    config: ServerConfig = request.app.state.config
    return config


def _connection(request: Request) -> Iterator[Connection]:
    """The request's own connection, given back when the response is done."""
    pool: Connections = request.app.state.connections
    conn = pool.take()
    try:
        yield conn
    finally:
        pool.give(conn)


def _fleet_ctx(
    request: Request,
    conn: Annotated[Connection, Depends(_connection)],
    x_fleet_id: Annotated[
        str | None, Header(alias="X-Fleet-Id", description="The fleet this request is about.")
    ] = None,
) -> Ctx:
    """docs/runtime.md §7.3: every route but `GET /api/fleets` names its fleet in `X-Fleet-Id`."""
    if x_fleet_id is None:
        raise ApiError(400, "X-Fleet-Id header required")
    value = x_fleet_id.strip()
    if not _INT_RE.fullmatch(value):
        raise ApiError(400, "X-Fleet-Id must be an integer")
    fleet_id = int(value)
    if not 1 <= fleet_id <= MAX_ID:
        raise ApiError(404, "Fleet not found")
    try:
        fleet = broker.get_fleet(conn, fleet_id)
    except FleetNotFound:
        raise ApiError(404, "Fleet not found") from None
    if fleet.deleted_at is not None:
        raise ApiError(404, "Fleet not found")
    return Ctx(conn=conn, fleet=fleet, config=_config(request))


FleetCtx = Annotated[Ctx, Depends(_fleet_ctx)]
MemberId = Annotated[int, Path(ge=1, le=MAX_ID)]
Limit = Annotated[int, Query(ge=1, le=1000, description="How many messages, newest first.")]
Lines = Annotated[int, Query(ge=1, le=1000, description="How many lines of the pane.")]


def _fleet_member(ctx: Ctx, member_id: int) -> Any:
    member = broker.get_member(ctx.conn, member_id)
    if member.fleet_id != ctx.fleet.fleet_id:
        raise MemberNotFound(member_id)
    return member


# --- renderers ---------------------------------------------------------------------------------


def _message(msg: Message) -> Any:
    return message_dict(msg)


def _messages(ctx: Ctx, found: list[Message]) -> list[Any]:
    """Messages with their `received_at` (docs/cli.md §2.38)."""
    receipts = broker.receipts_of(ctx.conn, [x.message_id for x in found])
    return [{**_message(x), "received_at": receipts.get(x.message_id)} for x in found]


def _member(member: Any) -> Any:
    placement = placement_dict(member.placement)
    return dict(
        member_id=member.member_id,
        name=member.name,
        description=member.description,
        kind=member.kind,
        status=member.status,
        registered_at=member.registered_at,
        deregistered_at=member.deregistered_at,
        placement=placement,
    )


def _wake_entry(entry: Any) -> Any:
    if entry is None:
        return None
    return dict(
        member_id=entry.member_id,
        name=entry.name,
        coding_agent=entry.coding_agent,
        unacked=entry.unacked,
    )


# --- the app -----------------------------------------------------------------------------------

ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": m.ErrorOut, "description": text}
    for code, text in (
        (400, "Missing or malformed X-Fleet-Id, or a body that is not JSON"),
        (401, "Missing or wrong token"),
        (403, "Foreign Host or Origin, or a read-only server"),
        (404, "Unknown fleet, member or route; no monitor row or no live loop"),
        (409, "The request cannot be carried out in the fleet's current state"),
        (413, "Request body too large"),
        (422, "Invalid parameters or body"),
        (500, "Internal error"),
        (503, "Database busy, or its schema changed since start-up"),
    )
}


def create_app(config: ServerConfig) -> WebUI:
    """The ASGI app: the API, the page and the security checks around both."""
    app = FastAPI(
        title="cafleet",
        version=__version__,
        description="The cafleet WebUI API (docs/runtime.md §7.3).",
        docs_url=None,
        redoc_url=None,
        responses=ERRORS,
    )
    app.state.config = config
    app.state.connections = Connections(config.db_path, config.schema_version)
    status_of = _error_status()

    def _typed(_request: Request, exc: Exception) -> JSONResponse:
        for cls in type(exc).__mro__:
            if cls in status_of:
                return _json_error(status_of[cls], error_text(exc))
        return _json_error(500, error_text(exc))  # pragma: no cover - only mapped classes

    for cls in status_of:
        app.add_exception_handler(cls, _typed)
    app.add_exception_handler(ApiError, lambda _r, e: _json_error(e.status, e.detail))
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _internal_error)

    _routes(app)
    _task_routes(app)
    answer_routes(app)
    static = resources.files("cafleet.web") / "static"
    app.mount("/static", StaticFiles(directory=str(static)), name="static")

    @app.get("/", include_in_schema=False)
    @_raw
    def page() -> FileResponse:
        return FileResponse(os.path.join(str(static), "index.html"), media_type="text/html")

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = _errors_as_strings(
                get_openapi(
                    title=app.title,
                    version=app.version,
                    description=app.description,
                    routes=app.routes,
                )
            )
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return WebUI(SecurityMiddleware(ServerTiming(app), config.policy), app.state.connections)


class WebUI:
    """The ASGI app `cafleet server` runs; `close()` closes the idle connections at shutdown."""

    def __init__(self, app: Any, connections: Connections) -> None:
        self.app = app
        self.connections = connections

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)

    def close(self) -> None:
        self.connections.close()


class ServerTiming:
    """`Server-Timing: app;dur=<ms>`: the time from the request reaching the app to its response
    starting (routing, the handler in its worker thread, its connection, rendering). Browsers'
    developer tools show it; the benchmark reads it (docs/performance.md)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()

        async def timed(message: Any) -> None:
            if message["type"] == "http.response.start":
                ms = (time.perf_counter() - start) * 1000
                message["headers"] = [
                    *message.get("headers", []),
                    (b"server-timing", f"app;dur={ms:.3f}".encode()),
                ]
            await send(message)

        await self.app(scope, receive, timed)


def _validation_error(_request: Request, exc: Exception) -> JSONResponse:
    errors = exc.errors() if isinstance(exc, RequestValidationError) else []
    if any(e.get("type") == "json_invalid" for e in errors):
        return _json_error(400, "request body is not valid JSON")
    parts = []
    for e in errors[:3]:
        where = ".".join(str(p) for p in e.get("loc", ()) if p != "body")
        parts.append(f"{where}: {e.get('msg', 'invalid')}" if where else str(e.get("msg")))
    return _json_error(422, "; ".join(parts) or "invalid request")


def _http_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    return JSONResponse(
        {"detail": str(exc.detail)}, status_code=exc.status_code, headers=exc.headers
    )


def _internal_error(_request: Request, exc: Exception) -> JSONResponse:
    return _json_error(500, f"internal error: {error_text(exc)}")


def _errors_as_strings(schema: dict[str, Any]) -> dict[str, Any]:
    """Every error response is `{"detail": <string>}`: FastAPI's generated 422 schema (a list of
    validation errors) is replaced by `ErrorOut`."""
    ref = {"$ref": "#/components/schemas/ErrorOut"}
    for path in schema.get("paths", {}).values():
        for op in path.values():
            for code, response in op.get("responses", {}).items():
                if code.startswith(("4", "5")):
                    response["content"] = {"application/json": {"schema": ref}}
    components = schema.get("components", {}).get("schemas", {})
    components.pop("HTTPValidationError", None)
    components.pop("ValidationError", None)
    return schema


def _routes(app: FastAPI) -> None:
    @app.get("/api/fleets", response_model=list[m.FleetOut], summary="Live fleets")
    @_raw
    def fleets(conn: Annotated[Connection, Depends(_connection)]) -> Any:
        return [
            dict(
                fleet_id=f.fleet_id,
                name=f.name,
                created_at=f.created_at,
                director_member_id=f.director_member_id,
                monitor_member_id=f.monitor_member_id,
                member_count=f.member_count,
            )
            for f in broker.list_fleets(conn)
        ]

    @app.get("/api/members", response_model=list[m.MemberOut], summary="The fleet's roster")
    @_raw
    def members(ctx: FleetCtx) -> Any:
        recorded = broker.fleet_permissions(ctx.conn, ctx.fleet.fleet_id)
        # As `member show` shows it (cafleet.agents.permissions.shown_profile): members only;
        # one recorded before profiles existed runs `readonly`.
        return [
            {
                **_member(x),
                "permissions": (recorded.get(x.member_id) or "readonly")
                if x.kind == "member"
                else None,
            }
            for x in broker.web_roster(ctx.conn, fleet_id=ctx.fleet.fleet_id)
        ]

    @app.get(
        "/api/members/activity",
        response_model=list[m.ActivityOut],
        summary="Idle time and un-ACKed count of each roster member",
    )
    @_raw
    def activity(ctx: FleetCtx) -> Any:
        fleet_id = ctx.fleet.fleet_id
        receipts = broker.fleet_receipts(ctx.conn, fleet_id)
        return [
            dict(member_id=mid, idle=idle, unacked=unacked, last_received_at=receipts.get(mid))
            for mid, idle, unacked in broker.roster_activity(ctx.conn, fleet_id=fleet_id)
        ]

    @app.get(
        "/api/members/usage",
        response_model=list[m.UsageOut],
        summary="Tokens and cost estimate of each roster member, from its agent's own records",
    )
    @_raw
    def member_usage(ctx: FleetCtx) -> Any:
        roster = web_roster(ctx.conn, fleet_id=ctx.fleet.fleet_id)
        table = load()
        # Read-only: sessions not learned yet stay `unknown` here (the loop learns them).
        found = usage(ctx.conn, ctx.config.settings.db_dir, roster, learn_missing=False)
        out = []
        for member, u in zip(roster, found, strict=True):
            totals = u.tally.totals() if u.tally is not None else (None, None, None, None)
            out.append(
                dict(
                    member_id=member.member_id,
                    input=totals[0],
                    output=totals[1],
                    cache_read=totals[2],
                    cache_write=totals[3],
                    cost_usd=None if u.tally is None else cost(u.tally, table),
                    unknown_reason=u.reason,
                )
            )
        return out

    @app.get(
        "/api/members/panes", response_model=m.PanesOut, summary="Pane state of each roster member"
    )
    @_raw
    def panes(ctx: FleetCtx) -> Any:
        roster = broker.web_roster(ctx.conn, fleet_id=ctx.fleet.fleet_id)
        # Each pane's host; another host's pane is not asked from here (docs/runtime.md §10.5).
        hosts = hosts_report(ctx.conn, roster, ctx.fleet.director_member_id)
        if hosts.spans:
            director_host = hosts.member_host.get(ctx.fleet.director_member_id or 0)
            remote = director_host not in (None, hosts.here)  # its pid is not ours to ask
            hosts = hosts.with_loop(loop_status(ctx.conn, ctx.fleet.fleet_id, remote=remote))
        # The same answer as `member list` (docs/cli.md §2.8): the classifier's word on a live pane.
        check = check_panes(roster, agent_state=classified_state, elsewhere=hosts.elsewhere())
        paused = broker.paused_members(ctx.conn)
        return dict(
            error=check.unknown_reason,
            panes=[
                dict(
                    member_id=p.member_id,
                    pane_id=p.pane_id,
                    state=p.state,
                    activity=p.agent_state,
                    host_id=hosts.member_host.get(p.member_id),
                    paused=paused.get(p.member_id),
                )
                for p in (check.panes[m.member_id] for m in roster)
            ],
            hosts=[h.as_dict() for h in hosts.hosts] if hosts.spans else [],
        )

    @app.get(
        "/api/members/worktrees",
        response_model=list[m.WorktreeOut],
        summary="The git worktree of each roster member that has one, with its state",
    )
    @_raw
    def worktrees(ctx: FleetCtx) -> Any:
        specs = fleet_worktrees(ctx.conn, ctx.fleet.fleet_id)
        if not specs:
            return []
        found = reports(specs)
        return [dict(member_id=mid, **found[mid].as_dict()) for mid in sorted(found)]

    @app.get(
        "/api/members/{member_id}/prompt",
        response_model=m.ShowingOut,
        summary="The permission prompt or question a member's pane shows",
    )
    @_raw
    def prompt(ctx: FleetCtx, member_id: MemberId) -> Any:
        _fleet_member(ctx, member_id)
        now = showing(ctx.conn, member_id)
        return dict(
            member_id=now.member_id,
            pane_id=now.pane_id,
            state=now.state,
            prompt=None if now.prompt is None else now.prompt.as_dict(),
        )

    @app.post(
        "/api/members/{member_id}/answer",
        response_model=m.AnsweredOut,
        summary="Answer a member's prompt (as `cafleet member answer --prompt`)",
    )
    @_raw
    def answer(ctx: FleetCtx, member_id: MemberId, body: m.AnswerIn) -> Any:
        problem = choice_problem(body.choice)
        if problem is not None:  # a choice no prompt could offer: bad input, not a conflict
            raise ApiError(400, f"{problem}; nothing was typed")
        _fleet_member(ctx, member_id)
        try:
            done = answer_prompt(
                ctx.conn, ctx.config.settings, member_id, body.choice, prompt_id=body.prompt_id
            )
        except WorkflowError as exc:  # a refusal (nothing typed) or a prompt that stayed
            raise ApiError(409, str(exc)) from None
        return dict(
            member_id=member_id,
            pane_id=done.pane_id,
            prompt=done.prompt.as_dict(),
            choice=dict(number=done.choice.number, label=done.choice.label),
            next_prompt=None if done.after is None else done.after.as_dict(),
        )

    @app.get(
        "/api/members/{member_id}/inbox",
        response_model=list[m.MessageOut],
        summary="Messages to a member",
    )
    @_raw
    def inbox(ctx: FleetCtx, member_id: MemberId, limit: Limit = 50) -> Any:
        _fleet_member(ctx, member_id)
        return _messages(ctx, broker.inbox_view(ctx.conn, member_id=member_id, limit=limit))

    @app.get(
        "/api/members/{member_id}/sent",
        response_model=list[m.MessageOut],
        summary="Messages from a member",
    )
    @_raw
    def sent(ctx: FleetCtx, member_id: MemberId, limit: Limit = 50) -> Any:
        _fleet_member(ctx, member_id)
        return _messages(ctx, broker.sent_view(ctx.conn, member_id=member_id, limit=limit))

    @app.get(
        "/api/members/{member_id}/capture",
        response_class=PlainTextResponse,
        responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}},
        summary="The last lines of a member's pane, as plain text",
    )
    @_raw
    def capture(
        ctx: FleetCtx,
        member_id: MemberId,
        lines: Lines = 40,
    ) -> PlainTextResponse:
        _fleet_member(ctx, member_id)
        captured = capture_member(ctx.conn, member_id, lines=lines)
        return PlainTextResponse(captured.content)

    @app.get(
        "/api/timeline", response_model=m.TimelineOut, summary="The newest 200 deliveries, grouped"
    )
    @_raw
    def timeline(ctx: FleetCtx) -> Any:
        rows = broker.timeline(ctx.conn, fleet_id=ctx.fleet.fleet_id, limit=TIMELINE_LIMIT)
        entries = group(rows)
        ids = {r.from_member_id for r in rows} | {r.owner_member_id for r in rows}
        return dict(
            limit=TIMELINE_LIMIT,
            rows=len(rows),
            limit_reached=len(rows) >= TIMELINE_LIMIT,
            entries=[
                dict(
                    kind=e.kind,
                    origin_message_id=e.origin_message_id,
                    from_member_id=e.from_member_id,
                    created_at=e.created_at,
                    text=e.text,
                    recipients=e.recipients,
                    acked=e.acked,
                    deliveries=[
                        dict(
                            message_id=d.message_id,
                            to_member_id=d.owner_member_id,
                            status_state=d.status_state,
                            ack_at=ack_at(d),
                        )
                        for d in e.deliveries
                    ],
                )
                for e in entries
            ],
            names=[dict(member_id=i, name=n) for i, n in broker.member_names(ctx.conn, ids)],
        )

    @app.post(
        "/api/messages/send",
        response_model=m.SendOut,
        summary="Send or broadcast as the root Director",
    )
    @_raw
    def send(ctx: FleetCtx, body: m.SendIn) -> Any:
        try:
            check_inline_body(body.text)
        except ValueError as exc:
            raise ApiError(422, str(exc)) from None
        director = ctx.fleet.director_member_id
        if director is None:
            raise ApiError(409, f"fleet {ctx.fleet.fleet_id} has no root Director")
        warnings: list[str] = []
        settings = ctx.config.settings
        if body.to_member_id == "*":
            result = messaging.broadcast(
                ctx.conn, settings, from_member_id=director, text=body.text, warn=warnings.append
            )
            return dict(
                kind="broadcast",
                message=_message(result.summary),
                recipients=result.recipients,
                notified=result.notified,
                warnings=warnings,
            )
        _fleet_member(ctx, body.to_member_id)
        sent = messaging.send(
            ctx.conn,
            settings,
            from_member_id=director,
            to_member_id=body.to_member_id,
            text=body.text,
            warn=warnings.append,
        )
        return dict(
            kind="unicast",
            message=_message(sent.message),
            recipients=1,
            notified=1 if sent.notification_sent else 0,
            warnings=warnings,
        )

    def _monitor_out(ctx: Ctx) -> Any:
        status = monitor_status(ctx.conn, ctx.fleet.fleet_id)
        rt = status.runtime
        return dict(
            live=status.live,
            runtime=None
            if rt is None
            else dict(
                fleet_id=rt.fleet_id,
                pid=rt.pid,
                started_at=rt.started_at,
                last_tick_at=rt.last_tick_at,
                tick_seconds=rt.tick_seconds,
                last_wake_at=rt.last_wake_at,
                wake_interval_seconds=rt.wake_interval_seconds,
                wake_requested_at=rt.wake_requested_at,
            ),
            wake_roster=dict(
                members=[e for e in map(_wake_entry, status.roster.members) if e is not None],
                director=_wake_entry(status.roster.director),
            ),
        )

    @app.get("/api/monitor", response_model=m.MonitorOut, summary="The monitor loop's state")
    @_raw
    def monitor(ctx: FleetCtx) -> Any:
        return _monitor_out(ctx)

    @app.patch("/api/monitor", response_model=m.MonitorOut, summary="Set the wake interval")
    @_raw
    def monitor_interval(ctx: FleetCtx, body: m.IntervalIn) -> Any:
        set_wake_interval(ctx.conn, ctx.fleet.fleet_id, body.wake_interval_seconds)
        return _monitor_out(ctx)

    @app.post("/api/monitor/wake", response_model=m.WakeOut, summary="Wake the monitor member now")
    @_raw
    def monitor_wake(ctx: FleetCtx) -> Any:
        return dict(wake_requested_at=wake_now(ctx.conn, ctx.fleet.fleet_id))


# --- the task board (docs/webui.md) ---------------------------------------------------------------

TaskId = Annotated[int, Path(ge=1, le=MAX_ID)]
BoardState = Annotated[m.TaskState | None, Query(description="Only this state.")]


def _task_out(entry: task_costs.BoardEntry) -> Any:
    return {
        **entry.task._asdict(),
        "after": list(entry.task.after),
        "age_seconds": entry.age_seconds,
        "cost_usd": entry.cost.usd,
        "cost_unknown_reason": entry.cost.unknown_reason,
    }


def _fleet_task(ctx: Ctx, task_id: int) -> Task:
    """The task, when it is this fleet's: another fleet's is not found (as an unknown id)."""
    task = broker.get_task(ctx.conn, task_id)
    if task.fleet_id != ctx.fleet.fleet_id:
        raise be.TaskNotFound(task_id)
    return task


def _entry(ctx: Ctx, task: Task) -> Any:
    return _task_out(task_costs.entries(ctx.conn, ctx.config.settings, [task])[0])


def _changed(ctx: Ctx, change: Callable[[list[str]], Task]) -> Any:
    warnings: list[str] = []
    task = change(warnings)
    return {"task": _entry(ctx, task), "warnings": warnings}


def _task_text(value: str, field: str, *, blank_ok: bool) -> None:
    if "\x00" in value:
        raise ApiError(422, f"{field}: may not contain NUL characters")
    if not blank_ok and not value.strip():
        raise ApiError(422, f"{field}: must not be empty")


def _task_routes(app: FastAPI) -> None:
    @app.get("/api/tasks", response_model=list[m.TaskOut], summary="The fleet's task board")
    @_raw
    def task_board(ctx: FleetCtx, state: BoardState = None) -> Any:
        found = task_costs.board(ctx.conn, ctx.config.settings, ctx.fleet.fleet_id, state=state)
        return [_task_out(e) for e in found]

    @app.get(
        "/api/tasks/{task_id}",
        response_model=m.TaskPageOut,
        summary="A task, its time in each state and its thread (as `task show`)",
    )
    @_raw
    def task_page(ctx: FleetCtx, task_id: TaskId) -> Any:
        _fleet_task(ctx, task_id)
        view = task_flows.show(ctx.conn, task_id)
        return {
            "task": _entry(ctx, view.detail.task),
            "seconds_in_state": view.seconds_in_state,
            "thread": [x._asdict() for x in view.detail.thread],
        }

    @app.post(
        "/api/tasks",
        response_model=m.TaskChangedOut,
        summary="Create a task as the root Director (as `task create`)",
    )
    @_raw
    def task_create(ctx: FleetCtx, body: m.TaskIn) -> Any:
        _task_text(body.title, "title", blank_ok=False)
        _task_text(body.body, "body", blank_ok=True)
        return _changed(
            ctx,
            lambda warnings: task_flows.create(
                ctx.conn,
                ctx.config.settings,
                fleet_id=ctx.fleet.fleet_id,
                title=body.title,
                body=body.body,
                creator_id=None,
                assignee_id=body.assignee_member_id,
                after=body.after,
                warn=warnings.append,
            ),
        )

    @app.post(
        "/api/tasks/{task_id}/assign",
        response_model=m.TaskChangedOut,
        summary="Give a task to a member (as `task assign`)",
    )
    @_raw
    def task_assign(ctx: FleetCtx, task_id: TaskId, body: m.AssignIn) -> Any:
        _fleet_task(ctx, task_id)
        return _changed(
            ctx,
            lambda warnings: task_flows.assign(
                ctx.conn,
                ctx.config.settings,
                task_id=task_id,
                member_id=body.member_id,
                warn=warnings.append,
            ),
        )

    @app.post(
        "/api/tasks/{task_id}/reopen",
        response_model=m.TaskChangedOut,
        summary="Open a done, blocked or cancelled task again (as `task reopen`)",
    )
    @_raw
    def task_reopen(ctx: FleetCtx, task_id: TaskId) -> Any:
        _fleet_task(ctx, task_id)
        return _changed(
            ctx,
            lambda warnings: task_flows.reopen(
                ctx.conn, ctx.config.settings, task_id=task_id, warn=warnings.append
            ),
        )

    @app.get(
        "/api/tasks/{task_id}/diff",
        response_model=m.DiffOut,
        summary="A done task's change against its base (as `task diff --json`)",
    )
    @_raw
    def task_diff(ctx: FleetCtx, task_id: TaskId) -> Any:
        _fleet_task(ctx, task_id)
        try:
            return review.task_diff(ctx.conn, task_id, stat=False).as_dict()
        except WorkflowError as exc:  # no branch, or git cannot show it
            raise ApiError(409, str(exc)) from None

    @app.post(
        "/api/tasks/{task_id}/merge",
        response_model=m.TaskChangedOut,
        summary="Merge a done task through the gate (as `task merge`); a failure sends it back",
    )
    @_raw
    def task_merge(ctx: FleetCtx, task_id: TaskId, body: m.MergeIn) -> Any:
        _fleet_task(ctx, task_id)
        if body.gate is not None:
            _task_text(body.gate, "gate", blank_ok=True)

        def merge(warnings: list[str]) -> Task:
            try:
                merged = review.merge(
                    ctx.conn, ctx.config.settings, task_id=task_id, gate=body.gate, wait=0,
                    warn=warnings.append,
                )  # fmt: skip
            except WorkflowError as exc:  # refused, or failed and sent back (the text says)
                raise ApiError(409, str(exc)) from None
            warnings.append(f"merged into {merged.target} as {merged.merge_commit[:12]}")
            return merged.task

        return _changed(ctx, merge)

    @app.post(
        "/api/tasks/{task_id}/reject",
        response_model=m.TaskChangedOut,
        summary="Send a done task back to its member with the reviewer's text",
    )
    @_raw
    def task_reject(ctx: FleetCtx, task_id: TaskId, body: m.RejectIn) -> Any:
        _fleet_task(ctx, task_id)
        _task_text(body.text, "text", blank_ok=False)
        return _changed(
            ctx,
            lambda warnings: review.reject(
                ctx.conn, ctx.config.settings, task_id=task_id, text=body.text,
                warn=warnings.append,
            ),
        )  # fmt: skip

    @app.get(
        "/api/merges",
        response_model=list[m.QueueEntryOut],
        summary="The merge queue: done tasks with a branch, oldest first, and the one merging",
    )
    @_raw
    def merge_queue(ctx: FleetCtx) -> Any:
        return review.queue(ctx.conn, ctx.fleet.fleet_id)

    @app.post(
        "/api/tasks/{task_id}/cancel",
        response_model=m.TaskChangedOut,
        summary="Cancel an open task (as `task cancel`)",
    )
    @_raw
    def task_cancel(ctx: FleetCtx, task_id: TaskId) -> Any:
        _fleet_task(ctx, task_id)
        return _changed(
            ctx,
            lambda warnings: task_flows.cancel(
                ctx.conn, ctx.config.settings, task_id=task_id, warn=warnings.append
            ),
        )


Factory = Callable[[ServerConfig], Any]
