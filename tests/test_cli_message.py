"""`cafleet message poll/ack/show` (docs/cli.md §2.16–§2.18), broken pipe and a busy database
(§4 items 15, 64–66, 78)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.cli_helpers import (
    REPO_ROOT,
    assert_unchanged,
    call_main,
    cli_env,
    hold_flock,
    query,
    run_cli,
    snapshot,
    sql,
    stamp,
    start_cli,
)
from tests.delivery_helpers import holds_open
from tests.factories import Db
from tests.harness.util import retry_until

T1 = datetime(2026, 5, 1, 12, 0, 0, tzinfo=UTC)


@pytest.fixture
def inbox(head_db: Path) -> SimpleNamespace:
    """Director `d` of a fleet; worker `w` receives m1 (T1), m2 (T1+2s), a broadcast delivery
    (T1+1s); m0 to w is ACKed; the broadcast summary belongs to `d`."""
    with Db(head_db) as db:
        fleet = db.fleet("team")
        d = fleet.director.member_id
        w = db.member(fleet.fleet.fleet_id, "coder").member_id
        m0 = db.send(d, w, "old", now=T1 - timedelta(seconds=5))
        db.ack(m0.message_id, now=T1 - timedelta(seconds=4))
        m1 = db.send(d, w, "first", now=T1)
        b = db.broadcast(d, "everyone", now=T1 + timedelta(seconds=1))
        m2 = db.send(d, w, "second", now=T1 + timedelta(seconds=2))
    delivery = next(x for x in b.deliveries if x.owner_member_id == w)
    return SimpleNamespace(d=d, w=w, m0=m0, m1=m1, m2=m2, summary=b.summary, delivery=delivery)


def test_poll_lists_unacked_newest_first(inbox: SimpleNamespace, head_db: Path) -> None:
    """64."""
    before = snapshot(head_db)
    code, out, err = run_cli("message", "poll", str(inbox.w))
    assert (code, err) == (0, "")
    origin = inbox.summary.message_id
    assert out == (
        f"[{inbox.m2.message_id} | from:Director ({inbox.d}) | {stamp(T1 + timedelta(seconds=2))}]\n"
        "second\n"
        "\n"
        f"[{inbox.delivery.message_id} | from:Director ({inbox.d}) | {stamp(T1 + timedelta(seconds=1))}"
        f" | origin:{origin}]\n"
        "everyone\n"
        "\n"
        f"[{inbox.m1.message_id} | from:Director ({inbox.d}) | {stamp(T1)}]\n"
        "first\n"
    )
    code, out, _ = run_cli("message", "poll", str(inbox.w), "--json")
    ids = [m["message_id"] for m in json.loads(out)]
    assert ids == [inbox.m2.message_id, inbox.delivery.message_id, inbox.m1.message_id]
    assert_unchanged(before, head_db)
    # the sender's own summary never appears in its inbox
    assert call_main(["message", "poll", str(inbox.d)]) == (0, "No messages found.\n", "")
    assert call_main(["message", "poll", str(inbox.d), "--json"]) == (0, "[]\n", "")


def test_ack(inbox: SimpleNamespace, head_db: Path) -> None:
    """65."""
    code, out, err = call_main(["message", "ack", str(inbox.m1.message_id)])
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == "Message acknowledged."
    # the send time, not the ACK time that is now the message's status_timestamp
    assert lines[1] == f"[{inbox.m1.message_id} | from:Director ({inbox.d}) | {stamp(T1)}]"
    assert lines[2:] == ["first"]
    assert query(
        head_db, "SELECT status_state FROM messages WHERE message_id = ?", (inbox.m1.message_id,)
    ) == [("completed",)]

    for message_id in (inbox.m1.message_id, inbox.summary.message_id):
        before = snapshot(head_db)
        assert run_cli("message", "ack", str(message_id)) == (
            1,
            "",
            "Error: Cannot ACK message in state completed\n",
        )
        assert_unchanged(before, head_db)
    before = snapshot(head_db)
    assert run_cli("message", "ack", "999") == (1, "", "Error: message 999 not found\n")
    assert_unchanged(before, head_db)

    code, out, _ = call_main(["message", "ack", str(inbox.m2.message_id), "--json"])
    data = json.loads(out)
    assert list(data) == ["message"]
    assert data["message"]["status_state"] == "completed"
    assert data["message"]["message_id"] == inbox.m2.message_id


def test_ack_of_deregistered_owner(inbox: SimpleNamespace, head_db: Path) -> None:
    with Db(head_db) as db:
        db.deregister(inbox.w)
    assert call_main(["message", "ack", str(inbox.m1.message_id)])[0] == 0


def test_show(inbox: SimpleNamespace, head_db: Path) -> None:
    """66."""
    sql(head_db, "UPDATE messages SET notified_at = 'secret-notified-at'")
    before = snapshot(head_db)
    code, out, _ = run_cli("message", "show", str(inbox.summary.message_id))
    assert code == 0
    origin = inbox.summary.message_id
    assert out == (
        f"[{origin} | from:Director ({inbox.d}) | {stamp(T1 + timedelta(seconds=1))} | "
        f"kind:broadcast_summary | origin:{origin}]\n"
        "Broadcast sent to 2 recipients\n"
    )
    code, out, _ = run_cli("message", "show", str(inbox.m0.message_id), "--json")
    assert code == 0
    assert "notified_at" not in out and "secret-notified-at" not in out
    message = json.loads(out)["message"]
    assert message["status_state"] == "completed"
    assert message["to_member_id"] == inbox.w
    code, out, _ = run_cli("message", "show", str(inbox.summary.message_id), "--json")
    assert json.loads(out)["message"]["to_member_id"] is None
    assert run_cli("message", "show", "424242") == (1, "", "Error: message 424242 not found\n")
    assert_unchanged(before, head_db)


def test_history_shows_what_a_member_received_and_sent_acked_or_not(
    inbox: SimpleNamespace, head_db: Path
) -> None:
    """docs/cli.md §2.31: oldest first, ACKed too, a broadcast once (its summary, for the
    sender), the newest --limit; read-only; a deregistered member's history too."""
    with Db(head_db) as db:
        reply = db.send(inbox.w, inbox.d, "done", now=T1 + timedelta(seconds=3))
    before = snapshot(head_db)
    d, w, origin = f"Director ({inbox.d})", f"coder ({inbox.w})", inbox.summary.message_id
    code, out, err = call_main(["message", "history", str(inbox.w)])
    assert (code, err) == (0, "")
    assert out.split("\n\n") == [
        f"[{inbox.m0.message_id} | from:{d} | {stamp(T1 - timedelta(seconds=5))} | ACKed "
        f"{stamp(T1 - timedelta(seconds=4))}]\nold",
        f"[{inbox.m1.message_id} | from:{d} | {stamp(T1)} | not ACKed]\nfirst",
        f"[{inbox.delivery.message_id} | from:{d} | {stamp(T1 + timedelta(seconds=1))} | "
        f"origin:{origin} | not ACKed]\neveryone",
        f"[{inbox.m2.message_id} | from:{d} | {stamp(T1 + timedelta(seconds=2))} | not ACKed]"
        "\nsecond",
        f"[{reply.message_id} | from:{w} | {stamp(T1 + timedelta(seconds=3))} | to:{d} | not "
        "ACKed]\ndone\n",
    ]
    code, out, _ = call_main(["message", "history", str(inbox.d), "--json"])
    assert code == 0
    assert [(m["message_id"], m["type"]) for m in json.loads(out)] == [
        (inbox.m0.message_id, "unicast"),
        (inbox.m1.message_id, "unicast"),
        (origin, "broadcast_summary"),  # not its two deliveries
        (inbox.m2.message_id, "unicast"),
        (reply.message_id, "unicast"),
    ]
    code, out, _ = call_main(["message", "history", str(inbox.w), "--limit", "2", "--json"])
    assert [m["message_id"] for m in json.loads(out)] == [inbox.m2.message_id, reply.message_id]
    assert call_main(["message", "history", "999"]) == (1, "", "Error: member 999 not found\n")
    assert call_main(["message", "history", str(inbox.w), "--limit", "0"])[0] == 2
    assert_unchanged(before, head_db)
    with Db(head_db) as db:
        db.deregister(inbox.w)
    code, out, _ = call_main(["message", "history", str(inbox.w), "--json"])
    assert (code, len(json.loads(out))) == (0, 5)


def test_empty_body_prints_header_only(head_db: Path) -> None:
    with Db(head_db) as db:
        fleet = db.fleet()
    sql(
        head_db,
        "INSERT INTO messages (owner_member_id, from_member_id, to_member_id, type, created_at, "
        "status_state, status_timestamp, origin_message_id, text, notified_at) "
        f"VALUES (1, 1, 1, 'unicast', '{stamp(T1)}', 'input_required', '{stamp(T1)}', NULL, '', "
        "NULL)",
    )
    assert fleet.director.member_id == 1
    assert call_main(["message", "show", "1"]) == (
        0,
        f"[1 | from:Director (1) | {stamp(T1)}]\n",
        "",
    )


# --- 15. broken pipe ----------------------------------------------------------------------------


@pytest.mark.parametrize("unbuffered", ["1", None])
def test_broken_pipe_exits_141_silently(head_db: Path, unbuffered: str | None) -> None:
    with Db(head_db) as db:
        fleet = db.fleet()
        d = fleet.director.member_id
    ts = stamp(T1)
    rows = ", ".join(
        f"({d}, {d}, {d}, 'unicast', '{ts}', 'input_required', '{ts}', NULL, "
        f"'{'message body ' * 15}{i}', '{ts}')"
        for i in range(3000)
    )
    sql(
        head_db,
        "INSERT INTO messages (owner_member_id, from_member_id, to_member_id, type, created_at, "
        f"status_state, status_timestamp, origin_message_id, text, notified_at) VALUES {rows}",
    )
    for args in (("message", "poll", str(d)), ("message", "poll", str(d), "--json")):
        proc = subprocess.Popen(
            [sys.executable, "-m", "cafleet", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=cli_env({"PYTHONUNBUFFERED": unbuffered}),
            cwd=str(REPO_ROOT),
        )
        assert proc.stdout is not None and proc.stderr is not None
        assert proc.stdout.read(64)  # the reader takes a little and goes away
        proc.stdout.close()
        err = proc.stderr.read()
        assert proc.wait(timeout=30) == 141
        assert err == b""


# --- 78. a busy database ------------------------------------------------------------------------


@pytest.mark.sqlite_only  # the file lock; PostgreSQL's advisory lock: test_storage_postgresql.py
def test_database_locked(inbox: SimpleNamespace, head_db: Path) -> None:
    """78: the ack queues for the writer lock at most 5 s, then fails unchanged; a poll
    meanwhile answers at once. The holder keeps the lock until the ack has finished (not a
    fixed 6 s), so the ack's start-up time on a loaded machine cannot let it outlive the
    holder."""
    lock = head_db.parent / "locks" / "db-write.lock"
    holder = hold_flock(lock, 60)
    try:
        before = snapshot(head_db)
        start = time.monotonic()
        ack = start_cli("message", "ack", str(inbox.m1.message_id))
        # Synchronise on the ack opening the writer lock file (its wait begins right after),
        # not on elapsed time: its start-up alone can take seconds on a loaded machine.
        retry_until(
            lambda: holds_open(ack.pid, lock) or ack.poll() is not None, timeout=30, interval=0.01
        )
        waiting = time.monotonic()
        assert ack.poll() is None, "the ack must queue for the writer lock"
        # In process, so the figure is the poll's own time, not an interpreter's start-up.
        poll_start = time.monotonic()
        code, out, _ = call_main(["message", "poll", str(inbox.w)])
        poll_elapsed = time.monotonic() - poll_start
        assert code == 0 and out.startswith("[")
        ack_out, ack_err = ack.communicate(timeout=30)
        ack_elapsed = time.monotonic() - start
        ack_waited = time.monotonic() - waiting
        assert ack.returncode == 1
        assert (ack_out, ack_err) == (b"", b"Error: database is locked\n")
        assert holder.poll() is None, "the holder must still hold the lock"
        assert_unchanged(before, head_db)
    finally:
        holder.kill()
        holder.wait()
    assert ack_elapsed >= 5.0  # spawn to exit: at least the 5 s wait
    assert ack_waited < 9.0, ack_waited  # from the wait's start: 5 s, then a prompt exit
    assert poll_elapsed < 3.0, poll_elapsed
    assert run_cli("message", "ack", str(inbox.m1.message_id))[0] == 0
