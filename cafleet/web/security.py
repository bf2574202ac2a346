"""The server's request checks, in order (docs/runtime.md §7.3; docs/webui.md "Security model"):

1. Host: the Host header must name the server itself (defeats DNS rebinding: a page on another
   site whose name resolves to 127.0.0.1 sends its own name). A wildcard bind (0.0.0.0, ::)
   accepts any Host; such a server always has a token.
2. Token: set unless `cafleet server --no-token` (loopback too: any local user can reach it);
   every request carries it as `Authorization: Bearer <token>` or in the cookie that
   `GET /?token=<token>` sets (HttpOnly, SameSite=Strict) before redirecting to `/`.
3. Mutating methods: refused on a `--read-only` server; otherwise the Origin (when sent) must be
   this server's own and `Sec-Fetch-Site` (when sent) same-origin, so a page in the user's
   browser cannot post into agents' panes.
4. Bodies: at most `max_body` bytes (413), read before the app sees them.

Every response carries `X-Cafleet-Read-Only` and headers that keep the page from being framed,
sniffed or leaking its URL (the token may be in it).
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", ""})
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
PAGE_HEADERS = (
    (
        b"content-security-policy",
        b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        b"connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def host_header_names(host: str, port: int) -> frozenset[str] | None:
    """The Host header values that name this server; None accepts any (wildcard bind)."""
    if host in WILDCARD_HOSTS:
        return None
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
    names = {shown.lower()}
    if is_loopback(host):
        names.update(LOOPBACK_NAMES)
    values = {f"{name}:{port}" for name in names}
    if port == 80:
        values |= names
    return frozenset(values)


@dataclass(frozen=True, slots=True)
class Policy:
    token: str | None
    hosts: frozenset[str] | None
    read_only: bool
    cookie: str  # the token cookie's name (cookies ignore ports: one name per port)
    max_body: int


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return bytes(value).decode("latin-1")
    return None


def _cookie(scope: Scope, name: str) -> str | None:
    raw = _header(scope, b"cookie")
    if not raw:
        return None
    for part in raw.split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value
    return None


ANSWER_PREFIX = "/answer/"


def _same(given: str | None, token: str) -> bool:
    return given is not None and hmac.compare_digest(given.encode(), token.encode())


class SecurityMiddleware:
    def __init__(self, app: ASGIApp, policy: Policy) -> None:
        self.app = app
        self.policy = policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        policy = self.policy
        method = scope["method"]
        host = (_header(scope, b"host") or "").lower()
        if policy.hosts is not None and host not in policy.hosts:
            await _error(send, 403, "Host not allowed", policy)
            return
        if scope["path"].startswith(ANSWER_PREFIX):
            # The phone answer page (docs/cli.md §2.35): its single-use link token is the
            # credential, never the server token; its form posts from wherever the phone is.
            if method in MUTATING and policy.read_only:
                await _error(send, 403, "the server is read-only (--read-only)", policy)
                return
            body = await _read_body(receive, policy.max_body)
            if body is None:
                await _error(send, 413, "request body too large", policy)
                return
            await self.app(scope, _replay(body), _with_headers(send, policy, answer=True))
            return
        if policy.token is not None:
            query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
            offered = query.get("token", [None])[-1]
            if scope["path"] == "/" and method == "GET" and offered is not None:
                if not _same(offered, policy.token):
                    await _error(send, 401, "missing or wrong token", policy)
                    return
                await _redirect_with_cookie(send, policy)
                return
            bearer = _header(scope, b"authorization") or ""
            given = bearer[7:] if bearer.lower().startswith("bearer ") else None
            if not (
                _same(given, policy.token) or _same(_cookie(scope, policy.cookie), policy.token)
            ):
                await _error(send, 401, "missing or wrong token", policy)
                return
        if method in MUTATING:
            if policy.read_only:
                await _error(send, 403, "the server is read-only (--read-only)", policy)
                return
            origin = _header(scope, b"origin")
            site = _header(scope, b"sec-fetch-site")
            if (origin is not None and origin.lower() != f"http://{host}") or (
                site is not None and site not in ("same-origin", "none")
            ):
                await _error(send, 403, "cross-origin request refused", policy)
                return
            body = await _read_body(receive, policy.max_body)
            if body is None:
                await _error(
                    send, 413, f"request body too large (limit {policy.max_body} bytes)", policy
                )
                return
            receive = _replay(body)
        await self.app(scope, receive, _with_headers(send, policy))


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes) -> Receive:
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return receive


def _extra_headers(policy: Policy) -> list[tuple[bytes, bytes]]:
    return [(b"x-cafleet-read-only", b"1" if policy.read_only else b"0"), *PAGE_HEADERS]


# The answer page: its own inline style, and its form posts back to itself.
ANSWER_HEADERS = (
    (
        b"content-security-policy",
        b"default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; "
        b"base-uri 'none'; form-action 'self'",
    ),
    *PAGE_HEADERS[1:],
)


def _with_headers(send: Send, policy: Policy, answer: bool = False) -> Send:
    extra = [*ANSWER_HEADERS] if answer else _extra_headers(policy)

    async def wrapped(message: Message) -> None:
        if message["type"] == "http.response.start":
            message["headers"] = [*message.get("headers", []), *extra]
        await send(message)

    return wrapped


async def _error(send: Send, status: int, detail: str, policy: Policy) -> None:
    body = json.dumps({"detail": detail}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *_extra_headers(policy),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _redirect_with_cookie(send: Send, policy: Policy) -> None:
    assert policy.token is not None
    cookie = f"{policy.cookie}={policy.token}; HttpOnly; SameSite=Strict; Path=/"
    headers = [
        (b"location", b"/"),
        (b"set-cookie", cookie.encode("latin-1")),
        (b"content-length", b"0"),
        *_extra_headers(policy),
    ]
    await send({"type": "http.response.start", "status": 303, "headers": headers})
    await send({"type": "http.response.body", "body": b""})
