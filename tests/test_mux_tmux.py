"""TmuxBackend against a real private tmux server with fake agents (docs/runtime.md §1, §8)."""

from __future__ import annotations

import os
import shlex
import threading

import pytest

from cafleet.mux import (
    MultiplexerError,
    MultiplexerUnavailable,
    MuxCommandFailed,
    MuxTimeout,
    PaneContext,
    PaneGone,
    PaneStatus,
    probe_for_typing,
)
from cafleet.mux.tmux import TmuxBackend, subprocess_runner
from tests.harness.fixtures import TmuxHarness
from tests.harness.util import (
    fake_print,
    fake_run,
    line_bytes,
    retry_until,
    start_record,
    wait_records,
)

pytestmark = pytest.mark.tmux


def calls_of(h: TmuxHarness, command: str) -> list[dict]:
    return [c for c in h.shim_calls() if c["command"] == command]


# --------------------------------------------------------------------------- availability, context


def test_ensure_available_and_discover_context(tmux_harness: TmuxHarness) -> None:
    h = tmux_harness
    backend = h.backend()
    backend.ensure_available()
    ctx = backend.discover_context()
    assert (
        ctx[:3]
        == PaneContext(session="fleet test", window_id=h.window_id, pane_id=h.director_pane)[:3]
    )
    # The server that answered and the pane's own process (docs/runtime.md §1.8).
    assert ctx.server == (h.server_pid, int(h.pane_format(h.director_pane, "#{start_time}")))
    assert ctx.pane_pid == int(h.pane_format(h.director_pane, "#{pane_pid}"))
    window = h.session.active_window
    assert ctx.window_id == window.window_id
    assert ctx.pane_id == window.active_pane.pane_id
    # Every call went through the shim, against this test's socket.
    assert h.shim_calls()
    assert all(c["guard"] == "ok" for c in h.shim_calls())
    assert "TMUX" not in os.environ and "TMUX_PANE" not in os.environ


def test_discover_context_is_the_callers_pane_not_the_focused_one(
    tmux_harness: TmuxHarness,
) -> None:
    h = tmux_harness
    other = h.spawn_fake()
    h.tmux("select-pane", "-t", other)
    ctx = h.backend().discover_context()
    assert ctx.pane_id == h.director_pane
    ctx_other = h.backend(env={"TMUX_PANE": other}).discover_context()
    assert ctx_other.pane_id == other


def test_discover_context_session_name_with_pipe(tmux_harness: TmuxHarness) -> None:
    h = tmux_harness
    out = h.tmux(
        "new-session", "-d", "-s", "a|b c|", "-x", "120", "-y", "40",
        "-P", "-F", "#{window_id} #{pane_id}", str(h.bin_dir / "claude"),
    )  # fmt: skip
    window_id, pane_id = out.split()
    ctx = h.backend(env={"TMUX_PANE": pane_id}).discover_context()
    assert ctx[:3] == PaneContext(session="a|b c|", window_id=window_id, pane_id=pane_id)[:3]
    assert ctx.server is not None and ctx.server.pid == h.server_pid


def test_discover_context_without_tmux_pane(tmux_harness: TmuxHarness) -> None:
    backend = TmuxBackend(env={k: v for k, v in tmux_harness.env.items() if k != "TMUX_PANE"})
    with pytest.raises(
        MultiplexerUnavailable, match=r"^not inside a tmux pane \(TMUX_PANE is not set\)$"
    ):
        backend.discover_context()


# --------------------------------------------------------------------------- type_line


LINE = (
    "[cafleet msg 7 from a`b$(c) (2)] -x Enter C-c %1 'q' \"dq\" \ttab é😀שלום "
    "— ack with: cafleet message ack 7"
)


def test_type_line_arrives_as_the_line_alone(tmux_harness: TmuxHarness) -> None:
    """No Escape before it (docs/runtime.md §1.7): the pane gets exactly the line, then Enter."""
    h = tmux_harness
    pane = h.spawn_fake()
    backend = h.backend()
    backend.type_line(pane, LINE)
    typed = LINE.replace("\t", " ")  # TAB is typed as a space (docs/tmux-arguments.md §4)
    records = wait_records(pane, 1)
    assert [r["text"] for r in records] == [typed]
    assert line_bytes(pane) == [typed.encode()]
    send_keys = [c["argv"][3:] for c in calls_of(h, "send-keys")]
    assert send_keys == [
        ["send-keys", "-t", pane, "-l", "--", typed],
        ["send-keys", "-t", pane, "Enter"],
    ]


LITERAL_BODIES = ["-starts with dash", "Enter", "C-c", "%1", "--", "-l"]


def test_type_line_literal_bodies(tmux_harness: TmuxHarness) -> None:
    """Each body arrives as one literal record (typed into separate panes concurrently)."""
    h = tmux_harness
    panes = [h.spawn_fake() for _ in LITERAL_BODIES]
    backend = h.backend()
    threads = [
        threading.Thread(target=backend.type_line, args=(pane, body))
        for pane, body in zip(panes, LITERAL_BODIES, strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for pane, body in zip(panes, LITERAL_BODIES, strict=True):
        wait_records(pane, 1)
        assert line_bytes(pane) == [body.encode()]


def test_type_line_long_line_is_chunked_and_arrives_whole(tmux_harness: TmuxHarness) -> None:
    h = tmux_harness
    pane = h.spawn_fake()
    line = "[" + "".join("aé😀ש-"[i % 5] for i in range(3000)) + "]"
    h.backend().type_line(pane, line)
    wait_records(pane, 1)
    assert line_bytes(pane) == [line.encode()]
    chunks = [c["argv"][-1] for c in calls_of(h, "send-keys") if "-l" in c["argv"]]
    assert len(chunks) > 1
    assert "".join(chunks) == line
    assert all(len(chunk.encode()) <= 1024 for chunk in chunks)


PASTED = [LINE, "-starts with dash", "ends with semicolons;;", "#{pane_id} #(echo x) %1"]


def test_pasted_lines_arrive_exactly_from_parallel_threads(tmux_harness: TmuxHarness) -> None:
    """`type_line(paste=True)`: one bracketed paste per line (a buffer per thread, deleted after
    the paste), tricky text read back exactly, no format or separator applied to it; pasted
    into separate panes at once, as a parallel drain does."""
    h = tmux_harness
    panes = [h.spawn_fake() for _ in PASTED]
    long_pane = h.spawn_fake()
    long_line = "[" + "".join("aé😀ש;"[i % 5] for i in range(3000)) + "]"
    backend = h.backend()
    threads = [
        threading.Thread(target=backend.type_line, args=(pane, body), kwargs={"paste": True})
        for pane, body in zip([*panes, long_pane], [*PASTED, long_line], strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for pane, body in zip([*panes, long_pane], [*PASTED, long_line], strict=True):
        wait_records(pane, 1)
        assert line_bytes(pane) == [body.replace("\t", " ").encode()]
    assert [c for c in calls_of(h, "send-keys") if "-l" in c["argv"]] == []
    assert len(calls_of(h, "paste-buffer")) == len(PASTED) + 1
    chunked = [c for c in calls_of(h, "set-buffer") if "-a" in c["argv"]]
    assert chunked  # the long line went in chunks of at most 1024 bytes
    assert h.tmux("list-buffers").strip() == ""  # every buffer was deleted by its paste


def test_screens_reads_several_panes_in_one_call(tmux_harness: TmuxHarness) -> None:
    """`screens`: every pane's `screen` in one tmux process; a pane that is gone, and every
    pane after it in the chain, is left out (the caller captures those alone)."""
    h = tmux_harness
    panes = [h.spawn_fake() for _ in range(3)]
    backend = h.backend()
    before = len(h.shim_calls())
    got = backend.screens(panes)
    assert len(h.shim_calls()) == before + 1
    assert got == {pane: backend.screen(pane) for pane in panes}
    assert all(f"({pane})" in got[pane] for pane in panes)  # `fake-claude ready (%N)`
    got = backend.screens([panes[0], "%999", panes[1]])
    assert got == {panes[0]: backend.screen(panes[0])}
    assert backend.screens([]) == {}


def test_consecutive_lines_stay_separate(tmux_harness: TmuxHarness) -> None:
    h = tmux_harness
    pane = h.spawn_fake()
    backend = h.backend()
    backend.type_line(pane, "[one]")
    backend.type_line(pane, "[two]")
    wait_records(pane, 2)
    assert line_bytes(pane) == [b"[one]", b"[two]"]


def test_type_line_into_missing_pane(tmux_harness: TmuxHarness) -> None:
    h = tmux_harness
    with pytest.raises(PaneGone) as exc:
        h.backend().type_line("%999", "[x]")
    assert str(exc.value) == "pane not found"
    assert exc.value.pane_id == "%999"
    assert [c["argv"][-1] for c in calls_of(h, "send-keys")] == ["[x]"]


# --------------------------------------------------------------------------- capture


def test_capture_windowing_and_ansi(tmux_harness: TmuxHarness) -> None:
    h = tmux_harness
    pane = h.spawn_fake()
    lines = [
        f"\x1b[31mline {i}\x1b[0m \x1b]8;;http://x/{i}\x07link{i}\x1b]8;;\x07" for i in range(1, 6)
    ]
    fake_print(pane, "\x1b[2J\x1b[H" + "\r\n".join(lines) + "\r\n")
    backend = h.backend()
    plain = [f"line {i} link{i}" for i in range(1, 6)]
    retry_until(lambda: backend.capture(pane, 3) == "\n".join(plain[-3:]))
    everything = backend.capture(pane, 20)
    assert everything.endswith("\n".join(plain))
    assert not everything.endswith("\n")
    assert "\x1b" not in everything
    coloured = backend.capture(pane, 5, ansi=True)
    assert coloured.count("\n") == 4
    assert "\x1b[31m" in coloured
    assert "line 5" in coloured


def test_capture_blank_pane(tmux_harness: TmuxHarness) -> None:
    h = tmux_harness
    pane = h.split(["sh", "-c", "printf '\\033[2J\\033[H'; exec sleep 600"])
    backend = h.backend()
    retry_until(lambda: backend.capture(pane, 10) == "")


def test_capture_of_missing_pane(tmux_harness: TmuxHarness) -> None:
    with pytest.raises(PaneGone):
        tmux_harness.backend().capture("%999", 5)


# --------------------------------------------------------------------------- pane status


def test_pane_status_copy_mode(tmux_harness: TmuxHarness) -> None:
    h = tmux_harness
    pane = h.spawn_fake()
    backend = h.backend()
    server = (h.server_pid, int(h.pane_format(pane, "#{start_time}")))
    where = (h.session_name, h.window_id, server, int(h.pane_format(pane, "#{pane_pid}")))
    assert backend.pane_status(pane) == PaneStatus(pane, None, False, *where)
    assert probe_for_typing(backend, pane) is None
    h.tmux("copy-mode", "-t", pane)
    assert backend.pane_status(pane) == PaneStatus(pane, "copy-mode", False, *where)
    assert probe_for_typing(backend, pane) == "pane is in copy-mode"
    h.tmux("send-keys", "-t", pane, "-X", "cancel")
    retry_until(lambda: backend.pane_status(pane).mode is None)


def test_pane_status_dead_pane(tmux_harness: TmuxHarness) -> None:
    h = tmux_harness
    # On until the pane has died: turned off earlier, a `true` that exits after the set-option
    # call (a loaded machine) takes its pane with it.
    h.tmux("set-option", "-g", "remain-on-exit", "on")
    pane = h.split(["true"])
    backend = h.backend()
    retry_until(lambda: backend.pane_status(pane).dead)
    assert probe_for_typing(backend, pane) == "pane has exited"
    h.tmux("set-option", "-g", "remain-on-exit", "off")


def test_pane_status_missing_pane(tmux_harness: TmuxHarness) -> None:
    backend = tmux_harness.backend()
    with pytest.raises(PaneGone) as exc:
        backend.pane_status("%999")
    assert exc.value.pane_id == "%999"
    assert probe_for_typing(backend, "%999") == "pane not found"


# --------------------------------------------------------------------------- list and kill


def test_list_and_kill_panes(tmux_harness: TmuxHarness) -> None:
    h = tmux_harness
    a = h.spawn_fake()
    b = h.spawn_fake("codex")
    backend = h.backend()
    assert backend.list_panes() == frozenset({h.director_pane, a, b})
    assert backend.kill_pane(a) is True
    assert backend.list_panes() == frozenset({h.director_pane, b})
    assert backend.kill_pane(a) is False
    with pytest.raises(PaneGone):
        backend.kill_pane(a, ignore_missing=False)


# --------------------------------------------------------------------------- split_window


def test_split_window_places_agent_in_directors_window(tmux_harness: TmuxHarness) -> None:
    h = tmux_harness
    workdir = h.project_dir / "sub dir"
    workdir.mkdir()
    backend = h.backend()
    argv = [str(h.bin_dir / "codex"), "--add-dir", "/x y", "prompt with 'quotes'\nand lines"]
    pane = backend.split_window(
        window_id=h.window_id, argv=argv, cwd=str(workdir), env={"CAFLEET_DATABASE_URL": h.db_url}
    )
    record = start_record(pane)
    assert record["argv"] == argv
    assert record["agent"] == "codex"
    assert record["pane"] == pane
    assert record["db_url"] == h.db_url
    assert os.path.realpath(record["cwd"]) == os.path.realpath(workdir)
    assert h.pane_format(pane, "#{window_id}") == h.window_id
    assert os.path.realpath(h.pane_format(pane, "#{pane_current_path}")) == os.path.realpath(
        workdir
    )
    # -d: the active pane did not change.
    assert h.pane_format(h.window_id, "#{pane_id}") == h.director_pane
    # The layout is main-vertical: applying it again changes nothing.
    layout = h.pane_format(h.window_id, "#{window_layout}")
    h.tmux("select-layout", "-t", h.window_id, "main-vertical")
    assert h.pane_format(h.window_id, "#{window_layout}") == layout
    split = calls_of(h, "split-window")
    assert len(split) == 1
    assert split[0]["argv"][:4] == ["-u", "-S", h.socket_path, "split-window"]


def test_split_window_forwards_only_what_it_is_given(tmux_harness: TmuxHarness) -> None:
    h = tmux_harness
    backend = h.backend()
    pane = backend.split_window(
        window_id=h.window_id, argv=[str(h.bin_dir / "claude")], cwd=str(h.project_dir), env={}
    )
    assert start_record(pane)["db_url"] is None
    result = fake_run(pane, ["sh", "-c", "env"])
    names = {line.split("=", 1)[0] for line in result["stdout"].splitlines() if "=" in line}
    assert {n for n in names if n.startswith("CAFLEET_")} <= {
        "CAFLEET_FAKE_DIR",
        "CAFLEET_REAL_TMUX",
    }
    assert "TMUX" in names and "TMUX_PANE" in names


def test_split_window_prompt_arrives_byte_exact(tmux_harness: TmuxHarness) -> None:
    h = tmux_harness
    unit = "a b  'single' \"double\" $(echo hi) `uname` \t tab\nnew line $HOME \\ ; | & é😀\n"
    prompt = (unit * (10_000 // len(unit.encode())))[:10_000]
    argv = [str(h.bin_dir / "claude"), "--name", "m", prompt]
    pane = h.backend().split_window(
        window_id=h.window_id, argv=argv, cwd=str(h.project_dir), env={}
    )
    assert start_record(pane)["argv"][-1] == prompt


def test_split_window_size_cap_makes_no_tmux_call(tmux_harness: TmuxHarness) -> None:
    h = tmux_harness
    backend = h.backend()
    argv = [str(h.bin_dir / "claude"), "x" * 16_000]
    size = TmuxBackend.command_size(
        TmuxBackend.split_args(window_id=h.window_id, argv=argv, cwd=str(h.project_dir), env={})
    )
    with pytest.raises(MultiplexerError) as exc:
        backend.split_window(window_id=h.window_id, argv=argv, cwd=str(h.project_dir), env={})
    assert str(exc.value) == (
        f"spawn command is too long for tmux ({size} bytes; limit 16000); shorten the spawn prompt"
    )
    assert calls_of(h, "split-window") == []
    assert backend.list_panes() == frozenset({h.director_pane})


def test_split_window_bad_window(tmux_harness: TmuxHarness) -> None:
    h = tmux_harness
    with pytest.raises(MuxCommandFailed) as exc:
        h.backend().split_window(window_id="@999", argv=["true"], cwd=str(h.project_dir), env={})
    assert str(exc.value).startswith("tmux split-window failed: can't find window")


# --------------------------------------------------------------------------- error mapping


def test_dead_server_is_unreachable(tmux_harness: TmuxHarness) -> None:
    h = tmux_harness
    backend = h.backend()
    h.tmux("kill-server")
    for call in (backend.list_panes, lambda: backend.pane_status(h.director_pane)):
        with pytest.raises(MultiplexerUnavailable) as exc:
            call()
        assert str(exc.value).startswith("cannot reach tmux: ")


def test_missing_socket_is_unreachable(tmux_harness: TmuxHarness) -> None:
    h = tmux_harness
    backend = h.backend(env={"TMUX": f"{h.dir}/no-such-socket,1,0"})
    with pytest.raises(MultiplexerUnavailable) as exc:
        backend.list_panes()
    assert str(exc.value).startswith(
        f"cannot reach tmux: error connecting to {h.dir}/no-such-socket"
    )


def test_injected_failure_and_timeout(tmux_harness: TmuxHarness) -> None:
    h = tmux_harness
    h.set_faults([{"command": "list-panes", "action": "fail", "stderr": "injected", "times": 1}])
    backend = h.backend()
    with pytest.raises(MuxCommandFailed) as exc:
        backend.list_panes()
    assert str(exc.value) == "tmux list-panes failed: injected"
    assert backend.list_panes() == frozenset({h.director_pane})

    h.set_faults([{"command": "list-panes", "action": "delay", "seconds": 3}])
    quick = h.backend(runner=lambda argv, timeout: subprocess_runner(argv, 0.3))
    with pytest.raises(MuxTimeout) as tex:
        quick.list_panes()
    assert str(tex.value) == "tmux list-panes failed: timed out after 5 s"


def test_shell_metacharacters_in_split_reach_argv(tmux_harness: TmuxHarness) -> None:
    """A multi-argument command is executed directly, never through a shell."""
    h = tmux_harness
    argv = [str(h.bin_dir / "opencode"), "--prompt", "$(touch pwned) ; rm -rf x"]
    pane = h.backend().split_window(
        window_id=h.window_id, argv=argv, cwd=str(h.project_dir), env={}
    )
    assert start_record(pane)["argv"] == argv
    assert not (h.project_dir / "pwned").exists()
    assert shlex.join(argv)  # sanity: the argv is printable
