"""A task's cost (docs/webui.md): what its assignee's agent recorded while the task was in
progress, to `SPAN_SECONDS`, from records in each agent's real format (tests/test_sessions.py's
shapes); on the board and the task's page."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cafleet import broker
from cafleet.config import load_settings
from cafleet.records.tasks import TaskEvent
from cafleet.sessions import Tally, records_of, timed_between
from cafleet.sessions.prices import cost, load
from cafleet.workflows import task_costs
from tests.cli_helpers import run_cli
from tests.delivery_helpers import sql_write
from tests.factories import World, build_world, connect
from tests.test_sessions import (
    T0,
    claude_session,
    claude_user,
    codex_rollout,
    iso,
    opencode_db,
    opencode_session,
    token_count,
    u,
)
from tests.web_helpers import client, fleet_headers, make_app

MODEL = "claude-sonnet-4-5-20250929"


def at(t: float) -> datetime:
    return datetime.fromtimestamp(t, UTC)


def reply(msg_id: str, usage: dict[str, int], t: float) -> dict[str, Any]:
    return {"type": "assistant", "requestId": msg_id, "timestamp": iso(t),
            "message": {"id": msg_id, "model": MODEL, "role": "assistant", "content": [],
                        "usage": usage}}  # fmt: skip


def worked(world: World, member_id: int, spans: list[tuple[float, float]]) -> int:
    """A task `member_id` claimed and left (blocked, then done) at the given times."""
    with connect(world.db_path) as conn:
        task_id = broker.create_task(conn, fleet_id=world.fleet_id, title="t", body="",
                                     creator_id=world.director, assignee_id=member_id,
                                     now=at(T0)).task.task_id  # fmt: skip
        for n, (start, end) in enumerate(spans):
            broker.claim_task(conn, task_id=task_id, member_id=member_id, now=at(start))
            if n + 1 < len(spans):
                broker.block_task(conn, task_id=task_id, member_id=member_id, reason="wait",
                                  now=at(end))  # fmt: skip
            else:
                broker.finish_task(conn, task_id=task_id, member_id=member_id, result=None,
                                   now=at(end))  # fmt: skip
    return task_id


def test_a_task_costs_what_its_assignee_used_while_it_was_in_progress(head_db: Path) -> None:
    world_home = Path(os.environ["HOME"])  # the test's own (tests/conftest.py)
    world = build_world(head_db, members=("alice", "bob"))
    alice = world.members["alice"]
    claude_session(world_home, "/p", "s-alice", [
        claude_user("hello", "/p", T0 + 1),
        reply("before", u(1000, 1000), T0 + 50),     # before the claim
        reply("first", u(10, 20, 30, 40), T0 + 105),  # in progress
        reply("paused", u(500, 500), T0 + 160),      # blocked
        reply("second", u(1, 2, 3, 4), T0 + 215),    # in progress again
        reply("after", u(7000, 7000), T0 + 300),     # done
    ])  # fmt: skip
    # the session `cafleet` learned for alice's spawn
    sql_write(head_db, "INSERT INTO member_spawns (member_id, agent_session_id) VALUES (?, ?)",
              alice, "s-alice")  # fmt: skip
    task_id = worked(world, alice, [(T0 + 100, T0 + 150), (T0 + 210, T0 + 250)])
    unstarted = worked(world, world.members["bob"], [])
    expected = Tally()
    expected.add(MODEL, (11, 22, 33, 44))
    price = cost(expected, load())
    assert price is not None and price > 0

    with client(make_app(head_db)) as api:
        board = {t["task_id"]: t for t in
                 api.get("/api/tasks", headers=fleet_headers(world.fleet_id)).json()}  # fmt: skip
        page = api.get(f"/api/tasks/{task_id}", headers=fleet_headers(world.fleet_id)).json()
    assert (board[task_id]["cost_usd"], board[task_id]["cost_unknown_reason"]) == (price, None)
    assert page["task"]["cost_usd"] == price
    # never in progress: it used nothing
    assert (board[unstarted]["cost_usd"], board[unstarted]["cost_unknown_reason"]) == (0.0, None)
    with connect(head_db) as conn:
        found = task_costs.costs(conn, load_settings(), [broker.get_task(conn, task_id)])[task_id]
    assert found.tally is not None and found.tally.by_model == expected.by_model
    # `task show` says the same, as `member usage` counts a member's
    code, out, err = run_cli("task", "show", str(task_id), "--json")
    assert code == 0, err
    assert json.loads(out)["task"]["in_progress_usage"] == {
        "usage": {"input": 11, "output": 22, "cache_read": 33, "cache_write": 44},
        "cost_usd": price,
        "unknown_reason": None,
    }
    code, out, err = run_cli("task", "show", str(unstarted))
    assert code == 0 and "used in progress: in 0 · out 0 · cache 0 · $0.0000" in out, err
    # reopened, it keeps what was used before (its `started_at` is cleared)
    with connect(head_db) as conn:
        broker.reopen_task(conn, task_id=task_id, now=at(T0 + 400))
        again = task_costs.costs(conn, load_settings(), [broker.get_task(conn, task_id)])
    assert again[task_id].usd == price


def test_an_unknown_session_is_an_unknown_cost_with_its_reason(head_db: Path) -> None:
    world = build_world(head_db, members=("alice",))
    task_id = worked(world, world.members["alice"], [(T0 + 100, T0 + 150)])
    with client(make_app(head_db)) as api:
        (task,) = api.get("/api/tasks", headers=fleet_headers(world.fleet_id)).json()
    assert task["task_id"] == task_id
    assert (task["cost_usd"], task["cost_unknown_reason"]) == (None, "no session known yet")


def test_in_progress_spans_follow_the_events_up_to_now() -> None:
    with_events = [
        TaskEvent("ready", iso(T0), None),
        TaskEvent("in_progress", iso(T0 + 10), 5),
        TaskEvent("blocked", iso(T0 + 20), 5),
        TaskEvent("in_progress", iso(T0 + 30), 6),
    ]
    task: Any = type("T", (), {"assignee_member_id": 6})()
    spans = task_costs.in_progress_spans(with_events, task, at(T0 + 45))
    assert spans == [(5, T0 + 10, T0 + 20), (6, T0 + 30, T0 + 45)]


def test_codex_and_opencode_usage_is_kept_per_span_of_time(tmp_path: Path) -> None:
    home = tmp_path / "h"
    env = {"HOME": str(home)}
    sid = "019a0000-0000-7000-8000-000000000001"
    early, late = (
        token_count((100, 40, 10), (100, 40, 10)),
        token_count((250, 90, 30), (150, 50, 20)),
    )
    early["timestamp"], late["timestamp"] = iso(T0 + 20), iso(T0 + 500)
    codex_rollout(home, sid, "/w", "go", events=[early, late])
    codex = records_of("codex")
    state = codex.read_usage(codex.locate(env, sid), {})  # type: ignore[arg-type]
    assert timed_between(state["timed"], T0 + 400, T0 + 600).totals() == (100, 20, 50, 0)

    conn = opencode_db(home)
    opencode_session(conn, "ses_1", "/w", "go", tokens=(30, 60, 9, 4))
    for n, (t, tokens) in enumerate([(T0 + 20, (10, 20, 3, 1)), (T0 + 500, (20, 40, 6, 3))]):
        data = {"role": "assistant", "modelID": "claude-sonnet-4-5",
                "tokens": {"input": tokens[0], "output": tokens[1], "reasoning": 0,
                           "cache": {"read": tokens[2], "write": tokens[3]}}}  # fmt: skip
        conn.execute("INSERT INTO message VALUES (?,?,?,?)",
                     (f"msg_a{n}", "ses_1", int(t * 1000), json.dumps(data)))  # fmt: skip
    conn.commit()
    opencode = records_of("opencode")
    state = opencode.read_usage(opencode.locate(env, "ses_1"), {})  # type: ignore[arg-type]
    late_only = timed_between(state["timed"], T0 + 400, T0 + 600)
    assert late_only.by_model == {"claude-sonnet-4-5": [20, 40, 6, 3]}


def test_an_old_usage_cache_is_read_again_for_its_times(tmp_path: Path) -> None:
    from cafleet.sessions.usage import Subject, cache_path, read_usage

    home, db_dir = tmp_path / "h", tmp_path / "db"
    db_dir.mkdir()
    claude_session(home, "/p", "s1", [claude_user("x", "/p"), reply("a", u(10, 1), T0 + 5)])
    # A version-1 cache read the whole file already, with no times.
    Path(cache_path(str(db_dir))).write_text(json.dumps({"version": 1, "members": {"7": {
        "sessions": {"s1": {"agent": "claude", "session_id": "s1", "path": os.fspath(
            home / ".claude/projects/-p/s1.jsonl"), "cwd": "/p", "created": T0,
            "state": {"offset": 10**6, "tally": {MODEL: [10, 1, 0, 0]}}}}}}}))  # fmt: skip
    (found,) = read_usage(str(db_dir), [Subject(7, "claude", "s1")], {"HOME": str(home)})
    assert found.timed is not None
    assert timed_between(found.timed, T0, T0 + 10).totals() == (10, 1, 0, 0)


def test_spans_are_looked_up_or_scanned_alike() -> None:
    timed = {str(k): {"m": [k, 1, 0, 0]} for k in range(100, 200)}
    timed["junk"] = {"m": [9, 9, 9, 9]}
    # a short task (looked up) and the whole session (scanned): the spans overlapping each
    assert timed_between(timed, 1505, 1525).totals() == (150 + 151 + 152, 3, 0, 0)
    assert timed_between(timed, 0, 10**6).totals() == (sum(range(100, 200)), 100, 0, 0)
