"""Failed notification attempts and their retries (docs/runtime.md §4.3–§4.7; §8 items 21,
30–37, 44, 47, 55; docs/cli.md §4 items 60–62).

A failed attempt leaves `notified_at` NULL, prints the not-notified warning, keeps the exit code
and the message pollable; the next send, a `message wait` or a monitor tick retries it once the
cause is gone.
"""

from __future__ import annotations

import json
import os
import re
import time

import pytest

from tests.cli_helpers import call_run
from tests.delivery_helpers import (
    expected_line,
    holds_open,
    message_row,
    notified_at,
    record_of,
    send_json,
    send_keys_runs,
    sent_id,
    sql_write,
    typed_ids,
    warning,
)
from tests.factories import build_world
from tests.fleet_helpers import log_path as monitor_log
from tests.harness import util
from tests.test_delivery_send import occupy_loop_slot, send

pytestmark = pytest.mark.tmux


def poll_ids(h, member_id: int) -> list[int]:
    result = h.cli("message", "poll", str(member_id), "--json")
    assert result.returncode == 0, result.stderr
    return [m["message_id"] for m in json.loads(result.stdout)]


def loop_row(h, fleet_id: int) -> tuple | None:
    found = h.sqlite("SELECT pid, last_tick_at FROM monitor_runtime WHERE fleet_id = ?", fleet_id)
    return found[0] if found else None


def log_text(h, fleet_id: int) -> str:
    path = monitor_log(h, fleet_id)
    return path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""


def test_copy_mode_warns_keeps_order_and_the_restarted_loop_retries(tmux_db) -> None:
    h = tmux_db
    w = build_world(h.db_path, harness=h, members=("alice", "bob"))
    a, b = w.members["alice"], w.members["bob"]
    pane = w.pane(b)
    h.tmux("copy-mode", "-t", pane)
    reason = f"typing into pane {pane} failed: pane is in copy-mode"

    r1 = send(h, a, b, "first")
    assert r1.returncode == 0
    m1 = sent_id(r1.stdout)
    assert r1.stdout.startswith("Message sent.\n")
    assert r1.stderr == warning(m1, b, reason) + "\n"
    # tmux was usable and a notification is still pending: the send started the fleet's loop
    row = loop_row(h, w.fleet_id)
    assert row is not None and row[0] is not None and util.pid_alive(int(row[0]))

    r2 = send(h, a, b, "second")
    m2 = sent_id(r2.stdout)
    assert r2.returncode == 0
    # The older message goes first and fails; the warning speaks of this send's own message
    # and names the older one separately (docs/cli.md §1.11).
    assert r2.stderr.splitlines() == [
        warning(m2, b, reason),
        f"Also pending for member {b}: message {m1} (not notified yet)",
    ]
    assert notified_at(h.db_path, m1) is None and notified_at(h.db_path, m2) is None
    assert sorted(poll_ids(h, b)) == [m1, m2]
    assert util.line_records(pane) == []
    assert h.pane_format(pane, "#{pane_in_mode}") == "1"  # cafleet never cancels copy mode

    h.tmux("send-keys", "-t", pane, "-X", "cancel")
    util.wait_records(pane, 2, timeout=30)
    assert util.line_bytes(pane) == [
        record_of(expected_line(m1, "alice", a, "first")),
        record_of(expected_line(m2, "alice", a, "second")),
    ]
    util.retry_until(
        lambda: f"tick -> notify msg {m2} member {b}" in log_text(h, w.fleet_id),
        timeout=10,
        message=lambda: log_text(h, w.fleet_id),
    )
    assert f"tick -> notify msg {m1} member {b}" in log_text(h, w.fleet_id)
    assert notified_at(h.db_path, m1) and notified_at(h.db_path, m2)
    assert sorted(poll_ids(h, b)) == [m1, m2]  # notified, still un-ACKed


def test_loop_that_cannot_start_only_warns(tmux_db) -> None:
    h = tmux_db
    w = build_world(h.db_path, harness=h, members=("alice", "bob"))
    a, b = w.members["alice"], w.members["bob"]
    # a Director pane that no longer exists: the loop refuses to start (docs/runtime.md §5.4 step 3)
    sql_write(
        h.db_path,
        "UPDATE member_placements SET mux_pane_id = '%9999' WHERE member_id = ?",
        w.director,
    )
    h.tmux("copy-mode", "-t", w.pane(b))
    result = send(h, a, b, "hello")
    assert result.returncode == 0
    m1 = sent_id(result.stdout)
    log = monitor_log(h, w.fleet_id)
    assert result.stderr.splitlines() == [
        warning(m1, b, f"typing into pane {w.pane(b)} failed: pane is in copy-mode"),
        f"Warning: monitor loop for fleet {w.fleet_id} is not running and could not be started: "
        f"it exited with status 1; see {log}",
    ]
    assert "Error: director pane %9999 is gone" in log.read_text()
    assert notified_at(h.db_path, m1) is None


def test_pane_gone_then_message_wait_retries_into_the_new_pane(tmux_db) -> None:
    from cafleet.mux import PaneKey
    from cafleet.mux.locks import pane_input_lock

    h = tmux_db
    w = build_world(h.db_path, harness=h, members=("alice", "bob"))
    a, b = w.members["alice"], w.members["bob"]
    occupy_loop_slot(h, w)
    old = w.pane(b)
    h.tmux("kill-pane", "-t", old)

    r1 = send(h, a, b, "lost?")
    m1 = sent_id(r1.stdout)
    assert r1.returncode == 0
    assert r1.stderr == warning(m1, b, f"typing into pane {old} failed: pane not found") + "\n"
    assert notified_at(h.db_path, m1) is None
    assert poll_ids(h, b) == [m1]

    # re-point the placement, under the new pane's lock, at a fresh fake
    new = h.spawn_fake()
    with pane_input_lock(
        str(h.db_path.parent), PaneKey("tmux", w.session, new), timeout=5, purpose="test"
    ):
        sql_write(
            h.db_path, "UPDATE member_placements SET mux_pane_id = ? WHERE member_id = ?", new, b
        )

    # the Director's wait drains the fleet: the old message reaches the new pane
    waiter = h.popen_cli("message", "wait", str(w.director), "--timeout", "60")
    util.wait_records(new, 1, timeout=30)
    assert util.line_bytes(new) == [record_of(expected_line(m1, "alice", a, "lost?"))]
    util.retry_until(lambda: notified_at(h.db_path, m1) is not None, timeout=10)
    assert waiter.poll() is None  # still waiting: the Director's inbox is empty

    # a member's send to the Director ends the wait promptly
    done = send(h, a, w.director, "done", "--json")
    sent_at = time.monotonic()
    d_id = send_json(done)["message"]["message_id"]
    stdout, stderr = waiter.communicate(timeout=30)
    latency = time.monotonic() - sent_at
    assert waiter.returncode == 0, stderr
    assert stderr == ""
    assert stdout.splitlines()[0].startswith(f"[{d_id} | from:alice ({a}) | ")
    assert stdout.splitlines()[1] == "done"
    assert latency < 5, latency
    assert util.line_records(w.director_pane) == []

    # a member's own wait never types into its own pane: its messages go to stdout
    pending = send(h, a, b, "for bob", env={"TMUX": ""})
    p_id = sent_id(pending.stdout)
    own = h.cli("message", "wait", str(b), "--timeout", "0", "--json")
    assert own.returncode == 0 and own.stderr == ""
    assert [m["message_id"] for m in json.loads(own.stdout)] == [m1, p_id]  # oldest first
    assert typed_ids(new) == [m1]


def test_lock_timeout_warns_after_about_a_second_and_the_loop_types_later(tmux_db) -> None:
    h = tmux_db
    w = build_world(h.db_path, harness=h, members=("alice", "bob"))
    a, b = w.members["alice"], w.members["bob"]
    pane = w.pane(b)
    with util.hold_pane_lock(h.db_path.parent, w.key(b)):
        started = time.monotonic()
        result = send(h, a, b, "busy?")
        elapsed = time.monotonic() - started
        m1 = sent_id(result.stdout)
        assert result.returncode == 0
        assert result.stderr == (
            f"Warning: message {m1} not notified to member {b}: pane {pane} is receiving another "
            "keystroke (it stays in the inbox; delivery will be retried)\n"
        )
        assert elapsed >= 1.0  # the lock was tried for (about) a second, not 30
        assert notified_at(h.db_path, m1) is None
        assert util.line_records(pane) == []
        row = loop_row(h, w.fleet_id)  # no loop was live: the send started one
        assert row is not None and row[0] is not None and util.pid_alive(int(row[0]))
        assert util.line_records(pane) == []
    util.wait_records(pane, 1, timeout=30)
    assert util.line_bytes(pane) == [record_of(expected_line(m1, "alice", a, "busy?"))]
    util.retry_until(
        lambda: f"tick -> notify msg {m1} member {b}" in log_text(h, w.fleet_id), timeout=10
    )


def test_a_busy_pane_warning_names_the_senders_own_message_unless_a_drain_holds_it(
    tmux_db,
) -> None:
    """docs/cli.md §1.11: the lock-wait warning is about this send's message (not the older one its
    drain selected first), and a pane another notification drain holds gives no warning."""
    h = tmux_db
    w = build_world(h.db_path, harness=h, members=("alice", "bob"))
    a, b = w.members["alice"], w.members["bob"]
    occupy_loop_slot(h, w)
    pane = w.pane(b)
    older = sent_id(send(h, a, b, "older", env={"TMUX": ""}).stdout)  # stays pending
    with util.hold_pane_lock(h.db_path.parent, w.key(b), purpose="prompt member 3"):
        result = send(h, a, b, "mine")
        mine = sent_id(result.stdout)
        assert result.returncode == 0
        assert result.stderr == (
            f"Warning: message {mine} not notified to member {b}: pane {pane} is receiving "
            "another keystroke (it stays in the inbox; delivery will be retried)\n"
            f"Also pending for member {b}: message {older} (not notified yet)\n"
        )
    with util.hold_pane_lock(h.db_path.parent, w.key(b), purpose=f"notify msg {older}"):
        # Another drain (a loop retrying the older line) holds the pane: no warning, but the
        # send says its own line was not typed, and why, in text and in JSON.
        quiet = send(h, a, b, "handed off")
        handed = sent_id(quiet.stdout)
        pending = (
            f"Pending: message {handed} for member {b} is not typed yet: pane {pane} is busy "
            f"typing another line (notify msg {older}); it stays in the inbox and is typed "
            "after that one"
        )
        assert quiet.returncode == 0 and quiet.stdout.startswith("Message sent.\n")
        assert quiet.stderr == pending + "\n"  # that drain goes on with the older ones too
        as_json = send(h, a, b, "handed off too", "--json")
        data = send_json(as_json)
        too = data["message"]["message_id"]
        assert data["notification_sent"] is False
        assert data["notification_note"] == pending.replace(f"message {handed} ", f"message {too} ")
        assert as_json.stderr == data["notification_note"] + "\n"
    assert notified_at(h.db_path, older) is None  # nothing was typed while the locks were held
    assert util.line_records(pane) == []


def test_a_warning_about_an_older_line_that_was_typed_says_so(tmux_db) -> None:
    """The drain stopped at an older message whose own line was typed but not verified (or
    held it): this send's result names its own message, says the older one failed first, and
    lists what else is pending; when its own line went in, only the pending line is left."""
    from cafleet.delivery.drains import DrainFailure, DrainReport
    from cafleet.workflows.messaging import own_outcome_lines
    from tests.factories import connect

    h = tmux_db
    w = build_world(h.db_path, harness=h, members=("alice", "bob"))
    a, b = w.members["alice"], w.members["bob"]
    older = sent_id(send(h, a, b, "older", env={"TMUX": ""}).stdout)
    mine = sent_id(send(h, a, b, "mine", env={"TMUX": ""}).stdout)
    pane = w.pane(b)
    reason = f"typed into pane {pane} but not verified: the line is not on the screen after Enter"
    also = f"Also pending for member {b}: message {older} (not notified yet)"
    with connect(h.db_path) as conn:
        report = DrainReport()
        report.failures.append(DrainFailure(older, b, pane, reason))
        assert own_outcome_lines(conn, report, {b: mine}) == [
            warning(mine, b, f"message {older} ahead of it failed first: {reason}"),
            also,
        ]
        held = DrainReport()
        held.failures.append(DrainFailure(older, b, pane, "held", held="starting"))
        assert own_outcome_lines(conn, held, {b: mine}) == [
            f"Held: message {mine} for member {b} waits while pane {pane} is starting; the "
            "monitor loop will deliver it",
            also,
        ]
        went_in = DrainReport()
        went_in.notified.append((mine, b))
        went_in.failures.append(DrainFailure(older, b, pane, reason))
        assert own_outcome_lines(conn, went_in, {b: mine}) == [also]
        # The pane lock was held by another drain: by one typing this very line (the loop
        # picked it up first), or an older one.
        busy = f"pane {pane} is receiving another keystroke"
        itself = DrainReport()
        itself.failures.append(DrainFailure(mine, b, pane, busy, True, f"notify msg {mine}"))
        assert own_outcome_lines(conn, itself, {b: mine}) == [
            f"Pending: message {mine} for member {b} is being typed into pane {pane} by another "
            "delivery (the monitor loop's, or a send's)"
        ]
        behind = DrainReport()
        behind.failures.append(DrainFailure(mine, b, pane, busy, True, f"notify msg {older}"))
        assert own_outcome_lines(conn, behind, {b: mine}) == [
            f"Pending: message {mine} for member {b} is not typed yet: pane {pane} is busy "
            f"typing another line (notify msg {older}); it stays in the inbox and is typed "
            "after that one"
        ]


def test_without_tmux_the_send_warns_and_a_later_send_types_older_first(tmux_db) -> None:
    h = tmux_db
    w = build_world(h.db_path, harness=h, members=("alice", "bob"))
    a, b = w.members["alice"], w.members["bob"]
    r1 = send(h, a, b, "no tmux here", env={"TMUX": ""})
    m1 = sent_id(r1.stdout)
    assert r1.returncode == 0 and r1.stdout.startswith("Message sent.\n")
    assert r1.stderr == warning(m1, b, "not inside a tmux session (TMUX is not set)") + "\n"
    assert notified_at(h.db_path, m1) is None
    assert loop_row(h, w.fleet_id) is None  # tmux was not usable: no loop is started
    assert util.shim_calls() == []

    r2 = send(h, a, b, "with tmux", "--json")
    data = send_json(r2)
    m2 = data["message"]["message_id"]
    assert data["notification_sent"] is True and r2.stderr == ""
    util.wait_records(w.pane(b), 2)
    assert typed_ids(w.pane(b)) == [m1, m2]
    assert loop_row(h, w.fleet_id) is None  # nothing pending afterwards: no loop needed


def test_failed_enter_is_one_attempt_and_the_retry_clears_the_stranded_text(tmux_db) -> None:
    """The Enter fails after the text landed in Claude's composer (screen mode): one attempt;
    the next send empties the composer first, so the retry is one clean submission."""
    h = tmux_db
    w = build_world(h.db_path, harness=h, members=("alice", "bob"), screen="")
    a, b = w.members["alice"], w.members["bob"]
    pane = w.pane(b)
    occupy_loop_slot(h, w)
    older = [sent_id(send(h, a, b, f"older {i}", env={"TMUX": ""}).stdout) for i in range(2)]
    h.set_faults(
        [
            {
                "command": "send-keys",
                "target": pane,
                "last": "Enter",
                "action": "fail",
                "stderr": "injected",
                "times": 1,
            }
        ]
    )
    r3 = send(h, a, b, "third")
    m3 = sent_id(r3.stdout)
    assert r3.returncode == 0
    reason = f"typing into pane {pane} failed: tmux send-keys failed: injected"
    assert r3.stderr.splitlines() == [  # about its own message; the older ones apart
        warning(m3, b, reason),
        f"Also pending for member {b}: messages {older[0]}, {older[1]} (not notified yet)",
    ]
    assert send_keys_runs(pane) == ["L", "N"]  # one attempt, nothing else tried
    for mid in (*older, m3):
        assert notified_at(h.db_path, mid) is None

    h.clear_faults()
    r4 = send(h, a, b, "fourth", "--json")
    m4 = send_json(r4)["message"]["message_id"]
    assert r4.stderr == ""
    util.wait_records(pane, 4, timeout=30)
    line1 = expected_line(older[0], "alice", a, "older 0")
    assert util.line_bytes(pane) == [
        record_of(line1),  # the stranded text was cleared (Ctrl-U), then typed again
        record_of(expected_line(older[1], "alice", a, "older 1")),
        record_of(expected_line(m3, "alice", a, "third")),
        record_of(expected_line(m4, "alice", a, "fourth")),
    ]
    for mid in (*older, m3, m4):
        assert notified_at(h.db_path, mid) is not None
    assert re.fullmatch(r"LNU+(LN){4}", "".join(send_keys_runs(pane)))
    assert "E" not in send_keys_runs(pane)


def test_ack_between_typing_and_stamping_counts_as_notified(tmux_db) -> None:
    h = tmux_db
    w = build_world(h.db_path, harness=h, members=("alice", "bob"))
    a, b = w.members["alice"], w.members["bob"]
    pane = w.pane(b)
    occupy_loop_slot(h, w)

    # a message ACKed before any drain selects it is never typed
    early = sent_id(send(h, a, b, "acked early", env={"TMUX": ""}).stdout)
    assert h.cli("message", "ack", str(early)).returncode == 0

    flag = h.dir / "release-enter"
    h.set_faults(
        [
            {
                "command": "send-keys",
                "target": pane,
                "last": "Enter",
                "action": "pause_until",
                "path": str(flag),
            }
        ]
    )
    proc = h.popen_cli(
        "message", "send", "--from-member-id", str(a), "--to-member-id", str(b), "racy", "--json"
    )
    util.retry_until(
        lambda: any(
            c.get("command") == "send-keys" and c.get("target") == pane and c["argv"][-1] == "Enter"
            for c in util.shim_calls()
        ),
        timeout=30,
        message="the Enter never reached the shim",
    )
    m1 = max(r[0] for r in h.sqlite("SELECT message_id FROM messages"))
    # In process: the paused Enter runs under the product's 5 s tmux-call timeout, which a
    # CLI's start-up on a loaded machine could use up.
    acked = call_run("message", "ack", str(m1))
    assert acked.returncode == 0, acked.stderr
    flag.touch()
    stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0 and stderr == ""
    data = json.loads(stdout)
    assert data["message"]["message_id"] == m1 and data["notification_sent"] is True
    row = message_row(h.db_path, m1)
    assert row["status_state"] == "completed" and row["notified_at"] is None
    util.wait_records(pane, 1)

    h.clear_faults()
    r2 = send(h, a, b, "after", "--json")
    m2 = send_json(r2)["message"]["message_id"]
    util.wait_records(pane, 2)
    assert typed_ids(pane) == [m1, m2]  # neither typed twice, the early ACK never
    assert early not in typed_ids(pane)


def test_sigint_while_the_send_waits_for_a_lock_keeps_the_message(tmux_db) -> None:
    import signal

    h = tmux_db
    w = build_world(h.db_path, harness=h, members=("alice", "bob"))
    a, b = w.members["alice"], w.members["bob"]
    occupy_loop_slot(h, w)
    from cafleet.mux.locks import pane_lock_path

    lock = pane_lock_path(str(h.db_path.parent), w.key(b))
    with util.hold_pane_lock(h.db_path.parent, w.key(b)):
        for _attempt in range(3):  # the lock wait lasts only 1 s; retry if the signal was late
            proc = h.popen_cli(
                "message", "send", "--from-member-id", str(a), "--to-member-id", str(b), "sig"
            )
            util.retry_until(
                lambda p=proc: holds_open(p.pid, lock) or p.poll() is not None,
                timeout=30,
                interval=0.005,
            )
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGINT)
            stdout, stderr = proc.communicate(timeout=30)
            if proc.returncode == 130:
                break
        assert proc.returncode == 130, (proc.returncode, stdout, stderr)
        assert stdout.startswith("Message sent.\n")
        assert stderr == ""  # an abandoned lock wait is not a failure: no warning, no traceback
        mid = sent_id(stdout)
        assert notified_at(h.db_path, mid) is None
        assert mid in poll_ids(h, b)
    assert util.line_records(w.pane(b)) == []


def test_sender_killed_between_enter_and_stamp_means_the_line_comes_again(tmux_db) -> None:
    import signal

    h = tmux_db
    w = build_world(h.db_path, harness=h, members=("alice", "bob"))
    a, b = w.members["alice"], w.members["bob"]
    pane = w.pane(b)
    occupy_loop_slot(h, w)
    h.set_faults(
        [
            {
                "command": "send-keys",
                "target": pane,
                "last": "Enter",
                "action": "kill_caller_after",
                "times": 1,
            }
        ]
    )
    killed = send(h, a, b, "crash")
    assert killed.returncode == -signal.SIGKILL
    m1 = max(r[0] for r in h.sqlite("SELECT message_id FROM messages"))
    util.wait_records(pane, 1)
    assert notified_at(h.db_path, m1) is None  # died before the stamp: at-least-once
    h.clear_faults()
    r2 = send(h, a, b, "next", "--json")
    m2 = send_json(r2)["message"]["message_id"]
    util.wait_records(pane, 3)
    line = record_of(expected_line(m1, "alice", a, "crash"))
    assert util.line_bytes(pane) == [line, line, record_of(expected_line(m2, "alice", a, "next"))]
    assert notified_at(h.db_path, m1) is not None


def test_a_killed_lock_holder_does_not_delay_the_next_send(tmux_db) -> None:
    import signal

    h = tmux_db
    w = build_world(h.db_path, harness=h, members=("alice", "bob"))
    a, b = w.members["alice"], w.members["bob"]
    occupy_loop_slot(h, w)
    with util.hold_pane_lock(h.db_path.parent, w.key(b)) as holder:
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
        result = send(h, a, b, "free again", "--json")
    data = send_json(result)
    assert data["notification_sent"] is True and result.stderr == ""
    util.wait_records(w.pane(b), 1)
