"""A member's agent session and usage through the CLI, with fake agents in a private tmux
server (docs/cli.md §2.9, §2.23, §2.26, §2.27; docs/runtime.md §9): the session id is learned
from the pane's own home and directory and bound to its member, `member respawn --resume`
refuses what it cannot resume before spawning anything and otherwise runs the agent's resume
command in the session's directory, `fleet restore` brings a fleet back on a new tmux server,
and usage is read from the records (`unknown` when they are gone)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.fleet_helpers import FleetIds, create_fleet, create_member, ok, sql_write, stop_loop
from tests.harness.fixtures import SESSION, TmuxHarness
from tests.harness.util import line_records, retry_until, start_record

pytestmark = pytest.mark.tmux

PROMPT = "You are member {member_id} of fleet {fleet_id}."
SONNET = "claude-sonnet-4-5-20250929"


@pytest.fixture
def fleet(tmux_db: TmuxHarness) -> FleetIds:
    ids = create_fleet(tmux_db)
    stop_loop(tmux_db, ids.fleet_id)  # learning is exercised through the commands
    return ids


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat().replace("+00:00", "Z")


def claude_record(
    session_id: str,
    prompt: str,
    cwd: Path,
    replies: Sequence[tuple[str, dict[str, int]]] = (),
) -> Path:
    """What Claude Code writes for a session (docs/runtime.md §9.1), under the test's HOME."""
    folder = Path(os.environ["HOME"], ".claude", "projects")
    folder /= "".join(c if c.isalnum() else "-" for c in str(cwd))
    folder.mkdir(parents=True, exist_ok=True)
    now = _iso(time.time())
    records: list[dict[str, Any]] = [
        {"type": "user", "cwd": str(cwd), "sessionId": session_id, "timestamp": now,
         "message": {"role": "user", "content": prompt}},
    ]  # fmt: skip
    for msg_id, usage in replies:
        records.append(
            {"type": "assistant", "cwd": str(cwd), "timestamp": now, "requestId": "r" + msg_id,
             "message": {"id": msg_id, "model": SONNET, "usage": usage}}
        )  # fmt: skip
    path = folder / f"{session_id}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def usage(i: int, o: int, cr: int = 0, cw: int = 0) -> dict[str, int]:
    return {"input_tokens": i, "output_tokens": o, "cache_read_input_tokens": cr,
            "cache_creation_input_tokens": cw}  # fmt: skip


def _show(h: TmuxHarness, member_id: int) -> dict[str, Any]:
    return dict(json.loads(ok(h.cli("member", "show", str(member_id), "--json")).stdout))


def _rendered(member_id: int, fleet_id: int) -> str:
    return PROMPT.format(member_id=member_id, fleet_id=fleet_id)


def _dump(h: TmuxHarness) -> dict[str, Any]:
    return {
        t: h.sqlite(f"SELECT * FROM {t} ORDER BY 1")
        for t in ("fleets", "members", "member_placements", "member_spawns", "messages")
    }


def _bind(h: TmuxHarness, member_id: int, session_id: str) -> None:
    sql_write(
        h,
        "UPDATE member_spawns SET agent_session_id = ? WHERE member_id = ?",
        session_id,
        member_id,
    )


def test_member_show_learns_the_session_of_its_own_pane_only(
    tmux_db: TmuxHarness, fleet: FleetIds
) -> None:
    h = tmux_db
    f = fleet.fleet_id
    a, _ = create_member(h, f, "alpha", PROMPT)
    b, _ = create_member(h, f, "beta", PROMPT)
    assert _show(h, a)["agent_session_id"] is None  # nothing recorded yet
    assert "agent_session:   -" in ok(h.cli("member", "show", str(a))).stdout.splitlines()
    # alpha's agent records its session; the same prompt in another directory does not count.
    claude_record("aaaaaaaa-0002", _rendered(a, f), h.dir)
    assert _show(h, a)["agent_session_id"] is None
    claude_record("aaaaaaaa-0001", _rendered(a, f), h.project_dir)
    assert _show(h, a)["agent_session_id"] == "aaaaaaaa-0001"
    lines = ok(h.cli("member", "show", str(a))).stdout.splitlines()
    assert "agent_session:   aaaaaaaa-0001" in lines
    # The session line comes before the placement (then worktree, permissions follow it).
    assert (
        lines.index("agent_session:   aaaaaaaa-0001")
        < [i for i, line in enumerate(lines) if line.startswith("placement:")][0]
    )
    assert _show(h, b)["agent_session_id"] is None  # beta's prompt is not in alpha's record
    # A session id is bound to one member, learned once.
    from cafleet.broker.sessions import set_session_id
    from cafleet.cli.guard import open_validated_connection
    from cafleet.db.runtime import close_connection

    conn = open_validated_connection(str(h.db_path))
    try:
        assert set_session_id(conn, b, "aaaaaaaa-0001") is False
        assert set_session_id(conn, a, "other") is False
    finally:
        close_connection(conn)
    assert h.sqlite(
        "SELECT member_id, agent_session_id FROM member_spawns WHERE agent_session_id IS NOT NULL"
    ) == [(a, "aaaaaaaa-0001")]
    # The root Director is the user's own agent: no line.
    assert "agent_session" not in ok(h.cli("member", "show", str(fleet.director_id))).stdout


def test_the_loop_learns_sessions_by_itself(tmux_db: TmuxHarness, fleet: FleetIds) -> None:
    from tests.fleet_helpers import start_loop

    h = tmux_db
    f = fleet.fleet_id
    a, _ = create_member(h, f, "alpha", PROMPT)
    claude_record("cccccccc-0001", _rendered(a, f), h.project_dir)
    loop = start_loop(h, f, "--tick", "1", "--interval", "0")
    loop.wait_line(rf"learned agent session of member {a}: session cccccccc-0001")
    assert h.sqlite("SELECT agent_session_id FROM member_spawns WHERE member_id = ?", a) == [
        ("cccccccc-0001",)
    ]


def test_respawn_resume_refuses_before_spawning(tmux_db: TmuxHarness, fleet: FleetIds) -> None:
    h = tmux_db
    f = fleet.fleet_id
    a, pane = create_member(h, f, "alpha", PROMPT)
    h.tmux("kill-pane", "-t", pane)
    panes, before = h.live_panes(), _dump(h)
    r = h.cli("member", "respawn", str(a), "--resume")
    assert (r.returncode, r.stdout) == (1, "")
    assert r.stderr == (
        f"Error: member {a} has no known agent session to resume (none was learned from its "
        f"agent's records); run 'cafleet member respawn {a}' to start it afresh\n"
    )
    assert h.live_panes() == panes and _dump(h) == before
    # A session id the agent no longer has.
    _bind(h, a, "bbbbbbbb-0001")
    before = _dump(h)
    r = h.cli("member", "respawn", str(a), "--resume")
    assert (r.returncode, r.stdout) == (1, "")
    assert r.stderr == (
        f"Error: member {a}'s claude session bbbbbbbb-0001 is no longer in the agent's records; "
        f"run 'cafleet member respawn {a}' to start it afresh\n"
    )
    assert h.live_panes() == panes and _dump(h) == before


def test_respawn_resume_runs_the_resume_command_in_the_sessions_directory(
    tmux_db: TmuxHarness, fleet: FleetIds
) -> None:
    h = tmux_db
    f = fleet.fleet_id
    a, pane = create_member(h, f, "alpha", PROMPT)
    elsewhere = h.dir / "elsewhere"
    elsewhere.mkdir()
    claude_record("dddddddd-0001", _rendered(a, f), elsewhere)
    _bind(h, a, "dddddddd-0001")
    h.tmux("kill-pane", "-t", pane)
    r = ok(h.cli("member", "respawn", str(a), "--resume", "--json"))
    done = json.loads(r.stdout)
    assert done["resumed_session_id"] == "dddddddd-0001"
    new_pane = done["placement"]["mux_pane_id"]
    start = start_record(new_pane, timeout=15)
    assert start["argv"][-2:] == ["--resume", "dddddddd-0001"]
    assert _rendered(a, f) not in start["argv"]  # no spawn prompt: the conversation has it
    assert start["cwd"] == str(elsewhere)
    assert _show(h, a)["agent_session_id"] == "dddddddd-0001"  # still this member's
    # Without --resume the member starts afresh and its new session is learned.
    h.tmux("kill-pane", "-t", new_pane)
    fresh = json.loads(ok(h.cli("member", "respawn", str(a), "--json")).stdout)
    assert fresh["resumed_session_id"] is None
    start = start_record(fresh["placement"]["mux_pane_id"], timeout=15)
    assert start["argv"][-1] == _rendered(a, f) and start["cwd"] == str(h.project_dir)
    assert h.sqlite("SELECT agent_session_id FROM member_spawns WHERE member_id = ?", a) == [
        (None,)
    ]


def _new_server(h: TmuxHarness) -> tuple[str, dict[str, str]]:
    """A new tmux server on the same socket (as after a reboot) with one fake pane."""
    from tests.harness.util import pid_alive

    retry_until(lambda: not pid_alive(h.server_pid), timeout=10, message="old server alive")
    started = subprocess.run(
        [h.real_tmux, "-S", h.socket_path, "-f", "/dev/null", "new-session", "-d", "-s",
         SESSION, "-x", "400", "-y", "200", "-c", str(h.project_dir), str(h.bin_dir / "claude")],
        env=h.server_env, capture_output=True, text=True, timeout=15,
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    pid, pane = (
        h.tmux("display-message", "-p", "-t", f"={SESSION}:", "#{pid}|#{pane_id}")
        .strip()
        .split("|")
    )
    return pane, {"TMUX": f"{h.socket_path},{pid},0", "TMUX_PANE": pane}


def _started(h: TmuxHarness, pane: str) -> dict[str, Any]:
    """The start record of the fake now in ``pane`` (a new server reuses pane ids, and the
    fakes' logs are per pane id: the record whose pid is the pane's)."""
    from tests.harness.util import fake_log

    pid = int(h.pane_format(pane, "#{pane_pid}"))
    return dict(
        retry_until(
            lambda: next(
                (r for r in fake_log(pane) if r.get("kind") == "start" and r.get("pid") == pid),
                None,
            ),
            timeout=15,
            message=f"no start record of pid {pid} in {pane}",
        )
    )


def test_fleet_restore_after_the_server_died(tmux_db: TmuxHarness, fleet: FleetIds) -> None:
    h = tmux_db
    f, mon = fleet.fleet_id, fleet.monitor_id
    a, _ = create_member(h, f, "alpha", PROMPT)
    b, _ = create_member(h, f, "beta", PROMPT)
    c, _ = create_member(h, f, "gamma", PROMPT)
    claude_record("eeeeeeee-000a", _rendered(a, f), h.project_dir)
    gone = claude_record("eeeeeeee-000c", _rendered(c, f), h.project_dir)
    for member in (a, c):
        assert _show(h, member)["agent_session_id"] is not None
    gone.unlink()  # gamma's agent lost its record
    h.tmux("kill-server")
    pane, here = _new_server(h)
    r = h.cli("fleet", "restore", str(f), env=here, timeout=120)
    lines = r.stdout.splitlines()
    assert r.returncode == 1, (r.stdout, r.stderr)  # gamma was not restored
    assert lines and lines[0].startswith(f"Director: pane {pane} (adopted; was %"), r.stderr
    by_member = {int(line.split()[1]): line for line in lines[1:-1]}
    assert sorted(by_member) == sorted([mon, a, b, c]), lines
    assert "resumed session eeeeeeee-000a in pane %" in by_member[a]
    assert "started afresh in pane %" in by_member[b]  # no session was ever learned
    assert "started afresh in pane %" in by_member[mon]
    assert by_member[c] == (
        f"member {c} (gamma): not restored: member {c}'s claude session eeeeeeee-000c is no "
        f"longer in the agent's records; run 'cafleet member respawn {c}' to start it afresh"
    )
    assert lines[-1].startswith("monitor loop: pid ")
    resumed_pane = _show(h, a)["placement"]["mux_pane_id"]
    assert _started(h, resumed_pane)["argv"][-2:] == ["--resume", "eeeeeeee-000a"]
    # Idempotent: the members that came back are left alone; gamma is still reported.
    again = h.cli("fleet", "restore", str(f), "--json", env=here, timeout=120)
    data = json.loads(again.stdout)
    assert again.returncode == 1 and data["adopted_from"] is None
    outcomes = {m["member_id"]: m["outcome"] for m in data["members"]}
    assert outcomes == {mon: "alive", a: "alive", b: "alive", c: "failed"}
    assert data["monitor_loop"] is not None
    retry_until(lambda: _show(h, b)["placement"]["mux_pane_id"] in h.live_panes(), timeout=5)


def test_member_usage_reads_the_records(tmux_db: TmuxHarness, fleet: FleetIds) -> None:
    h = tmux_db
    f = fleet.fleet_id
    a, _ = create_member(h, f, "alpha", PROMPT)
    b, _ = create_member(h, f, "beta", PROMPT)
    record = claude_record(
        "ffffffff-0001",
        _rendered(a, f),
        h.project_dir,
        [("m1", usage(1000, 200, 5000, 300)), ("m2", usage(10, 20))],
    )
    data = json.loads(ok(h.cli("member", "usage", "--fleet-id", str(f), "--json")).stdout)
    assert [row["member_id"] for row in data] == [fleet.monitor_id, a, b]
    row = data[1]
    assert row["usage"] == {
        "input": 1010, "output": 220, "cache_read": 5000, "cache_write": 300,
        "by_model": {SONNET: {"input": 1010, "output": 220, "cache_read": 5000,
                              "cache_write": 300}},
    }  # fmt: skip
    want = (1010 * 3 + 220 * 15 + 5000 * 0.3 + 300 * 3.75) / 1e6
    assert row["cost_usd"] == pytest.approx(want)
    assert data[2]["usage"] is None and data[2]["unknown_reason"] == "no session known yet"
    text = ok(h.cli("member", "usage", str(a))).stdout.splitlines()
    assert text[0] == "1 member:" and text[1].split() == [
        "member_id", "name", "agent", "input", "output", "cache_read", "cache_write", "cost",
    ]  # fmt: skip
    assert text[3].split() == [str(a), "alpha", "claude", "1010", "220", "5000", "300",
                               f"${want:.4f}"]  # fmt: skip
    # Appended turns are read incrementally; a model without a price shows tokens only.
    with record.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps({"type": "assistant", "message": {"id": "m3", "model": "mystery",
                             "usage": usage(1, 2)}}) + "\n")  # fmt: skip
    cells = ok(h.cli("member", "usage", str(a))).stdout.splitlines()[3].split()
    assert cells[3:] == ["1011", "222", "5000", "300", "-"]
    listed = ok(h.cli("member", "list", str(f), "--usage")).stdout.splitlines()
    assert listed[1].split()[-5:] == ["input", "output", "cache_read", "cache_write", "cost"]
    alpha = next(line for line in listed if line.split()[:2] == [str(a), "alpha"])
    assert alpha.split()[-5:] == ["1011", "222", "5000", "300", "-"]
    # A price file names the unknown model; a bad one fails the command.
    prices = Path(os.environ["HOME"], ".config", "cafleet", "prices.json")
    prices.parent.mkdir(parents=True)
    prices.write_text(json.dumps({"mystery": {"input": 1000000, "output": 0}}), encoding="utf-8")
    assert ok(h.cli("member", "usage", str(a))).stdout.splitlines()[3].split()[-1] == (
        f"${want + 1:.4f}"
    )
    prices.write_text("[1]", encoding="utf-8")
    r = h.cli("member", "usage", str(a))
    assert (r.returncode, r.stdout) == (1, "")
    assert r.stderr == f"Error: the price file {prices} must hold a JSON object of models\n"
    prices.unlink()
    # A rotated record: unknown, never a crash.
    record.unlink()
    record.write_text("", encoding="utf-8")
    rotated = json.loads(ok(h.cli("member", "usage", str(a), "--json")).stdout)[0]
    assert rotated["usage"] is None and "rotated" in rotated["unknown_reason"]
    assert ok(h.cli("member", "usage", str(a))).stdout.splitlines()[3].split()[3:] == [
        "unknown", "unknown", "unknown", "unknown", "-",
    ]  # fmt: skip


def test_member_usage_arguments(tmux_db: TmuxHarness, fleet: FleetIds) -> None:
    h = tmux_db
    for args in ((), ("1", "--fleet-id", "1")):
        r = h.cli("member", "usage", *args)
        assert r.returncode == 2 and r.stdout == ""
        assert r.stderr.endswith("Error: give exactly one of MEMBER_ID and --fleet-id\n")
    r = h.cli("member", "usage", "99")
    assert (r.returncode, r.stderr) == (1, "Error: member 99 not found\n")


def test_fleet_restore_sends_a_restarted_member_the_task_it_had_in_progress(
    tmux_db: TmuxHarness, fleet: FleetIds
) -> None:
    """A restarted agent comes back idle (resumed, it waits for a prompt; afresh, it knows
    nothing): the task it had in progress is sent to it again, once; a task still only ready
    is not (its assignment line is delivered as any other)."""
    h = tmux_db
    f = fleet.fleet_id
    a, _ = create_member(h, f, "alpha", PROMPT)
    b, _ = create_member(h, f, "beta", PROMPT)
    claude_record("eeeeeeee-00a1", _rendered(a, f), h.project_dir)  # alpha resumes, beta afresh

    def task(title: str, member: int) -> int:
        r = ok(h.cli("task", "create", "--fleet-id", str(f), "--title", title,
                     "--assign", str(member), "--json"))  # fmt: skip
        return int(json.loads(r.stdout)["task"]["task_id"])

    started = task("Port the parser", a)
    ok(h.cli("task", "claim", str(started), "--member-id", str(a)))
    ready = task("Write the docs", b)

    def linked(task_id: int) -> list[tuple[Any, ...]]:
        return h.sqlite(
            "SELECT message_id, to_member_id, text FROM messages WHERE task_id = ? "
            "ORDER BY message_id", task_id
        )  # fmt: skip

    assert len(linked(started)) == 1 and len(linked(ready)) == 1  # the assignments
    h.tmux("kill-server")
    _pane, here = _new_server(h)
    ok(h.cli("fleet", "restore", str(f), env=here, timeout=120))
    reminders = linked(started)[1:]
    assert [(to, text.splitlines()[0]) for _id, to, text in reminders] == [
        (a, f"[cafleet] task {started} is still in progress with you: Port the parser")
    ]
    assert f"cafleet task done {started} --member-id {a}" in reminders[0][2]
    assert len(linked(ready)) == 1
    pane = _show(h, a)["placement"]["mux_pane_id"]
    tag = f"cafleet msg {reminders[0][0]}"
    retry_until(
        lambda: any(tag in r["text"] for r in line_records(pane)),
        timeout=30,
        message=f"{tag} never reached alpha's new pane",
    )
    # A second restore finds everyone alive: nothing restarted, nothing sent again.
    ok(h.cli("fleet", "restore", str(f), env=here, timeout=120))
    assert len(linked(started)) == 2
