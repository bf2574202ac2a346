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
)
from tests.harness.fixtures import TmuxHarness
from tests.harness.util import line_records, pid_alive, retry_until

pytestmark = pytest.mark.tmux

LIVE = r"live \(pid (\d+), last heartbeat \d+s ago\)"


def _show(h: TmuxHarness, fleet_id: int) -> dict[str, str]:
    out = ok(h.cli("fleet", "show", str(fleet_id))).stdout
    return {k: v.strip() for k, v in (line.split(":", 1) for line in out.splitlines())}


def _kill9_loop(h: TmuxHarness, fleet_id: int) -> int:
    row = runtime_row(h, fleet_id)
    assert row is not None and row["pid"] is not None
    pid = int(row["pid"])
    os.kill(pid, signal.SIGKILL)
    retry_until(lambda: not pid_alive(pid), timeout=10)
    return pid


def _pending_send(h: TmuxHarness, sender: int, to: int, text: str) -> int:
    """A message whose notification stays pending: sent without TMUX (no drain, no restart)."""
    r = ok(
        h.cli(
            "message", "send", "--from-member-id", str(sender), "--to-member-id", str(to), text,
            "--json", env={"TMUX": ""},
        )
    )  # fmt: skip
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

    # the loop is SIGKILLed (no pending notification: nothing restarts it): stale, dead pid
    pid = _kill9_loop(h, ids.fleet_id)
    shown = _show(h, ids.fleet_id)
    assert re.fullmatch(
        rf"stale: pid {pid} is not running \(last heartbeat \d+s ago\)", shown["loop"]
    ), shown
    data = json.loads(ok(h.cli("fleet", "show", str(ids.fleet_id), "--json")).stdout)
    assert (data["loop"]["state"], data["loop"]["pid"], data["loop"]["pid_running"]) == (
        "stale",
        pid,
        False,
    )
    assert data["loop"]["log_path"] == f"{h.db_path}.monitor-{ids.fleet_id}.log"
    assert {p["member_id"]: p["pane_state"] for p in data["panes"]}[member] == "gone"
    report = json.loads(h.cli("doctor", "--json").stdout)["fleets"]
    assert report["ok"] is False and report["fleets"][0]["loop"]["state"] == "stale"


def test_any_command_restarts_a_dead_loop_while_notifications_wait(
    tmux_db: TmuxHarness, fleet: tuple[FleetIds, int, str]
) -> None:
    h = tmux_db
    ids, member, pane = fleet
    dead = _kill9_loop(h, ids.fleet_id)
    message = _pending_send(h, ids.director_id, member, "while the loop was dead")
    # outside tmux nothing can be reached: nothing is restarted
    ok(h.cli("message", "poll", str(member), env={"TMUX": ""}))
    assert runtime_row(h, ids.fleet_id)["pid"] == dead  # type: ignore[index]
    # a read-only command run in a pane of the fleet's server restarts it in the background
    ok(h.cli("message", "poll", str(member)))
    retry_until(
        lambda: (
            (r := runtime_row(h, ids.fleet_id)) is not None
            and r["pid"] not in (None, dead)
            and pid_alive(int(r["pid"]))
        ),
        timeout=20,
        message="no loop was restarted",
    )
    # ...and the new loop types the waiting line
    retry_until(
        lambda: any(f"[cafleet msg {message} " in r["text"] for r in line_records(pane)),
        timeout=30,
        message=lambda: line_records(pane),
    )


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
    message = _pending_send(h, ids.director_id, member, "held")
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

    # outside tmux `monitor start` cannot reach the fleet's server
    outside = h.cli("monitor", "start", f, unset=("TMUX", "TMUX_PANE"))
    assert (outside.returncode, outside.stderr) == (
        1,
        "Error: not inside a tmux session (TMUX is not set)\n",
    )
    # from another pane of that server it starts the loop in the background
    other_pane = h.spawn_fake()
    started = ok(h.cli("monitor", "start", f, env={"TMUX_PANE": other_pane}))
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
    # a fleet whose Director pane is not on this server is refused
    sql_write(
        h,
        "UPDATE member_placements SET mux_pane_id = '%9999' WHERE member_id = ?",
        ids.director_id,
    )
    ok(h.cli("monitor", "stop", f))
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
    captured = [
        c for c in h.shim_calls()[calls:]
        if c.get("command") == "capture-pane" and c.get("target") == pane
    ]  # fmt: skip
    assert captured == []


def test_member_list_asks_tmux_once_for_every_pane_then_captures_each(
    tmux_db: TmuxHarness,
) -> None:
    """One `list-panes` tells which panes live and where (session, window), so the pane-is-ours
    check costs no call per pane: the only call per live pane is its one capture. A session
    group lists every pane once more, under the other session's name (sorting last here):
    each pane is still the placement's."""
    h = tmux_db
    ids = create_fleet(h)
    panes = [create_member(h, ids.fleet_id, name)[1] for name in ("a", "b", "c")]
    h.tmux("new-session", "-d", "-t", h.session_name, "-s", "zzz-group")
    calls = len(h.shim_calls())
    ok(h.cli("member", "list", str(ids.fleet_id)))
    # The fleet's monitor loop ticks meanwhile (its tick captures member panes to read their
    # prompts, docs/runtime.md §5.12): only the calls `member list` made count.
    made = [c for c in h.shim_calls()[calls:] if c.get("ppid") != ids.loop_pid]
    counted = collections.Counter(c.get("command") for c in made if c.get("command"))
    live = len(panes) + 2  # the members, the monitor and the Director
    assert counted == {"list-panes": 1, "capture-pane": live}, counted
    captured = {c.get("target") for c in made if c.get("command") == "capture-pane"}
    assert set(panes) <= captured
