"""`cafleet member list/show` (docs/cli.md §2.8, §2.9; §4 items 43–45, 49)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cafleet.db.timefmt import utcnow
from cafleet.hosts import current_host
from tests.cli_helpers import assert_unchanged, call_main, run_cli, snapshot, sql, stamp
from tests.factories import Db, FakePane

T1 = datetime(2026, 5, 1, 12, 0, 0, tzinfo=UTC)
T2 = T1 + timedelta(minutes=1)
T3 = T1 + timedelta(minutes=2)


def test_roster_activity_json(head_db: Path) -> None:
    """43: active members only, by id, kinds, last_sent/last_recv/last_ack, idle rules."""
    with Db(head_db) as db:
        fleet = db.fleet("team")
        fid = fleet.fleet.fleet_id
        d, m = fleet.director.member_id, fleet.monitor.member_id
        alice = db.member(fid, "alice").member_id
        bob = db.member(fid, "bob", pane=None).member_id
        carol = db.member(fid, "carol", placed=False).member_id
        eve = db.member(fid, "eve").member_id
        gil = db.member(fid, "gil").member_id
        gone = db.member(fid, "gone").member_id
        db.deregister(gone)
        db.broadcast(bob, "standup", now=T1)  # summary from bob; deliveries to everyone else
        direct = db.send(d, alice, "do it", now=T2)
        db.ack(direct.message_id, now=T3)
        db.send(eve, eve, "note to self", now=utcnow() + timedelta(days=1))
        ivy = db.member(fid, "ivy").member_id  # registered after the broadcast: no activity
    sql(
        head_db,
        "INSERT INTO messages (owner_member_id, from_member_id, to_member_id, type, created_at, "
        "status_state, status_timestamp, origin_message_id, text, notified_at) "
        f"VALUES ({gil}, {gil}, {gil}, 'unicast', 'zzz-not-a-time', 'input_required', "
        f"'{stamp(T1)}', NULL, 'x', 'zzz-not-a-time')",
    )
    code, out, err = call_main(["member", "list", str(fid), "--json"])
    assert (code, err) == (0, "")
    rows = {row["member_id"]: row for row in json.loads(out)}
    assert list(rows) == sorted(rows) == [d, m, alice, bob, carol, eve, gil, ivy]
    assert gone not in rows
    kinds = {mid: row["kind"] for mid, row in rows.items()}
    assert kinds[d] == "director" and kinds[m] == "monitor"
    assert {kinds[x] for x in (alice, bob, carol, eve, gil, ivy)} == {"member"}

    def activity(mid: int) -> tuple[object, object, object]:
        return rows[mid]["last_sent"], rows[mid]["last_recv"], rows[mid]["last_ack"]

    assert activity(bob) == (stamp(T1), None, None)  # the broadcast summary counts as sent
    assert activity(d) == (stamp(T2), stamp(T1), None)
    assert activity(m) == (None, stamp(T1), None)  # broadcast deliveries count as received
    assert activity(alice) == (None, stamp(T2), stamp(T3))  # newest completed delivery
    assert activity(carol) == (None, stamp(T1), None)
    assert rows[eve]["idle"] == 0  # a future timestamp clamps to 0
    assert rows[gil]["last_sent"] == "zzz-not-a-time"
    assert rows[gil]["idle"] is None  # the greatest value does not parse: no fall-back
    assert rows[ivy]["idle"] is None and activity(ivy) == (None, None, None)
    assert isinstance(rows[alice]["idle"], int) and rows[alice]["idle"] > 0
    assert rows[carol]["placement"] is None
    assert rows[bob]["placement"]["mux_pane_id"] is None
    assert rows[alice]["placement"]["coding_agent"] == "codex"


def test_roster_text_table(head_db: Path) -> None:
    """44: `(pending)`, `-` for a placementless member, idle 59s/1m/59m/1h and `-`."""
    with Db(head_db) as db:
        fleet = db.fleet(
            "team",
            director_pane=FakePane("s", "@1", "%1"),
            monitor_pane=FakePane("s", "@1", "%2"),
        )
        fid = fleet.fleet.fleet_id
        d, m = fleet.director.member_id, fleet.monitor.member_id
        coder = db.member(fid, "coder", pane=None).member_id
        ghost = db.member(fid, "ghost", placed=False).member_id
        db.member(fid, "idle", pane="%7")
        now = utcnow()
        db.send(m, m, "x", now=now - timedelta(seconds=61))
        db.send(coder, coder, "x", now=now - timedelta(seconds=3590))
        db.send(ghost, ghost, "x", now=now - timedelta(seconds=3601))
        db.send(d, d, "x", now=utcnow() - timedelta(seconds=59))
        code, out, err = call_main(["member", "list", str(fid)])
    assert (code, err) == (0, "")
    assert out == (
        "5 members:\n"
        "  member_id  name      kind      agent   pane_id    pane     idle\n"
        "  ---------  --------  --------  ------  ---------  -------  ----\n"
        f"  {d}          Director  director  claude  %1         ?        59s\n"
        f"  {m}          monitor   monitor   claude  %2         ?        1m\n"
        f"  {coder}          coder     member    codex   (pending)  pending  59m\n"
        f"  {ghost}          ghost     member    -       -          -        1h\n"
        f"  {ghost + 1}          idle      member    codex   %7         ?        -\n"
        "monitor loop: never started\n"  # no TMUX here: the panes read `?`, and why
        "pane ?: not checked: not inside a tmux session (TMUX is not set)\n"
        "problem: the monitor loop is not running: no scheduled wakes; run "
        f"'cafleet monitor start {fid}'\n"
        # pending with no `member create` holding its creation lock: one that was interrupted
        f"problem: member {coder} (coder) has no pane: the 'cafleet member create' that "
        f"registered it was interrupted; run 'cafleet member respawn {coder}' (or remove it: "
        f"'cafleet member delete {coder}')\n"
    )


def test_roster_single_and_errors(head_db: Path) -> None:
    with Db(head_db) as db:
        fleet = db.fleet("team")
        db.deregister(fleet.monitor.member_id)
    fid = fleet.fleet.fleet_id
    assert call_main(["member", "list", str(fid)])[1].startswith("1 member:\n")
    assert run_cli("member", "list", "99") == (1, "", "Error: fleet 99 not found\n")
    assert call_main(["fleet", "delete", str(fid), "--keep-panes"])[0] == 0
    before = snapshot(head_db)
    assert run_cli("member", "list", str(fid)) == (1, "", f"Error: fleet {fid} is deleted\n")
    assert run_cli("member", "list", str(fid), "--json")[0] == 1
    assert_unchanged(before, head_db)


def test_member_show_active_and_deregistered(head_db: Path) -> None:
    """45."""
    with Db(head_db) as db:
        fleet = db.fleet("team", director_pane=FakePane("main", "@3", "%4"), now=T1)
        worker = db.member(fleet.fleet.fleet_id, "coder", description="writes\tcode", now=T2)
        pending = db.member(fleet.fleet.fleet_id, "later", pane=None, now=T2)
        loose = db.member(fleet.fleet.fleet_id, "loose", placed=False, now=T2)
        db.deregister(worker.member_id)
    d = fleet.director.member_id
    code, out, _ = call_main(["member", "show", str(d)])
    assert (code, out) == (
        0,
        f"member_id:       {d}\n"
        f"fleet_id:        {fleet.fleet.fleet_id}\n"
        "name:            Director\n"
        "kind:            director\n"
        "status:          active\n"
        "description:     Root Director for this fleet\n"
        f"registered_at:   {stamp(T1)}\n"
        f"placement:       tmux session=main window=@3 pane=%4 agent=claude created_at={stamp(T1)}\n",
    )
    code, out, _ = call_main(["member", "show", str(worker.member_id)])
    lines = out.splitlines()
    assert "status:          deregistered" in lines
    assert "description:     writes␉code" in lines
    dereg = [line for line in lines if line.startswith("deregistered_at: ")]
    assert len(dereg) == 1 and dereg[0] != "deregistered_at: -"
    assert lines[-2] == "placement:       (none)"
    # Registered without a spawn record (as before permission profiles): what it ran with then.
    assert lines[-1] == "permissions:     readonly"
    assert lines.index(dereg[0]) == lines.index(f"registered_at:   {stamp(T2)}") + 1
    code, out, _ = call_main(["member", "show", str(pending.member_id)])
    assert "pane=(pending) agent=codex" in out.splitlines()[-2]
    assert "deregistered_at" not in out
    assert call_main(["member", "show", str(loose.member_id)])[1].endswith(
        "placement:       (none)\npermissions:     readonly\n"
    )
    code, out, _ = call_main(["member", "show", str(worker.member_id), "--json"])
    data = json.loads(out)
    assert data["status"] == "deregistered" and data["deregistered_at"] is not None
    assert data["placement"] is None and data["kind"] == "member"
    code, out, _ = call_main(["member", "show", str(d), "--json"])
    assert json.loads(out)["placement"] == {
        "backend": "tmux",
        "mux_session": "main",
        "mux_window_id": "@3",
        "mux_pane_id": "%4",
        "coding_agent": "claude",
        "created_at": stamp(T1),
        "lost_at": None,
        "host_id": current_host(),  # the broker records this process's host
    }


def test_member_show_unknown(head_db: Path) -> None:
    before = snapshot(head_db)
    assert run_cli("member", "show", "42") == (1, "", "Error: member 42 not found\n")
    assert_unchanged(before, head_db)


def test_poll_of_unknown_or_deregistered_member(head_db: Path) -> None:
    """49 (the `message poll` part); docs/cli.md §2.16: a deregistered member's messages can be polled."""
    with Db(head_db) as db:
        fleet = db.fleet()
        worker = db.member(fleet.fleet.fleet_id)
        db.deregister(worker.member_id)
    before = snapshot(head_db)
    assert run_cli("message", "poll", "999") == (1, "", "Error: member 999 not found\n")
    assert run_cli("message", "poll", str(worker.member_id)) == (0, "No messages found.\n", "")
    assert_unchanged(before, head_db)


def test_delete_and_ping_of_unknown_or_deregistered_member(head_db: Path) -> None:
    """49 (the `member delete` and `member ping` parts): exit 1 and nothing written; the
    deregistered member's inbox still polls."""
    with Db(head_db) as db:
        fleet = db.fleet()
        worker = db.member(fleet.fleet.fleet_id)
        db.send(fleet.director.member_id, worker.member_id, "still yours")
        db.deregister(worker.member_id)
    before = snapshot(head_db)
    wid = worker.member_id
    for command in ("delete", "ping"):
        assert run_cli("member", command, "999") == (1, "", "Error: member 999 not found\n")
        assert run_cli("member", command, str(wid)) == (
            1,
            "",
            f"Error: member {wid} is deregistered\n",
        )
    code, out, err = run_cli("message", "poll", str(wid))
    assert (code, err) == (0, "")
    assert out.splitlines()[1:] == ["still yours"]
    assert_unchanged(before, head_db)
