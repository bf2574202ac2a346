"""The WebUI's task board in process (docs/webui.md): the board and a task's page as the CLI's
`task list`/`task show` see them, create/assign/reopen/cancel through the task workflows, and
every refusal (bad input, another fleet's task, cross-origin, read-only) writing nothing. Real
files, the real guard, no tmux (the assignment lines wait for the loop)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cafleet import broker
from tests.cli_helpers import snapshot
from tests.delivery_helpers import rows
from tests.factories import World, build_world, connect
from tests.web_helpers import client, fleet_headers, make_app, unchanged


@pytest.fixture
def world(head_db: Path) -> World:
    return build_world(head_db, members=("alice", "bob"))


@pytest.fixture
def api(head_db: Path, world: World) -> Any:
    with client(make_app(head_db)) as c:
        yield c


def post(api: Any, world: World, path: str, body: Any = None, **headers: str) -> Any:
    return api.post(path, headers={**fleet_headers(world.fleet_id), **headers}, json=body)


def get(api: Any, world: World, path: str) -> Any:
    return api.get(path, headers=fleet_headers(world.fleet_id))


def make_task(world: World, title: str = "t", **kw: Any) -> int:
    with connect(world.db_path) as conn:
        change = broker.create_task(
            conn,
            fleet_id=world.fleet_id,
            title=title,
            body=kw.pop("body", ""),
            creator_id=world.director,
            assignee_id=kw.pop("assignee_id", None),
            **kw,
        )
    return change.task.task_id


def test_board_lists_every_task_with_assignee_age_and_cost(api: Any, world: World) -> None:
    alice = world.members["alice"]
    first = make_task(world, "first", assignee_id=alice)
    second = make_task(world, "second", after=[first])
    with connect(world.db_path) as conn:
        broker.claim_task(conn, task_id=first, member_id=alice)
    response = get(api, world, "/api/tasks")
    assert response.status_code == 200, response.text
    board = response.json()
    assert [(t["task_id"], t["state"], t["assignee_member_id"], t["after"]) for t in board] == [
        (first, "in_progress", alice, []),
        (second, "waiting", None, [first]),
    ]
    # the record's fields, then the board's own
    assert list(board[0])[:3] == ["task_id", "fleet_id", "title"]
    assert all(t["age_seconds"] >= 0 for t in board)
    assert board[0]["cost_usd"] is None and board[0]["cost_unknown_reason"]
    assert (board[1]["cost_usd"], board[1]["cost_unknown_reason"]) == (0.0, None)  # not started
    only = get(api, world, "/api/tasks?state=waiting").json()
    assert [t["task_id"] for t in only] == [second]
    bad = get(api, world, "/api/tasks?state=finished")
    assert bad.status_code == 422


def test_task_page_is_task_show_with_its_thread(api: Any, world: World) -> None:
    alice = world.members["alice"]
    task_id = make_task(world, "threaded", assignee_id=alice, body="the brief")
    with connect(world.db_path) as conn:
        broker.store_task_send(
            conn,
            from_member_id=alice,
            to_member_id=world.director,
            text="working on it",
            token=None,
            task_id=task_id,
            reply_to=None,
        )
    page = get(api, world, f"/api/tasks/{task_id}").json()
    assert page["task"]["title"] == "threaded" and page["task"]["body"] == "the brief"
    assert set(page["seconds_in_state"]) == {"ready"}
    texts = [m["text"] for m in page["thread"]]
    # the assignment cafleet sent to alice, then her reply: every message with the task
    assert len(texts) == 2 and "threaded" in texts[0] and texts[1] == "working on it"
    assert all(m["task_id"] == task_id for m in page["thread"])


def test_create_assign_cancel_and_reopen_change_the_rows(api: Any, world: World) -> None:
    alice, bob = world.members["alice"], world.members["bob"]
    made = post(api, world, "/api/tasks", {"title": "build it", "body": "all of it"})
    assert made.status_code == 200, made.text
    task = made.json()["task"]
    assert (task["state"], task["assignee_member_id"], task["creator_member_id"]) == (
        "ready",
        None,
        world.director,
    )
    task_id = task["task_id"]
    after = post(api, world, "/api/tasks", {"title": "then", "assignee_member_id": bob,
                                            "after": [task_id]}).json()["task"]  # fmt: skip
    assert (after["state"], after["after"]) == ("waiting", [task_id])

    assigned = post(api, world, f"/api/tasks/{task_id}/assign", {"member_id": alice})
    assert assigned.status_code == 200, assigned.text
    assert assigned.json()["task"]["assignee_member_id"] == alice
    # assigned while ready: alice is sent the task, as `task assign` does
    sent = rows(world.db_path, "SELECT to_member_id, task_id FROM messages WHERE task_id = ?",
                task_id)  # fmt: skip
    assert [tuple(r) for r in sent] == [(alice, task_id)]

    cancelled = post(api, world, f"/api/tasks/{task_id}/cancel").json()["task"]
    assert cancelled["state"] == "cancelled" and cancelled["finished_at"] is not None
    reopened = post(api, world, f"/api/tasks/{task_id}/reopen").json()["task"]
    assert reopened["state"] == "ready" and reopened["finished_at"] is None
    states = rows(world.db_path, "SELECT state FROM tasks WHERE task_id = ?", task_id)
    assert states[0][0] == "ready"


@pytest.mark.parametrize(
    ("path", "body", "status", "text"),
    [
        ("/api/tasks", {"title": "  "}, 422, "title: must not be empty"),
        ("/api/tasks", {"title": "x", "body": "a\x00b"}, 422, "body: may not contain NUL"),
        ("/api/tasks", {"title": "x", "assignee_member_id": 999}, 404, "member 999"),
        ("/api/tasks", {"title": "x", "after": [999]}, 404, "task 999"),
        ("/api/tasks", {"title": "x", "extra": 1}, 422, "extra"),
        ("/api/tasks", {}, 422, "title"),
        ("/api/tasks/{task}/assign", {"member_id": 999}, 404, "member 999"),
        ("/api/tasks/{task}/assign", {"member_id": "{other_member}"}, 409, "not fleet"),
        ("/api/tasks/{task}/assign", {}, 422, "member_id"),
        ("/api/tasks/{other_task}/cancel", None, 404, "task"),
        ("/api/tasks/{other_task}/assign", {"member_id": "{alice}"}, 404, "task"),
        ("/api/tasks/{done}/cancel", None, 409, "it is done"),
        ("/api/tasks/{task}/reopen", None, 409, "cannot be reopened"),
        ("/api/tasks/999/reopen", None, 404, "task 999"),
        ("/api/tasks/0/cancel", None, 422, "task_id"),
    ],
)
def test_bad_input_is_one_clear_error_and_writes_nothing(
    head_db: Path, world: World, path: str, body: Any, status: int, text: str
) -> None:
    alice = world.members["alice"]
    other = build_world(head_db, members=("zed",), fleet_name="other")
    ids = {
        "task": make_task(world),
        "done": make_task(world, assignee_id=alice),
        "other_task": make_task(other),
        "other_member": other.members["zed"],
        "alice": alice,
    }
    with connect(head_db) as conn:
        broker.finish_task(conn, task_id=ids["done"], member_id=alice, result=None)
    if isinstance(body, dict):
        body = {k: int(v.format(**ids)) if isinstance(v, str) and "{" in v else v
                for k, v in body.items()}  # fmt: skip
    before = snapshot(head_db)
    with client(make_app(head_db)) as api:
        response = post(api, world, path.format(**ids), body)
        assert response.status_code == status, response.text
        assert text in response.json()["detail"]
        unchanged(api, before, head_db)


def test_another_fleets_task_page_is_not_found(head_db: Path, world: World, api: Any) -> None:
    other = build_world(head_db, members=("zed",), fleet_name="other")
    response = get(api, world, f"/api/tasks/{make_task(other)}")
    assert response.status_code == 404 and "task" in response.json()["detail"]


@pytest.mark.parametrize(
    "headers",
    [{"Origin": "http://evil.example"}, {"Sec-Fetch-Site": "cross-site"}],
)
def test_task_changes_refuse_foreign_origins(
    head_db: Path, world: World, headers: dict[str, str]
) -> None:
    task_id = make_task(world)
    before = snapshot(head_db)
    with client(make_app(head_db)) as api:
        for path, body in _changes(world, task_id):
            response = post(api, world, path, body, **headers)
            assert (response.status_code, response.json()) == (
                403,
                {"detail": "cross-origin request refused"},
            ), path
        assert get(api, world, "/api/tasks").status_code == 200  # reading is not refused
        unchanged(api, before, head_db)


def test_read_only_refuses_every_task_change(head_db: Path, world: World) -> None:
    task_id = make_task(world)
    before = snapshot(head_db)
    with client(make_app(head_db, read_only=True)) as api:
        for path, body in _changes(world, task_id):
            response = post(api, world, path, body)
            assert (response.status_code, response.json()) == (
                403,
                {"detail": "the server is read-only (--read-only)"},
            ), path
        board = get(api, world, "/api/tasks")
        assert board.status_code == 200 and board.headers["x-cafleet-read-only"] == "1"
        unchanged(api, before, head_db)


def test_a_token_guards_the_board(head_db: Path, world: World) -> None:
    task_id = make_task(world)
    before = snapshot(head_db)
    with client(make_app(head_db, token="tok-123456789")) as api:
        assert get(api, world, "/api/tasks").status_code == 401
        for path, body in _changes(world, task_id):
            assert post(api, world, path, body).status_code == 401, path
        unchanged(api, before, head_db)
        bearer = {**fleet_headers(world.fleet_id), "Authorization": "Bearer tok-123456789"}
        assert [t["task_id"] for t in api.get("/api/tasks", headers=bearer).json()] == [task_id]


def _changes(world: World, task_id: int) -> list[tuple[str, Any]]:
    return [
        ("/api/tasks", {"title": "nope"}),
        (f"/api/tasks/{task_id}/assign", {"member_id": world.members["alice"]}),
        (f"/api/tasks/{task_id}/cancel", None),
        (f"/api/tasks/{task_id}/reopen", None),
    ]


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/api/tasks"),
        ("GET", "/api/tasks/1"),
        ("POST", "/api/tasks"),
        ("POST", "/api/tasks/1/assign"),
        ("POST", "/api/tasks/1/reopen"),
        ("POST", "/api/tasks/1/cancel"),
    ],
)
def test_every_task_route_names_its_fleet(api: Any, world: World, method: str, path: str) -> None:
    make_task(world)
    body = {"title": "x"} if path == "/api/tasks" else {"member_id": world.members["alice"]}
    for headers, status, text in (
        ({}, 400, "X-Fleet-Id header required"),
        ({"X-Fleet-Id": "abc"}, 400, "X-Fleet-Id must be an integer"),
        ({"X-Fleet-Id": "999"}, 404, "Fleet not found"),
    ):
        response = api.request(
            method, path, headers=headers, json=body if method == "POST" else None
        )
        assert (response.status_code, response.json()) == (status, {"detail": text})
    assert rows(world.db_path, "SELECT count(*) FROM tasks")[0][0] == 1
