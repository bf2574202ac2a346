"""`message wait` and `message stream` (docs/cli.md §2.19, §2.20; §4 items 67–71, 77, 81;
docs/runtime.md §8 items 45, 46, 68, 71).

Most tests need no tmux: placements name made-up panes and the test process has no TMUX, so a
wait's drain stops silently. The lock-wait tests run against the private tmux server.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import time
from pathlib import Path

import pytest

from cafleet.db.shapes import HEAD_VERSION
from tests.cli_helpers import MESSAGE_KEYS, TYPING_MODULES, imported_after, snapshot
from tests.delivery_helpers import (
    LineReader,
    call,
    cli,
    expected_line,
    hold_writer_lock,
    holds_db_open,
    holds_open,
    local_dir,
    lock_files,
    notified_at,
    popen,
    record_of,
    sent_id,
)
from tests.factories import build_world, connect
from tests.harness import util


def put(conn, frm: int, to: int, text: str) -> int:
    from cafleet import broker

    return broker.send_message(conn, from_member_id=frm, to_member_id=to, text=text).message_id


def started(proc, db_path: Path) -> None:
    """Wait until the child has the database open (it is past start-up, in or near its loop)."""
    util.retry_until(
        lambda: holds_db_open(proc.pid, db_path) or proc.poll() is not None,
        timeout=30,
        interval=0.01,
        message="the command never opened the database",
    )
    assert proc.poll() is None, proc.communicate()


def cpu_ticks(pid: int) -> int:
    with open(f"/proc/{pid}/stat", "rb") as fh:
        fields = fh.read().rsplit(b")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def settled(proc, db_path: Path) -> None:
    """Wait until the child has the database open and idles in its polling loop (its CPU time
    barely moves over 0.3 s), so what the test does next happens inside the loop."""
    started(proc, db_path)

    def idle() -> bool:
        before = cpu_ticks(proc.pid)
        time.sleep(0.3)
        return cpu_ticks(proc.pid) - before <= 3

    util.retry_until(idle, timeout=30, interval=0.0, message="the command never went idle")


@pytest.fixture
def world(head_db: Path):
    return build_world(head_db, members=("alice", "bob"))


# --- wait ----------------------------------------------------------------------------------------


def test_wait_returns_at_once_like_poll_oldest_first(world, head_db: Path) -> None:
    """docs/cli.md §2.19: the envelopes poll prints, in the order they arrived."""
    from cafleet import broker

    a, b = world.members["alice"], world.members["bob"]
    with connect(head_db) as conn:
        ids = [put(conn, b, a, f"msg {i}\x1b") for i in range(3)]
        broker.ack_message(conn, message_id=ids[0])
        broker.broadcast_message(conn, from_member_id=b, text="everyone")
    polled = call("message", "poll", str(a))
    waited = call("message", "wait", str(a), "--timeout", "5")
    assert waited.returncode == 0 and waited.stderr == ""
    assert waited.stdout.rstrip("\n").split("\n\n") == list(
        reversed(polled.stdout.rstrip("\n").split("\n\n"))
    )
    polled = call("message", "poll", str(a), "--json")
    waited = call("message", "wait", str(a), "--timeout", "5", "--json")
    assert json.loads(waited.stdout) == list(reversed(json.loads(polled.stdout)))
    assert len(json.loads(call("message", "wait", str(a), "--json").stdout)) == 3


def test_wait_timeout_exits_124_with_the_timed_out_error(world, head_db: Path) -> None:
    """docs/cli.md §2.19: a timeout is its own documented outcome (exit 124, cafleet.status.TIMEOUT)."""
    a = world.members["alice"]
    before = snapshot(head_db)
    t0 = time.monotonic()
    r = call("message", "wait", str(a), "--timeout", "0.5")
    assert time.monotonic() - t0 >= 0.5
    assert (r.returncode, r.stdout, r.stderr) == (
        124,
        "",
        f"Error: timed out after 0.5 s with no message for member {a}\n",
    )
    r = call("message", "wait", str(a), "--timeout", "0", "--json")
    assert (r.returncode, r.stdout) == (124, "")
    assert json.loads(r.stderr) == {
        "error": {
            "code": "timeout",
            "message": f"timed out after 0 s with no message for member {a}",
        }
    }
    assert snapshot(head_db) == before
    for bad in ("-1", "90000", "abc", "nan", "inf"):
        r = call("message", "wait", str(a), "--timeout", bad)
        assert r.returncode == 2, (bad, r.stderr)
    assert "default: 60" in call("message", "wait", "--help").stdout


def test_wait_refuses_unknown_and_deregistered_members(world, head_db: Path) -> None:
    from cafleet import broker

    a = world.members["alice"]
    with connect(head_db) as conn:
        broker.deregister_member(conn, member_id=a)
    for member, text in (("999", "not found"), (str(a), "is deregistered")):
        for command in ("wait", "stream"):
            r = call("message", command, member, "--timeout", "0")
            assert (r.returncode, r.stdout) == (1, ""), r
            assert r.stderr == f"Error: member {member} {text}\n"


def test_wait_without_tmux_drains_silently_and_still_returns(world, head_db: Path) -> None:
    a, b = world.members["alice"], world.members["bob"]
    with connect(head_db) as conn:
        pending = put(conn, a, b, "for bob's (made-up) pane")
    r = call("message", "wait", str(world.director), "--timeout", "0.3")
    assert (r.returncode, r.stdout) == (124, "")
    assert r.stderr == f"Error: timed out after 0.3 s with no message for member {world.director}\n"
    assert notified_at(head_db, pending) is None


def test_wait_wakes_promptly_after_another_process_commits(world, head_db: Path) -> None:
    """Each of 10 waits is woken by the commit, not its 60 s timeout (the median latency is
    reported; speed itself is the benchmark harness's job, docs/performance.md)."""
    from cafleet import broker

    a, d = world.members["alice"], world.director
    latencies: list[float] = []
    with connect(head_db) as conn:
        for i in range(10):
            proc = popen("message", "wait", str(d), "--timeout", "60", "--json")
            reader = LineReader(proc)
            settled(proc, head_db)
            mid = put(conn, a, d, f"wake {i}")
            committed = time.monotonic()
            line = reader.line(timeout=10)
            latencies.append(time.monotonic() - committed)
            assert [m["message_id"] for m in json.loads(line)] == [mid]
            assert proc.wait(10) == 0
            broker.ack_message(conn, message_id=mid)
    median = statistics.median(latencies)
    print(
        f"\nmessage wait wake-up latency: median {median * 1000:.1f} ms, "
        f"max {max(latencies) * 1000:.1f} ms over {len(latencies)} trials"
    )


def test_wait_exits_1_when_the_member_is_deregistered(world, head_db: Path) -> None:
    from cafleet import broker

    a = world.members["alice"]
    proc = popen("message", "wait", str(a), "--timeout", "60")
    settled(proc, head_db)
    with connect(head_db) as conn:
        broker.deregister_member(conn, member_id=a)
    stdout, stderr = proc.communicate(timeout=30)
    assert (proc.returncode, stdout, stderr) == (
        1,
        b"",
        f"Error: member {a} was deregistered\n".encode(),
    )


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_wait_and_stream_stop_on_signals(world, head_db: Path, signum: int, code: int) -> None:
    a = world.members["alice"]
    with connect(head_db) as conn:
        put(conn, world.members["bob"], a, "backlog")
    waiter = popen("message", "wait", str(world.director), "--timeout", "60")
    streamer = popen("message", "stream", str(a))
    reader = LineReader(streamer)
    assert json.loads(reader.line())["text"] == "backlog"
    started(waiter, head_db)
    for proc in (waiter, streamer):
        proc.send_signal(signum)
    w_out, w_err = waiter.communicate(timeout=10)
    assert (waiter.returncode, w_out, w_err) == (code, b"", b"")
    s_err = streamer.stderr.read()
    assert streamer.wait(10) == code
    assert reader.rest() == b"" and s_err == b""


# --- stream --------------------------------------------------------------------------------------


def test_stream_emits_backlog_then_each_new_delivery_once(world, head_db: Path) -> None:
    from cafleet import broker

    a, b = world.members["alice"], world.members["bob"]
    with connect(head_db) as conn:
        acked = put(conn, b, a, "acked before the stream")
        broker.ack_message(conn, message_id=acked)
        m2 = put(conn, b, a, "second")
        d3 = broker.broadcast_message(conn, from_member_id=b, text="to all").deliveries
        d3_a = next(d.message_id for d in d3 if d.owner_member_id == a)
        own = put(conn, a, a, "self")
        broker.broadcast_message(conn, from_member_id=a, text="alice's own broadcast")
    proc = popen("message", "stream", str(a), "--timeout", "60", "--json")
    reader = LineReader(proc)
    backlog = [json.loads(reader.line()) for _ in range(3)]
    assert [m["message_id"] for m in backlog] == [m2, d3_a, own]
    assert list(backlog[0]) == MESSAGE_KEYS
    # one envelope per line, compact JSON, non-ASCII raw
    with connect(head_db) as conn:
        m5 = put(conn, b, a, "live é…\x1b")
        raw = reader.line()
        assert (
            raw == json.dumps(json.loads(raw), ensure_ascii=False, separators=(",", ":")).encode()
        )
        assert json.loads(raw)["message_id"] == m5 and json.loads(raw)["text"] == "live é…\x1b"
        broker.ack_message(conn, message_id=m2)  # changes nothing already emitted
        put(conn, b, world.director, "not alice's")
        m6 = put(conn, b, a, "sixth")
        assert json.loads(reader.line())["message_id"] == m6
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(10) == 143
    assert reader.rest() == b""
    assert proc.stderr.read() == b""


def test_stream_timeout_zero_writes_nothing_and_touches_no_tmux(world, head_db: Path) -> None:
    a, b = world.members["alice"], world.members["bob"]
    with connect(head_db) as conn:
        first = put(conn, b, a, "pending notification, never stamped by a stream")
    before, locks_before = snapshot(head_db), lock_files(head_db)
    r = cli("message", "stream", str(a), "--timeout", "0")
    assert r.returncode == 0 and r.stderr == ""
    assert [json.loads(x)["message_id"] for x in r.stdout.splitlines()] == [first]
    assert snapshot(head_db) == before
    assert lock_files(head_db) == locks_before
    code, found = imported_after(["message", "stream", str(a), "--timeout", "0"], TYPING_MODULES)
    assert (code, found) == (0, [])
    assert notified_at(head_db, first) is None


def test_stream_deregistration_emits_what_remains_then_exits_1(world, head_db: Path) -> None:
    from cafleet import broker

    a, b = world.members["alice"], world.members["bob"]
    with connect(head_db) as conn:
        m1 = put(conn, b, a, "one")
    proc = popen("message", "stream", str(a))
    reader = LineReader(proc)
    assert json.loads(reader.line())["message_id"] == m1
    with connect(head_db) as conn:
        m2 = put(conn, b, a, "last words")
        broker.deregister_member(conn, member_id=a)
    rest = reader.rest(timeout=30)
    assert [json.loads(x)["message_id"] for x in rest.splitlines()] == [m2]
    assert proc.wait(10) == 1
    assert proc.stderr.read() == f"Error: member {a} was deregistered\n".encode()


def test_stream_into_a_closed_pipe_exits_141_silently(world, head_db: Path) -> None:
    a, b = world.members["alice"], world.members["bob"]
    with connect(head_db) as conn:
        put(conn, b, a, "one")
    proc = popen("message", "stream", str(a), "--timeout", "60")
    reader = LineReader(proc)
    reader.line()
    proc.stdout.close()
    with connect(head_db) as conn:
        put(conn, b, a, "two")
    assert proc.wait(30) == 141
    assert proc.stderr.read() == b""


# --- against the private tmux server: lock waits ---------------------------------------------------


@pytest.mark.tmux
def test_wait_lock_wait_ends_at_the_deadline_or_on_mail(tmux_db) -> None:
    from cafleet.mux.locks import pane_lock_path
    from tests.test_delivery_send import occupy_loop_slot

    h = tmux_db
    w = build_world(h.db_path, harness=h, members=("alice", "bob"))
    a, b = w.members["alice"], w.members["bob"]
    occupy_loop_slot(h, w)
    pending = sent_id(
        h.cli("message", "send", "--from-member-id", str(a), "--to-member-id", str(b), "x",
              env={"TMUX": ""}).stdout
    )  # fmt: skip
    lock = pane_lock_path(str(local_dir(h.db_path)), w.key(b))
    with util.hold_pane_lock(local_dir(h.db_path), w.key(b)):
        # 1. the lock wait lasts until the deadline, then the empty result
        proc = h.popen_cli("message", "wait", str(w.director), "--timeout", "2")
        util.retry_until(lambda: holds_open(proc.pid, lock) or proc.poll() is not None, 30, 0.01)
        t0 = time.monotonic()  # its clock started a little earlier
        out, err = proc.communicate(timeout=30)
        waited = time.monotonic() - t0
        assert (proc.returncode, out) == (124, "")
        assert err == f"Error: timed out after 2 s with no message for member {w.director}\n"
        # the wait's deadline ended the lock wait, not the 30 s pane-lock timeout (how close to
        # the deadline it ends is measured by the benchmark harness, not asserted here)
        assert waited < 30, waited
        assert notified_at(h.db_path, pending) is None

        # 2. a message for the Director during the lock wait is printed promptly
        proc = h.popen_cli("message", "wait", str(w.director), "--timeout", "60")
        util.retry_until(lambda: holds_open(proc.pid, lock) or proc.poll() is not None, 30, 0.01)
        assert proc.poll() is None
        with connect(h.db_path) as conn:
            mid = put(conn, a, w.director, "while you wait")
            committed = time.monotonic()
        out, err = proc.communicate(timeout=30)
        latency = time.monotonic() - committed
        assert proc.returncode == 0 and err == ""
        assert out.splitlines()[0].startswith(f"[{mid} | from:alice ({a}) | ")
        # woken by the message, not by the 60 s timeout (that would exit 124 with no output)
        assert latency < 60, latency
        with connect(h.db_path) as conn:
            from cafleet import broker

            broker.ack_message(conn, message_id=mid)

        # 3. SIGTERM during the lock wait: 143 at once, nothing typed, nothing printed
        proc = h.popen_cli("message", "wait", str(w.director), "--timeout", "60")
        util.retry_until(lambda: holds_open(proc.pid, lock) or proc.poll() is not None, 30, 0.01)
        signalled = time.monotonic()
        os.kill(proc.pid, signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
        assert time.monotonic() - signalled < 3  # against a 60 s timeout
        assert (proc.returncode, out, err) == (143, "", "")
    assert util.line_records(w.pane(b)) == []
    assert notified_at(h.db_path, pending) is None


@pytest.mark.tmux
def test_wait_reruns_its_drain_pass_every_5_s_without_any_commit(tmux_db) -> None:
    """A pane that becomes live while nothing is committed is drained by the wait's periodic pass
    (docs/cli.md §2.19 step 5: "and at least every 5 s")."""
    from cafleet import broker
    from tests.test_delivery_send import occupy_loop_slot

    h = tmux_db
    w = build_world(h.db_path, harness=h, members=("alice", "bob"), pending=("bob",))
    a, b = w.members["alice"], w.members["bob"]
    occupy_loop_slot(h, w)
    # tmux numbers panes from one server-wide counter: the pane after a probe is probe + 1.
    probe = h.split(["sleep", "600"])
    h.tmux("kill-pane", "-t", probe)
    future_pane = f"%{int(probe[1:]) + 1}"
    with connect(h.db_path) as conn:
        broker.set_placement_pane(conn, member_id=b, pane_id=future_pane)
        mid = put(conn, a, b, "typed by a periodic pass")
    assert notified_at(h.db_path, mid) is None

    proc = h.popen_cli("message", "wait", str(w.director), "--timeout", "60")

    def list_panes_calls() -> list[dict]:
        return [
            c
            for c in h.shim_calls()
            if c.get("command") == "list-panes" and c.get("ppid") == proc.pid
        ]

    def list_panes_times() -> list[float]:
        return [c["t"] for c in list_panes_calls()]

    # The first pass finds bob's pane missing from the live set: no attempt, no warning. The
    # shim logs a call before the real tmux answers it, so wait until that call has ended (the
    # shim execs tmux under its own pid) before the pane may appear.
    first_call = util.retry_until(lambda: list_panes_calls()[:1], timeout=30, interval=0.02)[0]
    first = first_call["t"]
    util.retry_until(lambda: not util.pid_alive(first_call["pid"]), timeout=30, interval=0.01)
    # Later passes' list-panes wait until the fake agent reads its terminal (a line typed before
    # it starts would be flushed away), however long a loaded machine takes to start it. The
    # shim matches rules before it logs, so the first call is not held.
    ready = h.project_dir / "fake-ready"
    h.set_faults([{"command": "list-panes", "action": "pause_until", "path": str(ready)}])
    # The pane appears (with its fake agent) while nobody commits anything.
    pane = h.spawn_fake(wait=True)
    assert pane == future_pane
    ready.touch()
    util.wait_records(pane, 1, timeout=20)
    assert util.line_bytes(pane) == [
        record_of(expected_line(mid, "alice", a, "typed by a periodic pass"))
    ]
    # The stamp commits after the Enter that completed the line the fake just logged.
    util.retry_until(lambda: notified_at(h.db_path, mid), timeout=15, message="never stamped")
    times = list_panes_times()
    later = [t for t in times if t > first]
    assert later, f"typed without a later pass: list-panes at {times}"
    typed_by = later[0]
    assert 4.5 <= typed_by - first <= 5.0 + 3.0, times  # the 5 s period, with room for load
    assert proc.poll() is None  # still waiting: nothing arrived for the Director
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert (proc.returncode, out, err) == (143, "", "")


@pytest.mark.tmux
def test_stream_makes_no_tmux_call(tmux_db) -> None:
    h = tmux_db
    w = build_world(h.db_path, harness=h, members=("alice",))
    with connect(h.db_path) as conn:
        put(conn, w.director, w.members["alice"], "hello")
    locks = lock_files(h.db_path)
    r = h.cli("message", "stream", str(w.members["alice"]), "--timeout", "0")
    assert r.returncode == 0 and len(r.stdout.splitlines()) == 1
    assert util.shim_calls() == []
    assert lock_files(h.db_path) == locks
    assert not any(name.startswith("pane-") for name in locks)


@pytest.mark.parametrize("command", ["wait", "stream"])
def test_a_schema_change_stops_wait_and_stream(world, head_db: Path, command: str) -> None:
    from tests.delivery_helpers import sql_write

    a = world.members["alice"]
    proc = popen("message", command, str(a), "--timeout", "60")
    settled(proc, head_db)
    sql_write(head_db, f"UPDATE alembic_version SET version_num = '{HEAD_VERSION + 1:04d}'")
    sql_write(head_db, "CREATE TABLE unrelated_aux (x INTEGER)")  # bumps schema_version
    stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 1
    assert stdout == b""
    assert stderr == (
        f"Error: database schema {HEAD_VERSION + 1} is newer than this cafleet (head "
        f"{HEAD_VERSION}); upgrade cafleet\n".encode()
    )


def test_send_fails_when_the_writer_lock_stays_busy(world, head_db: Path) -> None:
    a, b = world.members["alice"], world.members["bob"]
    with hold_writer_lock(head_db):
        before = snapshot(head_db)
        poll = cli("message", "poll", str(b))
        assert poll.returncode == 0  # readers never wait for the writer lock
        t0 = time.monotonic()
        r = cli("message", "send", "--from-member-id", str(a), "--to-member-id", str(b), "x")
        elapsed = time.monotonic() - t0
        assert (r.returncode, r.stdout, r.stderr) == (1, "", "Error: database is locked\n")
        assert elapsed >= 5.0
        assert snapshot(head_db) == before
