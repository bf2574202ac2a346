"""Supervision (docs/cli.md §2.5, §2.8, §2.2): `fleet show`, `member list` and `doctor` show the loop and the
panes; any command that can reach the fleet's tmux server restarts a dead loop while
notifications wait; `monitor start` / `monitor stop`. Real private tmux server, fake agents."""

from __future__ import annotations

import collections
import json
import os
import re
import signal
from pathlib import Path

import pytest

from cafleet.config import monitor_hold_path
from tests.fleet_helpers import (
    FleetIds,
    create_fleet,
    create_member,
    ok,
    runtime_row,
    sql_write,
    stop_loop,
)
from tests.harness.fixtures import TmuxHarness
from tests.harness.util import line_records, pid_alive, retry_until

pytestmark = pytest.mark.tmux

LIVE = r"live \(pid (\d+), last heartbeat \d+s ago\)"


def _show(h: TmuxHarness, fleet_id: int) -> dict[str, str]:
    """`fleet show`'s labels; the `problems` lines (one under the other) joined by newlines."""
    out = ok(h.cli("fleet", "show", str(fleet_id))).stdout
    shown: dict[str, str] = {}
    label = ""
    for line in out.splitlines():
        if line.startswith(" "):
            shown[label] += "\n" + line.strip()
            continue
        label, value = line.split(":", 1)
        shown[label] = value.strip()
    return shown


def _kill9_loop(h: TmuxHarness, fleet_id: int) -> int:
    row = runtime_row(h, fleet_id)
    assert row is not None and row["pid"] is not None
    pid = int(row["pid"])
    os.kill(pid, signal.SIGKILL)
    retry_until(lambda: not pid_alive(pid), timeout=10)
    return pid


def _pending_send(h: TmuxHarness, sender: int, to: int, text: str, pane: str) -> int:
    """A message whose notification stays pending: sent while the recipient's pane is in copy
    mode (any shell reaches the pane through its placement's socket), which ends afterwards."""
    h.tmux("copy-mode", "-t", pane)
    try:
        r = ok(
            h.cli(
                "message", "send", "--from-member-id", str(sender), "--to-member-id", str(to),
                text, "--json",
            )
        )  # fmt: skip
    finally:
        h.tmux("send-keys", "-t", pane, "-X", "cancel")
    assert json.loads(r.stdout)["notification_sent"] is False
    return int(json.loads(r.stdout)["message"]["message_id"])


@pytest.fixture
def fleet(tmux_db: TmuxHarness) -> tuple[FleetIds, int, str]:
    ids = create_fleet(tmux_db)
    member, pane = create_member(tmux_db, ids.fleet_id, "coder")
    return ids, member, pane


def test_show_list_and_doctor_tell_the_loop_and_the_panes(
    tmux_db: TmuxHarness, fleet: tuple[FleetIds, int, str]
) -> None:
    h = tmux_db
    ids, member, pane = fleet
    shown = _show(h, ids.fleet_id)
    m = re.fullmatch(LIVE, shown["loop"])
    assert m and int(m.group(1)) == ids.loop_pid, shown
    assert shown["panes"] == "3 alive"
    listed = ok(h.cli("member", "list", str(ids.fleet_id))).stdout.splitlines()
    assert listed[1].split() == ["member_id", "name", "kind", "agent", "pane_id", "pane", "idle"]
    assert [row.split()[5] for row in listed[3:6]] == ["alive"] * 3
    assert re.fullmatch(f"monitor loop: {LIVE}", listed[-1]), listed
    doctor_ok = ok(h.cli("doctor")).stdout
    for section in ("✓ multiplexer\n", "✓ database\n", "✓ fleets\n"):
        assert section in doctor_ok, doctor_ok
    assert f"  ✓ fleet {ids.fleet_id} (demo): loop live (pid {ids.loop_pid}" in doctor_ok
    assert doctor_ok.endswith("no issues found\n") and "✗" not in doctor_ok

    # the member's pane goes: every view says so, doctor counts it
    h.tmux("kill-pane", "-t", pane)
    assert _show(h, ids.fleet_id)["panes"] == f"2 alive, 1 gone (member {member})"
    rows = ok(h.cli("member", "list", str(ids.fleet_id))).stdout.splitlines()[3:-1]
    row = next(r for r in rows if r.split()[0] == str(member))
    # `<pane> (gone)` once the loop has recorded the loss too (a tick may come first)
    assert row.split()[4:6] == [pane, "gone"] or row.split()[4:7] == [pane, "(gone)", "gone"]
    roster = json.loads(ok(h.cli("member", "list", str(ids.fleet_id), "--json")).stdout)
    assert {(r["member_id"], r["pane_state"]) for r in roster} >= {(member, "gone")}
    doctor = h.cli("doctor")
    assert doctor.returncode == 1
    assert f"✗ fleet {ids.fleet_id} (demo): loop live (pid {ids.loop_pid}" in doctor.stdout
    assert doctor.stdout.endswith("1 issue found\n")

    # the loop is SIGKILLed: stale, dead pid (doctor heals nothing; fleet show reports it as
    # it was, then restarts it on its way out)
    pid = _kill9_loop(h, ids.fleet_id)
    doctor = h.cli("doctor")
    assert re.search(
        rf"✗ fleet {ids.fleet_id} \(demo\): loop stale: pid {pid} is not running \(last "
        r"heartbeat \d+s ago\)",
        doctor.stdout,
    ), doctor.stdout
    report = json.loads(h.cli("doctor", "--json").stdout)["fleets"]
    assert report["ok"] is False and report["fleets"][0]["loop"]["state"] == "stale"
    data = json.loads(ok(h.cli("fleet", "show", str(ids.fleet_id), "--json")).stdout)
    assert (data["loop"]["state"], data["loop"]["pid"], data["loop"]["pid_running"]) == (
        "stale",
        pid,
        False,
    )
    assert data["loop"]["log_path"] == f"{h.db_path}.monitor-{ids.fleet_id}.log"
    assert {p["member_id"]: p["pane_state"] for p in data["panes"]}[member] == "gone"
    retry_until(
        lambda: re.fullmatch(LIVE, _show(h, ids.fleet_id)["loop"]) is not None,
        timeout=20,
        message="fleet show did not restart the killed loop",
    )


def _restarted(h: TmuxHarness, fleet_id: int, dead: int) -> bool:
    r = runtime_row(h, fleet_id)
    return r is not None and r["pid"] not in (None, dead) and pid_alive(int(r["pid"]))


def test_any_command_from_any_shell_restarts_a_killed_loop(
    tmux_db: TmuxHarness, fleet: tuple[FleetIds, int, str]
) -> None:
    """docs/cli.md §1.11 (every command heals): a killed loop is restarted by the next command that reaches the
    database, with nothing pending (scheduled wakes must not stop silently), from a plain
    shell too (the server is the one the Director's placement records)."""
    h = tmux_db
    ids, member, pane = fleet
    dead = _kill9_loop(h, ids.fleet_id)
    ok(h.cli("message", "poll", str(member), unset=("TMUX", "TMUX_PANE")))
    retry_until(
        lambda: _restarted(h, ids.fleet_id, dead),
        timeout=20,
        message="no loop was restarted",
    )
    # ...it runs on the fleet's server: it types a line that waited
    message = _pending_send(h, ids.director_id, member, "while the loop was dead", pane)
    retry_until(
        lambda: any(f"[cafleet msg {message} " in r["text"] for r in line_records(pane)),
        timeout=30,
        message=lambda: line_records(pane),
    )
    # a loop SIGTERMed without `monitor stop` (stopped, slot released) comes back the same way
    again = int(runtime_row(h, ids.fleet_id)["pid"])  # type: ignore[index]
    os.kill(again, signal.SIGTERM)
    retry_until(lambda: runtime_row(h, ids.fleet_id)["pid"] is None, timeout=10)  # type: ignore[index]
    ok(h.cli("fleet", "list"))
    retry_until(lambda: _restarted(h, ids.fleet_id, again), timeout=20, message="not restarted")


def test_monitor_stop_holds_the_loop_stopped_until_monitor_start(
    tmux_db: TmuxHarness, fleet: tuple[FleetIds, int, str]
) -> None:
    h = tmux_db
    ids, member, pane = fleet
    f = str(ids.fleet_id)
    hold = Path(monitor_hold_path(str(h.db_path), ids.fleet_id))
    stopped = ok(h.cli("monitor", "stop", f))
    assert stopped.stdout == (
        f"monitor loop for fleet {f} stopped (pid {ids.loop_pid}); it stays stopped until "
        f"'cafleet monitor start {f}'\n"
    )
    assert not pid_alive(ids.loop_pid) and hold.exists()
    assert runtime_row(h, ids.fleet_id)["pid"] is None  # type: ignore[index]
    again = ok(h.cli("monitor", "stop", f, "--json"))
    assert json.loads(again.stdout) == {"fleet_id": ids.fleet_id, "pid": None, "stopped": False}

    # held: neither a command's healing nor a send's restart rule starts it
    message = _pending_send(h, ids.director_id, member, "held", pane)
    ok(h.cli("message", "poll", str(member)))
    h.tmux("copy-mode", "-t", pane)  # the send's own line cannot be typed: it stays pending
    sent = ok(h.cli("message", "send", "--from-member-id", str(ids.director_id),
                    "--to-member-id", str(member), "again"))  # fmt: skip
    assert (
        f"Warning: monitor loop for fleet {f} is stopped by 'cafleet monitor stop'; pending "
        f"notifications wait for 'cafleet monitor start {f}'"
    ) in sent.stderr.splitlines()
    assert runtime_row(h, ids.fleet_id)["pid"] is None  # type: ignore[index]
    assert _show(h, ids.fleet_id)["loop"] == "stopped by 'cafleet monitor stop'"
    h.tmux("send-keys", "-t", pane, "-X", "cancel")

    # from a plain shell (TMUX unset) it reaches the fleet's server through the socket the
    # Director's placement records, and starts the loop in the background
    started = ok(h.cli("monitor", "start", f, unset=("TMUX", "TMUX_PANE")))
    m = re.fullmatch(rf"monitor loop for fleet {f}: pid (\d+) \(log: (.+)\)\n", started.stdout)
    assert m, started.stdout
    pid = int(m.group(1))
    assert m.group(2) == f"{h.db_path}.monitor-{f}.log" and not hold.exists()
    assert pid_alive(pid) and runtime_row(h, ids.fleet_id)["pid"] == pid  # type: ignore[index]
    retry_until(
        lambda: any(f"[cafleet msg {message} " in r["text"] for r in line_records(pane)),
        timeout=30,
        message=lambda: line_records(pane),
    )
    assert ok(h.cli("monitor", "start", f)).stdout == (
        f"monitor loop for fleet {f}: pid {pid} (already running)\n"
    )
    # a fleet whose Director pane is gone from its server is refused, naming the fix
    sql_write(
        h,
        "UPDATE member_placements SET mux_pane_id = '%9999' WHERE member_id = ?",
        ids.director_id,
    )
    ok(h.cli("monitor", "stop", f))
    refused = h.cli("monitor", "start", f)
    assert (refused.returncode, refused.stderr) == (
        1,
        f"Error: fleet {f}'s root Director pane %9999 is gone, so its monitor loop cannot run; "
        f"run 'cafleet fleet adopt {f}' in the pane that takes its place\n",
    )
    # a placement that recorded no server (before revision 0004) is asked on this one
    sql_write(
        h, "UPDATE member_placements SET mux_socket = NULL WHERE member_id = ?", ids.director_id
    )
    refused = h.cli("monitor", "start", f)
    assert (refused.returncode, refused.stderr) == (
        1,
        f"Error: fleet {f}'s root Director pane %9999 is not on this tmux server; run "
        f"'cafleet monitor start {f}' in a pane of the fleet's tmux server\n",
    )
    unknown = h.cli("monitor", "stop", "999", "--json")
    assert (unknown.returncode, json.loads(unknown.stderr)) == (
        1,
        {"error": {"code": "not_found", "message": "fleet 999 not found"}},
    )


def _pane_cells(h: TmuxHarness, fleet_id: int) -> dict[int, str]:
    """member id -> the `pane` cell of `member list` (the rows of members, not the loop line)."""
    lines = ok(h.cli("member", "list", str(fleet_id))).stdout.splitlines()
    header = lines[1]
    start, end = header.index(" pane ") + 1, header.index("idle")
    rows = [line for line in lines[3:] if line.split()[0].isdigit()]
    return {int(line.split()[0]): line[start:end].strip() for line in rows}


def test_member_list_and_fleet_show_name_the_agent_state_the_gate_sees(
    tmux_db: TmuxHarness,
) -> None:
    """docs/cli.md §2.8 through the delivery classifier (docs/agent-screens.md): a live pane reads `alive (<state>)`, the
    state being what `cafleet.delivery.screens.classify` makes of its screen (screen-mode fakes)."""
    h = tmux_db
    ids = create_fleet(h)
    h.tmux("set-environment", "-g", "CAFLEET_FAKE_SCREEN", "work=10")  # every new pane
    member, pane = create_member(h, ids.fleet_id, "coder")

    def state_is(wanted: str) -> bool:
        return _pane_cells(h, ids.fleet_id)[member] == f"alive ({wanted})"

    retry_until(lambda: state_is("ready"), timeout=60, message="the member never read ready")
    shown = json.loads(ok(h.cli("fleet", "show", str(ids.fleet_id), "--json")).stdout)
    row = next(p for p in shown["panes"] if p["member_id"] == member)
    assert (row["pane_state"], row["agent_state"]) == ("alive", "ready")
    ok(h.cli("member", "prompt", str(member), "a long task"))
    retry_until(lambda: state_is("working"), timeout=20, message="the member never read working")
    listed = json.loads(ok(h.cli("member", "list", str(ids.fleet_id), "--json")).stdout)
    assert {r["member_id"]: r["agent_state"] for r in listed}[member] in ("working", "ready")
    # A pane that is not the placement's (a reused id) is never captured: plain `alive`.
    sql_write(h, "UPDATE member_placements SET mux_window_id = '@999' WHERE member_id = ?", member)
    calls = len(h.shim_calls())
    assert _pane_cells(h, ids.fleet_id)[member] == "alive"
    assert pane not in _captured(h.shim_calls()[calls:])


def _captured(calls: list[dict]) -> list[str]:
    """Every pane a `capture-pane` of these tmux calls read (chained commands included)."""
    found = []
    for call in calls:
        argv = call.get("argv") or []
        for i, arg in enumerate(argv):
            if arg == "capture-pane" and "-t" in argv[i:]:
                found.append(argv[argv.index("-t", i) + 1])
    return found


def test_member_list_asks_tmux_once_for_every_pane_then_captures_each(
    tmux_db: TmuxHarness,
) -> None:
    """One `list-panes` tells which panes live and where (session, window), so the pane-is-ours
    check costs no call per pane, and one more tmux call captures every live pane (its
    commands chained, docs/performance.md §17). A session group lists every pane once more,
    under the other session's name (sorting last here): each pane is still the placement's."""
    h = tmux_db
    ids = create_fleet(h)
    panes = [create_member(h, ids.fleet_id, name)[1] for name in ("a", "b", "c")]
    h.tmux("new-session", "-d", "-t", h.session_name, "-s", "zzz-group")
    stop_loop(h, ids.fleet_id)  # its ticks' `list-panes` would land in the shim's log too
    calls = len(h.shim_calls())
    ok(h.cli("member", "list", str(ids.fleet_id)))
    # The fleet's monitor loop ticks meanwhile (its tick captures member panes to read their
    # prompts, docs/runtime.md §5.12): only the calls `member list` made count.
    made = [c for c in h.shim_calls()[calls:] if c.get("ppid") != ids.loop_pid]
    counted = collections.Counter(c.get("command") for c in made if c.get("command"))
    live = len(panes) + 2  # the members, the monitor and the Director
    assert counted == {"list-panes": 1, "display-message": 1}, counted
    captured = _captured(made)
    assert len(captured) == live and set(panes) <= set(captured)


def _doctor_fleet_lines(h: TmuxHarness) -> list[str]:
    """doctor's lines under `fleets` (exit status not checked)."""
    out = h.cli("doctor").stdout.splitlines()
    start = next(i for i, line in enumerate(out) if line.endswith(" fleets"))
    return [line for line in out[start + 1 :] if line.startswith("  ")]


def test_every_problem_line_names_its_fix(
    tmux_db: TmuxHarness, fleet: tuple[FleetIds, int, str]
) -> None:
    """docs/cli.md §2.5: `fleet show`, `member list` and `doctor` print each problem with the
    command that fixes it; a fleet whose monitor was deleted is a problem, not `no issues`."""
    h = tmux_db
    ids, member, pane = fleet
    f = ids.fleet_id
    assert _show(h, f)["problems"] == "none"
    assert json.loads(ok(h.cli("fleet", "show", str(f), "--json")).stdout)["problems"] == []

    # a member's pane goes
    h.tmux("kill-pane", "-t", pane)
    gone = (
        f"member {member} (coder) lost its pane {pane}; run 'cafleet member respawn {member}' "
        f"(or remove it: 'cafleet member delete {member}')"
    )
    assert _show(h, f)["problems"] == gone
    listed = ok(h.cli("member", "list", str(f))).stdout.splitlines()
    assert listed[-1] == f"problem: {gone}"
    assert _doctor_fleet_lines(h)[1:] == [f"    {gone}"]
    shown = json.loads(ok(h.cli("fleet", "show", str(f), "--json")).stdout)
    assert shown["problems"] == [
        {
            "kind": "pane_gone",
            "problem": f"member {member} (coder) lost its pane {pane}",
            "fix": f"cafleet member respawn {member}",
            "line": gone,
        }
    ]
    ok(h.cli("member", "delete", str(member)))

    # the monitor is stopped, then deleted (the README's teardown order)
    ok(h.cli("monitor", "stop", str(f)))
    stopped = (
        "the monitor loop is stopped by 'cafleet monitor stop': no scheduled wakes; run "
        f"'cafleet monitor start {f}'"
    )
    assert _show(h, f)["problems"] == stopped
    ok(h.cli("member", "delete", str(ids.monitor_id)))
    no_monitor = (
        "the fleet has no active monitor member: no one health-checks it; run 'cafleet member "
        f'create --fleet-id {f} --role monitor --name monitor --description "Monitor member '
        f"for this fleet\"' (or, when the fleet is done: 'cafleet fleet delete {f}')"
    )
    assert _show(h, f)["problems"] == f"{stopped}\n{no_monitor}"
    doctor = h.cli("doctor")
    assert doctor.returncode == 1 and doctor.stdout.endswith("1 issue found\n"), doctor.stdout
    assert _doctor_fleet_lines(h)[1:] == [f"    {stopped}", f"    {no_monitor}"]
    ok(h.cli("monitor", "start", str(f)))  # a live loop, still no monitor: still an issue
    doctor = h.cli("doctor")
    assert doctor.returncode == 1 and doctor.stdout.endswith("1 issue found\n"), doctor.stdout
    assert _doctor_fleet_lines(h)[1:] == [f"    {no_monitor}"]

    # the root Director's pane goes: the loop cannot run, `fleet adopt` is the fix
    sql_write(
        h, "UPDATE member_placements SET mux_pane_id = '%9999' WHERE member_id = ?", ids.director_id
    )
    assert _show(h, f)["problems"].splitlines()[0] == (
        "the root Director's pane %9999 is gone, so the monitor loop cannot run; run "
        f"'cafleet fleet adopt {f}' in the pane that takes its place"
    )


PLAIN_SHELL = ("TMUX", "TMUX_PANE")  # a shell outside the fleet's tmux server


def test_outside_tmux_the_recorded_socket_reaches_the_panes(
    tmux_db: TmuxHarness, fleet: tuple[FleetIds, int, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/cli.md §1.11 (the placement's server): from a plain shell (TMUX unset) `member list`, `member capture`, the
    WebUI's pane states and a send's delivery use the socket the placement records; a server
    that cannot be asked gives its reason, not a bare `?`."""
    h = tmux_db
    ids, member, pane = fleet
    f = ids.fleet_id
    cells = _pane_cells_outside(h, f)  # `alive (<agent state>)`: starting while it is blank
    assert all(c.split(" ", 1)[0] == "alive" for c in cells.values()), cells
    ok(h.cli("member", "capture", str(member), unset=PLAIN_SHELL))
    sent = ok(
        h.cli(
            "message", "send", "--from-member-id", str(ids.director_id), "--to-member-id",
            str(member), "from a plain shell", "--json", unset=PLAIN_SHELL,
        )
    )  # fmt: skip
    assert json.loads(sent.stdout)["notification_sent"] is True, sent.stderr
    assert any("from a plain shell" in r["text"] for r in line_records(pane))

    # the WebUI's pane states (its server process runs wherever it was started)
    from cafleet import broker
    from cafleet.workflows.supervision import check_panes
    from tests.factories import connect

    for var in PLAIN_SHELL:
        monkeypatch.delenv(var, raising=False)
    with connect(h.db_path) as conn:
        check = check_panes(broker.web_roster(conn, fleet_id=f))  # what /api/members/panes asks
    assert check.unknown_reason is None
    assert check.panes[member].state == "alive"

    # a server that no longer answers: the reason, not a bare `?`
    sql_write(h, "UPDATE member_placements SET mux_socket = ? WHERE member_id = ?",
              str(h.dir / "gone.sock"), member)  # fmt: skip
    out = ok(h.cli("member", "list", str(f), unset=PLAIN_SHELL)).stdout.splitlines()
    assert _pane_cells_outside(h, f)[member] == "?"
    reason = next(line for line in out if line.startswith("pane ?: "))
    assert reason.startswith("pane ?: not checked: cannot reach tmux: "), out


def _pane_cells_outside(h: TmuxHarness, fleet_id: int) -> dict[int, str]:
    lines = ok(h.cli("member", "list", str(fleet_id), unset=PLAIN_SHELL)).stdout.splitlines()
    header = lines[1]
    start, end = header.index(" pane ") + 1, header.index("idle")
    rows = [line for line in lines[3:] if line.split() and line.split()[0].isdigit()]
    return {int(line.split()[0]): line[start:end].strip() for line in rows}
