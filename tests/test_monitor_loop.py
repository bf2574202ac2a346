"""The monitor loop as a real process against a private tmux server (docs/cli.md §2.21, §4 items
72–73; docs/runtime.md §5, §8 items 48–66)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import pytest

from cafleet.db.shapes import HEAD_VERSION
from tests.factories import connect
from tests.fleet_helpers import (
    START_RE,
    TS,
    FleetIds,
    create_fleet,
    create_member,
    inproc,
    ok,
    parse_ts,
    pid_alive,
    runtime_row,
    sql_write,
    start_loop,
    stop_loop,
)
from tests.harness.fixtures import TmuxHarness
from tests.harness.util import line_bytes, line_records, retry_until, start_record

pytestmark = pytest.mark.tmux

EM = "\u2014"


@pytest.fixture
def fleet(tmux_db: TmuxHarness) -> FleetIds:
    ids = create_fleet(tmux_db)
    stop_loop(tmux_db, ids.fleet_id)
    return ids


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _wake_line(fleet_id: int, roster: str, director: str) -> bytes:
    return (
        f"[cafleet] tick: fleet {fleet_id} {EM} {roster} Director: {director}. Follow your "
        "monitor role protocol. Resume your work if something was still running."
    ).encode()


WAKE_TAG = re.compile(rb" \[wake [0-9a-z]{4}\]$")


def _wake_lines(pane: str) -> list[bytes]:
    """The pane's line records with each wake line's own id (` [wake <id>]`, docs/runtime.md
    §5.7) taken off; the ids of the wakes among them must all differ."""
    lines = line_bytes(pane)
    tags = [m.group(0) for line in lines if (m := WAKE_TAG.search(line))]
    assert len(tags) == len(set(tags)), lines
    return [WAKE_TAG.sub(b"", line) for line in lines]


def _register(h: TmuxHarness, fleet_id: int, name: str, agent: str = "codex") -> int:
    """A member with a pending placement (in the wake roster, never typed into)."""
    from cafleet.broker.members import register_member
    from cafleet.records import PlacementSpec

    with connect(h.db_path) as conn:
        return register_member(
            conn,
            fleet_id=fleet_id,
            name=name,
            description="d",
            role="member",
            placement=PlacementSpec("fleet test", h.window_id, agent),
            require_monitor=True,
        ).member_id


def _send(h: TmuxHarness, sender: int, to: int, text: str = "hi") -> int:
    from cafleet.broker.messages import send_message

    with connect(h.db_path) as conn:
        return send_message(conn, from_member_id=sender, to_member_id=to, text=text).message_id


def _request_wake(h: TmuxHarness, fleet_id: int) -> None:
    from cafleet.broker.monitor import request_monitor_wake

    with connect(h.db_path) as conn:
        request_monitor_wake(conn, fleet_id=fleet_id)


def test_two_loops_race_heartbeat_sigterm_and_displacement(
    tmux_db: TmuxHarness, fleet: FleetIds
) -> None:
    h = tmux_db
    f = fleet.fleet_id
    sql_write(h, "UPDATE monitor_runtime SET last_wake_at = '2026-01-01T00:00:00.000000+00:00'")
    loops = [
        start_loop(h, f, "--tick", "1", "--interval", "1000000000", wait=False) for _ in range(2)
    ]
    retry_until(lambda: sum(1 for lp in loops if lp.proc.poll() is not None) == 1, timeout=20)
    loser = next(lp for lp in loops if lp.proc.poll() is not None)
    winner = next(lp for lp in loops if lp is not loser)
    assert loser.proc.returncode == 1
    assert loser.stderr() == f"Error: monitor already running for fleet {f}\n"
    assert loser.lines() == []
    winner.wait_line(r"^monitor loop started")
    assert START_RE.match(winner.lines()[0]).groups() == (  # type: ignore[union-attr]
        str(f),
        "1",
        "1000000000",
        str(winner.proc.pid),
    )
    assert runtime_row(h, f)["pid"] == winner.proc.pid  # type: ignore[index]

    # The heartbeat advances every tick.
    seen = set()
    deadline = time.monotonic() + 4
    while time.monotonic() < deadline:
        seen.add(runtime_row(h, f)["last_tick_at"])  # type: ignore[index]
        time.sleep(0.1)
    assert len(seen) >= 4

    # SIGTERM: a clean stop that releases the slot and keeps the rest.
    assert winner.stop(signal.SIGTERM) == 0
    lines = winner.lines()
    assert re.fullmatch(rf"{TS} received SIGTERM; stopping", lines[-2])
    assert lines[-1] == f"monitor loop stopped (fleet {f}, pid {winner.proc.pid})"
    row = runtime_row(h, f)
    assert row is not None
    assert (row["pid"], row["started_at"], row["last_tick_at"]) == (None, None, None)
    assert (row["tick_seconds"], row["wake_interval_seconds"]) == (1, 1000000000)
    assert row["last_wake_at"] == "2026-01-01T00:00:00.000000+00:00"
    assert winner.stderr() == ""

    # Displaced: another pid in the row makes the loop stop within 2 s and leave it there.
    loop = start_loop(h, f, "--tick", "1")
    other = _dead_pid()
    sql_write(h, "UPDATE monitor_runtime SET pid = ? WHERE fleet_id = ?", other, f)
    started = time.monotonic()
    assert loop.proc.wait(timeout=10) == 0
    assert time.monotonic() - started < 3
    assert re.fullmatch(
        rf"{TS} monitor slot taken over by another loop; stopping", loop.lines()[-2]
    )
    assert runtime_row(h, f)["pid"] == other  # type: ignore[index]


def test_stale_takeover_and_sigint(tmux_db: TmuxHarness, fleet: FleetIds) -> None:
    h = tmux_db
    f = fleet.fleet_id
    from datetime import UTC, datetime, timedelta

    recent = (datetime.now(UTC) - timedelta(seconds=10)).isoformat(timespec="microseconds")
    sql_write(
        h,
        "UPDATE monitor_runtime SET pid = ?, started_at = '2026-01-01T00:00:00.000000+00:00', "
        "last_tick_at = '2026-01-01T00:00:00.000000+00:00', last_wake_at = ?, "
        "wake_requested_at = '2026-01-01T00:00:05.000000+00:00' WHERE fleet_id = ?",
        _dead_pid(),
        recent,
        f,
    )
    loop = start_loop(h, f, "--tick", "1")
    row = runtime_row(h, f)
    assert row is not None
    assert row["pid"] == loop.proc.pid
    assert row["started_at"] > "2026-01-02"
    assert row["last_wake_at"] == recent
    assert row["wake_requested_at"] is None
    assert START_RE.match(loop.lines()[0]).group(3) == "600"  # type: ignore[union-attr]
    assert loop.stop(signal.SIGINT) == 0
    assert re.fullmatch(rf"{TS} received SIGINT; stopping", loop.lines()[-2])
    assert runtime_row(h, f)["pid"] is None  # type: ignore[index]
    assert line_records(fleet.monitor_pane) == []


def test_fleet_delete_stops_the_loop_and_start_up_errors(
    tmux_db: TmuxHarness, fleet: FleetIds
) -> None:
    h = tmux_db
    f = fleet.fleet_id
    # Outside tmux the loop refuses without claiming.
    r = inproc("monitor", str(f))
    assert (r.returncode, r.stderr) == (1, "Error: not inside a tmux session (TMUX is not set)\n")
    assert runtime_row(h, f)["pid"] is None  # type: ignore[index]
    for args in (["--tick", "0"], ["--tick", "3601"], ["--interval", "-1"], ["x"]):
        r = inproc("monitor", *([str(f)] if args != ["x"] else []), *args)
        assert r.returncode == 2, (args, r.stderr)
        assert r.stderr.startswith("Usage: cafleet monitor [OPTIONS] FLEET_ID\n"), r.stderr
        assert "__monitor_loop__" not in r.stderr
    r = inproc("monitor", "99")
    assert (r.returncode, r.stderr) == (1, "Error: fleet 99 not found\n")

    loop = start_loop(h, f, "--tick", "1")
    ok(inproc("fleet", "delete", str(f), "--keep-panes"))  # the loop stops on its own
    assert loop.proc.wait(timeout=10) == 0
    assert re.fullmatch(rf"{TS} fleet {f} is deleted; stopping", loop.lines()[-2])
    assert loop.lines()[-1] == f"monitor loop stopped (fleet {f}, pid {loop.proc.pid})"
    r = h.cli("monitor", str(f))
    assert (r.returncode, r.stderr) == (1, f"Error: fleet {f} is deleted\n")


def test_director_pane_gone_stops_the_loop(tmux_db: TmuxHarness, fleet: FleetIds) -> None:
    h = tmux_db
    f = fleet.fleet_id
    loop = start_loop(h, f, "--tick", "1")
    h.tmux("kill-pane", "-t", h.director_pane)
    assert loop.proc.wait(timeout=10) == 0
    assert re.fullmatch(
        rf"{TS} director pane {re.escape(h.director_pane)} is gone; stopping", loop.lines()[-2]
    )
    assert runtime_row(h, f)["pid"] is None  # type: ignore[index]
    r = h.cli("monitor", str(f))
    assert (r.returncode, r.stderr) == (1, f"Error: director pane {h.director_pane} is gone\n")
    assert runtime_row(h, f)["pid"] is None  # type: ignore[index]


def test_three_failed_ticks_stop_the_loop(tmux_db: TmuxHarness, fleet: FleetIds) -> None:
    h = tmux_db
    f = fleet.fleet_id
    loop = start_loop(h, f, "--tick", "1")
    h.tmux("kill-server")
    assert loop.proc.wait(timeout=20) == 1
    lines = loop.lines()
    failed = [x for x in lines if re.fullmatch(rf"{TS} tick failed: .+", x)]
    assert len(failed) == 3, lines
    assert "cannot reach tmux" in failed[0] or "tmux list-panes failed" in failed[0], failed
    assert re.fullmatch(rf"{TS} 3 consecutive failed ticks; stopping", lines[-2])
    assert lines[-1] == f"monitor loop stopped (fleet {f}, pid {loop.proc.pid})"
    assert runtime_row(h, f)["pid"] is None  # type: ignore[index]
    assert "Traceback" in loop.stderr()  # failed ticks' tracebacks go to stderr


def _wake_decisions(h: TmuxHarness, fleet_id: int, pane: str, count: int) -> list[float]:
    """The next ``count`` wake decision times (each new ``last_wake_at``), once each wake's line
    has reached ``pane``.

    Cadence is asserted on decisions, not on the lines' arrival: typing a line takes 1.1 s or
    more, and longer on a loaded machine, which would make arrival gaps jitter.
    """
    seen = runtime_row(h, fleet_id)["last_wake_at"]  # type: ignore[index]
    lines_before = len(line_records(pane))
    decided: list[float] = []

    def enough() -> bool:
        nonlocal seen
        stamp = runtime_row(h, fleet_id)["last_wake_at"]  # type: ignore[index]
        if stamp is not None and stamp != seen:
            seen = stamp
            decided.append(parse_ts(stamp))
        return len(decided) >= count and len(line_records(pane)) >= lines_before + count

    retry_until(enough, timeout=30, interval=0.05, message=lambda: f"wake decisions: {decided}")
    return decided[:count]


def test_scheduled_wakes_on_cadence(tmux_db: TmuxHarness, fleet: FleetIds) -> None:
    h = tmux_db
    f = fleet.fleet_id
    member = _register(h, f, "builder")
    loop = start_loop(h, f, "--tick", "1", "--interval", "3")
    started = parse_ts(runtime_row(h, f)["started_at"])  # type: ignore[index]
    decided = _wake_decisions(h, f, fleet.monitor_pane, 3)
    expected = _wake_line(
        f,
        f"health-check your 1 member: {member} (builder; coding_agent=codex; unacked=0).",
        f"{fleet.director_id} (Director; coding_agent=claude; unacked=0)",
    )
    assert _wake_lines(fleet.monitor_pane)[:3] == [expected] * 3
    assert decided[0] - started >= 3.0, (decided, started)
    gaps = [b - a for a, b in zip(decided, decided[1:], strict=False)]
    # Due after 3 s; decided on the next 1 s tick, which a wake's own typing delays.
    assert all(3.0 <= g <= 6.0 for g in gaps), gaps
    assert loop.count(rf"^{TS} tick -> wake monitor {fleet.monitor_id} \(1 member\)$") >= 3
    assert runtime_row(h, f)["last_wake_at"] > runtime_row(h, f)["started_at"]  # type: ignore[index]
    assert loop.stop() == 0


def test_interval_zero_forced_wake_and_drain_every_tick(
    tmux_db: TmuxHarness, fleet: FleetIds
) -> None:
    h = tmux_db
    f = fleet.fleet_id
    loop = start_loop(h, f, "--tick", "1", "--interval", "0")
    assert START_RE.match(loop.lines()[0]).group(3) == "0"  # type: ignore[union-attr]
    m1 = _send(h, fleet.director_id, fleet.monitor_id, "first")
    loop.wait_line(rf"^{TS} tick -> notify msg {m1} member {fleet.monitor_id}$", timeout=5)
    time.sleep(4)  # a window in which a scheduled wake would show (interval 0: none may)
    assert loop.count("tick -> .*wake") == 0
    assert len(line_records(fleet.monitor_pane)) == 1
    _request_wake(h, f)
    loop.wait_line(rf"^{TS} tick -> forced wake monitor {fleet.monitor_id} \(0 members\)$", 5)
    retry_until(lambda: len(line_records(fleet.monitor_pane)) == 2, timeout=5)
    assert runtime_row(h, f)["wake_requested_at"] is None  # type: ignore[index]
    m2 = _send(h, fleet.director_id, fleet.monitor_id, "second")
    loop.wait_line(rf"^{TS} tick -> notify msg {m2} member {fleet.monitor_id}$", timeout=5)
    time.sleep(1.5)
    assert loop.count("tick -> .*wake") == 1
    assert _wake_lines(fleet.monitor_pane)[1] == _wake_line(
        f,
        "no members to health-check.",
        f"{fleet.director_id} (Director; coding_agent=claude; unacked=0)",
    )
    assert loop.stop() == 0


def test_wake_roster_counts_and_sanitised_names(tmux_db: TmuxHarness, fleet: FleetIds) -> None:
    h = tmux_db
    f, d = fleet.fleet_id, fleet.director_id
    a = _register(h, f, "x`$(y)", "claude")
    b = _register(h, f, "b", "opencode")
    c = _register(h, f, "c")
    _send(h, a, b)
    notified = _send(h, a, b)
    from cafleet.broker.notifications import stamp_notified

    with connect(h.db_path) as conn:
        stamp_notified(conn, message_id=notified)
    _send(h, b, c)
    _send(h, c, d)
    acked = _send(h, c, d)
    from cafleet.broker.messages import ack_message

    with connect(h.db_path) as conn:
        ack_message(conn, message_id=acked)
    _send(h, d, fleet.monitor_id)  # the monitor's own inbox is not in the line

    loop = start_loop(h, f, "--tick", "1", "--interval", "0")
    loop.wait_line(rf"tick -> notify msg \d+ member {fleet.monitor_id}$")
    _request_wake(h, f)
    loop.wait_line(rf"^{TS} tick -> forced wake monitor {fleet.monitor_id} \(3 members\)$")
    director = f"{d} (Director; coding_agent=claude; unacked=1)"
    first = retry_until(lambda: x if len(x := _wake_lines(fleet.monitor_pane)) >= 2 else None)
    assert first[1] == _wake_line(
        f,
        f"health-check your 3 members: {a} (x\u02cb$\ufe59y); coding_agent=claude; unacked=0), "
        f"{b} (b; coding_agent=opencode; unacked=2), {c} (c; coding_agent=codex; unacked=1).",
        director,
    )
    ok(inproc("member", "delete", str(b)))
    ok(inproc("member", "delete", str(c)))
    _request_wake(h, f)
    loop.wait_line(rf"^{TS} tick -> forced wake monitor {fleet.monitor_id} \(1 member\)$")
    second = retry_until(lambda: x if len(x := _wake_lines(fleet.monitor_pane)) >= 3 else None)
    assert second[2] == _wake_line(
        f,
        f"health-check your 1 member: {a} (x\u02cb$\ufe59y); coding_agent=claude; unacked=0).",
        director,
    )
    assert loop.stop() == 0


def test_monitor_pane_gone_skips_once(tmux_db: TmuxHarness, fleet: FleetIds) -> None:
    h = tmux_db
    f = fleet.fleet_id
    sql_write(h, "UPDATE monitor_runtime SET last_wake_at = NULL")
    h.tmux("kill-pane", "-t", fleet.monitor_pane)
    loop = start_loop(h, f, "--tick", "1", "--interval", "1")
    loop.wait_line(
        rf"^{TS} tick -> wake skipped: monitor pane {re.escape(fleet.monitor_pane)} is gone$"
    )
    time.sleep(4)  # four more ticks, each of them due
    assert loop.count("wake skipped") == 1
    assert runtime_row(h, f)["last_wake_at"] is None  # type: ignore[index]
    assert loop.stop() == 0


def test_restart_keeps_the_cadence_and_precedence(tmux_db: TmuxHarness, fleet: FleetIds) -> None:
    h = tmux_db
    f = fleet.fleet_id
    loop = start_loop(h, f, "--tick", "1", "--interval", "5")
    loop.wait_line(rf"tick -> wake monitor {fleet.monitor_id}", timeout=20)
    woke = parse_ts(runtime_row(h, f)["last_wake_at"])  # type: ignore[index]
    time.sleep(max(0.0, woke + 3 - time.time()))  # the restart comes >= 3 s after the wake
    assert loop.stop() == 0
    again = start_loop(h, f, "--tick", "1")
    # The stored interval (5) is used, counted from the last wake, not from the restart.
    assert START_RE.match(again.lines()[0]).group(3) == "5"  # type: ignore[union-attr]
    restarted = parse_ts(runtime_row(h, f)["started_at"])  # type: ignore[index]
    again.wait_line(rf"tick -> wake monitor {fleet.monitor_id}", timeout=20)
    second = parse_ts(runtime_row(h, f)["last_wake_at"])  # type: ignore[index]
    # Not before the interval since the last wake (no wake at once on a restart, which comes
    # ~3.5 s after the wake unless the machine is very slow)...
    assert second - woke >= 5.0, (woke, restarted, second)
    # ...and before a cadence restarted at the restart would allow (restart + 5 >= wake + 8).
    assert second < restarted + 5.0, (woke, restarted, second)
    assert again.stop() == 0

    def interval_and_tick(*args: str, env: dict[str, str] | None = None) -> tuple[str, str]:
        lp = start_loop(h, f, *args, env=env)
        m = START_RE.match(lp.lines()[0])
        assert lp.stop() == 0
        assert m is not None
        return m.group(3), m.group(2)

    from cafleet.broker.monitor import set_wake_interval

    with connect(h.db_path) as conn:
        set_wake_interval(conn, fleet_id=f, seconds=9)
    sql_write(h, "UPDATE monitor_runtime SET tick_seconds = 3")
    assert interval_and_tick("--interval", "7", "--tick", "2") == ("7", "2")  # flags win
    with connect(h.db_path) as conn:
        set_wake_interval(conn, fleet_id=f, seconds=9)
    sql_write(h, "UPDATE monitor_runtime SET tick_seconds = 3")
    env4 = {"CAFLEET_MONITOR_WAKE_INTERVAL": "4"}
    assert interval_and_tick(env=env4) == ("9", "3")  # stored beats env and 5
    sql_write(h, "DELETE FROM monitor_runtime")
    assert interval_and_tick(env=env4) == ("4", "5")  # env beats 600; the column default 5


def test_null_interval_resolves_to_the_environment(tmux_db: TmuxHarness, fleet: FleetIds) -> None:
    h = tmux_db
    f = fleet.fleet_id
    from cafleet.broker.monitor import set_wake_interval

    with connect(h.db_path) as conn:
        set_wake_interval(conn, fleet_id=f, seconds=None)
    loop = start_loop(h, f, "--tick", "1", env={"CAFLEET_MONITOR_WAKE_INTERVAL": "2"})
    assert START_RE.match(loop.lines()[0]).group(3) == "2"  # type: ignore[union-attr]
    with connect(h.db_path) as conn:
        set_wake_interval(conn, fleet_id=f, seconds=None)
    assert runtime_row(h, f)["wake_interval_seconds"] is None  # type: ignore[index]
    decided = _wake_decisions(h, f, fleet.monitor_pane, 3)
    gaps = [b - a for a, b in zip(decided, decided[1:], strict=False)]
    assert all(2.0 <= g <= 5.0 for g in gaps), gaps  # due after 2 s, decided on a 1 s tick
    assert runtime_row(h, f)["wake_interval_seconds"] is None  # type: ignore[index]
    assert loop.stop() == 0


def test_tick_drains_live_panes_and_logs_failures(tmux_db: TmuxHarness, fleet: FleetIds) -> None:
    h = tmux_db
    f, d = fleet.fleet_id, fleet.director_id
    m1, p1 = create_member(h, f, "one")
    m2, p2 = create_member(h, f, "two")
    start_record(p1)
    start_record(p2)
    h.tmux("copy-mode", "-t", p1)
    to_m1 = _send(h, d, m1, "for one")
    to_m2 = _send(h, d, m2, "for two")
    to_director = _send(h, m2, d, "for the Director")
    loop = start_loop(h, f, "--tick", "1", "--interval", "0")
    loop.wait_line(rf"^{TS} tick -> notify msg {to_m2} member {m2}$")
    loop.wait_line(
        rf"^{TS} tick -> not notified msg {to_m1} member {m1}: typing into pane "
        rf"{re.escape(p1)} failed: pane is in copy-mode$"
    )
    retry_until(lambda: loop.count(rf"not notified msg {to_m1} ") >= 2, timeout=6)
    assert line_records(p1) == []
    assert line_bytes(p2) == [
        f"[cafleet msg {to_m2} from Director ({d})] for two {EM} ack with: cafleet message "
        f"ack {to_m2}".encode()
    ]
    h.tmux("send-keys", "-t", p1, "-X", "cancel")
    loop.wait_line(rf"^{TS} tick -> notify msg {to_m1} member {m1}$")
    assert len(line_records(p1)) == 1

    # A killed pane costs no attempt and no line; the others are still served.
    h.tmux("kill-pane", "-t", p1)
    gone = _send(h, d, m1, "into the void")
    live = _send(h, d, m2, "still here")
    loop.wait_line(rf"^{TS} tick -> notify msg {live} member {m2}$")
    time.sleep(1.5)
    assert loop.count(rf"msg {gone} ") == 0
    # The Director is never typed into, and its message stays pending.
    assert line_records(h.director_pane) == []
    assert h.sqlite("SELECT notified_at FROM messages WHERE message_id = ?", to_director) == [
        (None,)
    ]
    assert loop.stop() == 0
    assert pid_alive(os.getpid())


def test_schema_change_stops_the_loop_with_the_guard_message(
    tmux_db: TmuxHarness, fleet: FleetIds
) -> None:
    h = tmux_db
    f = fleet.fleet_id
    loop = start_loop(h, f, "--tick", "1")
    sql_write(h, "DROP INDEX idx_messages_from_created")
    assert loop.proc.wait(timeout=10) == 1
    err = loop.stderr()
    assert err.startswith(f"Error: {h.db_path} is damaged (schema {HEAD_VERSION}): "), err
    assert "idx_messages_from_created" in err
    assert loop.lines()[-1] == f"monitor loop stopped (fleet {f}, pid {loop.proc.pid})"
    assert runtime_row(h, f)["pid"] is None  # type: ignore[index]
