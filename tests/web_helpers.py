"""Helpers for the WebUI tests: the app in process (Starlette's TestClient, no port), the real
`cafleet server` as a subprocess on a free port, and seeded fleets."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.harness.util import retry_until

BASE = "http://127.0.0.1:8000"
URL_RE = re.compile(r"^cafleet server: (http://\S+)")


def make_app(
    db_path: Path | str,
    *,
    token: str | None = None,
    host: str = "127.0.0.1",
    port: int = 8000,
    read_only: bool = False,
) -> Any:
    """The ASGI app exactly as `cafleet server` builds it, validated by the real guard."""
    from cafleet.config import load_settings
    from cafleet.db.guard import SCHEMA_VERSION_KEY, open_validated_connection
    from cafleet.db.runtime import close_connection
    from cafleet.web.app import MAX_BODY, ServerConfig, create_app
    from cafleet.web.security import Policy, host_header_names

    conn = open_validated_connection(str(db_path))
    try:
        version = conn.info[SCHEMA_VERSION_KEY]
    finally:
        close_connection(conn)
    return create_app(
        ServerConfig(
            db_path=str(db_path),
            schema_version=version,
            settings=load_settings(),
            policy=Policy(
                token=token,
                hosts=host_header_names(host, port),
                read_only=read_only,
                cookie=f"cafleet_token_{port}",
                max_body=MAX_BODY,
            ),
        )
    )


def client(app: Any, base_url: str = BASE, **kwargs: Any) -> Any:
    from starlette.testclient import TestClient

    return TestClient(app, base_url=base_url, raise_server_exceptions=False, **kwargs)


def fleet_headers(fleet_id: int) -> dict[str, str]:
    return {"X-Fleet-Id": str(fleet_id)}


# --- the real server ---------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    proc: subprocess.Popen[str]
    url: str  # as printed, token included
    port: int
    lines: list[str]

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def token(self) -> str | None:
        """The token printed in the URL (`cafleet server` requires one unless `--no-token`)."""
        found = re.search(r"[?&]token=([^&\s]+)", self.url)
        return found.group(1) if found else None

    @property
    def auth(self) -> dict[str, str]:
        """The request headers that carry the token (none without one)."""
        return {} if self.token is None else {"Authorization": f"Bearer {self.token}"}

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15) -> int:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)
            raise


def start_server(
    *args: str,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    track: Any = None,
    port: int | None = None,
) -> Server:
    """`python -m cafleet server --port <free> <args>`; waits for the URL line. A port that was
    taken in between (another test, another engineer) is retried with a fresh one."""
    for _attempt in range(5):
        chosen = port or free_port()
        proc = subprocess.Popen(
            [sys.executable, "-m", "cafleet", "server", "--port", str(chosen), *args],
            env=dict(env if env is not None else os.environ),
            cwd=str(cwd) if cwd else None,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        if track is not None:
            track(proc)
        assert proc.stdout is not None
        first = proc.stdout.readline()
        match = URL_RE.match(first)
        if match:
            return Server(proc, match.group(1), chosen, [first])
        rest = first + proc.stdout.read()
        proc.wait(timeout=10)
        if "Address already in use" in rest and port is None:
            continue
        raise AssertionError(f"cafleet server did not start (exit {proc.returncode}): {rest}")
    raise AssertionError("no free port after 5 attempts")


def serve(h: Any, *args: str) -> Server:
    """`start_server` in a private tmux harness's environment and project directory."""
    return start_server(*args, env=h.env, cwd=h.project_dir, track=h.track)


def http(
    method: str,
    url: str,
    *,
    headers: Mapping[str, str] | None = None,
    body: Any = None,
    timeout: float = 10,
) -> tuple[int, dict[str, str], bytes]:
    """One request with the standard library; returns status, headers (lower-case), body."""
    import json
    import urllib.error
    import urllib.request

    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers=dict(headers or {}))
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return (
                response.status,
                {k.lower(): v for k, v in response.headers.items()},
                response.read(),
            )
    except urllib.error.HTTPError as exc:
        return exc.code, {k.lower(): v for k, v in exc.headers.items()}, exc.read()


# --- seeding -----------------------------------------------------------------------------------


def insert_messages(db_path: Path | str, rows: Sequence[tuple[Any, ...]]) -> None:
    """Plain INSERTs: (owner, sender, to, type, created_at, state, status_ts, origin, text)."""
    import sqlite3

    from tests.pg_server import PgDb, PgRaw

    conn: Any = (
        PgRaw(db_path)
        if isinstance(db_path, PgDb)
        else sqlite3.connect(str(db_path), timeout=10, isolation_level=None)
    )
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(
            "INSERT INTO messages (owner_member_id, from_member_id, to_member_id, type, "
            "created_at, status_state, status_timestamp, origin_message_id, text, notified_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(*r, r[4]) for r in rows],
        )
        conn.execute("COMMIT")
    finally:
        conn.close()


def chromium_args() -> list[str]:
    return [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--no-first-run",
    ]


CHROMIUM = "/usr/bin/chromium"


@contextlib.contextmanager
def browser() -> Iterator[Any]:
    """Debian's chromium driven by Playwright (its own browser download is never used)."""
    import pytest
    from playwright.sync_api import sync_playwright

    if not os.path.exists(CHROMIUM):
        if os.environ.get("CAFLEET_REQUIRE_BROWSER") == "1":
            pytest.fail(f"{CHROMIUM} is required (CAFLEET_REQUIRE_BROWSER=1) but missing")
        pytest.skip(f"{CHROMIUM} not installed (apt-get install chromium)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=chromium_args())
        try:
            yield b
        finally:
            b.close()


def poll(predicate: Any, timeout: float = 15, message: str = "condition never held") -> Any:
    return retry_until(predicate, timeout=timeout, message=message)


def unchanged(api: Any, before: Any, db_path: Path | str) -> None:
    """docs/cli.md §4's Unchanged is checked with no connection open: close the server's idle
    connections first (they keep -wal/-shm in place while the server runs)."""
    from tests.cli_helpers import assert_unchanged
    from tests.pg_server import PgDb

    api.app.close()
    assert_unchanged(before, db_path if isinstance(db_path, PgDb) else Path(db_path))
