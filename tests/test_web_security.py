"""The WebUI's security model and the `cafleet server` command (docs/runtime.md §7.3, docs/cli.md §3.4):
Host and Origin checks, the token, `--read-only`, start-up refusals, the missing extra."""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path
from typing import Any

import pytest

from cafleet.db.shapes import HEAD_VERSION
from tests.cli_helpers import assert_unchanged, call_run, snapshot
from tests.delivery_helpers import rows
from tests.factories import World, build_world
from tests.web_helpers import client, fleet_headers, http, make_app, start_server, unchanged

SEND = "/api/messages/send"


@pytest.fixture
def world(head_db: Path) -> World:
    return build_world(head_db, members=("alice",))


def _send(api: Any, world: World, **headers: str) -> Any:
    return api.post(
        SEND,
        headers={**fleet_headers(world.fleet_id), **headers},
        json={"to_member_id": world.members["alice"], "text": "hi"},
    )


# --- Host and Origin ----------------------------------------------------------------------------


@pytest.mark.parametrize("host", ["127.0.0.1:8000", "localhost:8000", "[::1]:8000"])
def test_loopback_names_of_the_server_are_accepted(head_db: Path, world: World, host: str) -> None:
    with client(make_app(head_db)) as api:
        assert api.get("/api/fleets", headers={"Host": host}).status_code == 200


@pytest.mark.parametrize("host", ["evil.example:8000", "127.0.0.1:9999", "attacker.test", ""])
def test_a_foreign_host_is_refused_on_every_route(head_db: Path, world: World, host: str) -> None:
    before = snapshot(head_db)
    with client(make_app(head_db)) as api:
        for response in (
            api.get("/api/fleets", headers={"Host": host}),
            api.get("/", headers={"Host": host}),
            _send(api, world, Host=host),
        ):
            assert response.status_code == 403
            assert response.json() == {"detail": "Host not allowed"}
    unchanged(api, before, head_db)


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "http://evil.example"},
        {"Origin": "null"},
        {"Origin": "http://127.0.0.1:8001"},
        {"Origin": "https://127.0.0.1:8000"},
        {"Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "same-site"},
    ],
)
def test_mutating_routes_refuse_foreign_origins(
    head_db: Path, world: World, headers: dict[str, str]
) -> None:
    before = snapshot(head_db)
    with client(make_app(head_db)) as api:
        for response in (
            _send(api, world, **headers),
            api.patch(
                "/api/monitor",
                headers={**fleet_headers(world.fleet_id), **headers},
                json={"wake_interval_seconds": 1},
            ),
            api.post("/api/monitor/wake", headers={**fleet_headers(world.fleet_id), **headers}),
        ):
            assert (response.status_code, response.json()) == (
                403,
                {"detail": "cross-origin request refused"},
            )
        # reads are not mutating: a foreign Origin may look (the Host rule still applies)
        assert api.get("/api/fleets", headers=headers).status_code == 200
    unchanged(api, before, head_db)


def test_the_servers_own_origin_may_send(head_db: Path, world: World) -> None:
    with client(make_app(head_db)) as api:
        response = _send(
            api, world, Origin="http://127.0.0.1:8000", **{"Sec-Fetch-Site": "same-origin"}
        )
    assert response.status_code == 200, response.text
    assert len(rows(head_db, "SELECT 1 FROM messages")) == 1


def test_a_wildcard_bind_accepts_any_host(head_db: Path, world: World) -> None:
    with client(make_app(head_db, host="0.0.0.0", token="s3cret-token")) as api:
        ok = api.get(
            "/api/fleets", headers={"Host": "box.lan:8000", "Authorization": "Bearer s3cret-token"}
        )
    assert ok.status_code == 200


# --- token ----------------------------------------------------------------------------------------


def test_a_token_guards_every_route(head_db: Path, world: World) -> None:
    token = "tok-123456789"
    before = snapshot(head_db)
    with client(make_app(head_db, token=token)) as api:
        for path in ("/", "/static/app.js", "/openapi.json", "/api/fleets", "/api/nothing"):
            response = api.get(path)
            assert (response.status_code, response.json()) == (
                401,
                {"detail": "missing or wrong token"},
            ), path
            assert api.get(path, headers={"Authorization": "Bearer wrong-token"}).status_code == 401
        assert _send(api, world).status_code == 401
        assert api.get("/?token=nope", follow_redirects=False).status_code == 401
        unchanged(api, before, head_db)
        bearer = {"Authorization": f"Bearer {token}"}
        assert api.get("/api/fleets", headers=bearer).status_code == 200
        # the printed URL's ?token= sets the cookie the page then uses, and drops the token
        response = api.get(f"/?token={token}", follow_redirects=False)
        assert response.status_code == 303 and response.headers["location"] == "/"
        cookie = response.headers["set-cookie"]
        assert cookie.startswith(f"cafleet_token_8000={token};")
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        api.cookies.set("cafleet_token_8000", token)
        assert api.get("/").status_code == 200
        assert api.get("/api/fleets").status_code == 200


# --- read-only ----------------------------------------------------------------------------------


def test_read_only_refuses_every_mutating_route(head_db: Path, world: World) -> None:
    before = snapshot(head_db)
    with client(make_app(head_db, read_only=True)) as api:
        f = fleet_headers(world.fleet_id)
        for response in (
            _send(api, world),
            api.patch("/api/monitor", headers=f, json={"wake_interval_seconds": 1}),
            api.post("/api/monitor/wake", headers=f),
        ):
            assert (response.status_code, response.json()) == (
                403,
                {"detail": "the server is read-only (--read-only)"},
            )
        reads = api.get("/api/timeline", headers=f)
        assert reads.status_code == 200 and reads.headers["x-cafleet-read-only"] == "1"
    unchanged(api, before, head_db)
    with client(make_app(head_db)) as api:
        assert api.get("/api/fleets").headers["x-cafleet-read-only"] == "0"


def test_page_headers_forbid_framing_sniffing_and_inline_script(
    head_db: Path, world: World
) -> None:
    with client(make_app(head_db)) as api:
        page = api.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    csp = page.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert page.headers["x-frame-options"] == "DENY"
    assert page.headers["x-content-type-options"] == "nosniff"
    assert page.headers["referrer-policy"] == "no-referrer"


# --- the command ----------------------------------------------------------------------------------


def test_server_serves_until_sigterm_then_exits_0(
    head_db: Path, world: World, tmp_path: Path
) -> None:
    server = start_server(cwd=tmp_path)
    try:
        assert re.fullmatch(rf"http://127\.0\.0\.1:{server.port}/\?token=[\w-]{{32}}", server.url)
        status, headers, body = http("GET", f"{server.base}/api/fleets", headers=server.auth)
        assert status == 200 and b'"name":"demo"' in body
        status, _h, body = http("GET", f"{server.base}/", headers=server.auth)
        assert status == 200 and b"/static/app.js" in body
        status, _h, _b = http("GET", f"{server.base}/static/app.js", headers=server.auth)
        assert status == 200
    finally:
        code = server.stop(signal.SIGTERM)
    assert code == 0


def test_a_loopback_server_requires_its_token_too(
    head_db: Path, world: World, tmp_path: Path
) -> None:
    """Any local user could send into the agents' panes through 127.0.0.1 with no token."""
    before = snapshot(head_db)
    server = start_server(cwd=tmp_path)
    try:
        assert server.token is not None, server.url
        send = {"to_member_id": world.members["alice"], "text": "rm -rf ~"}
        for headers in ({}, {"Authorization": "Bearer wrong-token-0"}):
            assert http("GET", f"{server.base}/api/fleets", headers=headers)[0] == 401
            status, _h, body = http(
                "POST", f"{server.base}{SEND}", headers={**headers, **fleet_headers(world.fleet_id)},
                body=send,
            )  # fmt: skip
            assert (status, body) == (401, b'{"detail": "missing or wrong token"}')
        assert http("GET", f"{server.base}/", headers={})[0] == 401
    finally:
        assert server.stop() == 0
    assert_unchanged(before, head_db)


def test_no_token_serves_loopback_without_one(head_db: Path, world: World, tmp_path: Path) -> None:
    server = start_server("--no-token", cwd=tmp_path)
    try:
        assert server.url == f"http://127.0.0.1:{server.port}/"
        assert http("GET", f"{server.base}/api/fleets")[0] == 200
    finally:
        assert server.stop() == 0


def test_a_non_loopback_host_gets_a_generated_token(
    head_db: Path, world: World, tmp_path: Path
) -> None:
    server = start_server("--host", "0.0.0.0", cwd=tmp_path)
    try:
        match = re.fullmatch(r"http://[^/]+:(\d+)/\?token=([A-Za-z0-9_-]{32})", server.url)
        assert match, server.url
        token = match.group(2)
        assert http("GET", f"{server.base}/api/fleets")[0] == 401
        assert (
            http("GET", f"{server.base}/api/fleets", headers={"Authorization": f"Bearer {token}"})[
                0
            ]
            == 200
        )
    finally:
        assert server.stop() == 0


@pytest.mark.parametrize("how", ["option", "env"])
def test_a_given_token_is_required_on_loopback_too(
    head_db: Path, world: World, tmp_path: Path, how: str
) -> None:
    token = "given-token-42"
    env = dict(os.environ)
    args: tuple[str, ...] = ()
    if how == "env":
        env["CAFLEET_SERVER_TOKEN"] = token
    else:
        args = ("--token", token)
    server = start_server(*args, env=env, cwd=tmp_path)
    try:
        assert server.url.endswith(f"/?token={token}")
        assert http("GET", f"{server.base}/api/fleets")[0] == 401
        assert (
            http("GET", f"{server.base}/api/fleets", headers={"Authorization": f"Bearer {token}"})[
                0
            ]
            == 200
        )
    finally:
        server.stop()


def test_read_only_flag_is_printed_and_enforced(
    head_db: Path, world: World, tmp_path: Path
) -> None:
    server = start_server("--read-only", cwd=tmp_path)
    try:
        assert server.lines[0].rstrip().endswith("(read-only)")
        status, _h, body = http(
            "POST",
            f"{server.base}{SEND}",
            headers={**server.auth, **fleet_headers(world.fleet_id)},
            body={"to_member_id": world.members["alice"], "text": "x"},
        )
        assert (status, body) == (403, b'{"detail": "the server is read-only (--read-only)"}')
    finally:
        server.stop()


def test_env_host_and_port_are_read_and_options_win(
    head_db: Path, world: World, tmp_path: Path
) -> None:
    from tests.web_helpers import free_port

    port = free_port()
    env = {**os.environ, "CAFLEET_BROKER_HOST": "localhost", "CAFLEET_BROKER_PORT": "1"}
    server = start_server("--host", "127.0.0.1", env=env, cwd=tmp_path, port=port)
    try:
        assert server.url.startswith(f"http://127.0.0.1:{port}/?token=")
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("env", "args", "code", "text"),
    [
        ({"CAFLEET_BROKER_PORT": "0"}, [], 1, "Error: CAFLEET_BROKER_PORT must be an integer from 1 to 65535 (got '0')"),
        ({"CAFLEET_BROKER_PORT": "65536"}, [], 1, "Error: CAFLEET_BROKER_PORT must be an integer from 1 to 65535 (got '65536')"),
        ({"CAFLEET_BROKER_PORT": "http"}, [], 1, "Error: CAFLEET_BROKER_PORT must be an integer from 1 to 65535 (got 'http')"),
        ({"CAFLEET_SERVER_TOKEN": "short"}, [], 1, "Error: CAFLEET_SERVER_TOKEN must be 8-256 characters from A-Z a-z 0-9 . _ ~ -"),
        ({}, ["--port", "0"], 2, "Error: Invalid value for '--port': 0 is not in the range 1<=x<=65535."),
        ({}, ["--token", "a b c d e f g h"], 2, "Error: --token must be 8-256 characters from A-Z a-z 0-9 . _ ~ -"),
        ({}, ["--no-token", "--token", "given-token-42"], 2, "Error: --no-token and --token cannot go together"),
        ({}, ["--no-token", "--host", "0.0.0.0"], 2, "Error: --no-token needs a loopback --host (not 0.0.0.0): any machine could send into the agents' panes"),
        ({"CAFLEET_MAX_TEXT_LEN": "x"}, [], 1, "Error: CAFLEET_MAX_TEXT_LEN must be a non-negative integer (got 'x')"),
    ],
)  # fmt: skip
def test_bad_settings_stop_before_anything_listens(
    head_db: Path, env: dict[str, str], args: list[str], code: int, text: str
) -> None:
    before = snapshot(head_db)
    result = call_run("server", *args, env=env)
    assert result.returncode == code
    assert text in result.stderr.splitlines()
    assert result.stdout == ""
    assert_unchanged(before, head_db)


def test_a_missing_database_refuses_to_start(db_path: Path) -> None:
    result = call_run("server")
    assert (result.returncode, result.stderr) == (
        1,
        "Error: no cafleet database; run 'cafleet setup'\n",
    )
    assert not db_path.exists()


def test_a_database_failing_diagnosis_refuses_to_start_unchanged(head_db: Path) -> None:
    from tests.delivery_helpers import sql_write

    # A newer ledger: refused before any shape is compared (a stale ledger on this file would
    # read as damaged, not behind, once a later revision changed a table).
    sql_write(head_db, f"UPDATE alembic_version SET version_num = '{HEAD_VERSION + 1:04d}'")
    before = snapshot(head_db)
    result = call_run("server")
    assert result.returncode == 1
    assert result.stderr == (
        f"Error: database schema {HEAD_VERSION + 1} is newer than this cafleet (head "
        f"{HEAD_VERSION}); upgrade cafleet\n"
    )
    assert result.stdout == ""
    assert_unchanged(before, head_db)


def test_an_address_in_use_is_an_error(head_db: Path, world: World, tmp_path: Path) -> None:
    server = start_server(cwd=tmp_path)
    try:
        result = call_run("server", "--port", str(server.port))
        assert result.returncode == 1
        assert result.stderr == (
            f"Error: cannot listen on 127.0.0.1:{server.port}: Address already in use\n"
        )
    finally:
        server.stop()


def test_without_the_web_extra_the_error_names_the_install_command(
    head_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    real = importlib.util.find_spec

    def hide(name: str, *args: Any, **kwargs: Any) -> Any:
        return None if name in ("fastapi", "uvicorn") else real(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", hide)
    result = call_run("server")
    assert result.returncode == 1
    assert result.stderr == (
        "Error: cafleet server needs FastAPI and uvicorn, which are not installed; "
        "install them with: pip install 'cafleet[web]'\n"
    )


def test_server_help_imports_no_web_stack(db_path: Path) -> None:
    from tests.cli_helpers import imported_after

    code, found = imported_after(
        ["server", "--help"], modules=("fastapi", "uvicorn", "starlette", "pydantic")
    )
    assert code == 0
    assert [m for m in found if m in ("fastapi", "uvicorn", "starlette", "pydantic")] == []
    assert not db_path.exists()
