"""`cafleet fleet create` against a private tmux server (docs/cli.md §2.3, §4 items 28–33;
docs/runtime.md §8 items 4, 19, 48, 65)."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from tests.cli_helpers import MEMBER_KEYS, PLACEMENT_KEYS, snapshot
from tests.fleet_helpers import (
    create_fleet,
    inproc,
    log_lines,
    log_path,
    pid_alive,
    popen_paused_at,
    runtime_row,
    sql_write,
)
from tests.harness.fixtures import TmuxHarness
from tests.harness.util import fake_run, retry_until, start_record

pytestmark = pytest.mark.tmux


def _rows(h: TmuxHarness) -> dict[str, int]:
    return {
        t: h.sqlite(f"SELECT COUNT(*) FROM {t}")[0][0]
        for t in ("fleets", "members", "member_placements", "monitor_runtime")
    }


def test_fleet_create_success(tmux_db: TmuxHarness) -> None:
    h = tmux_db
    panes_before = h.live_panes()
    ids = create_fleet(h)

    # The rows: back-reference, Director placement = the calling pane, monitor marker + pane.
    assert h.sqlite("SELECT name, director_member_id, deleted_at FROM fleets") == [
        ("demo", ids.director_id, None)
    ]
    members = h.sqlite(
        "SELECT member_id, name, description, status, member_card_json FROM members ORDER BY 1"
    )
    assert members[0][:4] == (ids.director_id, "Director", "Root Director for this fleet", "active")
    assert '"cafleet"' not in members[0][4]
    assert members[1][:4] == (ids.monitor_id, "monitor", "Monitor member for this fleet", "active")
    assert json.loads(members[1][4])["cafleet"] == {"kind": "monitor"}
    placements = h.sqlite(
        "SELECT member_id, mux_session, mux_window_id, mux_pane_id, backend, coding_agent "
        "FROM member_placements ORDER BY 1"
    )
    assert placements[0] == (
        ids.director_id,
        "fleet test",
        h.window_id,
        h.director_pane,
        "tmux",
        "claude",
    )
    assert placements[1][:3] == (ids.monitor_id, "fleet test", h.window_id)
    assert placements[1][3] == ids.monitor_pane
    assert h.live_panes() == panes_before | {ids.monitor_pane}

    # The printed pid is the live loop's; its log starts with the start line.
    row = runtime_row(h, ids.fleet_id)
    assert row is not None and row["pid"] == ids.loop_pid and pid_alive(ids.loop_pid)
    first = log_lines(log_path(h, ids.fleet_id))[0]
    assert first == (
        f"monitor loop started (fleet {ids.fleet_id}, tick 5s, wake interval 600s, "
        f"pid {ids.loop_pid})"
    )

    # The monitor got the bundled prompt, rendered, as its last argv element.
    start = start_record(ids.monitor_pane)
    from cafleet.agents.prompt import load_default_monitor_prompt, render_template

    expected = render_template(
        load_default_monitor_prompt(),
        fleet_id=ids.fleet_id,
        member_id=ids.monitor_id,
        director_member_id=ids.director_id,
        coding_agent="claude",
    )
    assert start["argv"][-1] == expected
    assert start["argv"][1:8] == [
        "--permission-mode",
        "dontAsk",
        "--allowedTools",
        "Bash(cafleet message *)",
        "Bash(cafleet monitor scan *)",
        "Bash(cafleet member ping *)",
        "--name",
    ]
    assert start["argv"][8] == "monitor"
    assert start["db_url"] == h.db_url
    assert h.pane_format(ids.monitor_pane, "#{pane_current_path}") == str(h.project_dir)


def test_fleet_create_json_from_inside_the_director_pane(tmux_db: TmuxHarness) -> None:
    """Run from the Director pane itself (its own TMUX/TMUX_PANE), after the pane's first fleet
    was deleted (one live fleet per Director pane)."""
    h = tmux_db
    first = create_fleet(h, name="first")
    assert h.cli("fleet", "delete", str(first.fleet_id)).returncode == 0
    rec = fake_run(
        h.director_pane,
        [
            "cafleet",
            "fleet",
            "create",
            "--name",
            "second",
            "--coding-agent",
            "codex",
            "--monitor-model",
            "gpt-x",
            "--monitor-effort",
            "high",
            "--json",
        ],
        env={"CAFLEET_DATABASE_URL": h.db_url},
        cwd=str(h.project_dir),
    )
    assert rec["rc"] == 0, rec
    data = json.loads(rec["stdout"])
    assert list(data) == ["fleet_id", "name", "created_at", "director", "monitor", "monitor_loop"]
    assert data["name"] == "second"
    assert list(data["director"]) == MEMBER_KEYS and list(data["monitor"]) == MEMBER_KEYS
    assert data["director"]["kind"] == "director" and data["monitor"]["kind"] == "monitor"
    assert list(data["director"]["placement"]) == PLACEMENT_KEYS
    assert data["director"]["placement"]["mux_pane_id"] == h.director_pane
    assert data["director"]["placement"]["coding_agent"] == "codex"
    assert list(data["monitor_loop"]) == ["pid"]
    row = runtime_row(h, data["fleet_id"])
    assert row is not None and row["pid"] == data["monitor_loop"]["pid"]
    # Only the live fleet's Director placement names the pane.
    assert h.sqlite(
        "SELECT member_id FROM member_placements WHERE mux_pane_id = ?", h.director_pane
    ) == [(data["director"]["member_id"],)]
    argv = start_record(data["monitor"]["placement"]["mux_pane_id"])["argv"]
    assert argv[1:6] == ["--ask-for-approval", "never", "--sandbox", "workspace-write", "--add-dir"]
    assert argv[6] == str(h.db_path.parent)
    assert argv[7:10] == ["--model", "gpt-x", "--config=model_reasoning_effort=high"]


def test_fleet_create_outside_tmux_writes_nothing(tmux_db: TmuxHarness) -> None:
    h = tmux_db
    before, panes = snapshot(h.db_path), h.live_panes()
    result = inproc("fleet", "create", "--name", "x", "--coding-agent", "claude")
    assert result.returncode == 1
    assert result.stderr == (
        "Error: cafleet fleet create must be run inside a tmux pane: "
        "not inside a tmux session (TMUX is not set)\n"
    )
    assert result.stdout == ""
    result = h.cli(
        "fleet", "create", "--name", "x", "--coding-agent", "claude", unset=["TMUX_PANE"]
    )
    assert result.returncode == 1
    assert result.stderr.rstrip("\n").endswith("not inside a tmux pane (TMUX_PANE is not set)")
    assert snapshot(h.db_path) == before and h.live_panes() == panes
    assert not any(c["command"] == "split-window" for c in h.shim_calls())


def test_fleet_create_bad_input(tmux_db: TmuxHarness, tmp_path: Path) -> None:
    h = tmux_db
    before, panes = snapshot(h.db_path), h.live_panes()
    base = ["fleet", "create"]

    def run(*args: str, **kw: object) -> tuple[int, str]:
        r = inproc(*base, *args, **kw)  # type: ignore[arg-type]
        assert r.stdout == ""
        return r.returncode, r.stderr

    usage = [
        ["--coding-agent", "claude"],
        ["--name", "x"],
        ["--name", "x", "--coding-agent", "vim"],
    ]
    for args in usage:
        code, err = run(*args)
        assert code == 2, (args, err)
    for name, message in [
        ("", "--name may not be empty"),
        ("   ", "--name may not be empty"),
        ("a\nb", "--name may not contain control characters"),
        ("x" * 101, "--name is too long (101 characters; the limit is 100)"),
    ]:
        code, err = run("--name", name, "--coding-agent", "claude")
        assert code == 2 and err.endswith(f"Error: {message}\n"), (name, err)

    files = {
        "missing": (tmp_path / "nope.md", None),
        "dir": (tmp_path, None),
        "latin1": (tmp_path / "l.md", b"caf\xe9 {fleet_id}"),
        "empty": (tmp_path / "e.md", b" \n\t"),
        "nul": (tmp_path / "n.md", b"a\x00b"),
        "unknown": (tmp_path / "u.md", b"hello {name}"),
        "dash": (tmp_path / "d.md", b"- list item {fleet_id}"),
    }
    for path, data in files.values():
        if data is not None:
            path.write_bytes(data)
    expected = {
        "missing": (
            1,
            f"Error: --monitor-file {files['missing'][0]}: file does not exist or is not a regular file\n",
        ),
        "dir": (
            1,
            f"Error: --monitor-file {tmp_path}: file does not exist or is not a regular file\n",
        ),
        "latin1": (1, f"Error: --monitor-file {files['latin1'][0]}: file is not valid UTF-8\n"),
        "empty": (1, f"Error: --monitor-file {files['empty'][0]}: file is empty\n"),
        "nul": (1, f"Error: --monitor-file {files['nul'][0]}: file contains NUL characters\n"),
        "unknown": (
            2,
            "Error: unknown placeholder 'name' in the spawn prompt; supported placeholders are {fleet_id}, {member_id}, {director_member_id}, {coding_agent}; write {{ and }} for literal braces\n",
        ),
        "dash": (
            2,
            "Error: spawn prompt may not start with '-' (the coding agent would read it as an option)\n",
        ),
    }
    for key, (path, _data) in files.items():
        code, err = run("--name", "x", "--coding-agent", "claude", "--monitor-file", str(path))
        want_code, want_err = expected[key]
        assert code == want_code, (key, err)
        if want_code == 1:
            assert err == want_err, key
        else:
            assert err.endswith(want_err), (key, err)

    code, err = run("--name", "x", "--coding-agent", "opencode", "--monitor-effort", "high")
    assert code == 2 and err.endswith(
        "Error: the opencode coding agent does not support --monitor-effort\n"
    )
    code, err = run("--name", "x", "--coding-agent", "opencode", "--monitor-model", "m")
    assert code == 2 and err.endswith(
        "Error: --monitor-model for the opencode coding agent must be "
        "'<provider-id>/<model-id>' (got 'm')\n"
    )
    code, err = run("--name", "x", "--coding-agent", "claude", "--monitor-effort", "huge")
    assert code == 2 and err.endswith(
        "Error: --monitor-effort for the claude coding agent must be one of low, medium, high, "
        "xhigh, max (got 'huge')\n"
    )
    no_fakes = os.pathsep.join(
        p for p in os.environ["PATH"].split(os.pathsep) if p != str(h.bin_dir)
    )
    code, err = run("--name", "x", "--coding-agent", "codex", env={"PATH": no_fakes})
    assert (code, err) == (1, "Error: binary codex not found on PATH\n")

    assert snapshot(h.db_path) == before and h.live_panes() == panes
    assert not any(c["command"] == "split-window" for c in h.shim_calls())


def test_failing_split_leaves_no_rows_and_no_pane(tmux_db: TmuxHarness) -> None:
    h = tmux_db
    panes = h.live_panes()
    h.set_faults([{"command": "split-window", "action": "fail", "stderr": "injected split"}])
    result = h.cli("fleet", "create", "--name", "x", "--coding-agent", "claude")
    assert result.returncode == 1
    assert result.stderr == "Error: tmux split-window failed: injected split\n"
    assert result.stdout == ""
    assert _rows(h) == {"fleets": 0, "members": 0, "member_placements": 0, "monitor_runtime": 0}
    assert h.live_panes() == panes
    assert not log_path(h, 1).exists()


def test_commit_failure_after_spawn_kills_the_pane(tmux_db: TmuxHarness) -> None:
    h = tmux_db
    panes = h.live_panes()
    # An unrelated trigger (the guard accepts it) fails the monitor placement insert.
    sql_write(
        h,
        "CREATE TRIGGER test_fail_monitor_placement BEFORE INSERT ON member_placements "
        "WHEN (SELECT json_extract(member_card_json, '$.cafleet.kind') FROM members "
        "WHERE member_id = NEW.member_id) = 'monitor' "
        "BEGIN SELECT RAISE(ABORT, 'injected placement failure'); END",
    )
    result = h.cli("fleet", "create", "--name", "x", "--coding-agent", "claude")
    assert result.returncode == 1, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("Error: fleet creation failed after spawning pane %")
    assert lines[0].endswith(": injected placement failure")
    spawned = lines[0].split("pane ", 1)[1].split(":", 1)[0]
    assert spawned not in panes
    retry_until(lambda: h.live_panes() == panes, timeout=5)
    assert _rows(h) == {"fleets": 0, "members": 0, "member_placements": 0, "monitor_runtime": 0}


def test_loop_that_does_not_start_soft_deletes_the_fleet(tmux_db: TmuxHarness) -> None:
    h = tmux_db
    panes = h.live_panes()
    h.set_faults([{"command": "list-panes", "arg": "-a", "action": "fail", "stderr": "injected"}])
    result = h.cli("fleet", "create", "--name", "x", "--coding-agent", "claude")
    log = log_path(h, 1)
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr == f"Error: monitor loop for fleet 1 did not start; see {log}\n"
    assert "Error: tmux list-panes failed: injected" in log_lines(log)
    assert h.sqlite("SELECT deleted_at IS NOT NULL FROM fleets") == [(1,)]
    assert h.sqlite("SELECT DISTINCT status FROM members") == [("deregistered",)]
    assert _rows(h)["member_placements"] == 0 and _rows(h)["monitor_runtime"] == 0
    # The monitor pane is gone; the Director pane is untouched.
    assert h.live_panes() == panes and h.director_pane in panes


def test_sigint_inside_the_bootstrap_transaction(tmux_db: TmuxHarness) -> None:
    h = tmux_db
    panes = h.live_panes()
    proc, release = popen_paused_at(
        h, "split-window", "fleet", "create", "--name", "x", "--coding-agent", "claude"
    )
    proc.send_signal(signal.SIGINT)
    time.sleep(0.3)  # the signal is recorded while the spawn is still paused
    release.touch()
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert out == ""
    assert "Traceback" not in err and "Aborted!" not in err
    # The transaction committed, then the command compensated.
    assert h.sqlite("SELECT deleted_at IS NOT NULL FROM fleets") == [(1,)]
    assert h.sqlite("SELECT DISTINCT status FROM members") == [("deregistered",)]
    assert _rows(h)["monitor_runtime"] == 0
    assert not log_path(h, 1).exists()  # no loop was started
    retry_until(lambda: h.live_panes() == panes, timeout=5)


def _blocked_reading_stdin(pid: int) -> bool:
    """The process sits in read(0, ...) (x86_64 syscall 0, aarch64 63)."""
    try:
        parts = Path(f"/proc/{pid}/syscall").read_text().split()
    except OSError:
        return False
    return len(parts) > 1 and parts[0] in ("0", "63") and parts[1] == "0x0"


def test_sigint_while_validating_writes_nothing(tmux_db: TmuxHarness) -> None:
    h = tmux_db
    before, panes = snapshot(h.db_path), h.live_panes()
    proc = h.popen_cli(
        "fleet",
        "create",
        "--name",
        "x",
        "--coding-agent",
        "claude",
        "--monitor-file",
        "-",
        stdin=__import__("subprocess").PIPE,
    )
    retry_until(lambda: _blocked_reading_stdin(proc.pid), timeout=15)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(input="prompt for {member_id}\n", timeout=30)
    assert proc.returncode == 130, err
    assert out == "" and "Traceback" not in err and "Aborted!" not in err
    assert snapshot(h.db_path) == before and h.live_panes() == panes
