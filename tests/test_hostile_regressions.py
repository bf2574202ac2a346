"""The tmux-argument repros (docs/tmux-arguments.md §1-§4), one test each: user text ending in `;` (or holding tmux formats) reaches
the agent byte-exact and never runs a tmux command (docs/tmux-arguments.md)."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from cafleet.agents.claude import profile_args, with_hook_settings
from cafleet.agents.codex import notify_override
from cafleet.mux.tmux_args import chunk_utf8
from tests.delivery_helpers import expected_line, record_of, send_json
from tests.factories import build_world, connect
from tests.harness import util
from tests.harness.fixtures import TmuxHarness
from tests.hostile import HOME_PWNED, no_pwned, server_state
from tests.test_delivery_send import occupy_loop_slot

CLAUDE_RULES = profile_args("workspace")  # a member's default profile (docs/permissions.md)


def claude_rules(member_id: int) -> list[str]:
    """The default profile's flags with the member's hooks merged in (docs/runtime.md §4.12)."""
    return with_hook_settings(["claude", *CLAUDE_RULES], member_id)[1:]


def _create(h: TmuxHarness, fleet_id: int, *args: str, **kwargs: Any) -> tuple[int, str]:
    result = h.cli("member", "create", "--fleet-id", str(fleet_id), *args, "--json", **kwargs)
    assert result.returncode == 0, (result.stdout, result.stderr)
    data = json.loads(result.stdout)
    return data["member_id"], data["placement"]["mux_pane_id"]


def _panes_added(h: TmuxHarness, before: tuple[str, ...], pane: str) -> None:
    """The server is the one from before with exactly ``pane`` added: no window, session or
    option appeared, and nothing was killed."""
    after = server_state(h)
    assert after[0] == before[0]  # the same server process
    assert after[1:3] == before[1:3]  # sessions, windows
    assert sorted(after[3].split()) == sorted([*before[3].split(), pane])
    assert after[4:] == before[4:]


def test_model_ending_in_semicolon_does_not_kill_the_server(tmux_db: TmuxHarness) -> None:
    """`--model 'sonnet;' … 'kill-server'` killed the whole tmux server."""
    h = tmux_db
    w = build_world(h.db_path, harness=h, members=())
    before = server_state(h)
    member, pane = _create(
        h, w.fleet_id, "--name", "worker", "--model", "sonnet;", "--description", "x",
        "--coding-agent", "claude", "kill-server",
    )  # fmt: skip
    record = util.start_record(pane, timeout=20)
    assert record["argv"] == [
        str(h.bin_dir / "claude"), *claude_rules(member), "--name", "worker", "--model", "sonnet;",
        "kill-server",
    ]  # fmt: skip
    _panes_added(h, before, pane)


def test_name_ending_in_semicolon_opens_no_window(tmux_db: TmuxHarness) -> None:
    """`--name 'evil;' … 'new-window'` opened a window running bash and lost the prompt."""
    h = tmux_db
    w = build_world(h.db_path, harness=h, members=())
    before = server_state(h)
    member, pane = _create(
        h, w.fleet_id, "--name", "evil;", "--description", "x", "--coding-agent", "claude",
        "new-window",
    )  # fmt: skip
    record = util.start_record(pane, timeout=20)
    assert record["argv"] == [
        str(h.bin_dir / "claude"), *claude_rules(member), "--name", "evil;", "new-window",
    ]  # fmt: skip
    _panes_added(h, before, pane)
    assert h.sqlite("SELECT name FROM members WHERE name = 'evil;'") == [("evil;",)]


def test_worker_semicolon_is_created(tmux_db: TmuxHarness) -> None:
    """`--name 'worker;'` failed with `unknown command: please review the diff`."""
    h = tmux_db
    w = build_world(h.db_path, harness=h, members=())
    _, pane = _create(
        h, w.fleet_id, "--name", "worker;", "--description", "reviews;", "--coding-agent",
        "claude", "please review the diff",
    )  # fmt: skip
    record = util.start_record(pane, timeout=20)
    assert record["argv"][-3:] == ["--name", "worker;", "please review the diff"]


def test_working_directory_ending_in_semicolon(tmux_db: TmuxHarness) -> None:
    """A cwd `~/work/proj;` failed with `unknown command: -e`; a `#{…}`/`#(…)` directory would be
    expanded (and run) as a format."""
    h = tmux_db
    w = build_world(h.db_path, harness=h, members=())
    for name in ("proj;", f"#{{pane_id}} #(cd;touch {HOME_PWNED});"):
        cwd = h.dir / "work" / name
        cwd.mkdir(parents=True)
        _, pane = _create(
            h, w.fleet_id, "--name", "w", "--description", "x", "--coding-agent", "claude",
            "hello", cwd=cwd,
        )  # fmt: skip
        record = util.start_record(pane, timeout=20)
        assert record["cwd"] == str(cwd)
        assert record["db_url"] == h.db_url  # the `-e` after `-c` still arrived
        assert no_pwned(h)


def _db_under(h: TmuxHarness, directory: str) -> tuple[Path, dict[str, str]]:
    path = h.dir / "data" / directory / "cafleet.db"
    env = {"CAFLEET_DATABASE_URL": f"sqlite:///{path}"}
    result = h.cli("setup", env=env)
    assert result.returncode == 0, result.stderr
    return path, env


def test_codex_with_database_directory_ending_in_semicolon(tmux_db: TmuxHarness) -> None:
    """A database under `semi;/` with codex: `--add-dir <db dir>` ended a command."""
    h = tmux_db
    path, env = _db_under(h, "semi;")
    w = build_world(path, harness=h, members=())
    member, pane = _create(
        h, w.fleet_id, "--name", "coder", "--description", "x", "--coding-agent", "codex",
        "You are a member {member_id}", env=env,
    )  # fmt: skip
    record = util.start_record(pane, timeout=20)
    assert record["argv"][1:6] == [
        "--ask-for-approval", "on-request", "--sandbox", "workspace-write", "--add-dir",
    ]  # fmt: skip
    assert record["argv"][6] == str(path.parent)
    assert record["argv"][6].endswith("semi;")
    assert record["argv"][7:9] == ["-c", notify_override(member)]  # its hook (no path in it)
    assert re.fullmatch(r"You are a member \d+", record["argv"][9])
    assert record["db_url"] == env["CAFLEET_DATABASE_URL"]


def test_fleet_create_with_codex_and_database_directory_ending_in_semicolon(
    tmux_harness: TmuxHarness,
) -> None:
    """The monitor's spawn failed with `unknown command: You are the monitor…`."""
    h = tmux_harness
    path, env = _db_under(h, "semi;")
    result = h.cli("fleet", "create", "--name", "f", "--coding-agent", "codex", env=env)
    assert result.returncode == 0, (result.stdout, result.stderr)
    loop_pid = int(re.search(r"monitor loop: pid (\d+)", result.stdout).group(1))  # type: ignore[union-attr]
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        (pane,) = db.execute(
            "SELECT mux_pane_id FROM member_placements AS p JOIN members AS m USING (member_id) "
            "WHERE m.member_card_json LIKE '%monitor%'"
        ).fetchone()
        db.close()
        record = util.start_record(pane, timeout=20)
        assert record["argv"][6] == str(path.parent)
        assert record["argv"][7].startswith("You are the monitor of cafleet fleet ")
    finally:
        os.kill(loop_pid, signal.SIGTERM)
        util.retry_until(lambda: not util.pid_alive(loop_pid), timeout=20)


def test_member_prompt_types_semicolons_exactly(tmux_db: TmuxHarness) -> None:
    """`'run the tests; then commit;'` typed `run the tests; then commit`; `';'` submitted an
    empty line; `'git add -A \\;'` typed `git add -A ;`."""
    h = tmux_db
    w = build_world(h.db_path, harness=h, members=("typist",))
    member = w.members["typist"]
    pane = w.pane(member)
    texts = ["run the tests; then commit;", ";", "git add -A \\;", "#{pane_id} ##;"]
    for text in texts:
        result = h.cli("member", "prompt", str(member), text)
        assert result.returncode == 0, result.stderr
        assert result.stdout == f"Sent prompt to member typist ({member}, pane {pane}).\n"
    util.wait_records(pane, len(texts), timeout=20)
    assert util.line_bytes(pane) == [t.encode() for t in texts]


def _next_message_id(db_path: Path) -> int:
    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        row = db.execute("SELECT seq FROM sqlite_sequence WHERE name = 'messages'").fetchone()
    finally:
        db.close()
    return (row[0] if row else 0) + 1


def test_notification_whose_chunk_ends_in_semicolon(tmux_db: TmuxHarness) -> None:
    """A notification whose 1024-byte chunk ends in `;` lost it (the stored text was intact)."""
    h = tmux_db
    w = build_world(h.db_path, harness=h, members=("alice", "bob"))
    alice, bob = w.members["alice"], w.members["bob"]
    pane = w.pane(bob)
    message_id = _next_message_id(h.db_path)
    prefix = expected_line(message_id, "alice", alice, "").split("  ")[0] + " "
    body = "x" * (1023 - len(prefix.encode())) + "; then more;"
    line = expected_line(message_id, "alice", alice, body)
    assert chunk_utf8(line)[0].endswith(";")  # the case this test is about
    occupy_loop_slot(h, w)
    result = h.cli(
        "message", "send", "--from-member-id", str(alice), "--to-member-id", str(bob), body,
        "--json", env={"CAFLEET_MAX_TEXT_LEN": "5000"},
    )  # fmt: skip
    data = send_json(result)
    assert data["message"]["message_id"] == message_id
    assert data["notification_sent"] is True
    util.wait_records(pane, 1, timeout=20)
    assert util.line_bytes(pane) == [record_of(line)]
    assert h.sqlite("SELECT text FROM messages WHERE message_id = ?", message_id) == [(body,)]


def test_tab_in_a_notification_is_typed_as_a_space(tmux_db: TmuxHarness) -> None:
    h = tmux_db
    w = build_world(h.db_path, harness=h, members=("alice", "bob"))
    alice, bob = w.members["alice"], w.members["bob"]
    occupy_loop_slot(h, w)
    body = "col1\tcol2\t;"
    data = send_json(
        h.cli("message", "send", "--from-member-id", str(alice), "--to-member-id", str(bob),
              body, "--json")
    )  # fmt: skip
    message_id = data["message"]["message_id"]
    util.wait_records(w.pane(bob), 1, timeout=20)
    assert util.line_bytes(w.pane(bob)) == [
        record_of(expected_line(message_id, "alice", alice, "col1 col2 ;"))
    ]
    assert h.sqlite("SELECT text FROM messages WHERE message_id = ?", message_id) == [(body,)]


def _wake_names(prefix_len: int, director: str = "Director") -> list[str] | None:
    """Member names (the issue's 😀×75 + a×25, then one tuning name) whose wake line puts a `;`
    on the last byte of its first 1024-byte chunk; None when this roster size cannot."""
    from cafleet.monitor.wakeline import WakeEntry, build_wake_line

    big = "😀" * 75 + "a" * 25
    for emoji in range(0, 26):
        for ascii_len in range(0, 75):
            last = "😀" * emoji + "a" * ascii_len
            if not last:
                continue
            names = [big, big, last]
            entries = [
                WakeEntry(prefix_len + i, n, "claude", 0) for i, n in enumerate(names, start=1)
            ]
            line = build_wake_line(1, entries, WakeEntry(1, director, "claude", 0))
            if chunk_utf8(line)[0].endswith(";"):
                return names
    return None


def test_wake_line_with_a_semicolon_on_a_chunk_boundary(
    tmux_db: TmuxHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a member named 😀×75 + a×25, every wake typed `Director: 1 (Director;
    coding_agent=claude unacked=0)`: the `;` at the chunk's end was gone."""
    h = tmux_db
    w = build_world(h.db_path, harness=h, members=())
    last_id = max(w.director, w.monitor)
    names = _wake_names(last_id)
    assert names is not None
    from cafleet import broker
    from cafleet.monitor.state import LoopState
    from cafleet.monitor.tick import build_line, run_tick
    from cafleet.records import PlacementSpec

    with connect(h.db_path) as conn:
        for name in names:
            broker.register_member(
                conn, fleet_id=w.fleet_id, name=name, description="x", role="member",
                placement=PlacementSpec(w.session, h.window_id, "claude"), require_monitor=False,
            )  # fmt: skip
        line, _count = build_line(conn, w.fleet_id)
        assert chunk_utf8(line)[0].endswith(";")
        # The tick's wake resolves its backend from this process's environment.
        monkeypatch.setenv("TMUX", h.env["TMUX"])
        assert broker.claim_monitor(
            conn, fleet_id=w.fleet_id, pid=os.getpid(), tick_seconds=5, wake_interval_seconds=0
        )
        broker.request_monitor_wake(conn, fleet_id=w.fleet_id)
        logged: list[str] = []
        state = LoopState(
            conn=conn, fleet_id=w.fleet_id, pid=os.getpid(), tick_seconds=5,
            pane_lock_timeout=5, env_wake_interval=None, backend=h.backend(), log=logged.append,
            stop_requested=lambda: False,
        )  # fmt: skip
        run_tick(state)
        broker.clear_monitor(conn, fleet_id=w.fleet_id, pid=os.getpid())
    assert any(entry.startswith("tick -> forced wake monitor") for entry in logged), logged
    monitor_pane = w.monitor_pane
    assert monitor_pane is not None
    util.wait_records(monitor_pane, 1, timeout=20)
    # The typed line is the built one plus its own wake id (docs/runtime.md §5.7).
    [typed] = util.line_bytes(monitor_pane)
    assert re.fullmatch(re.escape(line) + r" \[wake [0-9a-z]{4}\]", typed.decode()), typed
    assert f"Director: {w.director} (Director; coding_agent=claude; unacked=0)." in line
