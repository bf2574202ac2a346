"""`cafleet server` (docs/cli.md §3.4, docs/runtime.md §7.3): the WebUI in the foreground.

Schema-guarded at start-up (a refused file stops it with the guard's text), exempt from the
stale-assets guard, and the only importer of FastAPI and uvicorn, which come with the `web`
extra: `pip install 'cafleet[web]'`.
"""

from __future__ import annotations

import importlib.util
import os
import re
import secrets
import socket
from typing import TYPE_CHECKING, Any

import click

from cafleet.cli.app import cli
from cafleet.cli.context import fail, invocation, usage_error
from cafleet.output import flush, out

if TYPE_CHECKING:
    from cafleet.web.app import ServerConfig

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
MISSING_EXTRA = (
    "cafleet server needs FastAPI and uvicorn, which are not installed; "
    "install them with: pip install 'cafleet[web]'"
)
_TOKEN_RE = re.compile(r"[A-Za-z0-9._~-]{8,256}")
_PORT_RE = re.compile(r"[0-9]{1,5}")


def _env_host() -> str:
    return os.environ.get("CAFLEET_BROKER_HOST") or DEFAULT_HOST


def _env_port() -> int:
    raw = os.environ.get("CAFLEET_BROKER_PORT") or ""
    if not raw:
        return DEFAULT_PORT
    if not _PORT_RE.fullmatch(raw) or not 1 <= int(raw) <= 65535:
        fail(f"CAFLEET_BROKER_PORT must be an integer from 1 to 65535 (got '{raw}')")
    return int(raw)


def _bind(host: str, port: int) -> socket.socket:
    """Listen before serving, so an unusable address fails as `Error: …`, exit 1."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError as exc:
        fail(f"cannot listen on {host}:{port}: {exc}")
    family, kind, proto, _name, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}")
    sock.set_inheritable(False)
    return sock


def _url(host: str, port: int, token: str | None) -> str:
    shown = f"[{host}]" if ":" in host else host
    if shown in ("0.0.0.0", "[::]"):
        shown = socket.gethostname()
    return f"http://{shown}:{port}/" + (f"?token={token}" if token else "")


def _address(host: str | None, port: int | None, token: str | None) -> tuple[str, int, str | None]:
    """The options, else their settings; checks the environment's token and the web extra."""
    host = host or _env_host()
    port = port or _env_port()
    token = token or os.environ.get("CAFLEET_SERVER_TOKEN") or None
    if token is not None and not _TOKEN_RE.fullmatch(token):
        fail("CAFLEET_SERVER_TOKEN must be 8-256 characters from A-Z a-z 0-9 . _ ~ -")
    if any(importlib.util.find_spec(name) is None for name in ("fastapi", "uvicorn")):
        fail(MISSING_EXTRA)
    return host, port, token


def _listen(
    inv: Any,
    schema_version: int | None,
    host: str,
    port: int,
    token: str | None,
    read_only: bool,
    no_token: bool = False,
) -> tuple[socket.socket, ServerConfig, int, str | None]:
    """Bind the socket and build the app's configuration: a token unless ``no_token``, generated
    when none was given. On loopback too: any local user can reach 127.0.0.1, and what the page
    sends is typed into agents' panes."""
    from cafleet.web.app import MAX_BODY, ServerConfig
    from cafleet.web.security import Policy, host_header_names

    if token is None and not no_token:
        token = secrets.token_urlsafe(24)
    sock = _bind(host, port)
    port = sock.getsockname()[1]
    policy = Policy(
        token=token,
        hosts=host_header_names(host, port),
        read_only=read_only,
        cookie=f"cafleet_token_{port}",
        max_body=MAX_BODY,
    )
    config = ServerConfig(
        db_path=inv.db_path, schema_version=schema_version, settings=inv.settings, policy=policy
    )
    return sock, config, port, token


@cli.command(
    "server",
    help=(
        "Serve the WebUI (roster, timeline, composer, monitor controls) in the foreground. "
        "Needs the web extra: pip install 'cafleet[web]'."
    ),
)
@click.option(
    "--host",
    default=None,
    help="Address to listen on (default: CAFLEET_BROKER_HOST, else 127.0.0.1).",
)
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    default=None,
    help="Port, 1-65535 (default: CAFLEET_BROKER_PORT, else 8000).",
)
@click.option(
    "--token",
    default=None,
    help=(
        "Require this token on every request (default: CAFLEET_SERVER_TOKEN, else a generated "
        "one, printed in the URL)."
    ),
)
@click.option(
    "--no-token",
    is_flag=True,
    help=(
        "Require no token (loopback hosts only): any local user can then send into the agents' "
        "panes."
    ),
)
@click.option("--read-only", is_flag=True, help="Refuse sending, the interval change and wake now.")
def server(
    host: str | None, port: int | None, token: str | None, no_token: bool, read_only: bool
) -> None:
    from cafleet import signals
    from cafleet.cli import signal_stop_is_clean
    from cafleet.web.security import is_loopback

    if token is not None and not _TOKEN_RE.fullmatch(token):
        usage_error("--token must be 8-256 characters from A-Z a-z 0-9 . _ ~ -")
    if no_token and token is not None:
        usage_error("--no-token and --token cannot go together")
    inv = invocation()
    host, port, token = _address(host, port, None if no_token else token)
    if no_token:
        if not is_loopback(host):
            from cafleet.text import sanitize_single_line

            usage_error(
                f"--no-token needs a loopback --host (not {sanitize_single_line(host)}): any "
                "machine could send into the agents' panes"
            )
        token = None
    conn = inv.connection()  # the schema guard: a refused file stops the server here

    from cafleet.db.guard import SCHEMA_VERSION_KEY
    from cafleet.web.serve import serve

    version = conn.info.get(SCHEMA_VERSION_KEY)
    sock, config, port, token = _listen(inv, version, host, port, token, read_only, no_token)
    out(f"cafleet server: {_url(host, port, token)}" + (" (read-only)" if read_only else ""))
    flush()
    signal_stop_is_clean()  # Ctrl-C is how a foreground server stops: exit 0
    signals.check()
    serve(config, sock)
