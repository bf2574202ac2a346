"""Every route's responses checked against the served OpenAPI schema with schemathesis: chosen
requests that reach each route's success and error answers, then generated ones."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from cafleet.db.timefmt import now_ts
from tests.delivery_helpers import sql_write
from tests.factories import World, build_world, connect
from tests.web_helpers import client, make_app

pytest.importorskip("schemathesis")  # the test extra installs it; CI always has it

from schemathesis.checks import not_a_server_error  # noqa: E402
from schemathesis.specs.openapi.checks import (  # noqa: E402
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


@pytest.fixture
def served(head_db: Path) -> tuple[Any, World]:
    import schemathesis

    world = build_world(head_db, members=("alice", "bob"), pending=("bob",))
    from cafleet import broker
    from cafleet.db.timefmt import now_ts

    with connect(head_db) as conn:
        broker.send_message(
            conn, from_member_id=world.director, to_member_id=world.members["alice"], text="hi"
        )
        broker.broadcast_message(conn, from_member_id=world.director, text="all")
        for title in ("open", "done", "reviewed", "rejected"):
            broker.create_task(
                conn,
                fleet_id=world.fleet_id,
                title=title,
                body="",
                creator_id=world.director,
                assignee_id=world.members["alice"],
            )
        broker.finish_task(conn, task_id=2, member_id=world.members["alice"], result="ok")
        # Task 3 done on a branch of a real repository (docs/cli.md §2.37); task 4 done.
        from cafleet.records.tasks import GitWork
        from tests.git_helpers import git, init_repo

        repo = head_db.parent / "repo"
        repo.mkdir()
        init_repo(repo)
        git(repo, "checkout", "-q", "-b", "feature")
        (repo / "f.txt").write_text("f\n")
        git(repo, "add", "f.txt")
        git(repo, "commit", "-qm", "f")
        git(repo, "checkout", "-q", "main")
        head = git(repo, "rev-parse", "feature").strip()
        work = GitWork(str(repo), "feature", "main", head)
        alice = world.members["alice"]
        broker.finish_task(conn, task_id=3, member_id=alice, result="ok", git=work)
        broker.finish_task(conn, task_id=4, member_id=alice, result="ok")
    stamp = now_ts()
    sql_write(
        head_db,
        "INSERT INTO monitor_runtime (fleet_id, pid, started_at, last_tick_at, wake_interval_seconds) "
        "VALUES (?, ?, ?, ?, 60)",
        world.fleet_id,
        os.getpid(),
        stamp,
        stamp,
    )
    # A wildcard bind accepts schemathesis's `testserver` Host; the Host rule has its own tests.
    app = make_app(head_db, host="0.0.0.0")
    return schemathesis.openapi.from_asgi("/openapi.json", app), world


def test_the_schema_is_served_and_errors_are_detail_strings(head_db: Path) -> None:
    build_world(head_db)
    with client(make_app(head_db)) as api:
        schema = api.get("/openapi.json").json()
    assert schema["components"]["schemas"]["ErrorOut"]["properties"]["detail"]["type"] == "string"
    assert "HTTPValidationError" not in schema["components"]["schemas"]
    for path, ops in schema["paths"].items():
        for op in ops.values():
            for code, response in op["responses"].items():
                if code[0] in "45":
                    assert response["content"]["application/json"]["schema"] == {
                        "$ref": "#/components/schemas/ErrorOut"
                    }, (path, code)


def _cases(world: World) -> list[tuple[str, str, dict[str, Any]]]:
    f = {"X-Fleet-Id": str(world.fleet_id)}
    alice = world.members["alice"]
    bob = world.members["bob"]
    return [
        ("GET", "/api/fleets", {}),
        ("GET", "/api/members", {"headers": f}),
        ("GET", "/api/members", {"headers": {"X-Fleet-Id": "nope"}}),
        ("GET", "/api/members", {"headers": {"X-Fleet-Id": "77"}}),
        ("GET", "/api/members/activity", {"headers": f}),
        ("GET", "/api/members/panes", {"headers": f}),
        ("GET", "/api/members/usage", {"headers": f}),
        ("GET", "/api/members/worktrees", {"headers": f}),
        ("GET", "/api/members/{member_id}/inbox", {"headers": f, "path_parameters": {"member_id": alice}}),
        ("GET", "/api/members/{member_id}/inbox", {"headers": f, "path_parameters": {"member_id": 999}}),
        ("GET", "/api/members/{member_id}/inbox", {"headers": f, "path_parameters": {"member_id": alice}, "query": {"limit": 0}}),
        ("GET", "/api/members/{member_id}/sent", {"headers": f, "path_parameters": {"member_id": world.director}, "query": {"limit": 1}}),
        ("GET", "/api/members/{member_id}/capture", {"headers": f, "path_parameters": {"member_id": bob}}),
        ("GET", "/api/members/{member_id}/capture", {"headers": f, "path_parameters": {"member_id": alice}}),
        ("GET", "/api/timeline", {"headers": f}),
        ("GET", "/api/timeline", {}),
        ("POST", "/api/messages/send", {"headers": f, "body": {"to_member_id": alice, "text": "x"}}),
        ("POST", "/api/messages/send", {"headers": f, "body": {"to_member_id": "*", "text": "x"}}),
        ("POST", "/api/messages/send", {"headers": f, "body": {"to_member_id": 999, "text": "x"}}),
        ("POST", "/api/messages/send", {"headers": f, "body": {"to_member_id": alice, "text": ""}}),
        ("GET", "/api/monitor", {"headers": f}),
        ("PATCH", "/api/monitor", {"headers": f, "body": {"wake_interval_seconds": 30}}),
        ("PATCH", "/api/monitor", {"headers": f, "body": {"wake_interval_seconds": -3}}),
        ("POST", "/api/monitor/wake", {"headers": f}),
        ("POST", "/api/monitor/wake", {"headers": {"X-Fleet-Id": "77"}}),
        ("GET", "/api/members/{member_id}/prompt", {"headers": f, "path_parameters": {"member_id": bob}}),
        ("GET", "/api/members/{member_id}/prompt", {"headers": f, "path_parameters": {"member_id": 999}}),
        ("POST", "/api/members/{member_id}/answer", {"headers": f, "path_parameters": {"member_id": bob}, "body": {"choice": "1", "prompt_id": "0badcafe"}}),
        ("POST", "/api/members/{member_id}/answer", {"headers": f, "path_parameters": {"member_id": alice}, "body": {"choice": "1", "prompt_id": "not-hex"}}),
        ("GET", "/api/tasks", {"headers": f}),
        ("GET", "/api/tasks", {"headers": f, "query": {"state": "nope"}}),
        ("GET", "/api/tasks/{task_id}", {"headers": f, "path_parameters": {"task_id": 1}}),
        ("GET", "/api/tasks/{task_id}", {"headers": f, "path_parameters": {"task_id": 999}}),
        ("POST", "/api/tasks", {"headers": f, "body": {"title": "web", "assignee_member_id": alice, "after": [1]}}),
        ("POST", "/api/tasks", {"headers": f, "body": {"title": " "}}),
        ("POST", "/api/tasks/{task_id}/assign", {"headers": f, "path_parameters": {"task_id": 1}, "body": {"member_id": alice}}),
        ("POST", "/api/tasks/{task_id}/assign", {"headers": f, "path_parameters": {"task_id": 2}, "body": {"member_id": alice}}),
        ("POST", "/api/tasks/{task_id}/reopen", {"headers": f, "path_parameters": {"task_id": 2}}),
        ("POST", "/api/tasks/{task_id}/reopen", {"headers": f, "path_parameters": {"task_id": 1}}),
        ("POST", "/api/tasks/{task_id}/cancel", {"headers": f, "path_parameters": {"task_id": 1}}),
        ("POST", "/api/tasks/{task_id}/cancel", {"headers": f, "path_parameters": {"task_id": 999}}),
        ("GET", "/api/merges", {"headers": f}),
        ("GET", "/api/tasks/{task_id}/diff", {"headers": f, "path_parameters": {"task_id": 3}}),
        ("GET", "/api/tasks/{task_id}/diff", {"headers": f, "path_parameters": {"task_id": 4}}),
        ("POST", "/api/tasks/{task_id}/merge", {"headers": f, "path_parameters": {"task_id": 3}, "body": {"gate": "true"}}),
        ("POST", "/api/tasks/{task_id}/merge", {"headers": f, "path_parameters": {"task_id": 3}, "body": {}}),
        ("POST", "/api/tasks/{task_id}/reject", {"headers": f, "path_parameters": {"task_id": 4}, "body": {"text": " "}}),
        ("POST", "/api/tasks/{task_id}/reject", {"headers": f, "path_parameters": {"task_id": 4}, "body": {"text": "redo"}}),
        ("POST", "/api/tasks/{task_id}/reject", {"headers": f, "path_parameters": {"task_id": 4}, "body": {"text": "again"}}),
    ]  # fmt: skip


def test_chosen_requests_reach_every_route_and_conform(served: tuple[Any, World]) -> None:
    schema, world = served
    operations = {(op.ok().method.upper(), op.ok().path) for op in schema.get_all_operations()}
    covered: dict[tuple[str, str], set[int]] = {}
    for method, path, parts in _cases(world):
        if path == "/api/monitor/wake":
            # A wake needs a fresh heartbeat; under load the calls before it can outlast one.
            sql_write(world.db_path, "UPDATE monitor_runtime SET last_tick_at = ?", now_ts())
        case = schema[path][method].Case(**parts)
        response = case.call()
        case.validate_response(response, checks=CHECKS)
        covered.setdefault((method, path), set()).add(response.status_code)
    assert set(covered) == operations  # every route in the schema was called
    # each one succeeded, but capture, prompt and answer, which need tmux (capture: its own test
    # below; prompt and answer: tests/test_web_prompts.py)
    needs_tmux = ("capture", "prompt", "answer")
    never_ok = {
        key: codes
        for key, codes in covered.items()
        if 200 not in codes and not any(w in key[1] for w in needs_tmux)
    }
    assert never_ok == {}
    assert {400, 404, 409, 422} <= set().union(*covered.values())


@pytest.mark.parametrize(
    "route",
    [
        ("GET", "/api/fleets"),
        ("GET", "/api/members"),
        ("GET", "/api/members/activity"),
        ("GET", "/api/members/panes"),
        ("GET", "/api/members/worktrees"),
        ("GET", "/api/members/{member_id}/inbox"),
        ("GET", "/api/members/{member_id}/sent"),
        ("GET", "/api/members/{member_id}/capture"),
        ("GET", "/api/timeline"),
        ("POST", "/api/messages/send"),
        ("GET", "/api/monitor"),
        ("PATCH", "/api/monitor"),
        ("POST", "/api/monitor/wake"),
        ("GET", "/api/tasks"),
        ("GET", "/api/tasks/{task_id}"),
        ("POST", "/api/tasks"),
        ("POST", "/api/tasks/{task_id}/assign"),
        ("POST", "/api/tasks/{task_id}/reopen"),
        ("POST", "/api/tasks/{task_id}/cancel"),
        ("GET", "/api/merges"),
        ("GET", "/api/tasks/{task_id}/diff"),
        ("POST", "/api/tasks/{task_id}/reject"),
        # not `merge`: a generated gate would be a shell command
    ],
)
def test_generated_requests_conform(served: tuple[Any, World], route: tuple[str, str]) -> None:
    from hypothesis import HealthCheck, given, settings

    schema, world = served
    method, path = route
    operation = schema[path][method]
    seen: set[int] = set()

    @settings(
        max_examples=12,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy())
    def check(case: Any) -> None:
        # Half the cases keep the generated header (mostly malformed); half name the fleet.
        if case.headers is not None and "X-Fleet-Id" in case.headers and len(seen) % 2 == 0:
            case.headers["X-Fleet-Id"] = str(world.fleet_id)
        response = case.call()
        seen.add(response.status_code)
        case.validate_response(response, checks=CHECKS)

    check()
    assert seen


def test_capture_and_pane_states_with_tmux_conform(tmux_db: Any, monkeypatch: Any) -> None:
    import schemathesis

    world = build_world(tmux_db.db_path, members=("alice",), harness=tmux_db)
    app = make_app(tmux_db.db_path, host="0.0.0.0")
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    f = {"X-Fleet-Id": str(world.fleet_id)}
    alice = world.members["alice"]
    # the in-process backend reaches the private server through TMUX
    monkeypatch.setenv("TMUX", tmux_db.env["TMUX"])
    case = schema["/api/members/{member_id}/capture"]["GET"].Case(
        headers=f, path_parameters={"member_id": alice}, query={"lines": 5}
    )
    response = case.call()
    case.validate_response(response, checks=CHECKS)
    assert response.status_code == 200 and "fake-claude ready" in response.text
    case = schema["/api/members/panes"]["GET"].Case(headers=f)
    response = case.call()
    case.validate_response(response, checks=CHECKS)
    states = {p["member_id"]: p["state"] for p in response.json()["panes"]}
    assert states[alice] == "alive"
