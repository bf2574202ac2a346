"""`cafleet search` (docs/cli.md §2.34, docs/storage.md §2.13): message bodies and tasks'
titles, bodies and results, ranked, with a snippet; kept in step with every write, concurrent
writers included; bad queries refused with nothing written. Every test runs on SQLite and
PostgreSQL."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from cafleet import broker
from tests.cli_helpers import assert_unchanged, run_cli, snapshot
from tests.factories import Db


@pytest.fixture
def team(head_db: Path) -> SimpleNamespace:
    """Fleet `f` (Director `d`) with workers `a` and `b`; fleet `g` with `x`."""
    with Db(head_db) as db:
        f = db.fleet("team")
        fid = f.fleet.fleet_id
        a = db.member(fid, "alice").member_id
        b = db.member(fid, "bob").member_id
        g = db.fleet("other")
        x = db.member(g.fleet.fleet_id, "xavier").member_id
    return SimpleNamespace(
        db=head_db, f=fid, d=f.director.member_id, a=a, b=b, g=g.fleet.fleet_id, x=x
    )


def cli_json(*args: str) -> Any:
    code, out, err = run_cli(*args, "--json")
    assert code == 0, (code, out, err)
    return json.loads(out)


def send(sender: int, recipient: int, text: str) -> int:
    sent = cli_json(
        "message", "send", "--from-member-id", str(sender), "--to-member-id", str(recipient), text
    )
    return int(sent["message"]["message_id"])


def hits(*args: str) -> list[tuple[str, int, int]]:
    return [(h["kind"], h["id"], h["fleet_id"]) for h in cli_json("search", *args)]


def test_search_finds_messages_and_tasks_ranked_with_a_snippet(team: SimpleNamespace) -> None:
    t = team
    one = send(t.a, t.b, "The parser fails on empty lines; see parser.py line 12")
    send(t.a, t.b, "lunch at noon")
    other = send(t.x, t.x, "parser notes from another fleet")
    task = cli_json(
        "task", "create", "--fleet-id", str(t.f), "--title", "Fix the parser",
        "--body", "Empty lines break it.",
    )["task"]["task_id"]  # fmt: skip
    cli_json("message", "broadcast", "--from-member-id", str(t.d), "parser freeze today")

    found = cli_json("search", "parser")
    kinds = [(h["kind"], h["fleet_id"]) for h in found]
    # the message, the task, the broadcast once (its summary, not each recipient's copy), and
    # the other fleet's message
    assert sorted(kinds) == sorted(
        [("message", t.f), ("task", t.f), ("message", t.f), ("message", t.g)]
    )
    assert {h["id"] for h in found if h["kind"] == "task"} == {task}
    first = next(h for h in found if h["id"] == one and h["kind"] == "message")
    assert first["snippet"] == "The [parser] fails on empty lines; see [parser].py line 12"
    assert first["title"] is None
    (as_task,) = (h for h in found if h["kind"] == "task")
    assert as_task["title"] == "Fix the parser"
    assert as_task["snippet"] == "Fix the [parser]"

    # every word is required; the fleet filter; the limit
    assert sorted(hits("parser empty")) == [("message", one, t.f), ("task", task, t.f)]
    assert ("message", other, t.g) not in hits("parser", "--fleet-id", str(t.f))
    assert hits("parser", "--fleet-id", str(t.g)) == [("message", other, t.g)]
    assert len(hits("parser", "--limit", "2")) == 2

    # ranked: the body that is most about the word first
    weak = send(t.a, t.b, "we could deploy after a long review of everything else in the queue")
    strong = send(t.a, t.b, "deploy: deploy the deploy script")
    assert [i for _, i, _ in hits("deploy")] == [strong, weak]

    code, out, _ = run_cli("search", "empty lines", "--fleet-id", str(t.f))
    assert code == 0
    assert sorted(out.splitlines()) == [
        f"message {one} (fleet {t.f}): The parser fails on [empty] [lines]; see parser.py line 12",
        f"task {task} (fleet {t.f}) 'Fix the parser': [Empty] [lines] break it.",
    ]
    assert run_cli("search", "nothing-like-it")[1] == "No matches.\n"


def test_a_task_result_is_searchable_once_written(team: SimpleNamespace) -> None:
    t = team
    task = cli_json(
        "task", "create", "--fleet-id", str(t.f), "--title", "Ship", "--assign", str(t.a)
    )["task"]["task_id"]
    assert hits("zanzibar") == []
    cli_json("task", "claim", str(task), "--member-id", str(t.a))
    cli_json("task", "done", str(task), "--member-id", str(t.a), "--result", "Shipped to zanzibar")
    found = cli_json("search", "Zanzibar")  # case folded
    (hit,) = (h for h in found if h["kind"] == "task")
    assert (hit["id"], hit["snippet"]) == (task, "Shipped to [zanzibar]")
    # and the Director's notice of it, a message
    assert [h["kind"] for h in found] == ["message", "task"] or len(found) == 2


def test_search_syntax_in_a_query_is_literal_and_bad_queries_write_nothing(
    team: SimpleNamespace,
) -> None:
    t = team
    mid = send(t.a, t.b, 'quote " star * minus - and AND or OR near NEAR(x y)')
    before = snapshot(t.db)
    # Every FTS operator and quote is text: no syntax error, a literal search for the words.
    for query in [
        '"quote',
        "star*",
        "quote -minus",
        "AND",
        "and OR",
        "NEAR(x",
        "x y)",
        "star:*",
        "^or",
    ]:
        assert hits(query) == [("message", mid, t.f)], query
    assert hits("quote -nothing") == []  # "-" does not exclude: "nothing" is required
    for query, text in [
        ("", "the search query has no word to search for (letters or digits)"),
        ("   ", "the search query has no word to search for (letters or digits)"),
        ('"*" - ()', "the search query has no word to search for (letters or digits)"),
        ("a" * 1001, "the search query is longer than 1000 characters"),
    ]:
        code, out, err = run_cli("search", query)
        assert (code, out, err) == (2, "", f"Error: {text}\n"), query
    assert run_cli("search", "quote", "--fleet-id", "999")[::2] == (
        1,
        "Error: fleet 999 not found\n",
    )
    assert run_cli("search", "quote", "--limit", "0")[0] == 2
    assert_unchanged(before, t.db)


def test_a_deleted_fleet_is_searched_only_when_named(team: SimpleNamespace) -> None:
    t = team
    mid = send(t.x, t.x, "archived walrus")
    assert hits("walrus") == [("message", mid, t.g)]
    with Db(t.db) as db:
        broker.delete_fleet(db.conn, fleet_id=t.g, locked_panes=set(), try_lock=lambda _: True)
    assert hits("walrus") == []
    assert hits("walrus", "--fleet-id", str(t.g)) == [("message", mid, t.g)]


def test_the_index_keeps_in_step_with_concurrent_writers(team: SimpleNamespace) -> None:
    """Four processes send at once: every message is found, once."""
    t = team
    senders = [t.a, t.b, t.d, t.a]

    def burst(n: int) -> list[int]:
        return [send(senders[n], t.b, f"burst {n} {i} common") for i in range(3)]

    with ThreadPoolExecutor(4) as pool:
        sent = [mid for ids in pool.map(burst, range(4)) for mid in ids]
    found = hits("common burst", "--limit", "100")
    assert sorted(i for _, i, _ in found) == sorted(sent)
