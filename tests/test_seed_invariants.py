"""Seed-000 wave-1 sentences that `docs/seed-trace.md` listed as only partly proved.

- #21: the notification stamp is written after the complete submission, while the message is
  still pending and the pane-input lock is still held.
- #25: one `message wait` attempts each pending message at most once across all its drain passes.
- #40: `member create`'s pane-id patch (docs/cli.md §2.7 step 9) takes the new pane's input lock.
- #45: `message send`, stamp included, uses the one connection the guard validated.

All run against the private tmux server; fleets are built through the repository (no monitor
loop runs unless a command starts one).
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
from pathlib import Path

import pytest

from tests.cli_helpers import call_main
from tests.delivery_helpers import (
    expected_line,
    local_dir,
    message_row,
    notified_at,
    record_of,
    warning,
)
from tests.factories import build_world, connect
from tests.harness import util

pytestmark = pytest.mark.tmux


def put(conn, frm: int, to: int, text: str) -> int:
    """Store a message without draining (the repository alone)."""
    from cafleet import broker

    return broker.send_message(conn, from_member_id=frm, to_member_id=to, text=text).message_id


# --- seed 000 #21 ---------------------------------------------------------------------------------


def test_stamp_happens_after_the_full_line_while_the_pane_lock_is_held(tmux_db, monkeypatch):
    """Breaks if the stamp moves after the lock release (the spy's try-lock then succeeds), or
    before/while typing (the spy then waits in vain for the fake's line record and times out),
    or if notification state is written before the stamp (notified_at is set at the spy)."""
    from cafleet import broker
    from cafleet.delivery.drains import drain_recipients
    from cafleet.mux import PaneKey
    from cafleet.mux.locks import try_pane_lock

    h = tmux_db
    w = build_world(h.db_path, harness=h, members=("alice", "bob"))
    a, b = w.members["alice"], w.members["bob"]
    pane = w.pane(b)
    db_dir = str(local_dir(h.db_path))
    key = PaneKey("tmux", w.session, pane)
    real_stamp = broker.stamp_notified
    seen: list[dict] = []

    def spy(conn, *, message_id, **kwargs):
        # The fake agent has received the whole line and its Enter (complete submission).
        lines = util.wait_records(pane, 1, timeout=15)
        other = try_pane_lock(db_dir, key, purpose="seed-21 probe")  # a second open file
        held = other is None
        if other is not None:
            other.release()
        seen.append(
            {
                "message_id": message_id,
                "lines": [util.record_bytes(r) for r in lines],
                "lock_held": held,
                "notified_at": notified_at(h.db_path, message_id),
                "state": status_state(h.db_path, message_id),
            }
        )
        return real_stamp(conn, message_id=message_id, **kwargs)

    monkeypatch.setattr(broker, "stamp_notified", spy)
    with connect(h.db_path) as conn:
        m1 = put(conn, a, b, "stamp under the lock")
        report = drain_recipients(conn, [b], attempted=set(), lock_timeout=5, env=h.env)

    assert report.failures == [] and report.notified == [(m1, b)]
    assert seen == [
        {
            "message_id": m1,
            "lines": [record_of(expected_line(m1, "alice", a, "stamp under the lock"))],
            "lock_held": True,
            "notified_at": None,
            "state": "input_required",  # still pending (un-ACKed)
        }
    ]
    assert notified_at(h.db_path, m1) is not None
    after = try_pane_lock(db_dir, key, purpose="seed-21 after")  # released once the drain ends
    assert after is not None
    after.release()


def status_state(db_path: Path, message_id: int) -> str:
    return message_row(db_path, message_id)["status_state"]


# --- seed 000 #25 ---------------------------------------------------------------------------------


def _probes(h, pane: str, pid: int) -> list[dict]:
    """`pane_status` probes of ``pane`` made by process ``pid`` (the shim's ppid)."""
    return [
        c
        for c in h.shim_calls()
        if c.get("ppid") == pid
        and c.get("command") == "display-message"
        and c.get("target") == pane
        and any("#{pane_in_mode}" in arg for arg in c["argv"])
    ]


def test_message_wait_attempts_a_failing_message_once_across_its_passes(tmux_db):
    """Breaks if a drain pass of the wait forgets the invocation's attempted/blocked sets: every
    data_version change below re-runs the pass, which would probe bob's pane again and print the
    warning again."""
    h = tmux_db
    w = build_world(h.db_path, harness=h, members=("alice", "bob"))
    a, b = w.members["alice"], w.members["bob"]
    bob_pane, alice_pane = w.pane(b), w.pane(a)
    h.tmux("copy-mode", "-t", bob_pane)
    with connect(h.db_path) as conn:
        m1 = put(conn, a, b, "stuck behind copy mode")

    out, err = h.dir / "wait.out", h.dir / "wait.err"
    with open(out, "w") as fo, open(err, "w") as fe:
        proc = h.popen_cli(
            "message", "wait", str(w.director), "--timeout", "60", stdout=fo, stderr=fe
        )
    reason = f"typing into pane {bob_pane} failed: pane is in copy-mode"
    expected_warning = warning(m1, b, reason)
    util.retry_until(
        lambda: expected_warning in err.read_text() or proc.poll() is not None,
        timeout=20,
        message=lambda: f"no warning; stderr {err.read_text()!r}",
    )
    assert proc.poll() is None, err.read_text()

    # Three commits in the fleet, each followed by the pass it triggers (alice's pane gets a line).
    sent = []
    with connect(h.db_path) as conn:
        for i in range(3):
            sent.append(put(conn, b, a, f"round {i}"))
            util.wait_records(alice_pane, i + 1, timeout=20)
        # A message for the Director ends the wait.
        final = put(conn, a, w.director, "done")
    assert proc.wait(timeout=30) == 0, err.read_text()

    assert str(final) in out.read_text()
    assert util.line_bytes(alice_pane) == [
        record_of(expected_line(m, "bob", b, f"round {i}")) for i, m in enumerate(sent)
    ]
    assert err.read_text().splitlines() == [expected_warning]
    assert len(_probes(h, bob_pane, proc.pid)) == 1
    assert util.line_records(bob_pane) == []
    assert notified_at(h.db_path, m1) is None


# --- seed 000 #40 ---------------------------------------------------------------------------------


def _next_pane_id(h) -> str:
    """tmux allocates pane ids from one increasing per-server counter: check it, then predict."""

    def throwaway() -> int:
        pane = h.tmux(
            "split-window", "-d", "-P", "-F", "#{pane_id}", "-t", h.window_id, "--", "sleep", "600"
        ).strip()
        h.tmux("kill-pane", "-t", pane)
        return int(pane.lstrip("%"))

    first = throwaway()
    second = throwaway()
    assert second == first + 1, (first, second)  # the assumption this test relies on
    return f"%{second + 1}"


def _member_rows(h, name: str) -> list[tuple]:
    return h.sqlite(
        "SELECT m.member_id, m.status, p.mux_pane_id, p.member_id IS NOT NULL"
        " FROM members m LEFT JOIN member_placements p ON p.member_id = m.member_id"
        " WHERE m.name = ?",
        name,
    )


def _create_args(fleet_id: int, name: str) -> list[str]:
    return [
        "member",
        "create",
        "--fleet-id",
        str(fleet_id),
        "--name",
        name,
        "--description",
        f"{name} member",
        "hello {member_id}",
    ]


def test_member_create_patch_times_out_on_the_new_panes_held_lock(tmux_db):
    """Breaks if step 9 patches the pane id without taking the new pane's lock (the create then
    succeeds) or takes some other key's lock."""
    from cafleet.mux import PaneKey

    h = tmux_db
    w = build_world(h.db_path, harness=h, members=("alice",))
    pane = _next_pane_id(h)
    key = PaneKey("tmux", w.session, pane)
    with util.hold_pane_lock(local_dir(h.db_path), key):
        result = h.cli(*_create_args(w.fleet_id, "carol"), env={"CAFLEET_PANE_LOCK_TIMEOUT": "1"})
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert result.stdout == ""
    assert result.stderr.splitlines()[0] == (
        f"Error: placement update failed: pane {pane} is receiving another keystroke"
    )
    assert pane not in h.live_panes()
    ((member_id, status, _pane, has_placement),) = _member_rows(h, "carol")
    assert status == "deregistered" and not has_placement, (member_id, status)


def test_member_create_patch_waits_for_the_new_panes_lock(tmux_db):
    """Breaks if step 9 does not wait for the new pane's lock: the placement is then patched
    while the lock is still held."""
    from cafleet.mux import PaneKey

    h = tmux_db
    w = build_world(h.db_path, harness=h, members=("alice",))
    pane = _next_pane_id(h)
    key = PaneKey("tmux", w.session, pane)
    with util.hold_pane_lock(local_dir(h.db_path), key):
        out, err = h.dir / "create.out", h.dir / "create.err"
        with open(out, "w") as fo, open(err, "w") as fe:
            proc = h.popen_cli(
                *_create_args(w.fleet_id, "carol"),
                env={"CAFLEET_PANE_LOCK_TIMEOUT": "30"},
                stdout=fo,
                stderr=fe,
            )
        util.retry_until(
            lambda: pane in h.live_panes() and _member_rows(h, "carol"),
            timeout=20,
            message=lambda: f"pane {pane} not spawned; stderr {err.read_text()!r}",
        )
        # For a full second after the spawn the patch stays pending: it waits for the lock.
        watch_until = time.monotonic() + 1.0
        while time.monotonic() < watch_until:
            ((_mid, status, patched, has_placement),) = _member_rows(h, "carol")
            assert (status, patched, has_placement) == ("active", None, 1)
            assert proc.poll() is None, err.read_text()
            time.sleep(0.05)
    assert proc.wait(timeout=30) == 0, err.read_text()
    m = re.fullmatch(r"(\d+) carol agent=claude pane=(%\d+)\n", out.read_text())
    assert m and m.group(2) == pane, out.read_text()
    ((member_id, status, patched, _),) = _member_rows(h, "carol")
    assert (member_id, status, patched) == (int(m.group(1)), "active", pane)
    assert pane in h.live_panes()


# --- seed 000 #45 ---------------------------------------------------------------------------------


def test_message_send_with_a_typed_notification_opens_one_connection(tmux_db, monkeypatch):
    """Breaks if any step of `message send` (guard, insert, drain recheck/stamp, loop check)
    opens a second connection to the database (the file, or the PostgreSQL database)."""
    import cafleet.db.diagnosis as diagnosis
    import cafleet.db.guard as guard
    from tests.pg_server import PgDb

    h = tmux_db
    w = build_world(h.db_path, harness=h, members=("alice", "bob"))
    a, b = w.members["alice"], w.members["bob"]
    monkeypatch.setenv("TMUX", h.env["TMUX"])
    monkeypatch.setenv("TMUX_PANE", w.pane(a))  # the sender's own pane (docs/cli.md §1.5)

    opened: list[str] = []
    file_connects: list[str] = []
    real_open = guard.open_connection

    def counting_open(path, *args, **kwargs):
        opened.append(path)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(guard, "open_connection", counting_open)  # the guard's opener
    monkeypatch.setattr(diagnosis, "open_connection", counting_open)
    # any driver connection to the database at all: sqlite3.connect to the file, or psycopg's
    # connect (module function and class method, either may be called) naming the database
    if isinstance(h.db_path, PgDb):
        import psycopg

        target = f"/{h.db_path.name}"
        patched = [(psycopg, "connect"), (psycopg.Connection, "connect")]
    else:
        target = str(h.db_path)
        patched = [(sqlite3, "connect")]
    counting = [True]  # only during the command: the checks below read the database too

    def counted(real):
        def connect(database, *args, **kwargs):
            if counting[0] and target in str(database):
                file_connects.append(str(database))
            return real(database, *args, **kwargs)

        return connect

    for owner, name in patched:
        monkeypatch.setattr(owner, name, counted(getattr(owner, name)))
    try:
        code, stdout, stderr = call_main(
            [
                "message",
                "send",
                "--from-member-id",
                str(a),
                "--to-member-id",
                str(b),
                "one connection",
                "--json",
            ]
        )
    finally:
        counting[0] = False
    assert code == 0, (stdout, stderr)
    assert stderr == ""
    data = json.loads(stdout)
    assert data["notification_sent"] is True
    m1 = data["message"]["message_id"]
    assert opened == [str(h.db_path)]
    assert len(file_connects) == 1, file_connects
    assert notified_at(h.db_path, m1) is not None  # the drain's stamp was written
    util.wait_records(w.pane(b), 1)
    assert util.line_bytes(w.pane(b)) == [
        record_of(expected_line(m1, "alice", a, "one connection"))
    ]
