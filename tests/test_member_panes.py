"""`member create/delete/capture/prompt/ping` against a private tmux server (docs/cli.md §2.7,
§2.10–§2.13, §4 items 37–42, 46–52; docs/runtime.md §8 items 5, 6, 8, 13–18, 38)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cafleet.agents.claude import profile_args, with_hook_settings
from cafleet.agents.codex import notify_override
from tests.cli_helpers import MEMBER_KEYS, hold_flock
from tests.delivery_helpers import holds_open
from tests.factories import connect
from tests.fleet_helpers import (
    FleetIds,
    create_fleet,
    create_member,
    inproc,
    ok,
    popen_paused_at,
    sql_write,
    stop_loop,
    table_dump,
)
from tests.harness.fixtures import TmuxHarness
from tests.harness.util import (
    command_records,
    fake_print,
    hold_pane_lock,
    line_bytes,
    proc_state,
    retry_until,
    start_record,
    wait_records,
)

pytestmark = pytest.mark.tmux

PROMPT = (
    "You are member {member_id} of fleet {fleet_id}; Director {director_member_id}; "
    "agent {coding_agent}; literal {{x}}."
)


@pytest.fixture
def fleet(tmux_db: TmuxHarness) -> FleetIds:
    ids = create_fleet(tmux_db)
    # Member tests need no loop: stopping it keeps it from typing into panes under test.
    stop_loop(tmux_db, ids.fleet_id)
    return ids


def _lock(h: TmuxHarness, pane: str):  # type: ignore[no-untyped-def]
    from cafleet.mux import PaneKey
    from cafleet.mux.locks import acquire_pane_lock

    return acquire_pane_lock(
        str(h.db_path.parent), PaneKey("tmux", "fleet test", pane), timeout=5, purpose="test"
    )


def _register_without_pane(h: TmuxHarness, fleet_id: int, name: str, *, pending: bool) -> int:
    """A member as another process sees it mid-creation (pending, its creation lock held by a
    process standing in for its `member create`) or one with no placement."""
    from cafleet.broker.members import register_member
    from cafleet.mux.locks import pane_lock_path
    from cafleet.records import PlacementSpec
    from cafleet.workflows.halfmade import creation_key

    if pending:
        key = creation_key(fleet_id, name)
        h.track(hold_flock(Path(pane_lock_path(str(h.db_path.parent), key)), 600))

    with connect(h.db_path) as conn:
        member = register_member(
            conn,
            fleet_id=fleet_id,
            name=name,
            description="no pane",
            role="member",
            placement=PlacementSpec("fleet test", h.window_id, "claude") if pending else None,
            require_monitor=False,
        )
    return member.member_id


def test_member_create_spawns_and_renders(tmux_db: TmuxHarness, fleet: FleetIds) -> None:
    h = tmux_db
    active = h.pane_format(h.director_pane, "#{window_active}#{pane_active}")
    member_id, pane = create_member(h, fleet.fleet_id, "coder", PROMPT)
    assert pane in h.live_panes()
    assert h.sqlite(
        "SELECT mux_session, mux_window_id, mux_pane_id, backend, coding_agent "
        "FROM member_placements WHERE member_id = ?",
        member_id,
    ) == [("fleet test", h.window_id, pane, "tmux", "claude")]
    start = start_record(pane)
    assert start["argv"] == [
        str(h.bin_dir / "claude"),
        # the default permission profile (docs/permissions.md) and the member's hooks
        *with_hook_settings(["claude", *profile_args("workspace")], member_id)[1:],
        "--name",
        "coder",
        f"You are member {member_id} of fleet {fleet.fleet_id}; Director {fleet.director_id}; "
        "agent claude; literal {x}.",
    ]
    assert start["db_url"] == h.db_url and start["cwd"] == str(h.project_dir)
    # Same window, focus unchanged, main-vertical layout.
    assert h.pane_format(pane, "#{window_id}") == h.window_id
    assert h.pane_format(h.director_pane, "#{window_active}#{pane_active}") == active
    assert h.pane_format(pane, "#{pane_current_path}") == str(h.project_dir)
    layout = h.pane_format(pane, "#{window_layout}")
    assert layout  # main-vertical was applied: the Director pane spans the full height
    assert h.pane_format(h.director_pane, "#{pane_height}") == h.pane_format(
        h.director_pane, "#{window_height}"
    )

    # --json: the member record; codex with model and effort.
    result = ok(
        h.cli(
            "member",
            "create",
            "--fleet-id",
            str(fleet.fleet_id),
            "--name",
            "tester",
            "--description",
            "Tests things",
            "--coding-agent",
            "codex",
            "--model",
            "o9",
            "--effort",
            "high",
            "run {member_id}",
            "--json",
        )
    )
    record = json.loads(result.stdout)
    assert list(record) == [*MEMBER_KEYS, "permissions"]  # docs/permissions.md §1
    assert record["permissions"] == "workspace"
    assert record["kind"] == "member" and record["placement"]["coding_agent"] == "codex"
    codex_pane = record["placement"]["mux_pane_id"]
    argv = start_record(codex_pane)["argv"]
    assert argv[1:7] == [
        "--ask-for-approval",
        "on-request",
        "--sandbox",
        "workspace-write",
        "--add-dir",
        str(h.db_path.parent),
    ]
    assert argv[7:] == [
        "--model",
        "o9",
        "--config=model_reasoning_effort=high",
        "-c",
        notify_override(record["member_id"]),  # its hook (docs/runtime.md §4.12)
        f"run {record['member_id']}",
    ]

    # Without CAFLEET_DATABASE_URL in the caller's environment nothing reaches the pane: the
    # default path (under HOME) is made to name the same database through a symlink.
    default_dir = Path(os.environ["HOME"]) / ".local" / "share" / "cafleet"
    default_dir.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(h.db_path.parent, default_dir)
    r = ok(
        h.cli(
            "member",
            "create",
            "--fleet-id",
            str(fleet.fleet_id),
            "--name",
            "oc",
            "--description",
            "d",
            "--coding-agent",
            "opencode",
            "--model",
            "p/m",
            "go",
            unset=["CAFLEET_DATABASE_URL"],
        )
    )
    rec = start_record(r.stdout.split("pane=")[1].strip())
    assert rec["argv"] == [
        str(h.bin_dir / "opencode"), "--agent", "cafleet", "--model", "p/m", "--prompt", "go"
    ]  # fmt: skip
    assert rec["db_url"] is None

    # member list shows everyone with agents and panes.
    listing = ok(h.cli("member", "list", str(fleet.fleet_id))).stdout.splitlines()
    assert listing[0] == "5 members:"
    assert re.match(r"  member_id  name\s+kind\s+agent\s+pane_id\s+pane\s+idle$", listing[1])
    assert re.match(
        rf"  {member_id}\s+coder\s+member\s+claude\s+{re.escape(pane)}\s+alive( \(\w+\))?\s+-$",
        listing[5],
    )


def test_member_create_refusals_change_nothing(tmux_db: TmuxHarness, fleet: FleetIds) -> None:
    h = tmux_db
    f = str(fleet.fleet_id)
    before, panes = table_dump(h), h.live_panes()
    calls = len(h.shim_calls())

    def refuse(args: list[str], code: int, err: str, **kw: object) -> None:
        kw.pop("unset", None)  # this process never has TMUX set: in-process runs are outside
        r = inproc("member", "create", *args, **kw)  # type: ignore[arg-type]
        assert r.returncode == code, (args, r.stderr)
        if code == 1:
            assert r.stderr == f"Error: {err}\n", (args, r.stderr)
        else:
            assert r.stderr.endswith(f"Error: {err}\n"), (args, r.stderr)
        assert r.stdout == ""

    common = ["--name", "m", "--description", "d"]
    refuse(["--fleet-id", "99", *common, "p"], 1, "fleet 99 not found")
    refuse(
        ["--fleet-id", f, *common, "--role", "monitor", "p"],
        1,
        f"fleet {f} already has an active monitor member (member {fleet.monitor_id})",
    )
    refuse(
        ["--fleet-id", f, *common, "p"],
        1,
        "not inside a tmux session (TMUX is not set)",
        unset=["TMUX"],
    )
    refuse(
        ["--fleet-id", f, *common, "p", "--file", "x"], 2, "give either PROMPT or --file, not both"
    )
    # The stale-assets guard: codex's assets are not where CODEX_HOME now points.
    elsewhere = h.dir / "other-codex"
    refuse(
        ["--fleet-id", f, *common, "--coding-agent", "codex"],
        1,
        f"no cafleet skills are installed for codex at {elsewhere}; "
        "run 'cafleet setup --coding-agent codex'",
        env={"CODEX_HOME": str(elsewhere)},
    )
    refuse(["--fleet-id", f, *common, ""], 2, "text may not be empty")
    refuse(
        ["--fleet-id", f, *common, "hi {name}"],
        2,
        "unknown placeholder 'name' in the spawn prompt; supported placeholders are "
        "{fleet_id}, {member_id}, {director_member_id}, {coding_agent}; write {{ and }} for "
        "literal braces",
    )
    refuse(
        ["--fleet-id", f, *common, "hi {fleet_id!r}"],
        2,
        "malformed spawn prompt: format specs and conversions are not supported; write {{ "
        "and }} for literal braces",
    )
    refuse(
        ["--fleet-id", f, *common, "hi {"],
        2,
        "malformed spawn prompt: unmatched '{'; write {{ and }} for literal braces",
    )
    refuse(
        ["--fleet-id", f, *common, "--", "-x {fleet_id}"],
        2,
        "spawn prompt may not start with '-' (the coding agent would read it as an option)",
    )
    r = inproc("member", "create", "--fleet-id", f, *common, "--role", "director", "p")
    assert r.returncode == 2 and "--role" in r.stderr
    refuse(["--fleet-id", f, *common, "--model", "", "p"], 2, "--model may not be empty")
    refuse(
        ["--fleet-id", f, *common, "--coding-agent", "opencode", "--model", "m", "p"],
        2,
        "--model for the opencode coding agent must be '<provider-id>/<model-id>' (got 'm')",
    )
    refuse(
        ["--fleet-id", f, *common, "--coding-agent", "opencode", "--effort", "low", "p"],
        2,
        "the opencode coding agent does not support --effort",
    )
    refuse(
        ["--fleet-id", f, *common, "--coding-agent", "codex", "--effort", "max", "p"],
        2,
        "--effort for the codex coding agent must be one of minimal, low, medium, high, "
        "xhigh (got 'max')",
    )
    refuse(
        ["--fleet-id", f, *common, "--file", str(h.dir / "missing.md")],
        1,
        f"--file {h.dir / 'missing.md'}: file does not exist or is not a regular file",
    )
    (h.dir / "empty.md").write_text("  \n")
    refuse(
        ["--fleet-id", f, *common, "--file", str(h.dir / "empty.md")],
        1,
        f"--file {h.dir / 'empty.md'}: file is empty",
    )
    no_fakes = os.pathsep.join(
        p for p in os.environ["PATH"].split(os.pathsep) if p != str(h.bin_dir)
    )
    refuse(
        ["--fleet-id", f, *common, "--coding-agent", "codex", "p"],
        1,
        "binary codex not found on PATH",
        env={"PATH": no_fakes},
    )
    name_cases = [
        (["--name", "a\tb", "--description", "d"], "--name may not contain control characters"),
        (
            ["--name", "m", "--description", "d\x1b"],
            "--description may not contain control characters",
        ),
        (
            ["--name", "m", "--description", "x" * 2001],
            "--description is too long (2001 characters; the limit is 2000)",
        ),
    ]
    for args, message in name_cases:
        refuse(["--fleet-id", f, *args, "p"], 2, message)
    assert table_dump(h) == before and h.live_panes() == panes
    assert not any(c["command"] == "split-window" for c in h.shim_calls()[calls:])

    # No active monitor: an ordinary member is refused; a deleted fleet too.
    ok(h.cli("member", "delete", str(fleet.monitor_id)))
    before, panes = table_dump(h), h.live_panes()
    refuse(
        ["--fleet-id", f, *common, "p"],
        1,
        f"fleet {f} has no active monitor member; spawn one with --role monitor first",
    )
    assert table_dump(h) == before and h.live_panes() == panes
    ok(inproc("fleet", "delete", f))
    before = table_dump(h)
    refuse(["--fleet-id", f, *common, "p"], 1, f"fleet {f} is deleted")
    assert table_dump(h) == before and h.live_panes() == panes


def test_racing_monitor_creates_make_exactly_one(tmux_db: TmuxHarness, fleet: FleetIds) -> None:
    h = tmux_db
    ok(h.cli("member", "delete", str(fleet.monitor_id)))
    panes = h.live_panes()
    args = [
        "member",
        "create",
        "--fleet-id",
        str(fleet.fleet_id),
        "--description",
        "watch",
        "--role",
        "monitor",
    ]
    procs = [h.popen_cli(*args, "--name", f"mon{i}", "watch {fleet_id}") for i in range(2)]
    results = [(p.wait(timeout=60), *p.communicate()) for p in procs]
    winners = [r for r in results if r[0] == 0]
    losers = [r for r in results if r[0] != 0]
    assert len(winners) == 1 and len(losers) == 1, results
    winner_id = int(winners[0][1].split()[0])
    assert losers[0][0] == 1
    assert losers[0][2] == (
        f"Error: fleet {fleet.fleet_id} already has an active monitor member (member {winner_id})\n"
    )
    active = h.sqlite(
        "SELECT member_id FROM members WHERE status = 'active' AND "
        "json_extract(member_card_json, '$.cafleet.kind') = 'monitor'"
    )
    assert active == [(winner_id,)]
    # The loser left no member row at all, no placement and no pane.
    assert h.sqlite("SELECT COUNT(*) FROM members WHERE name IN ('mon0', 'mon1')")[0][0] == 1
    assert len(h.live_panes() - panes) == 1
    argv = start_record(winners[0][1].split("pane=")[1].strip())["argv"]
    assert "Bash(cafleet monitor scan *)" in argv and "Bash(cafleet member ping *)" in argv


def test_spawn_failure_deregisters_the_member(tmux_db: TmuxHarness, fleet: FleetIds) -> None:
    h = tmux_db
    panes = h.live_panes()
    h.set_faults([{"command": "split-window", "action": "fail", "stderr": "no space for new pane"}])
    r = h.cli(
        "member",
        "create",
        "--fleet-id",
        str(fleet.fleet_id),
        "--name",
        "m",
        "--description",
        "d",
        "p",
    )
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr == "Error: tmux split-window failed: no space for new pane\n"
    h.clear_faults()
    calls = len(h.shim_calls())
    big = "x" * 16500
    r = h.cli(
        "member",
        "create",
        "--fleet-id",
        str(fleet.fleet_id),
        "--name",
        "big",
        "--description",
        "d",
        big,
    )
    assert r.returncode == 1
    assert re.fullmatch(
        r"Error: spawn command is too long for tmux \((\d+) bytes; limit 16000\); shorten the "
        r"spawn prompt\n",
        r.stderr,
    ), r.stderr
    assert not any(c["command"] == "split-window" for c in h.shim_calls()[calls:])
    assert h.sqlite(
        "SELECT name, status FROM members WHERE name IN ('m', 'big') ORDER BY member_id"
    ) == [("m", "deregistered"), ("big", "deregistered")]
    assert h.sqlite(
        "SELECT COUNT(*) FROM member_placements p JOIN members m USING (member_id) "
        "WHERE m.name IN ('m', 'big')"
    ) == [(0,)]
    assert h.live_panes() == panes


def test_delete_while_creation_pauses_between_spawn_and_patch(
    tmux_db: TmuxHarness, fleet: FleetIds
) -> None:
    h = tmux_db
    panes = h.live_panes()
    proc, release = popen_paused_at(
        h, "select-layout", "member", "create", "--fleet-id", str(fleet.fleet_id),
        "--name", "slow", "--description", "d", "p",
    )  # fmt: skip
    member_id = h.sqlite("SELECT member_id FROM members WHERE name = 'slow'")[0][0]
    # Outside tmux: a pending member is deleted without touching tmux.
    d = inproc("member", "delete", str(member_id))
    assert d.returncode == 0, d.stderr
    assert (
        d.stdout
        == f"Member deleted.\n  member_id: {member_id}\n  pane_id:   (pending \u2014 no pane)\n"
    )
    release.touch()
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 1 and out == ""
    assert err == "Error: placement row vanished before pane-id patch\n"
    retry_until(lambda: h.live_panes() == panes, timeout=5)
    assert h.sqlite("SELECT status FROM members WHERE member_id = ?", member_id) == [
        ("deregistered",)
    ]


def test_member_delete(tmux_db: TmuxHarness, fleet: FleetIds) -> None:
    h = tmux_db
    a, pane_a = create_member(h, fleet.fleet_id, "alpha")
    b, pane_b = create_member(h, fleet.fleet_id, "beta")
    with connect(h.db_path) as conn:
        from cafleet.broker.messages import send_message

        send_message(conn, from_member_id=b, to_member_id=a, text="keep me")

    # The root Director is refused; its pane stays.
    r = inproc("member", "delete", str(fleet.director_id))
    assert (r.returncode, r.stderr) == (
        1,
        "Error: cannot deregister the root Director; use 'cafleet fleet delete' instead\n",
    )
    assert h.director_pane in h.live_panes()

    # A held lock: the exact message, nothing changed.
    before, panes = table_dump(h), h.live_panes()
    lock = _lock(h, pane_a)
    try:
        r = h.cli("member", "delete", str(a), env={"CAFLEET_PANE_LOCK_TIMEOUT": "1"})
    finally:
        lock.release()
    assert (r.returncode, r.stdout) == (1, "")
    assert (
        r.stderr
        == f"Error: member {a}'s pane is receiving another keystroke; retry in a few seconds\n"
    )
    # Outside tmux a placement is reached through the server it records; one made before the
    # socket was recorded needs TMUX (nothing changed).
    (socket,) = h.sqlite("SELECT mux_socket FROM member_placements WHERE member_id = ?", a)[0]
    sql_write(h, "UPDATE member_placements SET mux_socket = NULL WHERE member_id = ?", a)
    r = inproc("member", "delete", str(a))
    assert (r.returncode, r.stderr) == (1, "Error: not inside a tmux session (TMUX is not set)\n")
    sql_write(h, "UPDATE member_placements SET mux_socket = ? WHERE member_id = ?", socket, a)
    assert table_dump(h) == before and h.live_panes() == panes

    # Deleting kills exactly its pane.
    r = ok(h.cli("member", "delete", str(a)))
    assert r.stdout == f"Member deleted.\n  member_id: {a}\n  pane_id:   {pane_a} (killed)\n"
    assert h.live_panes() == panes - {pane_a}
    assert h.sqlite("SELECT status FROM members WHERE member_id = ?", a) == [("deregistered",)]
    assert h.sqlite("SELECT COUNT(*) FROM member_placements WHERE member_id = ?", a) == [(0,)]
    assert h.sqlite("SELECT text FROM messages WHERE owner_member_id = ?", a) == [("keep me",)]

    # An already-closed pane.
    h.tmux("kill-pane", "-t", pane_b)
    r = ok(h.cli("member", "delete", str(b), "--json"))
    assert r.stdout == f'{{"member_id":{b},"pane_id":"{pane_b}","pane_status":"already_gone"}}\n'

    # Unknown and deregistered ids.
    for member_id, why in ((a, "is deregistered"), (999, "not found")):
        r = inproc("member", "delete", str(member_id))
        assert (r.returncode, r.stderr) == (1, f"Error: member {member_id} {why}\n")

    # Placementless and pending members are deleted outside tmux, without importing libtmux.
    none_id = _register_without_pane(h, fleet.fleet_id, "ghost", pending=False)
    pending_id = _register_without_pane(h, fleet.fleet_id, "pend", pending=True)
    code = (
        "import sys\nfrom cafleet.cli import run\n"
        f"rc = run(['member', 'delete', '{none_id}'])\n"
        f"rc2 = run(['member', 'delete', '{pending_id}', '--json'])\n"
        "print('RC', rc, rc2, 'libtmux' in sys.modules)\n"
    )
    env = dict(h.env)
    env.pop("TMUX")
    env.pop("TMUX_PANE")
    proc = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        cwd=str(h.project_dir),
        timeout=60,
    )
    assert proc.stdout == (
        f"Member deleted.\n  member_id: {none_id}\n  pane_id:   (no placement)\n"
        f'{{"member_id":{pending_id},"pane_id":null,"pane_status":"pending"}}\n'
        "RC 0 0 False\n"
    ), proc.stderr


def test_member_capture(tmux_db: TmuxHarness, fleet: FleetIds) -> None:
    h = tmux_db
    member_id, pane = create_member(h, fleet.fleet_id, "cap")
    start_record(pane)
    fake_print(
        pane,
        "\r\n"
        + "\r\n".join(
            [
                "one",
                "\x1b[31mtwo red\x1b[0m",
                "three",
                "\x1b]8;;http://x\x07link\x1b]8;;\x07",
                "five",
            ]
        )
        + "\r\n",
    )
    r = ok(h.cli("member", "capture", str(member_id), "--lines", "3"))
    assert r.stdout == "three\nlink\nfive\n"
    r = ok(h.cli("member", "capture", str(member_id)))
    lines = r.stdout.splitlines()
    assert lines[-5:] == ["one", "two red", "three", "link", "five"]
    r = ok(h.cli("member", "capture", str(member_id), "--lines", "4", "--ansi", "--json"))
    data = json.loads(r.stdout)
    assert list(data) == [
        "member_id",
        "pane_id",
        "lines",
        "content",
        "captured_at",
        "content_sha256",
    ]
    assert data["pane_id"] == pane and data["lines"] == 4
    assert "\x1b[31mtwo red" in data["content"]
    assert data["content_sha256"] == hashlib.sha256(data["content"].encode()).hexdigest()
    r = inproc("member", "capture", str(member_id), "--lines", "0")
    assert r.returncode == 2 and "--lines" in r.stderr

    none_id = _register_without_pane(h, fleet.fleet_id, "ghost", pending=False)
    pending_id = _register_without_pane(h, fleet.fleet_id, "pend", pending=True)
    r = inproc("member", "capture", str(none_id))
    assert (r.returncode, r.stderr) == (
        1,
        f"Error: member {none_id} has no placement row; it was not spawned via "
        "'cafleet member create'\n",
    )
    r = inproc("member", "capture", str(pending_id))
    assert (r.returncode, r.stderr) == (
        1,
        f"Error: member {pending_id} has no pane yet (pending placement) \u2014 nothing to capture\n",
    )
    # The Director's pane may be captured.
    ok(h.cli("member", "capture", str(fleet.director_id), "--lines", "2"))
    h.tmux("kill-pane", "-t", pane)
    r = h.cli("member", "capture", str(member_id))
    assert (r.returncode, r.stderr) == (1, "Error: capture failed: pane not found\n")


def test_member_prompt_and_ping(tmux_db: TmuxHarness, fleet: FleetIds) -> None:
    h = tmux_db
    member_id, pane = create_member(h, fleet.fleet_id, "pp")
    start_record(pane)
    for bad, message in [
        ("two\nlines", "text may not contain newlines"),
        ("bell\x07", "text may not contain control characters"),
        ("   ", "text may not be empty"),
    ]:
        r = inproc("member", "prompt", str(member_id), bad)
        assert r.returncode == 2 and r.stderr.endswith(f"Error: {message}\n"), r.stderr

    r = ok(h.cli("member", "prompt", str(member_id), "  /compact now "))
    assert r.stdout == f"Sent prompt to member pp ({member_id}, pane {pane}).\n"
    assert wait_records(pane, 1)[0]["bytes_b64"]
    assert line_bytes(pane) == [b"/compact now"]

    r = ok(h.cli("member", "ping", str(member_id), "--json"))
    assert json.loads(r.stdout) == {
        "member_id": member_id,
        "pane_id": pane,
        "skipped": False,
        "reason": None,
        "state": "unknown",  # the plain fake draws no agent screen
    }
    wait_records(pane, 2)
    # the fixed line, then its own id (what the screen check looks for, docs/cli.md §2.13)
    assert re.fullmatch(
        rb"\[cafleet\] ping: run cafleet message poll %d, act on and ack what you find, then "
        rb"resume your work if something was still running\. \[ping [0-9a-z]{4}\]" % member_id,
        line_bytes(pane)[1],
    ), line_bytes(pane)

    # Busy: one non-blocking try, skipped at once.
    lock = _lock(h, pane)
    try:
        started = time.monotonic()
        r = ok(h.cli("member", "ping", str(member_id)))
        assert time.monotonic() - started < 5
        assert r.stdout == (
            f"Member pp ({member_id}, pane {pane}) is receiving another keystroke; ping skipped.\n"
        )
        r = ok(h.cli("member", "ping", str(member_id), "--json"))
        assert json.loads(r.stdout)["reason"] == "busy"
        r = h.cli("member", "prompt", str(member_id), "hi", env={"CAFLEET_PANE_LOCK_TIMEOUT": "0"})
        assert (r.returncode, r.stderr) == (
            1,
            f"Error: member {member_id}'s pane is receiving another keystroke; retry in a few "
            "seconds\n",
        )
    finally:
        lock.release()

    # Pending: skipped without tmux.
    pending_id = _register_without_pane(h, fleet.fleet_id, "pend", pending=True)
    r = ok(inproc("member", "ping", str(pending_id)))
    assert (
        r.stdout
        == f"Member pend ({pending_id}) has no pane yet (pending placement); ping skipped.\n"
    )
    r = ok(inproc("member", "ping", str(pending_id), "--json"))
    assert r.stdout == (
        f'{{"member_id":{pending_id},"pane_id":null,"skipped":true,"reason":"pending_placement",'
        '"state":null}\n'
    )
    r = inproc("member", "prompt", str(pending_id), "x")
    assert r.stderr == (
        f"Error: member {pending_id} has no pane yet (pending placement) \u2014 nothing to prompt\n"
    )

    # The root Director is never typed into.
    director_records = len(line_bytes(h.director_pane))
    refusal = (
        f"Error: cafleet never types into the root Director's pane (member {fleet.director_id})\n"
    )
    for args in (["prompt", str(fleet.director_id), "hello"], ["ping", str(fleet.director_id)]):
        r = inproc("member", *args)
        assert (r.returncode, r.stderr) == (1, refusal)
    assert len(line_bytes(h.director_pane)) == director_records

    # A pane in copy mode is probed and nothing is typed.
    h.tmux("copy-mode", "-t", pane)
    r = h.cli("member", "ping", str(member_id))
    assert (r.returncode, r.stderr) == (
        1,
        f"Error: typing into pane {pane} failed: pane is in copy-mode\n",
    )
    h.tmux("send-keys", "-t", pane, "-X", "cancel")
    assert len(line_bytes(pane)) == 2

    for cmd in (["ping", "999"], ["prompt", "999", "x"], ["capture", "999"]):
        r = inproc("member", *cmd)
        assert (r.returncode, r.stderr) == (1, "Error: member 999 not found\n")


def test_member_create_signal_after_spawn_and_fake_run_directives(
    tmux_db: TmuxHarness, fleet: FleetIds
) -> None:
    h = tmux_db
    panes = h.live_panes()
    proc, release = popen_paused_at(
        h, "split-window", "member", "create", "--fleet-id", str(fleet.fleet_id),
        "--name", "sig", "--description", "d", "p",
    )  # fmt: skip
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)  # recorded while the spawn is paused; the spawn itself runs to its end
    release.touch()
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 143, err
    assert out == "" and "Traceback" not in err and "Aborted!" not in err
    assert h.sqlite("SELECT status FROM members WHERE name = 'sig'") == [("deregistered",)]
    assert h.sqlite(
        "SELECT COUNT(*) FROM member_placements JOIN members USING (member_id) WHERE name = 'sig'"
    ) == [(0,)]
    retry_until(lambda: h.live_panes() == panes, timeout=5)
    h.clear_faults()

    # The spawned agent learns its ids from the rendered prompt and can use them in its pane.
    member_id, pane = create_member(
        h, fleet.fleet_id, "runner", "Work.\n#fake run cafleet member show {member_id} --json\n"
    )
    rec = retry_until(lambda: command_records(pane), timeout=20)[0]
    assert rec["rc"] == 0, rec
    assert json.loads(rec["stdout"])["member_id"] == member_id


def test_delete_waits_for_a_keystroke_in_flight_and_sigterm(
    tmux_db: TmuxHarness, fleet: FleetIds
) -> None:
    h = tmux_db
    member_id, pane = create_member(h, fleet.fleet_id, "busy")
    start_record(pane)
    from cafleet.mux import PaneKey
    from cafleet.mux.locks import pane_lock_path

    key = PaneKey("tmux", "fleet test", pane)
    lock = pane_lock_path(str(h.db_path.parent), key)
    # The paused Enter below runs under the product's 5 s tmux-call timeout, too short for a
    # CLI's start-up on a loaded machine. So both deletes start first, behind a lock the test
    # holds; each is seen waiting by its open lock file, then stopped (SIGSTOP) until the
    # keystroke is in flight. A long lock timeout keeps their waits alive meanwhile.
    lock_env = {"CAFLEET_PANE_LOCK_TIMEOUT": "300"}
    with hold_pane_lock(h.db_path.parent, key):
        deletes = [h.popen_cli("member", "delete", str(member_id), env=lock_env) for _ in "ab"]
        for proc in deletes:
            retry_until(
                lambda p=proc: holds_open(p.pid, lock) or p.poll() is not None,
                timeout=30,
                interval=0.01,
                message="a delete never reached the pane-lock wait",
            )
            assert proc.poll() is None, proc.communicate(timeout=10)
            os.kill(proc.pid, signal.SIGSTOP)
            retry_until(lambda p=proc: proc_state(p.pid) == "T", timeout=10)
    waiting, deleting = deletes

    release = h.dir / "release-enter"
    h.set_faults(
        [{"command": "send-keys", "target": pane, "last": "Enter", "action": "pause_until",
          "path": str(release)}]
    )  # fmt: skip
    prompt = h.popen_cli("member", "prompt", str(member_id), "hello there")
    retry_until(
        lambda: any(c["command"] == "send-keys" and c["argv"][-1] == "Enter"
                    for c in h.shim_calls()),
        timeout=30,
    )  # fmt: skip
    # A delete waiting for the pane lock during the keystroke: SIGTERM ends that wait at once,
    # changing nothing.
    before = table_dump(h)
    os.kill(waiting.pid, signal.SIGCONT)
    sent = time.monotonic()
    waiting.send_signal(signal.SIGTERM)
    out, err = waiting.communicate(timeout=10)
    assert waiting.returncode == 143 and time.monotonic() - sent < 3.0, err
    assert out == "" and "Traceback" not in err
    assert table_dump(h) == before and pane in h.live_panes()

    # The other one keeps waiting until the Enter went through.
    os.kill(deleting.pid, signal.SIGCONT)
    time.sleep(0.3)  # not an assertion wait: give a delete that wrongly went ahead time to act
    assert deleting.poll() is None and pane in h.live_panes()
    release.touch()
    assert prompt.wait(timeout=20) == 0
    out, err = deleting.communicate(timeout=20)
    assert deleting.returncode == 0, err
    assert out.endswith(f"{pane} (killed)\n")
    # The pane was killed only after the Enter went through: the record is complete.
    assert line_bytes(pane) == [b"hello there"]
    calls = h.shim_calls()
    enter = max(i for i, c in enumerate(calls) if c["command"] == "send-keys")
    kill = max(i for i, c in enumerate(calls) if c["command"] == "kill-pane")
    assert enter < kill


def test_member_create_without_a_director_pane(tmux_db: TmuxHarness, fleet: FleetIds) -> None:
    h = tmux_db
    f = fleet.fleet_id
    sql_write(h, "UPDATE member_placements SET mux_pane_id = NULL WHERE member_id = ?",
              fleet.director_id)  # fmt: skip
    r = h.cli("member", "create", "--fleet-id", str(f), "--name", "m", "--description", "d", "p")
    assert (r.returncode, r.stderr) == (
        1,
        f"Error: the root Director of fleet {f} has no pane to split from\n",
    )
    sql_write(h, "DELETE FROM member_placements WHERE member_id = ?", fleet.director_id)
    r = inproc("member", "create", "--fleet-id", str(f), "--name", "m", "--description", "d", "p")
    assert (r.returncode, r.stderr) == (
        1,
        "Error: cannot resolve the member's coding agent: the root Director (member "
        f"{fleet.director_id}) has no placement; re-run with --coding-agent\n",
    )
    assert h.sqlite("SELECT COUNT(*) FROM members WHERE name = 'm'") == [(0,)]
