"""The test harness itself: isolation, teardown, fake agents and the tmux shim (docs/runtime.md §6)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.harness.fixtures import TmuxHarness, private_tmux
from tests.harness.util import (
    command_records,
    fake_log,
    fake_run,
    fake_stall,
    line_bytes,
    line_records,
    pid_alive,
    retry_until,
    start_record,
    wait_records,
)

pytestmark = pytest.mark.tmux


def send(h: TmuxHarness, pane: str, text: str) -> None:
    """Type raw text plus CR into a pane (test-side, through the real tmux)."""
    h.tmux("send-keys", "-t", pane, "-l", "--", text)
    h.tmux("send-keys", "-t", pane, "Enter")


# --------------------------------------------------------------------------- isolation


def test_environment_isolation(tmux_harness: TmuxHarness) -> None:
    h = tmux_harness
    assert "TMUX" not in os.environ and "TMUX_PANE" not in os.environ
    assert h.dir is not None and h.dir.name.startswith("cft") and str(h.dir).startswith("/tmp/")
    assert os.environ["TMUX_TMPDIR"] == str(h.dir)
    path = os.environ["PATH"].split(os.pathsep)
    assert path[:2] == [str(h.bin_dir), os.path.dirname(sys.executable)]
    assert h.socket_path.startswith(str(h.dir) + "/")
    assert h.env["TMUX"] == f"{h.socket_path},{h.server_pid},0"
    assert h.env["TMUX_PANE"] == h.director_pane
    assert h.env["CAFLEET_DATABASE_URL"] == h.db_url == os.environ["CAFLEET_DATABASE_URL"]
    assert h.session_name == "fleet test"
    assert h.pane_format(h.director_pane, "#{window_width}x#{window_height}") == "400x200"
    director = start_record(h.director_pane)
    assert director["agent"] == "claude"
    assert director["db_url"] is None  # the server does not carry the CLI's database URL
    assert director["argv"] == [str(h.bin_dir / "claude")]


def test_fakes_are_generated_with_the_test_interpreter(tmux_harness: TmuxHarness) -> None:
    h = tmux_harness
    for name in ("claude", "codex", "opencode"):
        first = (h.bin_dir / name).read_text().split("\n", 1)[0]
        assert first == f"#!{sys.executable}"
        assert os.access(h.bin_dir / name, os.X_OK)
    python_shim = h.bin_dir / "tmux-py"  # beside the fast path; else the shim itself
    if not python_shim.exists():
        python_shim = h.bin_dir / "tmux"
    assert python_shim.read_text().startswith(f"#!{sys.executable} -IS\n")


def test_cafleet_on_pane_path_is_this_checkout(tmux_harness: TmuxHarness) -> None:
    h = tmux_harness
    result = fake_run(h.director_pane, ["cafleet", "--version"])
    assert result["rc"] == 0, result["stderr"]
    assert result["stdout"].startswith("cafleet ")
    cli = h.cli("--version")
    assert cli.returncode == 0 and cli.stdout == result["stdout"]


def test_teardown_stops_loops_kills_server_and_removes_dir(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with private_tmux(monkeypatch) as h:
        # A stand-in for a detached monitor loop: it carries the CLI environment.
        loop = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(600)"],
            env=h.env,
            start_new_session=True,
        )
        h.db_path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(h.db_path)
        conn.execute("CREATE TABLE monitor_runtime (fleet_id INTEGER PRIMARY KEY, pid INTEGER)")
        conn.execute("INSERT INTO monitor_runtime VALUES (1, ?), (2, NULL)", (loop.pid,))
        conn.commit()
        conn.close()
        assert h.monitor_pids() == [loop.pid]
        directory, socket_path, real = h.dir, h.socket_path, h.real_tmux
        pane_pid = start_record(h.director_pane)["pid"]
    assert loop.wait(timeout=10) == -signal.SIGTERM
    assert directory is not None and not directory.exists()
    probe = subprocess.run([real, "-S", socket_path, "has-session"], capture_output=True)
    assert probe.returncode != 0
    retry_until(lambda: not pid_alive(pane_pid), timeout=5)


def test_teardown_reports_guard_violations(monkeypatch: pytest.MonkeyPatch) -> None:
    with (
        pytest.raises(AssertionError, match="the tmux shim refused 1 call"),
        private_tmux(monkeypatch) as h,
    ):
        shim(h, "-S", "/tmp/not-this-test/sock", "list-sessions")
    assert h._dir is None  # torn down


def test_teardown_tolerates_missing_database(monkeypatch: pytest.MonkeyPatch) -> None:
    with private_tmux(monkeypatch) as h:
        assert not h.db_path.exists()
        assert h.monitor_pids() == []
        h.db_path.parent.mkdir(parents=True, exist_ok=True)
        sqlite3.connect(h.db_path).close()  # a database without the table
        assert h.monitor_pids() == []


# --------------------------------------------------------------------------- fake agent


def test_fake_records_lines_byte_exact(tmux_harness: TmuxHarness) -> None:
    h = tmux_harness
    pane = h.spawn_fake("opencode", ["--prompt", "hello"])
    record = start_record(pane)
    assert record["agent"] == "opencode"
    assert record["argv"] == [str(h.bin_dir / "opencode"), "--prompt", "hello"]
    assert record["pane"] == pane and record["pid"] > 0
    assert os.path.realpath(record["cwd"]) == os.path.realpath(h.project_dir)
    h.tmux("send-keys", "-t", pane, "-l", "--", "first\rsecond é")
    h.tmux("send-keys", "-t", pane, "Escape")
    h.tmux("send-keys", "-t", pane, "Enter")
    wait_records(pane, 2)
    assert line_bytes(pane) == [b"first", "second é\x1b".encode()]
    assert line_records(pane)[1]["text"] == "second é\x1b"
    retry_until(lambda: "got: second é^[" in h.tmux("capture-pane", "-p", "-t", pane))


def test_fake_directives(tmux_harness: TmuxHarness) -> None:
    h = tmux_harness
    prompt = (
        "You are member 12.\n"
        "#fake run sh -c 'echo pane=$TMUX_PANE member=12'\n"
        "#fake auto-ack\n"
        "#fake exit-on STOP NOW\n"
    )
    pane = h.spawn_fake("claude", ["--name", "m", prompt])
    run = retry_until(lambda: [r for r in command_records(pane) if r["source"] == "run"])
    assert run[0]["argv"] == ["sh", "-c", "echo pane=$TMUX_PANE member=12"]
    assert run[0]["rc"] == 0
    assert run[0]["stdout"] == f"pane={pane} member=12\n"
    send(h, pane, "\x1b[cafleet msg 41 from a (2)] hi — ack with: cafleet message ack 41")
    acks = retry_until(lambda: [r for r in command_records(pane) if r["source"] == "auto-ack"])
    assert acks[0]["argv"] == ["cafleet", "message", "ack", "41"]
    send(h, pane, "please STOP NOW")
    retry_until(lambda: pane not in h.live_panes())


def test_fake_stall_directive_and_control(tmux_harness: TmuxHarness) -> None:
    h = tmux_harness
    pane = h.spawn_fake("codex", ["#fake stall 1"])
    started = time.time()
    send(h, pane, "a")
    records = wait_records(pane, 1)
    assert records[0]["t"] - started >= 0.5
    fake_stall(pane, 1.0)
    stalled_at = time.time()
    send(h, pane, "b")
    send(h, pane, "c")
    records = wait_records(pane, 3)
    assert [r["text"] for r in records] == ["a", "b", "c"]
    assert records[1]["t"] - stalled_at >= 0.5


def test_fake_run_control_dir_env_and_unset(tmux_harness: TmuxHarness) -> None:
    h = tmux_harness
    pane = h.spawn_fake()
    result = fake_run(
        pane,
        ["sh", "-c", 'echo "$FOO|${TMUX:-unset}|$PWD"'],
        env={"FOO": "bar"},
        unset=["TMUX"],
        cwd="/",
    )
    assert result["rc"] == 0
    assert result["stdout"] == "bar|unset|/\n"
    missing = fake_run(pane, ["/no/such/binary"])
    assert missing["rc"] == 127
    assert not list((h.fake_dir / f"{pane.replace('%', 'p')}.cmd").glob("*.json"))


# --------------------------------------------------------------------------- tmux shim


def shim(h: TmuxHarness, *args: str, env: dict | None = None) -> subprocess.CompletedProcess[str]:
    merged = dict(h.env)
    merged.update(env or {})
    return subprocess.run(
        [str(h.bin_dir / "tmux"), *args], env=merged, capture_output=True, text=True, timeout=30
    )


def test_shim_forwards_and_logs(tmux_harness: TmuxHarness) -> None:
    h = tmux_harness
    result = shim(h, "-u", "-S", h.socket_path, "list-panes", "-a", "-F", "#{pane_id}")
    assert result.returncode == 0 and result.stdout.split() == [h.director_pane]
    (call,) = h.shim_calls()
    assert call["argv"] == ["-u", "-S", h.socket_path, "list-panes", "-a", "-F", "#{pane_id}"]
    assert call["command"] == "list-panes" and call["guard"] == "ok" and call["rule"] is None
    assert call["socket"] == h.socket_path and isinstance(call["t"], float)


def test_the_fast_path_logs_what_the_python_shim_logs(tmux_harness: TmuxHarness) -> None:
    """tests/harness/tmux_fast.c: the same line as tmux_shim.py for every call it handles, and
    the Python shim for the rest (here: non-ASCII text)."""
    h = tmux_harness
    if not (h.bin_dir / "tmux-py").exists():
        pytest.skip("no C compiler: the Python shim runs every call")
    calls = [  # (argv, handled by the fast path alone)
        (["-S", h.socket_path, "list-panes", "-a", "-F", "#{pane_id}"], True),
        (["-u", f"-S{h.socket_path}", "display-message", "-p", "-t", h.director_pane, 'a"q"\\b'], True),
        (["-S", h.socket_path, "set-buffer", "-b", "x", "tab\there\nnewline\x1b[0m"], True),
        (["-S", h.socket_path, "set-buffer", "-b", "y", "caf\u00e9 \u2603"], False),
        (["-V"], True),
    ]  # fmt: skip
    python_shim = h.bin_dir / "tmux-py"
    for args, fast_alone in calls:
        for program in ("tmux", "tmux-py"):
            # A call the fast path handles runs even when the Python shim cannot.
            python_shim.chmod(0 if program == "tmux" and fast_alone else 0o755)
            try:
                done = subprocess.run(
                    [str(h.bin_dir / program), *args], env=h.env, capture_output=True, timeout=30
                )
            finally:
                python_shim.chmod(0o755)
            assert done.returncode == 0, (args, done.stderr)
    logged = h.shim_calls()
    assert len(logged) == 2 * len(calls)
    volatile = ("t", "pid", "ppid")
    for fast, slow in zip(logged[::2], logged[1::2], strict=True):
        assert {k: v for k, v in fast.items() if k not in volatile} == {
            k: v for k, v in slow.items() if k not in volatile
        }
        assert isinstance(fast["t"], float)


def test_shim_guard_refuses_other_servers(tmux_harness: TmuxHarness, tmp_path: Path) -> None:
    h = tmux_harness
    h.allow_guard_violations = True
    outside = shim(h, "-S", str(tmp_path / "sock"), "list-sessions")
    assert outside.returncode == 97
    default = shim(h, "list-sessions", env={"TMUX": "", "TMUX_TMPDIR": str(tmp_path)})
    assert default.returncode == 97
    assert [c["guard"] for c in h.shim_calls()] == ["violation", "violation"]


def test_shim_fail_rules_with_target_and_times(tmux_harness: TmuxHarness) -> None:
    h = tmux_harness
    pane = h.spawn_fake()
    h.set_faults(
        [
            {"command": "send-keys", "target": pane, "last": "Enter", "action": "fail",
             "stderr": "boom", "times": 1},
        ]
    )  # fmt: skip
    base = ["-u", "-S", h.socket_path]
    assert shim(h, *base, "send-keys", "-t", pane, "-l", "--", "text").returncode == 0
    failed = shim(h, *base, "send-keys", "-t", pane, "Enter")
    assert failed.returncode == 1 and failed.stderr == "boom\n"
    assert shim(h, *base, "send-keys", "-t", pane, "Enter").returncode == 0
    wait_records(pane, 1)
    assert line_bytes(pane) == [b"text"]
    assert [c["action"] for c in h.shim_calls()] == [None, "fail", None]


def test_shim_fail_after_forwarding(tmux_harness: TmuxHarness) -> None:
    h = tmux_harness
    pane = h.spawn_fake()
    h.set_faults([{"command": "send-keys", "arg": "Enter", "action": "fail", "when": "after"}])
    base = ["-u", "-S", h.socket_path]
    shim(h, *base, "send-keys", "-t", pane, "-l", "--", "x")
    result = shim(h, *base, "send-keys", "-t", pane, "Enter")
    assert result.returncode == 1 and result.stderr.endswith("injected\n")
    wait_records(pane, 1)  # the Enter was delivered before the failure


def test_shim_delay_and_pause(tmux_harness: TmuxHarness) -> None:
    h = tmux_harness
    flag = h.dir / "release"  # type: ignore[operator]
    h.set_faults(
        [
            {"command": "list-panes", "action": "delay", "seconds": 0.5},
            {"command": "list-sessions", "action": "pause_until", "path": str(flag)},
        ]
    )
    base = ["-u", "-S", h.socket_path]
    start = time.monotonic()
    assert shim(h, *base, "list-panes").returncode == 0
    assert time.monotonic() - start >= 0.5
    paused = subprocess.Popen(
        [str(h.bin_dir / "tmux"), *base, "list-sessions"], env=h.env, stdout=subprocess.PIPE
    )
    h.track(paused)
    retry_until(lambda: any(c["command"] == "list-sessions" for c in h.shim_calls()))
    time.sleep(0.3)  # not an assertion wait: give a wrongly unpaused call time to finish
    assert paused.poll() is None
    flag.touch()
    assert paused.wait(timeout=10) == 0


def test_shim_kill_pane_before(tmux_harness: TmuxHarness) -> None:
    h = tmux_harness
    pane = h.spawn_fake()
    h.set_faults([{"command": "send-keys", "target": pane, "action": "kill_pane_before"}])
    result = shim(h, "-u", "-S", h.socket_path, "send-keys", "-t", pane, "Escape")
    assert result.returncode != 0 and "can't find pane" in result.stderr
    assert pane not in h.live_panes()


def test_shim_kill_caller_after(tmux_harness: TmuxHarness) -> None:
    h = tmux_harness
    pane = h.spawn_fake()
    h.set_faults([{"command": "send-keys", "last": "Enter", "action": "kill_caller_after"}])
    caller = (
        "import subprocess, sys\n"
        "tmux, sock, pane = sys.argv[1:4]\n"
        "subprocess.run([tmux, '-u', '-S', sock, 'send-keys', '-t', pane, '-l', '--', 'zz'])\n"
        "subprocess.run([tmux, '-u', '-S', sock, 'send-keys', '-t', pane, 'Enter'])\n"
        "print('survived', flush=True)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", caller, "tmux", h.socket_path, pane],
        env=h.env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == -signal.SIGKILL
    assert "survived" not in proc.stdout
    wait_records(pane, 1)
    assert line_bytes(pane) == [b"zz"]


def test_shim_faults_reach_cli_processes(tmux_harness: TmuxHarness) -> None:
    h = tmux_harness
    h.set_faults([{"command": "display-message", "action": "fail", "stderr": "injected"}])
    result = fake_run(
        h.director_pane,
        [
            sys.executable,
            "-c",
            "from cafleet.mux import tmux_backend; tmux_backend().discover_context()",
        ],
        env={"CAFLEET_TMUX_FAULTS": str(h.dir / "tmux-faults.json")},  # type: ignore[operator]
    )
    assert result["rc"] != 0
    assert "tmux display-message failed: injected" in result["stderr"]
    assert json.loads((h.dir / "tmux-faults.json").read_text())  # type: ignore[operator]
    assert [e for e in fake_log(h.director_pane) if e["kind"] == "start"]
