"""Tasks (docs/cli.md §2.32, docs/storage.md §2.12): the commands, the messages a change sends,
threads, and bad input refused with nothing written. Every test runs on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from cafleet import broker
from tests.cli_helpers import assert_unchanged, run_cli, snapshot
from tests.factories import Db


@pytest.fixture
def team(head_db: Path) -> SimpleNamespace:
    """Fleet `f` (Director `d`, monitor `mon`) with workers `a` and `b`; fleet `g` with `x`."""
    with Db(head_db) as db:
        f = db.fleet("team")
        fid = f.fleet.fleet_id
        a = db.member(fid, "alice").member_id
        b = db.member(fid, "bob").member_id
        g = db.fleet("other")
        x = db.member(g.fleet.fleet_id, "xavier").member_id
    assert f.monitor is not None
    return SimpleNamespace(
        db=head_db,
        f=fid,
        d=f.director.member_id,
        mon=f.monitor.member_id,
        a=a,
        b=b,
        g=g.fleet.fleet_id,
        x=x,
    )


def cli_json(*args: str) -> Any:
    code, out, err = run_cli(*args, "--json")
    assert code == 0, (code, out, err)
    return json.loads(out)


def inbox(member_id: int) -> list[dict[str, Any]]:
    """The member's un-ACKed messages, oldest first."""
    polled = cli_json("message", "poll", str(member_id))
    return sorted(polled, key=lambda m: m["message_id"])  # type: ignore[no-any-return]


def create(t: SimpleNamespace, title: str, *extra: str) -> dict[str, Any]:
    return cli_json("task", "create", "--fleet-id", str(t.f), "--title", title, *extra)["task"]  # type: ignore[no-any-return]


def test_dependent_task_goes_out_only_after_its_dependency(team: SimpleNamespace) -> None:
    t = team
    one = create(
        t, "write the parser", "--body", "Parse the log.\nKeep it small.", "--assign", str(t.a)
    )
    two = create(t, "document it", "--assign", str(t.b), "--after", str(one["task_id"]))
    assert (one["state"], two["state"]) == ("ready", "waiting")
    assert two["after"] == [one["task_id"]]
    assert one["creator_member_id"] == t.d
    (sent,) = inbox(t.a)
    assert sent["text"] == (
        f"[cafleet] task {one['task_id']} is ready for you: write the parser\n"
        "Parse the log.\nKeep it small.\n"
        f"Start it: cafleet task claim {one['task_id']} --member-id {t.a}\n"
        f'Finish it: cafleet task done {one["task_id"]} --member-id {t.a} --result "<what you did>"\n'
        f'Stuck: cafleet task block {one["task_id"]} --member-id {t.a} --reason "<why>"'
    )
    assert inbox(t.b) == []  # not before its dependency is done

    claimed = cli_json("task", "claim", str(one["task_id"]), "--member-id", str(t.a))["task"]
    assert claimed["state"] == "in_progress" and claimed["started_at"] is not None
    done = cli_json(
        "task", "done", str(one["task_id"]), "--member-id", str(t.a), "--result", "parser.py"
    )["task"]
    assert (done["state"], done["result"]) == ("done", "parser.py")

    (released,) = inbox(t.b)
    assert released["text"].startswith(
        f"[cafleet] task {two['task_id']} is ready for you: document it\n"
    )
    notices = [m for m in inbox(t.d) if m["text"].startswith("[cafleet] task")]
    assert [(m["text"], m["from_member_id"]) for m in notices] == [
        (
            f"[cafleet] task {one['task_id']} (write the parser) is done by member {t.a}: parser.py",
            t.mon,
        )
    ]
    board = cli_json("task", "list", "--fleet-id", str(t.f))
    assert [(x["task_id"], x["state"]) for x in board] == [
        (one["task_id"], "done"),
        (two["task_id"], "ready"),
    ]
    assert [
        x["task_id"] for x in cli_json("task", "list", "--fleet-id", str(t.f), "--member", str(t.b))
    ] == [two["task_id"]]
    assert [
        x["task_id"] for x in cli_json("task", "list", "--fleet-id", str(t.f), "--state", "done")
    ] == [one["task_id"]]

    shown = cli_json("task", "show", str(one["task_id"]))
    assert shown["task"]["state"] == "done"
    assert set(shown["task"]["seconds_in_state"]) == {"ready", "in_progress"}
    # its thread: the assignment and the Director's notice
    assert [m["to_member_id"] for m in shown["thread"]] == [t.a, t.d]


def test_block_reopen_and_cancel_tell_the_director(team: SimpleNamespace) -> None:
    t = team
    task = create(t, "deploy", "--assign", str(t.a))
    tid = str(task["task_id"])
    blocked = cli_json("task", "block", tid, "--member-id", str(t.a), "--reason", "no credentials")[
        "task"
    ]
    assert (blocked["state"], blocked["reason"]) == ("blocked", "no credentials")
    reopened = cli_json("task", "reopen", tid)["task"]
    assert (reopened["state"], reopened["reason"]) == ("ready", None)
    assert len(inbox(t.a)) == 2  # sent again when reopened
    cancelled = cli_json("task", "cancel", tid)["task"]
    assert cancelled["state"] == "cancelled"
    notices = [m["text"] for m in inbox(t.d) if m["text"].startswith("[cafleet] task")]
    assert notices == [
        f"[cafleet] task {tid} (deploy) is blocked by member {t.a}: no credentials",
        f"[cafleet] task {tid} (deploy) is cancelled",
    ]


def test_assigning_a_ready_task_sends_it_and_an_unassigned_task_can_be_claimed(
    team: SimpleNamespace,
) -> None:
    t = team
    task = create(t, "triage")
    assert task["assignee_member_id"] is None and inbox(t.a) == []
    assert (
        cli_json("task", "assign", str(task["task_id"]), str(t.a))["task"]["assignee_member_id"]
        == t.a
    )
    assert len(inbox(t.a)) == 1
    other = create(t, "sweep")
    claimed = cli_json("task", "claim", str(other["task_id"]), "--member-id", str(t.b))["task"]
    assert (claimed["assignee_member_id"], claimed["state"]) == (t.b, "in_progress")


def test_messages_about_a_task_and_threads(team: SimpleNamespace) -> None:
    t = team
    task = create(t, "review", "--assign", str(t.a))
    tid = str(task["task_id"])
    q = cli_json(
        "message",
        "send",
        "--from-member-id",
        str(t.a),
        "--to-member-id",
        str(t.d),
        "--task",
        tid,
        "which branch?",
    )["message"]
    r = cli_json(
        "message",
        "send",
        "--from-member-id",
        str(t.d),
        "--to-member-id",
        str(t.a),
        "--task",
        tid,
        "--reply-to",
        str(q["message_id"]),
        "main",
    )["message"]
    thread = cli_json("task", "show", tid)["thread"]
    assert [m["message_id"] for m in thread][-2:] == [q["message_id"], r["message_id"]]
    assert thread[-1]["reply_to_message_id"] == q["message_id"]
    assert [m["text"] for m in cli_json("message", "thread", str(r["message_id"]))] == [
        "which branch?",
        "main",
    ]


# --- bad input: one clear error, nothing written -----------------------------------------------


def _refused(db: Path, args: list[str], code: int, error: str) -> None:
    before = snapshot(db)
    got, out, err = run_cli(*args)
    assert (got, out) == (code, ""), (got, out, err)
    assert error in err, err
    assert_unchanged(before, db)


def test_bad_input_is_refused_and_writes_nothing(team: SimpleNamespace) -> None:
    t = team
    ready = create(t, "ready one", "--assign", str(t.a))
    waiting = create(t, "waiting one", "--assign", str(t.b), "--after", str(ready["task_id"]))
    foreign = cli_json("task", "create", "--fleet-id", str(t.g), "--title", "theirs")["task"]
    r, w, fo = (str(x["task_id"]) for x in (ready, waiting, foreign))
    base = ["task", "create", "--fleet-id", str(t.f), "--title", "x"]
    cases: list[tuple[list[str], int, str]] = [
        (["task", "create", "--fleet-id", "999", "--title", "x"], 1, "Error: fleet 999 not found"),
        ([*base, "--assign", "999"], 1, "Error: member 999 not found"),
        (
            [*base, "--assign", str(t.x)],
            1,
            f"Error: member {t.x} is in fleet {t.g}, not fleet {t.f}",
        ),
        ([*base, "--after", "999"], 1, "Error: task 999 not found"),
        ([*base, "--after", fo], 1, f"Error: task {fo} is in fleet {t.g}, not fleet {t.f}"),
        (["task", "create", "--fleet-id", str(t.f), "--title", " "], 2, "--title"),
        (["task", "create", "--fleet-id", str(t.f)], 2, "--title"),
        (["task", "show", "999"], 1, "Error: task 999 not found"),
        (
            ["task", "done", r, "--member-id", str(t.b)],
            1,
            f"Error: task {r} is assigned to member {t.a}, not member {t.b}",
        ),
        (
            ["task", "claim", r, "--member-id", str(t.b)],
            1,
            f"Error: task {r} is assigned to member {t.a}, not member {t.b}",
        ),
        (
            ["task", "claim", w, "--member-id", str(t.b)],
            1,
            f"Error: task {w} is waiting, so it cannot be claimed",
        ),
        (["task", "block", r, "--member-id", str(t.a)], 2, "--reason"),
        (["task", "reopen", r], 1, f"Error: task {r} is ready, so it cannot be reopened"),
        (
            ["task", "assign", r, str(t.x)],
            1,
            f"Error: member {t.x} is in fleet {t.g}, not fleet {t.f}",
        ),
        (["task", "list", "--fleet-id", str(t.f), "--state", "sleeping"], 2, "--state"),
        (
            [
                "message",
                "send",
                "--from-member-id",
                str(t.a),
                "--to-member-id",
                str(t.d),
                "--task",
                fo,
                "hi",
            ],
            1,
            f"Error: task {fo} is in fleet {t.g}, not the sender's fleet {t.f}",
        ),
        (
            [
                "message",
                "send",
                "--from-member-id",
                str(t.a),
                "--to-member-id",
                str(t.d),
                "--reply-to",
                "999",
                "hi",
            ],
            1,
            "Error: message 999 not found",
        ),
    ]
    for args, code, error in cases:
        _refused(t.db, args, code, error)
    cli_json("task", "cancel", r)
    _refused(t.db, ["task", "cancel", r], 1, f"Error: cannot cancel task {r}: it is cancelled")
    _refused(
        t.db,
        ["task", "done", r, "--member-id", str(t.a)],
        1,
        f"Error: task {r} is cancelled, so it cannot be done",
    )


# --- the messages reach the panes through verified delivery ------------------------------------


@pytest.mark.tmux
@pytest.mark.sqlite_only  # delivery is the send path's, tested on both dialects there
def test_a_ready_task_is_typed_into_its_assignee_pane_and_its_dependent_only_after(
    tmux_db: Any,
) -> None:
    from tests.delivery_helpers import record_ids, send_json
    from tests.factories import build_world
    from tests.harness import util
    from tests.test_delivery_send import occupy_loop_slot

    h = tmux_db
    w = build_world(h.db_path, harness=h, members=("alice", "bob"))
    alice, bob = w.members["alice"], w.members["bob"]
    occupy_loop_slot(h, w)

    def task(*args: str) -> dict[str, Any]:
        return send_json(h.cli("task", *args, "--json"))["task"]  # type: ignore[no-any-return]

    fid = str(w.fleet_id)
    one = task("create", "--fleet-id", fid, "--title", "build", "--assign", str(alice))
    two = task(
        "create",
        "--fleet-id",
        fid,
        "--title",
        "ship",
        "--assign",
        str(bob),
        "--after",
        str(one["task_id"]),
    )
    util.wait_records(w.pane(alice), 1)
    (typed,) = util.line_bytes(w.pane(alice))
    assert f"[cafleet] task {one['task_id']} is ready for you: build".encode() in typed
    assert util.line_records(w.pane(bob)) == []

    task("claim", str(one["task_id"]), "--member-id", str(alice))
    task("done", str(one["task_id"]), "--member-id", str(alice), "--result", "built")
    util.wait_records(w.pane(bob), 1)
    (typed,) = util.line_bytes(w.pane(bob))
    assert f"[cafleet] task {two['task_id']} is ready for you: ship".encode() in typed
    # once each: nothing more reaches either pane
    assert [len(ids) for ids in record_ids(w.pane(alice))] == [1]
    assert len(util.line_records(w.pane(bob))) == 1


# --- export and import --------------------------------------------------------------------------


def _other_database(team: SimpleNamespace, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty database at head, of the test's dialect; its CAFLEET_DATABASE_URL."""
    if "://" in str(team.db):  # PostgreSQL: a fresh copy of the set-up template
        from tests.pg_server import PgDb

        server = request.getfixturevalue("pg_server")
        return PgDb(server, server.new_database("cafleet_head")).url  # type: ignore[no-any-return]
    from cafleet.db.migrate import run_setup

    path = tmp_path / "other" / "cafleet.db"
    path.parent.mkdir()
    run_setup(str(path))
    return f"sqlite:///{path}"


def test_a_body_from_stdin_is_kept_whole(team: SimpleNamespace) -> None:
    text = "line one\n  indented\n\nlast: python -m pytest -q tests/test_x.py\n"
    code, out, err = run_cli(
        "task", "create", "--fleet-id", str(team.f), "--title", "t", "--body", "-", "--json",
        input=text,
    )  # fmt: skip
    assert (code, err) == (0, "")
    assert json.loads(out)["task"]["body"] == text


def test_a_deleted_fleet_exports_with_its_deletion(team: SimpleNamespace) -> None:
    create(team, "left behind", "--assign", str(team.a))
    code, _out, err = run_cli("fleet", "delete", str(team.f), "--keep-panes")
    assert (code, err) == (0, ""), err
    code, out, err = run_cli("export", "--fleet-id", str(team.f))
    assert (code, err) == (0, "")
    records = [json.loads(line) for line in out.splitlines()]
    assert records[0]["kind"] == "fleet" and records[0]["deleted_at"] is not None
    assert [r["title"] for r in records if r["kind"] == "task"] == ["left behind"]
    members = [r for r in records if r["kind"] == "member"]
    assert len(members) == 4 and {r["status"] for r in members} == {"deregistered"}


def test_every_table_is_exported_or_named_as_left_out() -> None:
    """A table a later revision adds is in a fleet's export or in NOT_EXPORTED, never forgotten."""
    from cafleet.db.schema import metadata
    from cafleet.db.statements.transfer import NOT_EXPORTED, TABLES

    named = [t.name for t in (*TABLES, *NOT_EXPORTED)]
    assert len(named) == len(set(named))
    assert sorted(named) == sorted(metadata.tables)


def test_export_then_import_into_an_empty_database_round_trips(
    team: SimpleNamespace, conn: Any, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    t = team
    one = create(t, "build", "--body", "all of it", "--assign", str(t.a))
    create(t, "ship", "--assign", str(t.b), "--after", str(one["task_id"]))
    cli_json("task", "claim", str(one["task_id"]), "--member-id", str(t.a))
    cli_json(
        "message",
        "send",
        "--from-member-id",
        str(t.a),
        "--to-member-id",
        str(t.d),
        "--task",
        str(one["task_id"]),
        "started",
    )
    cli_json("task", "done", str(one["task_id"]), "--member-id", str(t.a), "--result", "ok")
    # Its channels, their outbox and the budgets belong to the fleet too (port 9: refused).
    assert (
        run_cli("notify", "add", "--fleet-id", str(t.f), "webhook", "http://127.0.0.1:9/h")[0] == 0
    )
    broker.record_event(conn, fleet_id=t.f, event="test", event_key="k", payload={"text": "hi"})
    assert run_cli("member", "budget", str(t.a), "--budget-tokens", "500")[0] == 0
    assert run_cli("fleet", "budget", str(t.f), "--budget-usd", "2.5")[0] == 0
    code, exported, err = run_cli("export", "--fleet-id", str(t.f))
    assert (code, err) == (0, "")
    records = [json.loads(line) for line in exported.splitlines()]
    kinds = [r["kind"] for r in records]
    assert kinds[0] == "fleet" and {"member", "task", "message", "task_dep"} <= set(kinds)
    assert {"notify_channel", "notify_outbox", "member_budget", "fleet_budget"} <= set(kinds)
    assert all(r["fleet_id"] == t.f for r in records if r["kind"] in ("fleet", "member", "task"))
    path = tmp_path / "fleet.jsonl"
    assert run_cli("export", "--fleet-id", str(t.f), "--output", str(path))[0] == 0
    assert path.read_text() == exported and (path.stat().st_mode & 0o777) == 0o600

    other = {"CAFLEET_DATABASE_URL": _other_database(t, request, tmp_path)}
    code, out, err = run_cli("import", "--input", str(path), env=other)
    assert (code, err) == (0, ""), out
    assert run_cli("export", "--fleet-id", str(t.f), env=other)[1] == exported
    # the imported database goes on: new ids follow the imported ones
    code, out, _ = run_cli(
        "task", "create", "--fleet-id", str(t.f), "--title", "next", "--json", env=other
    )
    assert code == 0 and json.loads(out)["task"]["task_id"] == 3
    code, out, _ = run_cli("notify", "add", "--fleet-id", str(t.f), "desktop", "--json", env=other)
    assert code == 0 and json.loads(out)["channel_id"] == 2, out
    # a second import is refused, nothing written
    before = run_cli("export", "--fleet-id", str(t.f), env=other)[1]
    code, out, err = run_cli("import", "--input", str(path), env=other)
    assert (code, out) == (1, "")
    assert err == "Error: the database already holds fleets; import needs an empty one\n"
    assert run_cli("export", "--fleet-id", str(t.f), env=other)[1] == before
    code, _, err = run_cli("export", "--fleet-id", "999")
    assert (code, err) == (1, "Error: fleet 999 not found\n")


def test_tasks_benchmark_runs_at_smoke_size(tmp_path: Path) -> None:
    """benchmarks/tasks.py end to end at smoke size (the figures are the full run's)."""
    import subprocess
    import sys

    from tests.cli_helpers import REPO_ROOT

    out = tmp_path / "tasks.json"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.tasks", "--smoke", "--out", str(out)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    results = json.loads(out.read_text())
    assert results["task_list"]["x_floor"] > 0
    release = results["release"]
    assert release["released"] == release["dependents"]  # all of them, by the one done
    assert release["messages"] == release["dependents"] + 1  # each assignee, and the Director
    found = results["search"]["sqlite"]
    assert found["messages"] == 200 and found["queries"]["zzznothing"]["hits"] == 0
    assert found["queries"]["parser"]["hits"] > 0


def test_the_monitor_wake_names_tasks_in_progress_too_long(team: SimpleNamespace) -> None:
    from datetime import timedelta

    from cafleet import broker
    from cafleet.db.timefmt import utcnow
    from cafleet.monitor.tick import TASK_OVERDUE_MINUTES, build_line

    t = team
    with Db(t.db) as db:
        old = utcnow() - timedelta(minutes=TASK_OVERDUE_MINUTES + 5)
        slow = broker.create_task(
            db.conn, fleet_id=t.f, title="slow", body="", creator_id=t.d, assignee_id=t.a, now=old
        ).task
        broker.claim_task(db.conn, task_id=slow.task_id, member_id=t.a, now=old)
        fresh = broker.create_task(
            db.conn, fleet_id=t.f, title="fresh", body="", creator_id=t.d, assignee_id=t.b
        ).task
        broker.claim_task(db.conn, task_id=fresh.task_id, member_id=t.b)
        line, _ = build_line(db.conn, t.f, "k3f9")
    assert (
        f". Tasks in progress over {TASK_OVERDUE_MINUTES} min: {slow.task_id} (member {t.a}). "
        "Follow your monitor role protocol." in line
    )
    assert line.endswith("[wake k3f9]")
