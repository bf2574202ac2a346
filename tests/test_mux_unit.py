"""Unit tests of TmuxBackend's argv, delays and error mapping (injected runner; docs/runtime.md §1)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cafleet import mux
from cafleet.mux import (
    MultiplexerError,
    MultiplexerUnavailable,
    MuxCommandFailed,
    MuxTimeout,
    PaneContext,
    PaneGone,
    PaneStatus,
)
from cafleet.mux.tmux import RunResult, TmuxBackend, chunk_utf8, parse_version, reset_version_cache

SOCK = "/tmp/cftx/tmux-0/sock"
BIN = "/usr/bin/tmux"
PREFIX = [BIN, "-u", "-S", SOCK]
ENV = {"TMUX": f"{SOCK},123,0", "TMUX_PANE": "%1", "PATH": "/usr/bin"}
SERVER = mux.ServerId(10, 100)  # the answering server in the canned outputs (pid 10)

Responder = Callable[[list[str]], RunResult]


class Recorder:
    """Records (kind, payload) events: ("run", argv, timeout) and ("sleep", seconds)."""

    def __init__(self, responder: Responder | None = None) -> None:
        self.events: list[tuple] = []
        self.responder = responder

    def runner(self, argv: list[str], timeout: float) -> RunResult:
        self.events.append(("run", argv[len(PREFIX) :], timeout))
        assert argv[: len(PREFIX)] == PREFIX
        if self.responder is not None:
            return self.responder(argv[len(PREFIX) :])
        return RunResult(0, "", "")

    def sleep(self, seconds: float) -> None:
        self.events.append(("sleep", seconds))

    @property
    def calls(self) -> list[list[str]]:
        return [e[1] for e in self.events if e[0] == "run"]


def make(
    responder: Responder | None = None, env: dict | None = None
) -> tuple[TmuxBackend, Recorder]:
    rec = Recorder(responder)
    backend = TmuxBackend(
        env=ENV if env is None else env, runner=rec.runner, sleep=rec.sleep, tmux_bin=BIN
    )
    return backend, rec


def fail(stderr: str, code: int = 1) -> Responder:
    return lambda args: RunResult(code, "", stderr)


@pytest.fixture(autouse=True)
def _fresh_version_cache() -> None:
    reset_version_cache()


# --------------------------------------------------------------------------- import budget


def test_importing_mux_does_not_import_libtmux_or_sqlalchemy() -> None:
    code = (
        "import sys, cafleet.mux, cafleet.mux.tmux, cafleet.mux.locks,"
        " cafleet.agents, cafleet.agents.prompt, cafleet.agents.claude,"
        " cafleet.agents.codex, cafleet.agents.opencode\n"
        "from cafleet.mux import get_backend\n"
        "get_backend('tmux', env={})\n"
        "bad = [m for m in ('libtmux', 'sqlalchemy', 'alembic', 'click') if m in sys.modules]\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


# --------------------------------------------------------------------------- addressing


LIST = ["list-panes", "-a", "-F", "#{pane_id}|#{pid}|#{start_time}|#{pane_pid}"]


def test_argv_prefix_uses_socket_before_first_comma() -> None:
    backend, rec = make(lambda a: RunResult(0, "%1|10|100|11\n%2|10|100|12\n", ""))
    live = backend.list_panes()
    assert live == frozenset({"%1", "%2"})
    assert (live.server, live.pids) == (mux.ServerId(10, 100), {"%1": 11, "%2": 12})
    assert rec.events == [("run", LIST, 5.0)]


def test_tmux_bin_resolved_from_path(tmp_path) -> None:
    fake = tmp_path / "tmux"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    backend = TmuxBackend(env={"TMUX": "/s,1,0", "PATH": str(tmp_path)})
    assert backend.tmux_bin == str(fake)
    assert TmuxBackend(env={"TMUX": "/s,1,0", "PATH": str(tmp_path / "none")}).tmux_bin is None


# --------------------------------------------------------------------------- ensure_available


def test_ensure_available_order_binary_first() -> None:
    backend = TmuxBackend(env={"PATH": "/nonexistent"}, runner=Recorder().runner)
    with pytest.raises(MultiplexerUnavailable) as exc:
        backend.ensure_available()
    assert str(exc.value) == "tmux binary not found on PATH"


@pytest.mark.parametrize("tmux_value", [None, ""])
def test_ensure_available_requires_tmux(tmux_value: str | None) -> None:
    env = {"PATH": "/usr/bin"}
    if tmux_value is not None:
        env["TMUX"] = tmux_value
    backend, rec = make(env=env)
    with pytest.raises(MultiplexerUnavailable) as exc:
        backend.ensure_available()
    assert str(exc.value) == "not inside a tmux session (TMUX is not set)"
    assert rec.calls == []


@pytest.mark.parametrize(
    ("output", "ok"),
    [
        ("tmux 3.3a", True),
        ("tmux 3.0", True),
        ("tmux 10.1", True),
        ("tmux next-3.4", True),
        ("tmux master", True),
        ("tmux 2.9a", False),
        ("tmux 1.8", False),
    ],
)
def test_version_check(output: str, ok: bool) -> None:
    backend, rec = make(lambda a: RunResult(0, output + "\n", ""))
    if ok:
        backend.ensure_available()
    else:
        with pytest.raises(MultiplexerUnavailable) as exc:
            backend.ensure_available()
        assert str(exc.value) == f"tmux 3.0 or newer is required (found '{output}')"
    assert rec.calls == [["-V"]]


def test_version_read_once_per_process() -> None:
    backend, rec = make(lambda a: RunResult(0, "tmux 3.3a\n", ""))
    backend.ensure_available()
    backend.ensure_available()
    other, rec2 = make(lambda a: RunResult(0, "tmux 3.3a\n", ""))
    other.ensure_available()
    assert rec.calls == [["-V"]]
    assert rec2.calls == []


def test_parse_version() -> None:
    assert parse_version("tmux 3.3a") == (3, 3)
    assert parse_version("tmux master") is None


# --------------------------------------------------------------------------- error mapping


@pytest.mark.parametrize(
    ("stderr", "code", "cls", "message"),
    [
        ("can't find pane: %9\n", 1, PaneGone, "pane not found"),
        ("No Such Pane\n", 1, PaneGone, "pane not found"),
        (
            "no server running on /tmp/x\n",
            1,
            MultiplexerUnavailable,
            "cannot reach tmux: no server running on /tmp/x",
        ),
        (
            "\n  error connecting to /tmp/x (No such file or directory)\n",
            1,
            MultiplexerUnavailable,
            "cannot reach tmux: error connecting to /tmp/x (No such file or directory)",
        ),
        (
            "server exited unexpectedly\n",
            1,
            MultiplexerUnavailable,
            "cannot reach tmux: server exited unexpectedly",
        ),
        ("can't find window: @9\nsecond\n", 1, MuxCommandFailed, None),
        ("", 3, MuxCommandFailed, "tmux kill-pane failed: exit status 3"),
    ],
)
def test_error_mapping(stderr: str, code: int, cls: type, message: str | None) -> None:
    backend, _ = make(fail(stderr, code))
    with pytest.raises(cls) as exc:
        backend.kill_pane("%9", ignore_missing=False)
    expected = message or "tmux kill-pane failed: can't find window: @9"
    assert str(exc.value) == expected
    assert isinstance(exc.value, MultiplexerError)
    if cls is PaneGone:
        assert exc.value.pane_id == "%9"


def test_timeout_maps_to_mux_timeout() -> None:
    def responder(args: list[str]) -> RunResult:
        raise subprocess.TimeoutExpired(args, 5)

    backend, _ = make(responder)
    with pytest.raises(MuxTimeout) as exc:
        backend.list_panes()
    assert str(exc.value) == "tmux list-panes failed: timed out after 5 s"

    with pytest.raises(MuxTimeout) as exc:
        backend.split_window(window_id="@1", argv=["x"], cwd="/", env={})
    assert str(exc.value) == "tmux split-window failed: timed out after 10 s"


def test_missing_binary_at_run_time() -> None:
    def responder(args: list[str]) -> RunResult:
        raise FileNotFoundError("tmux")

    backend, _ = make(responder)
    with pytest.raises(MultiplexerUnavailable, match="^tmux binary not found on PATH$"):
        backend.list_panes()


def test_operations_without_tmux_env_raise_unavailable() -> None:
    backend, rec = make(env={"PATH": "/usr/bin"})
    with pytest.raises(
        MultiplexerUnavailable, match=r"^not inside a tmux session \(TMUX is not set\)$"
    ):
        backend.list_panes()
    assert rec.calls == []


# --------------------------------------------------------------------------- discover_context


def test_discover_context() -> None:
    backend, rec = make(lambda a: RunResult(0, "10|100|11|fleet test|@3|%1\n", ""))
    assert backend.discover_context() == PaneContext(
        "fleet test", "@3", "%1", mux.ServerId(10, 100), 11
    )
    assert rec.calls == [
        [
            "display-message",
            "-p",
            "-t",
            "%1",
            "#{pid}|#{start_time}|#{pane_pid}|#{session_name}|#{window_id}|#{pane_id}",
        ]
    ]


def test_discover_context_session_with_pipes() -> None:
    backend, _ = make(lambda a: RunResult(0, "10|100|11|a|b|c|@3|%1\n", ""))
    assert backend.discover_context() == PaneContext("a|b|c", "@3", "%1", mux.ServerId(10, 100), 11)


def test_discover_context_requires_tmux_pane() -> None:
    backend, rec = make(env={"TMUX": "/s,1,0", "PATH": "/usr/bin"})
    with pytest.raises(MultiplexerUnavailable) as exc:
        backend.discover_context()
    assert str(exc.value) == "not inside a tmux pane (TMUX_PANE is not set)"
    assert rec.calls == []


@pytest.mark.parametrize("line", ["garbage", "s|@3|%2", "@3|%1x"])
def test_discover_context_unexpected_output(line: str) -> None:
    backend, _ = make(lambda a: RunResult(0, line + "\n", ""))
    with pytest.raises(MuxCommandFailed) as exc:
        backend.discover_context()
    assert str(exc.value) == f"tmux display-message failed: unexpected output '{line}'"


# --------------------------------------------------------------------------- split_window


def split_responder(pane: str = "%5\n", layout_fails: bool = False) -> Responder:
    def responder(args: list[str]) -> RunResult:
        if args[0] == "split-window":
            return RunResult(0, pane, "")
        if args[0] == "select-layout" and layout_fails:
            return RunResult(1, "", "boom")
        return RunResult(0, "", "")

    return responder


def test_split_window_argv_and_layout() -> None:
    backend, rec = make(split_responder())
    pane = backend.split_window(
        window_id="@2",
        argv=["/bin/claude", "--name", "a b", "-x"],
        cwd="/work dir",
        env={"CAFLEET_DATABASE_URL": "sqlite:////x/y.db"},
    )
    assert pane == "%5"
    assert rec.events == [
        (
            "run",
            [
                "split-window", "-d", "-P", "-F", "#{pane_id}", "-t", "@2", "-c", "/work dir",
                "-e", "CAFLEET_DATABASE_URL=sqlite:////x/y.db",
                "--", "/bin/claude", "--name", "a b", "-x",
            ],
            10.0,
        ),
        ("run", ["select-layout", "-t", "@2", "main-vertical"], 5.0),
    ]  # fmt: skip


def test_split_window_without_env_has_no_e() -> None:
    backend, rec = make(split_responder())
    backend.split_window(window_id="@2", argv=["/bin/x"], cwd="/", env={})
    assert "-e" not in rec.calls[0]


def test_split_window_layout_failure_is_ignored() -> None:
    backend, _ = make(split_responder(layout_fails=True))
    assert backend.split_window(window_id="@2", argv=["/bin/x"], cwd="/", env={}) == "%5"


@pytest.mark.parametrize("output", ["", "\n", "pane\n", "%x\n", "@5\n", "5\n"])
def test_split_window_requires_pane_id(output: str) -> None:
    backend, rec = make(split_responder(output))
    with pytest.raises(MuxCommandFailed) as exc:
        backend.split_window(window_id="@2", argv=["/bin/x"], cwd="/", env={})
    assert str(exc.value) == "tmux split-window failed: printed no pane id"
    assert [c[0] for c in rec.calls] == ["split-window"]


def test_split_window_size_cap() -> None:
    backend, rec = make(split_responder())
    base = TmuxBackend.split_args(window_id="@2", argv=["/bin/x", ""], cwd="/", env={})
    base_size = TmuxBackend.command_size(base)
    assert base_size == sum(len(a.encode()) + 1 for a in base)
    # Exactly at the limit: allowed.
    prompt = "é" * ((16000 - base_size) // 2)
    prompt += "a" * (16000 - base_size - len(prompt.encode()))
    backend.split_window(window_id="@2", argv=["/bin/x", prompt], cwd="/", env={})
    assert rec.calls[0][-1] == prompt
    # One byte more: refused before any call.
    rec.events.clear()
    with pytest.raises(MultiplexerError) as exc:
        backend.split_window(window_id="@2", argv=["/bin/x", prompt + "a"], cwd="/", env={})
    assert type(exc.value) is MultiplexerError
    assert str(exc.value) == (
        "spawn command is too long for tmux (16001 bytes; limit 16000); shorten the spawn prompt"
    )
    assert rec.calls == []


# --------------------------------------------------------------------------- type_line


def test_type_line_sequence_and_delays() -> None:
    """No Escape before the line (docs/runtime.md §1.7): the literal text, the settle, Enter."""
    backend, rec = make()
    backend.type_line("%4", "[cafleet msg 1 from a (2)] hi")
    assert rec.events == [
        ("run", ["send-keys", "-t", "%4", "-l", "--", "[cafleet msg 1 from a (2)] hi"], 5.0),
        ("sleep", 1.0),
        ("run", ["send-keys", "-t", "%4", "Enter"], 5.0),
    ]


def test_type_text_send_key_and_screen() -> None:
    backend, rec = make(lambda a: RunResult(0, "a\nb\n\n", ""))
    backend.type_text("%4", "no enter")
    backend.send_key("%4", "C-u")
    assert backend.screen("%4") == "a\nb"
    assert rec.calls == [
        ["send-keys", "-t", "%4", "-l", "--", "no enter"],
        ["send-keys", "-t", "%4", "C-u"],
        ["capture-pane", "-p", "-t", "%4"],
    ]
    with pytest.raises(ValueError):
        backend.send_key("%4", "C-c")  # only Enter, Escape and C-u are ever pressed
    with pytest.raises(ValueError):
        backend.type_text("%4", "a\nb")


def test_type_line_chunks_at_codepoint_boundaries() -> None:
    backend, rec = make()
    line = "-" + "a" * 1022 + "€" + "😀" * 300 + "tail"
    backend.type_line("%4", line)
    chunks = [c[5] for c in rec.calls if "-l" in c]
    assert "".join(chunks) == line
    assert all(len(c.encode()) <= 1024 for c in chunks)
    assert len(chunks[0].encode()) == 1023  # the 3-byte euro sign did not fit
    assert all(c[:4] == ["send-keys", "-t", "%4", "-l"] and c[4] == "--" for c in rec.calls[:-1])
    kinds = [e[0] for e in rec.events]
    assert kinds[-2:] == ["sleep", "run"]
    assert kinds[:-2] == ["run"] * len(chunks)


def test_chunk_utf8() -> None:
    assert chunk_utf8("") == []
    assert chunk_utf8("abc", 2) == ["ab", "c"]
    assert chunk_utf8("ééé", 4) == ["éé", "é"]
    assert chunk_utf8("😀😀", 5) == ["😀", "😀"]


@pytest.mark.parametrize("line", ["a\nb", "a\rb", "\n", "x\r\n"])
def test_type_line_rejects_newlines_before_any_call(line: str) -> None:
    backend, rec = make()
    with pytest.raises(ValueError):
        backend.type_line("%4", line)
    assert rec.events == []


def test_type_line_errors_propagate_without_cleanup() -> None:
    def responder(args: list[str]) -> RunResult:
        if args[-1] == "Enter":
            return RunResult(1, "", "can't find pane: %4")
        return RunResult(0, "", "")

    backend, rec = make(responder)
    with pytest.raises(PaneGone):
        backend.type_line("%4", "x")
    assert rec.calls[-1] == ["send-keys", "-t", "%4", "Enter"]
    assert len(rec.calls) == 2


# --------------------------------------------------------------------------- pane_status


@pytest.mark.parametrize(
    ("output", "status"),
    [
        (
            "%4|0||0|@2|10|100|11|fleet test\n",
            PaneStatus("%4", None, False, "fleet test", "@2", SERVER, 11),
        ),
        (
            "%4|1|copy-mode|0|@2|10|100|11|s\n",
            PaneStatus("%4", "copy-mode", False, "s", "@2", SERVER, 11),
        ),
        (
            "%4|1|view-mode|0|@2|10|100|11|s\n",
            PaneStatus("%4", "view-mode", False, "s", "@2", SERVER, 11),
        ),
        ("%4|0||1|@2|10|100|11|s\n", PaneStatus("%4", None, True, "s", "@2", SERVER, 11)),
        # The session name comes last: a `|` in it stays in it.
        (
            "%4|0||0|@9|10|100|11|a|b c|\n",
            PaneStatus("%4", None, False, "a|b c|", "@9", SERVER, 11),
        ),
    ],
)
def test_pane_status(output: str, status: PaneStatus) -> None:
    backend, rec = make(lambda a: RunResult(0, output, ""))
    assert backend.pane_status("%4") == status
    assert rec.calls == [
        [
            "display-message",
            "-p",
            "-t",
            "%4",
            "#{pane_id}|#{pane_in_mode}|#{pane_mode}|#{pane_dead}|#{window_id}"
            "|#{pid}|#{start_time}|#{pane_pid}|#{session_name}",
        ]
    ]


def test_pane_status_problem_texts() -> None:
    assert PaneStatus("%1", None, False).problem() is None
    assert PaneStatus("%1", "copy-mode", False).problem() == "pane is in copy-mode"
    assert PaneStatus("%1", None, True).problem() == "pane has exited"


def test_pane_status_other_pane_printed_is_gone() -> None:
    backend, _ = make(lambda a: RunResult(0, "%7|0||0|@1|s\n", ""))
    with pytest.raises(PaneGone) as exc:
        backend.pane_status("%4")
    assert exc.value.pane_id == "%4"


def test_probe_for_typing() -> None:
    backend, _ = make(lambda a: RunResult(0, "%4|1|copy-mode|0|@1|10|100|11|s\n", ""))
    assert mux.probe_for_typing(backend, "%4") == "pane is in copy-mode"
    backend, _ = make(fail("can't find pane: %4"))
    assert mux.probe_for_typing(backend, "%4") == "pane not found"
    backend, _ = make(fail("no server running on /x"))
    assert mux.probe_for_typing(backend, "%4") == "cannot reach tmux: no server running on /x"
    backend, _ = make(lambda a: RunResult(0, "%4|0||0|@1|10|100|11|s\n", ""))
    assert mux.probe_for_typing(backend, "%4") is None


def test_probe_and_owner_check_the_placements_server_session_and_window() -> None:
    """docs/runtime.md §1.8: a pane id of another server, or one reused elsewhere, is not ours."""
    not_ours = "pane %4 belongs to another tmux server or was reused"
    backend, rec = make(lambda a: RunResult(0, "%4|1|copy-mode|0|@1|10|100|11|s\n", ""))
    socket = backend.socket_path
    assert socket is not None
    here = mux.PaneOwner(socket, "s", "@1")
    assert mux.probe_for_typing(backend, "%4", here) == "pane is in copy-mode"
    assert mux.probe_for_typing(backend, "%4", mux.PaneOwner(None, "s", "@1")) is not None
    assert mux.probe_for_typing(backend, "%4", mux.PaneOwner(socket, "s", "@2")) == not_ours
    assert mux.probe_for_typing(backend, "%4", mux.PaneOwner(socket, "t", "@1")) == not_ours
    assert mux.owner_problem(backend, "%4", mux.PaneOwner(socket, "t", "@1")) == not_ours
    assert mux.owner_problem(backend, "%4", here) is None
    assert mux.owner_problem(backend, "%4", None) is None
    rec.events.clear()
    elsewhere = mux.PaneOwner("/tmp/another-server/default", "s", "@1")
    assert mux.probe_for_typing(backend, "%4", elsewhere) == not_ours
    assert mux.owner_problem(backend, "%4", elsewhere) == not_ours
    assert rec.calls == []  # decided from the socket path alone: nothing asked of any server
    gone, _ = make(fail("can't find pane: %4"))
    assert mux.owner_problem(gone, "%4", mux.PaneOwner(None, "s", "@1")) is None


def test_a_pane_of_a_later_server_or_another_process_is_not_ours() -> None:
    """docs/runtime.md §1.8: the answering server (pid, start time) and the pane's process must
    be the ones the placement records; a placement that records no server must not be older
    than the server. What was not recorded is not compared."""
    not_ours = "pane %4 belongs to another tmux server or was reused"
    backend, _ = make(lambda a: RunResult(0, "%4|0||0|@1|10|100|11|s\n", ""))
    socket = backend.socket_path

    def owner(**kw: Any) -> mux.PaneOwner:
        return mux.PaneOwner(socket, "s", "@1", **kw)

    for ours in (owner(), owner(server=SERVER), owner(server=SERVER, pane_pid=11),
                 owner(made_at=100.0), owner(made_at=250.5)):  # fmt: skip
        assert mux.probe_for_typing(backend, "%4", ours) is None, ours
        assert mux.owner_problem(backend, "%4", ours) is None, ours
        assert not mux.pane_replaced(backend, "%4", ours)
    for other in (owner(server=mux.ServerId(10, 99)), owner(server=mux.ServerId(9, 100)),
                  owner(server=SERVER, pane_pid=12), owner(made_at=99.9),
                  owner(server=mux.ServerId(9, 100), made_at=500.0)):  # fmt: skip
        assert mux.probe_for_typing(backend, "%4", other) == not_ours, other
        assert mux.owner_problem(backend, "%4", other) == not_ours, other
        assert mux.pane_replaced(backend, "%4", other)


def test_a_listing_holds_only_the_placements_own_pane() -> None:
    from cafleet.records import Placement

    live = mux.Listing({"%4"}, SERVER, {"%4": 11})

    def placed(**kw: Any) -> Placement:
        base: dict[str, Any] = {
            "member_id": 3,
            "backend": "tmux",
            "mux_session": "s",
            "mux_window_id": "@1",
            "mux_pane_id": "%4",
            "coding_agent": "claude",
            "created_at": "2026-01-01T00:00:00+00:00",
        }
        base.update(kw)
        return Placement(**base)

    assert mux.holds(live, placed()) and mux.pane_state(placed(), live) == "alive"
    assert mux.holds(live, placed(mux_server_pid=10, mux_server_start=100, mux_pane_pid=11))
    assert not mux.holds(live, placed(mux_server_pid=10, mux_server_start=99))
    assert not mux.holds(live, placed(mux_server_pid=10, mux_server_start=100, mux_pane_pid=7))
    assert mux.pane_state(placed(mux_pane_pid=7), live) == "gone"
    assert not mux.holds(live, placed(mux_pane_id="%5"))
    assert mux.holds(frozenset({"%4"}), placed(mux_pane_pid=7))  # plain ids: nothing to compare


# --------------------------------------------------------------------------- capture


def test_capture_argv_and_windowing() -> None:
    raw = "one\n\x1b[31mtwo\x1b[0m\nthree\n\n   \n\x1b[0m\n"
    backend, rec = make(lambda a: RunResult(0, raw, ""))
    assert backend.capture("%4", 2) == "two\nthree"
    assert rec.calls == [["capture-pane", "-p", "-t", "%4", "-S", "-1002"]]
    rec.events.clear()
    assert backend.capture("%4", 20, ansi=True) == "one\n\x1b[31mtwo\x1b[0m\nthree"
    assert rec.calls == [["capture-pane", "-p", "-t", "%4", "-S", "-1020", "-e"]]


@pytest.mark.parametrize("lines", [0, -1])
def test_capture_rejects_non_positive(lines: int) -> None:
    backend, rec = make()
    with pytest.raises(ValueError) as exc:
        backend.capture("%4", lines)
    assert str(exc.value) == f"capture: lines must be positive, got {lines}"
    assert rec.calls == []


# --------------------------------------------------------------------------- kill_pane


def test_kill_pane() -> None:
    backend, rec = make()
    assert backend.kill_pane("%4") is True
    assert rec.calls == [["kill-pane", "-t", "%4"]]
    backend, _ = make(fail("can't find pane: %4"))
    assert backend.kill_pane("%4") is False
    with pytest.raises(PaneGone):
        backend.kill_pane("%4", ignore_missing=False)


# --------------------------------------------------------------------------- registry


def test_registry() -> None:
    assert mux.backend_names() == ("tmux",)
    backend = mux.get_backend("tmux", env=ENV)
    assert isinstance(backend, TmuxBackend)
    assert isinstance(backend, mux.Multiplexer)
    assert backend.name == "tmux"
    assert isinstance(mux.tmux_backend(env=ENV), TmuxBackend)
    for name in ("herdr", "screen", ""):
        with pytest.raises(MultiplexerUnavailable) as exc:
            mux.get_backend(name)
        assert str(exc.value) == f"placement backend '{name}' is not supported by this cafleet"


def test_error_classes() -> None:
    for cls in (mux.MultiplexerUnavailable, mux.PaneGone, mux.MuxCommandFailed, mux.MuxTimeout):
        assert issubclass(cls, MultiplexerError)
    assert str(MuxCommandFailed("list-panes", "injected")) == "tmux list-panes failed: injected"
    assert str(MuxTimeout("send-keys", 5)) == "tmux send-keys failed: timed out after 5 s"
    gone = PaneGone("%3")
    assert str(gone) == "pane not found" and gone.pane_id == "%3"


def test_list_panes_of_a_server_being_killed_is_a_failure_not_an_empty_set() -> None:
    # tmux 3.3a, mid kill-server: exit 0, no panes, "no current target" on stderr.
    backend, _ = make(lambda a: RunResult(0, "", "no current target\n"))
    with pytest.raises(MuxCommandFailed) as info:
        backend.list_panes()
    assert str(info.value) == "tmux list-panes failed: no current target"
    # A quiet empty answer stays an empty live set.
    backend, _ = make(lambda a: RunResult(0, "", ""))
    assert backend.list_panes() == frozenset()
    # Panes with a stray warning are still panes.
    backend, _ = make(lambda a: RunResult(0, "%3\n", "warning\n"))
    assert backend.list_panes() == frozenset({"%3"})


def test_find_executable_agrees_with_shutil_which(tmp_path: Path) -> None:
    """The backend finds tmux without importing shutil (docs/performance.md): same answers."""
    import shutil

    from cafleet.mux.tmux import find_executable

    exe = tmp_path / "bin" / "tmux"
    exe.parent.mkdir()
    exe.write_text("#!/bin/sh\n", encoding="utf-8")
    exe.chmod(0o755)
    plain = tmp_path / "plain" / "tmux"  # not executable: skipped
    plain.parent.mkdir()
    plain.write_text("", encoding="utf-8")
    for path in (
        str(exe.parent),
        f"{plain.parent}:{exe.parent}",
        str(plain.parent),
        "",
        "/nonexistent",
        None,
    ):
        assert find_executable("tmux", path) == shutil.which("tmux", path=path), path
    assert find_executable("tmux", f"{plain.parent}:{exe.parent}") == str(exe)


def test_pane_places_reads_each_panes_session_and_window_in_one_call() -> None:
    # A session name may hold spaces and `|`; a pane is listed once per session its window is
    # in (%1's window is in main and in its group peer zz).
    out = "%1|@1|10|100|11|main\n%7|@3|10|100|17|fleet 2|odd\n%1|@1|10|100|11|zz\n\n"
    backend, rec = make(lambda a: RunResult(0, out, ""))
    places = backend.pane_places()
    assert places == {
        "%1": frozenset({("main", "@1"), ("zz", "@1")}),
        "%7": frozenset({("fleet 2|odd", "@3")}),
    }
    assert (places.server, places.pids) == (SERVER, {"%1": 11, "%7": 17})
    assert rec.events == [("run", PLACES, 5.0)]
    backend, _ = make(lambda a: RunResult(0, "", "no current target\n"))
    with pytest.raises(MuxCommandFailed) as info:
        backend.pane_places()
    assert str(info.value) == "tmux list-panes failed: no current target"


PLACES = [
    "list-panes",
    "-a",
    "-F",
    "#{pane_id}|#{window_id}|#{pid}|#{start_time}|#{pane_pid}|#{session_name}",
]
AVAILABLE = [
    "list-panes",
    "-a",
    "-F",
    "#{version}|#{pane_id}|#{window_id}|#{pid}|#{start_time}|#{pane_pid}|#{session_name}",
]


def test_available_places_checks_the_version_from_the_listing_in_one_call() -> None:
    """`tmux -V` is not run: the listing prints the server's version (docs/runtime.md §1.4)."""
    out = "3.3a|%1|@1|10|100|11|main\n3.3a|%7|@3|10|100|17|fleet 2|odd\n3.3a|%1|@1|10|100|11|zz\n"
    backend, rec = make(lambda a: RunResult(0, out, ""))
    assert backend.available_places() == {
        "%1": frozenset({("main", "@1"), ("zz", "@1")}),
        "%7": frozenset({("fleet 2|odd", "@3")}),
    }
    assert rec.calls == [AVAILABLE]
    backend.ensure_available()  # the version is known now: no `-V`
    again, rec2 = make(lambda a: RunResult(0, "%1|@1|10|100|11|main\n", ""))
    assert again.available_places() == {"%1": frozenset({("main", "@1")})}
    assert rec.calls == [AVAILABLE] and rec2.calls == [PLACES]


def test_available_places_refuses_an_old_server_as_the_version_check_does() -> None:
    backend, rec = make(lambda a: RunResult(0, "2.9a|%1|@1|10|100|11|main\n", ""))
    with pytest.raises(MultiplexerUnavailable) as exc:
        backend.available_places()
    assert str(exc.value) == "tmux 3.0 or newer is required (found 'tmux 2.9a')"
    assert rec.calls == [AVAILABLE]


@pytest.mark.parametrize("version", ["", "master"])
def test_available_places_without_a_version_that_parses_runs_the_version_check(
    version: str,
) -> None:
    def answer(args: list[str]) -> RunResult:
        if args == ["-V"]:
            return RunResult(0, f"tmux {version or 'master'}\n", "")
        return RunResult(0, f"{version}|%1|@1|10|100|11|main\n", "")

    backend, rec = make(answer)
    assert backend.available_places() == {"%1": frozenset({("main", "@1")})}
    assert rec.calls == [AVAILABLE, ["-V"]]


def test_a_failing_available_places_reports_what_the_two_calls_would() -> None:
    """The `-V` check comes first, as with ensure_available: an old tmux is refused as such,
    a current one lets the listing's own failure through."""

    def old(args: list[str]) -> RunResult:
        if args == ["-V"]:
            return RunResult(0, "tmux 2.9a\n", "")
        return RunResult(1, "", "no server running on /tmp/x\n")

    backend, rec = make(old)
    with pytest.raises(MultiplexerUnavailable) as exc:
        backend.available_places()
    assert str(exc.value) == "tmux 3.0 or newer is required (found 'tmux 2.9a')"
    assert rec.calls == [AVAILABLE, ["-V"]]
    reset_version_cache()
    backend, rec = make(lambda a: RunResult(0, "tmux 3.3a\n", "") if a == ["-V"] else old(a))
    with pytest.raises(MultiplexerUnavailable) as exc:
        backend.available_places()
    assert str(exc.value) == "cannot reach tmux: no server running on /tmp/x"
    backend, _ = make(env={"PATH": "/usr/bin"})
    with pytest.raises(MultiplexerUnavailable) as exc:
        backend.available_places()
    assert str(exc.value) == "not inside a tmux session (TMUX is not set)"
