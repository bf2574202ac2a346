"""Notification delivery through `message send` / `broadcast` against the private tmux server
(docs/runtime.md §4; §8 items 12, 24–28, 38, 39, 41; docs/cli.md §4 items 53–55, 63).

Fleets are built with the repository (no monitor loop). Each notification costs about 1.1 s of
real keystroke timing, so the tests keep the number of notifications small.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.cli_helpers import TYPING_MODULES, imported_after
from tests.delivery_helpers import (
    expected_line,
    message_row,
    record_ids,
    record_of,
    rows,
    send_json,
    send_keys_runs,
    typed_ids,
)
from tests.factories import build_world
from tests.harness import util

pytestmark = pytest.mark.tmux


def send(h, frm: int, to: int, *body: str, env=None):
    return h.cli(
        "message", "send", "--from-member-id", str(frm), "--to-member-id", str(to), *body, env=env
    )


def occupy_loop_slot(h, world) -> subprocess.Popen:
    """Make the fleet's loop look live (a sleeping stand-in process), so send/broadcast never
    start a real loop that would drain behind the test's back."""
    from tests.delivery_helpers import sql_write

    proc = h.track(subprocess.Popen(["sleep", "600"]))
    sql_write(
        h.db_path,
        "INSERT INTO monitor_runtime (fleet_id, pid, started_at, last_tick_at, tick_seconds) "
        "VALUES (?, ?, '2999-01-01T00:00:00.000000+00:00', '2999-01-01T00:00:00.000000+00:00', 5)",
        world.fleet_id,
        proc.pid,
    )
    return proc


def test_send_types_exactly_one_normalised_line_and_stamps(tmux_db) -> None:
    h = tmux_db
    w = build_world(h.db_path, harness=h, members=("a`b$(c)", "bob"))
    a, b = w.members["a`b$(c)"], w.members["bob"]
    occupy_loop_slot(h, w)
    pane = w.pane(b)

    # 1. the normaliser (docs/runtime.md §8 item 25), a sender name that needs no escaping (27)
    body = "a\r\nb\rc\nd\te\x1b\x07\x7f\u0085f😀שלום"
    path = h.project_dir / "body.txt"
    path.write_bytes(body.encode())
    data = send_json(send(h, a, b, "--file", str(path), "--json"))
    m1 = data["message"]["message_id"]
    assert data["notification_sent"] is True
    assert data["message"]["text"] == body
    util.wait_records(pane, 1)
    # TAB typed as a space (docs/tmux-arguments.md §4), stored unchanged
    assert util.line_bytes(pane) == [record_of(expected_line(m1, "a`b$(c)", a, "a⏎b⏎c⏎d ef😀שלום"))]
    row = message_row(h.db_path, m1)
    assert row["notified_at"] is not None and row["notified_at"] >= row["created_at"]
    assert row["status_state"] == "input_required"
    assert row["text"] == body
    shown = json.loads(h.cli("message", "show", str(m1), "--json").stdout)["message"]
    assert shown["text"] == body and "notified_at" not in shown

    # 2. a 10 KB body arrives cut to 200 code points plus … and how to read the rest, one record
    big = ("0123456789" * 1024)[:10_240]
    result = send(h, a, b, big, "--json")
    m2 = send_json(result)["message"]["message_id"]
    assert result.stderr == ""
    util.wait_records(pane, 2)
    assert util.line_bytes(pane)[1] == record_of(
        expected_line(
            m2, "a`b$(c)", a, big[:200] + f"… (+10,040 characters: cafleet message show {m2})"
        )
    )

    # 3. a long multi-byte body under a raised limit: typed in several 1024-byte chunks, yet one
    #    literal record; leading '-', key names and '%1' stay literal (docs/runtime.md §8 item 12)
    long_body = "-x Enter C-c %1 " + "é😀ש" * 1_000
    result = send(h, a, b, "--json", "--", long_body, env={"CAFLEET_MAX_TEXT_LEN": "5000"})
    m3 = send_json(result)["message"]["message_id"]
    util.wait_records(pane, 3)
    assert util.line_bytes(pane)[2] == record_of(expected_line(m3, "a`b$(c)", a, long_body))
    assert len(util.line_records(pane)) == 3

    # per notification: the literal chunks, one Enter, never interleaved, and never an Escape
    runs = "".join(send_keys_runs(pane))
    chunks = len(record_of(expected_line(m3, "a`b$(c)", a, long_body))) // 1024
    assert runs.startswith("LNLNL") and runs.endswith("N")
    assert runs[4:] == "L" * (len(runs) - 5) + "N"
    assert len(runs) - 5 >= chunks
    # the stamp is written only by the drain, never anything else
    assert all(
        r[0] is not None
        for r in rows(h.db_path, "SELECT notified_at FROM messages WHERE owner_member_id = ?", b)
    )


def test_director_and_self_sends_are_never_typed_and_broadcast_groups(tmux_db) -> None:
    h = tmux_db
    w = build_world(h.db_path, harness=h, members=("alice", "bob"))
    a, b = w.members["alice"], w.members["bob"]
    occupy_loop_slot(h, w)

    to_director = send_json(send(h, a, w.director, "for the director", "--json"))
    assert to_director["notification_sent"] is False
    self_send = send_json(send(h, a, a, "note to self", "--json"))
    assert self_send["notification_sent"] is False
    d_id = to_director["message"]["message_id"]
    s_id = self_send["message"]["message_id"]

    result = h.cli("message", "broadcast", "--from-member-id", str(a), "all hands")
    assert result.returncode == 0 and result.stderr == "", result.stderr
    summary_id = int(result.stdout.split()[1].split("=")[1])
    assert result.stdout == f"broadcast id={summary_id} recipients=3 notified=2\n"
    deliveries = dict(
        rows(
            h.db_path,
            "SELECT owner_member_id, message_id FROM messages WHERE origin_message_id = ? "
            "AND type = 'unicast'",
            summary_id,
        )
    )
    assert sorted(deliveries) == sorted([w.director, w.monitor, b])
    summary = message_row(h.db_path, summary_id)
    assert summary["origin_message_id"] == summary_id
    assert summary["notified_at"] == summary["created_at"]
    assert summary["text"] == "Broadcast sent to 3 recipients"

    util.wait_records(w.pane(w.monitor), 1)
    util.wait_records(w.pane(b), 1)
    assert record_ids(w.pane(w.monitor)) == [[deliveries[w.monitor]]]
    assert record_ids(w.pane(b)) == [[deliveries[b]]]
    assert util.line_bytes(w.pane(b)) == [
        record_of(expected_line(deliveries[b], "alice", a, "all hands"))
    ]
    # nothing ever reaches the Director's pane or the sender's own pane
    assert util.line_records(w.director_pane) == []
    assert util.line_records(w.pane(a)) == []
    assert summary_id not in typed_ids(w.pane(b)) + typed_ids(w.pane(w.monitor))

    # Director messages stay un-notified and pollable; the self-send was born notified
    for mid in (d_id, deliveries[w.director]):
        assert message_row(h.db_path, mid)["notified_at"] is None
    polled = json.loads(h.cli("message", "poll", str(w.director), "--json").stdout)
    assert {m["message_id"] for m in polled} == {d_id, deliveries[w.director]}
    row = message_row(h.db_path, s_id)
    assert row["notified_at"] == row["created_at"] and row["status_state"] == "input_required"
    polled = json.loads(h.cli("message", "poll", str(a), "--json").stdout)
    assert [m["message_id"] for m in polled] == [s_id]
    assert h.cli("message", "ack", str(s_id)).returncode == 0
    # no tmux call at all was made for the Director send or the self-send: only the broadcast's
    typed_panes = {c.get("target") for c in util.shim_calls() if c.get("command") == "send-keys"}
    assert typed_panes == {w.pane(w.monitor), w.pane(b)}


def test_paneless_self_and_director_sends_never_import_libtmux(tmux_db) -> None:
    h = tmux_db
    w = build_world(h.db_path, harness=h, members=("alice",), unplaced=("carol",))
    w2 = build_world(h.db_path, members=("carol",), unplaced=("carol",), fleet_name="paneless")
    a = w.members["alice"]
    carol = w2.members["carol"]
    for argv in (
        ("message", "send", "--from-member-id", str(a), "--to-member-id", str(a), "self"),
        ("message", "send", "--from-member-id", str(a), "--to-member-id", str(w.director), "d"),
        (
            "message",
            "send",
            "--from-member-id",
            str(w2.director),
            "--to-member-id",
            str(carol),
            "p",
        ),
    ):
        code, found = imported_after(argv, TYPING_MODULES, env=h.env_for(*argv), cwd=h.project_dir)
        assert code == 0, (argv, found)
        assert set(found) <= {"cafleet.delivery.drains"}, (argv, found)
    assert util.shim_calls() == []


def test_eight_concurrent_senders_never_interleave(tmux_db) -> None:
    h = tmux_db
    w = build_world(h.db_path, harness=h, members=("alice", "bob"))
    a, b = w.members["alice"], w.members["bob"]
    occupy_loop_slot(h, w)
    pane = w.pane(b)
    procs = [
        h.popen_cli(
            "message", "send", "--from-member-id", str(a), "--to-member-id", str(b),
            f"concurrent {i} " + "z" * 150, "--json",
        )
        for i in range(8)
    ]  # fmt: skip
    sent: list[int] = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 0, stderr
        sent.append(json.loads(stdout)["message"]["message_id"])
        # docs/cli.md §1.11: a send whose lock wait ran out while another send typed into the pane does
        # not warn (that drain types every pending line, this one too) but says its line is
        # pending; all 8 lines arrive
        mine = json.loads(stdout)["message"]["message_id"]
        assert stderr == "" or stderr.startswith(f"Pending: message {mine} for member {b} "), stderr
        assert stderr.count("\n") <= 1 and "Warning" not in stderr, stderr
    records = util.wait_records(pane, 8, timeout=60)
    got = util.line_bytes(pane)
    assert len(got) == 8, got
    for rec in got:
        assert rec.count(b"\x1b") == 0 and rec.count(b"[cafleet msg ") == 1
        assert rec.endswith(f" {'—'} ack with: cafleet message ack ".encode() + rec.split(b" ")[2])
    assert sorted(typed_ids(pane)) == sorted(sent)
    assert len(records) == 8
    stamped = rows(
        h.db_path,
        f"SELECT COUNT(*) FROM messages WHERE message_id IN ({','.join('?' * 8)}) "
        "AND notified_at IS NOT NULL",
        *sent,
    )
    assert stamped == [(8,)]
    assert "".join(send_keys_runs(pane)) == "LN" * 8


def test_four_senders_and_four_recipients_concurrently(tmux_db) -> None:
    h = tmux_db
    senders = ("s1", "s2", "s3", "s4")
    recipients = ("r1", "r2", "r3", "r4")
    w = build_world(h.db_path, harness=h, members=senders + recipients)
    occupy_loop_slot(h, w)
    procs = {
        (s, r): h.popen_cli(
            "message", "send", "--from-member-id", str(w.members[s]),
            "--to-member-id", str(w.members[r]), f"{s} to {r}", "--json",
        )
        for s in senders
        for r in recipients
    }  # fmt: skip
    sent: dict[str, set[int]] = {r: set() for r in recipients}
    for (_s, r), proc in procs.items():
        stdout, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 0, stderr
        sent[r].add(json.loads(stdout)["message"]["message_id"])
    for r in recipients:
        pane = w.pane(w.members[r])
        util.wait_records(pane, 4, timeout=60)
        assert sorted(typed_ids(pane)) == sorted(sent[r])  # its own messages, once each
        assert all(len(ids) == 1 for ids in record_ids(pane))
    for s in senders:
        assert util.line_records(w.pane(w.members[s])) == []
    unstamped = rows(h.db_path, "SELECT COUNT(*) FROM messages WHERE notified_at IS NULL")
    assert unstamped == [(0,)]
