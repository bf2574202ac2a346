"""Losses and recovery against a private tmux server (docs/runtime.md §5.11; docs/cli.md §2.8,
§2.23, §2.24; docs/runtime.md §5.11): the loop reports a lost member or monitor pane to the
Director once; `member respawn` re-creates a pane with the original agent and prompt; `fleet
adopt` gives a fleet whose Director pane is gone a new one."""

from __future__ import annotations

import json
import re

import pytest

from tests.delivery_helpers import record_ids
from tests.fleet_helpers import (
    FleetIds,
    create_fleet,
    create_member,
    ok,
    runtime_row,
    sql_write,
    start_loop,
    stop_loop,
    table_dump,
)
from tests.harness.fixtures import TmuxHarness
from tests.harness.util import (
    hold_pane_lock,
    pid_alive,
    retry_until,
    start_record,
    wait_records,
)

pytestmark = pytest.mark.tmux

PROMPT = "You are {member_id} of {fleet_id} (Director {director_member_id}, {coding_agent})."


@pytest.fixture
def fleet(tmux_db: TmuxHarness) -> FleetIds:
    ids = create_fleet(tmux_db)
    stop_loop(tmux_db, ids.fleet_id)  # each test runs its own loop when it needs one
    return ids


def _reports(h: TmuxHarness, director_id: int) -> list[tuple[int, int, str]]:
    return [
        (r[0], r[1], r[2])
        for r in h.sqlite(
            "SELECT message_id, from_member_id, text FROM messages "
            "WHERE owner_member_id = ? ORDER BY message_id",
            director_id,
        )
    ]


def _wait_ticks(h: TmuxHarness, fleet_id: int, n: int) -> None:
    """Wait until the loop's heartbeat advanced ``n`` times."""
    seen: set[str] = set()

    def advanced() -> bool:
        row = runtime_row(h, fleet_id)
        if row is not None and row["last_tick_at"]:
            seen.add(row["last_tick_at"])
        return len(seen) > n

    retry_until(advanced, timeout=10 + 3 * n, message=f"fewer than {n} ticks")


def _roster_panes(h: TmuxHarness, fleet_id: int) -> dict[int, str]:
    """member id -> the `pane_id` cell of `member list` (cut at the header's columns)."""
    lines = ok(h.cli("member", "list", str(fleet_id))).stdout.splitlines()
    header = lines[1]
    start = header.index("pane_id")
    end = header.index("pane", start + len("pane_id"))  # the pane-state column follows
    rows = [line for line in lines[3:] if line.split() and line.split()[0].isdigit()]
    return {int(line.split()[0]): line[start:end].strip() for line in rows}


# --- item 5: losses are reported ------------------------------------------------------------


def test_lost_member_and_monitor_panes_are_reported_once(
    tmux_db: TmuxHarness, fleet: FleetIds
) -> None:
    h = tmux_db
    f, d, mon = fleet.fleet_id, fleet.director_id, fleet.monitor_id
    a, a_pane = create_member(h, f, "alpha")
    b, b_pane = create_member(h, f, "beta")
    c, c_pane = create_member(h, f, "gamma")
    # One loss in a tick: its own report.
    loop = start_loop(h, f, "--tick", "1", "--interval", "0")
    h.tmux("kill-pane", "-t", a_pane)
    loop.wait_line(rf"tick -> pane lost: member {a} pane {re.escape(a_pane)} ")
    loop.stop()
    # Two losses seen by one tick (the loop was down meanwhile): one report names both, the
    # monitor first.
    h.tmux("kill-pane", "-t", c_pane)
    h.tmux("kill-pane", "-t", fleet.monitor_pane)
    loop = start_loop(h, f, "--tick", "1", "--interval", "0")
    loop.wait_line(rf"tick -> pane lost: member {mon} pane {re.escape(fleet.monitor_pane)} ")
    _wait_ticks(h, f, 3)

    reports = _reports(h, d)
    assert [(sender, text) for _, sender, text in reports] == [
        (
            mon,
            f"[cafleet] member {a} (alpha) lost its pane {a_pane}: tmux no longer has it. "
            f"Its messages wait in its inbox. Re-create it with: cafleet member respawn {a} "
            f"(or remove it: cafleet member delete {a})",
        ),
        (
            mon,
            f"[cafleet] 2 members lost their panes: {mon} (the monitor) pane "
            f"{fleet.monitor_pane}, {c} (gamma) pane {c_pane}. tmux no longer has them. One is "
            "the monitor, so no one health-checks the fleet. Their messages wait in their "
            "inboxes. Re-create each with: cafleet member respawn <M> (or remove it: cafleet "
            f"member delete <M>); cafleet member list {f} shows every pane gone.",
        ),
    ]  # once per loss, however many ticks see it
    ids = {m for m, _, _ in reports}
    second = reports[1][0]
    for member in (mon, c):
        assert loop.count(rf"pane lost: member {member} .*as msg {second}\)$") == 1
    # A real inbox row for the Director: poll lists it, un-notified rows stay un-notified.
    polled = ok(h.cli("message", "poll", str(d), "--json")).stdout
    assert {m["message_id"] for m in json.loads(polled)} == ids
    # member list marks both panes gone; member show has the time.
    panes = _roster_panes(h, f)
    assert panes[a] == f"{a_pane} (gone)" and panes[mon] == f"{fleet.monitor_pane} (gone)"
    assert panes[c] == f"{c_pane} (gone)"
    assert panes[b] == b_pane and panes[d] == h.director_pane
    shown = json.loads(ok(h.cli("member", "show", str(a), "--json")).stdout)
    assert shown["placement"]["lost_at"] is not None
    # Deleting a member (its pane killed under the lock) is not a loss.
    ok(h.cli("member", "delete", str(b)))
    _wait_ticks(h, f, 2)
    assert len(_reports(h, d)) == 2
    assert loop.count(rf"pane lost: member {b} ") == 0
    loop.stop()


def test_a_busy_pane_lock_defers_the_report(tmux_db: TmuxHarness, fleet: FleetIds) -> None:
    h = tmux_db
    f, d = fleet.fleet_id, fleet.director_id
    a, a_pane = create_member(h, f, "alpha")
    from cafleet.mux import PaneKey

    loop = start_loop(h, f, "--tick", "1", "--interval", "0")
    with hold_pane_lock(h.db_path.parent, PaneKey("tmux", h.session_name, a_pane)):
        h.tmux("kill-pane", "-t", a_pane)
        _wait_ticks(h, f, 2)
        assert _reports(h, d) == []
    loop.wait_line(rf"tick -> pane lost: member {a} ")
    assert len(_reports(h, d)) == 1
    loop.stop()


# --- item 6: member respawn ---------------------------------------------------------------------


def test_respawn_recreates_the_pane_with_the_original_agent_and_prompt(
    tmux_db: TmuxHarness, fleet: FleetIds
) -> None:
    h = tmux_db
    f, d = fleet.fleet_id, fleet.director_id
    a, a_pane = create_member(
        h, f, "alpha", PROMPT, "--coding-agent", "codex", "--model", "gpt-x", "--effort", "high"
    )
    first = start_record(a_pane)
    ok(h.cli("message", "send", "--from-member-id", str(d), "--to-member-id", str(a), "one"))
    wait_records(a_pane, 1)
    h.tmux("kill-pane", "-t", a_pane)
    # A message sent while the pane is gone stays pending (the drain says why).
    sent = h.cli("message", "send", "--from-member-id", str(d), "--to-member-id", str(a), "two")
    assert sent.returncode == 0 and "pane not found" in sent.stderr

    result = ok(h.cli("member", "respawn", str(a)))
    m = re.fullmatch(
        rf"Respawned member alpha \({a}\) in pane (%\d+) \(was {re.escape(a_pane)}; agent codex\)\.\n",
        result.stdout,
    )
    assert m, result.stdout
    new_pane = m.group(1)
    assert new_pane != a_pane and new_pane in h.live_panes()
    again = start_record(new_pane)
    assert again["argv"] == first["argv"]  # same binary, flags, model, effort and prompt
    assert again["argv"][-1] == f"You are {a} of {f} (Director {d}, codex)."
    assert "--model" in again["argv"] and "--config=model_reasoning_effort=high" in again["argv"]
    row = h.sqlite(
        "SELECT mux_session, mux_window_id, mux_pane_id, coding_agent, lost_at "
        "FROM member_placements WHERE member_id = ?",
        a,
    )
    assert row == [(h.session_name, h.window_id, new_pane, "codex", None)]
    assert h.sqlite("SELECT status FROM members WHERE member_id = ?", a) == [("active",)]
    # Same inbox: both messages are still there; the next drain types the pending one first.
    inbox = json.loads(ok(h.cli("message", "poll", str(a), "--json")).stdout)
    assert [x["text"] for x in inbox] == ["two", "one"]
    ok(h.cli("message", "send", "--from-member-id", str(d), "--to-member-id", str(a), "three"))
    wait_records(new_pane, 2)
    pending_id = inbox[0]["message_id"]
    typed = record_ids(new_pane)
    assert len(typed) == 2 and typed[0] == [pending_id] and typed[1][0] > pending_id

    # --json: the member record with its new placement.
    h.tmux("kill-pane", "-t", new_pane)
    data = json.loads(ok(h.cli("member", "respawn", str(a), "--json", "--window", "new")).stdout)
    assert data["member_id"] == a and data["placement"]["mux_pane_id"] not in (new_pane, a_pane)
    assert data["placement"]["mux_window_id"] != h.window_id  # --window new


def test_respawn_refusals_change_nothing(tmux_db: TmuxHarness, fleet: FleetIds) -> None:
    h = tmux_db
    f, d = fleet.fleet_id, fleet.director_id
    a, a_pane = create_member(h, f, "alpha")
    gone, gone_pane = create_member(h, f, "old")
    h.tmux("kill-pane", "-t", gone_pane)
    # A member from before revision 0003 has no recorded prompt.
    sql_write(h, "DELETE FROM member_spawns WHERE member_id = ?", gone)
    before, panes, calls = table_dump(h), h.live_panes(), len(h.shim_calls())
    cases = [
        (str(a), f"member {a}'s pane {a_pane} is still running; 'cafleet member respawn' "
                 f"re-creates a lost pane (to replace a running one: cafleet member delete {a})"),
        (str(d), f"member {d} is the root Director of fleet {f}; run 'cafleet fleet adopt {f}' "
                 "in the pane that takes its place"),
        ("999", "member 999 not found"),
        (str(gone), f"member {gone} has no recorded spawn prompt (it was created before cafleet "
                    "kept them); delete it and create a new member"),
    ]  # fmt: skip
    for member, message in cases:
        r = h.cli("member", "respawn", member)
        assert (r.returncode, r.stdout, r.stderr) == (1, "", f"Error: {message}\n"), member
    assert table_dump(h) == before and h.live_panes() == panes
    assert not any(c["command"] in ("split-window", "new-window") for c in h.shim_calls()[calls:])
    r = h.cli("member", "respawn", "0")
    assert r.returncode == 2


def test_respawn_the_monitor_with_the_bundled_prompt(tmux_db: TmuxHarness, fleet: FleetIds) -> None:
    h = tmux_db
    f, d, mon = fleet.fleet_id, fleet.director_id, fleet.monitor_id
    first = start_record(fleet.monitor_pane)
    h.tmux("kill-pane", "-t", fleet.monitor_pane)
    # A monitor from before revision 0003 (no recorded prompt) gets the bundled one too.
    sql_write(h, "DELETE FROM member_spawns WHERE member_id = ?", mon)
    result = ok(h.cli("member", "respawn", str(mon)))
    new_pane = re.search(r"in pane (%\d+)", result.stdout).group(1)  # type: ignore[union-attr]
    again = start_record(new_pane)
    from cafleet.agents.prompt import load_default_monitor_prompt, render_template

    assert again["argv"] == first["argv"]
    assert again["argv"][-1] == render_template(
        load_default_monitor_prompt(),
        fleet_id=f,
        member_id=mon,
        director_member_id=d,
        coding_agent="claude",
    )
    assert "Bash(cafleet monitor scan *)" in again["argv"] and again["argv"][8] == "monitor"
    # The loop wakes the respawned monitor.
    loop = start_loop(h, f, "--tick", "1", "--interval", "0")
    ok(h.cli("member", "ping", str(mon)))
    wait_records(new_pane, 1)
    loop.stop()


# --- item 6: fleet adopt ------------------------------------------------------------------------


def test_adopt_gives_the_fleet_a_new_director_pane(tmux_db: TmuxHarness) -> None:
    h = tmux_db
    ids = create_fleet(h)
    f, d = ids.fleet_id, ids.director_id
    a, a_pane = create_member(h, f, "alpha")
    new = h.spawn_fake("claude", window=h.window_id)
    here = {"TMUX_PANE": new}
    # Refused while the Director's pane is open, and from a member's pane.
    before = table_dump(h)
    r = h.cli("fleet", "adopt", str(f), env=here)
    assert (r.returncode, r.stderr) == (
        1,
        f"Error: fleet {f}'s root Director pane {h.director_pane} is still open; "
        "'cafleet fleet adopt' replaces a Director pane that is gone\n",
    )
    h.tmux("kill-pane", "-t", h.director_pane)
    retry_until(lambda: not pid_alive(ids.loop_pid), timeout=20, message="loop still runs")
    r = h.cli("fleet", "adopt", str(f), env={"TMUX_PANE": a_pane})
    assert (r.returncode, r.stderr) == (
        1,
        f"Error: pane {a_pane} is member {a}'s pane; run 'cafleet fleet adopt' in a pane of "
        "its own\n",
    )
    r = h.cli("fleet", "adopt", str(f), unset=["TMUX"])
    assert r.returncode == 1 and r.stderr == (
        "Error: cafleet fleet adopt must be run inside a tmux pane: not inside a tmux session "
        "(TMUX is not set)\n"
    )
    assert table_dump(h, skip=("monitor_runtime", "messages")) == {
        k: v for k, v in before.items() if k != "messages"
    }

    result = ok(h.cli("fleet", "adopt", str(f), "--coding-agent", "codex", env=here))
    lines = result.stdout.splitlines()
    assert lines[0] == (
        f"Adopted fleet {f}: its root Director (member {d}) is now pane {new} "
        f"(was {h.director_pane})."
    )
    pid = int(re.fullmatch(r"monitor loop: pid (\d+)", lines[1]).group(1))  # type: ignore[union-attr]
    row = runtime_row(h, f)
    assert row is not None and row["pid"] == pid and pid_alive(pid)
    assert h.sqlite(
        "SELECT mux_pane_id, coding_agent, lost_at FROM member_placements WHERE member_id = ?", d
    ) == [(new, "codex", None)]
    # The fleet works again from its new Director pane: members split its window, and the new
    # pane cannot start a second fleet.
    b, b_pane = create_member(h, f, "beta", env=here)
    assert h.pane_format(b_pane, "#{window_id}") == h.pane_format(new, "#{window_id}")
    r = h.cli("fleet", "create", "--name", "again", "--coding-agent", "claude", env=here)
    assert r.returncode == 1 and "is already the root Director of live fleet" in r.stderr
    r = h.cli("fleet", "adopt", str(f), env=here)
    assert (r.returncode, r.stderr) == (
        1,
        f"Error: pane {new} already is the root Director's pane of fleet {f}\n",
    )
    ok(h.cli("fleet", "delete", str(f), env=here))
    assert new in h.live_panes() and b_pane not in h.live_panes()
