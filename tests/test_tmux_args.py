"""The one argument rule (cafleet/mux/tmux_args.py, docs/tmux-arguments.md), first as pure
functions, then against the real tmux parser and the fake agent on one private server."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cafleet.mux.tmux_args import (
    CHUNK_BYTES,
    command_arg,
    command_argv,
    format_literal,
    spawn_command,
    typed_keys,
    typed_text,
)
from tests.harness import util
from tests.harness.fixtures import TmuxHarness
from tests.hostile import at_chunk_boundary, hostile_text, no_pwned, server_state, shared_server

# --------------------------------------------------------------------------- pure rules


@pytest.mark.parametrize(
    ("arg", "sent"),
    [
        ("a;", "a\\;"),
        (";", "\\;"),
        ("a\\;", "a\\\\;"),
        ("a;;", "a;\\;"),
        ("a;b", "a;b"),
        ("\\", "\\"),
        ("-x", "-x"),
        ("", ""),
        ("#{pane_id}", "#{pane_id}"),
    ],
)
def test_command_arg_escapes_only_a_final_semicolon(arg: str, sent: str) -> None:
    assert command_arg(arg) == sent
    assert command_argv(["x", arg]) == ["x", sent]


def test_format_literal_doubles_every_hash() -> None:
    assert format_literal("/w/#{pane_id}/#(id)/a##b/#S") == "/w/##{pane_id}/##(id)/a####b/##S"
    assert format_literal("/plain/dir") == "/plain/dir"


def test_spawn_command_refuses_what_a_shell_would_read() -> None:
    assert spawn_command(["/bin/x", "a b;"]) == ["/bin/x", "a b;"]
    assert spawn_command(["/usr/bin/sleep"]) == ["/usr/bin/sleep"]
    for bad in (["sleep 5"], ["a;b"], ["-x"], ["A=1"], ["$(id)"], ["#x"]):
        with pytest.raises(ValueError):
            spawn_command(bad)
    with pytest.raises(ValueError):
        spawn_command([])


@pytest.mark.parametrize(
    ("line", "calls"),
    [
        (
            "run the tests; then commit;",
            [["-l", "--", "run the tests; then commit"], ["-H", "3b"]],
        ),
        (";", [["-H", "3b"]]),
        (";;;", [["-H", "3b", "3b", "3b"]]),
        ("git add -A \\;", [["-l", "--", "git add -A \\"], ["-H", "3b"]]),
        ("a\tb", [["-l", "--", "a b"]]),
        ("-x", [["-l", "--", "-x"]]),
        ("", []),
    ],
)
def test_typed_keys_never_end_a_literal_on_a_semicolon(line: str, calls: list[list[str]]) -> None:
    assert list(typed_keys(line)) == calls


def test_typed_keys_at_a_chunk_boundary() -> None:
    line = "a" * (CHUNK_BYTES - 1) + ";" + "b;"
    assert list(typed_keys(line)) == [
        ["-l", "--", "a" * (CHUNK_BYTES - 1)],
        ["-H", "3b"],
        ["-l", "--", "b"],
        ["-H", "3b"],
    ]


def _decode(calls: list[list[str]]) -> str:
    out: list[str] = []
    for call in calls:
        if call[0] == "-l":
            assert call[1] == "--" and len(call) == 3
            out.append(call[2])
        else:
            assert call[0] == "-H"
            out.append(bytes(int(h, 16) for h in call[1:]).decode("utf-8"))
    return "".join(out)


@settings(max_examples=300)
@given(hostile_text(max_pieces=30) | at_chunk_boundary())
def test_typed_keys_type_exactly_the_text(line: str) -> None:
    calls = list(typed_keys(line))
    assert _decode(calls) == typed_text(line) == line.replace("\t", " ")
    for call in calls:
        if call[0] == "-l":
            assert not call[2].endswith(";")
            assert len(call[2].encode("utf-8")) <= CHUNK_BYTES
        assert command_argv(call) == call  # the argument rule has nothing left to do


# --------------------------------------------------------------------------- the real tmux


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TmuxHarness]:
    with shared_server(tmp_path_factory.mktemp("tmux-args")) as harness:
        yield harness


@pytest.fixture(scope="module")
def typist(server: TmuxHarness) -> str:
    """A fake agent pane for the typing examples."""
    return server.spawn_fake()


def _no_sleep(_seconds: float) -> None:
    return None


def _strftime_literal(text: str) -> str:
    """display-message, the read-back here, also runs its message through strftime (`%H` prints
    the hour, ` %3` came back as `  %3`); no argument cafleet passes is (`-c`, `-n` get formats
    only), so the test undoes that step alone."""
    return text.replace("%", "%%")


@pytest.mark.tmux
@settings(max_examples=60)
@given(st.lists(hostile_text(), min_size=1, max_size=4))
@example([" %3", "%H #{pane_id} %%"])
def test_tmux_reads_every_argument_back_exactly(server: TmuxHarness, texts: list[str]) -> None:
    """One client argv holding several commands joined by real separators: each argument,
    passed through both rules, prints back as itself, and the separators still separate."""
    argv = [server.real_tmux, "-S", server.socket_path]
    for i, text in enumerate(texts):
        if i:
            argv.append(";")
        message = _strftime_literal(format_literal(text))
        argv += command_argv(["display-message", "-p", "--", message])
    before = server_state(server)
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n") == [*texts, ""]
    assert server_state(server) == before
    assert no_pwned(server)


@pytest.mark.tmux
@settings(max_examples=40)
@given(hostile_text(max_pieces=12) | at_chunk_boundary())
def test_typed_line_reaches_the_agent_byte_exact(
    server: TmuxHarness, typist: str, line: str
) -> None:
    backend = server.backend(sleep=_no_sleep)
    seen = len(util.line_records(typist))
    before = server_state(server)
    backend.type_line(typist, line)
    records = util.wait_records(typist, seen + 1, timeout=20)
    assert len(records) == seen + 1
    assert util.record_bytes(records[-1]) == line.replace("\t", " ").encode("utf-8")
    assert server_state(server) == before
    assert no_pwned(server)


def _component(text: str) -> str:
    """A usable directory name from hostile text (no `/`, not `.` or `..`, at most 200 bytes)."""
    name = text.replace("/", "\u2215")
    while len(name.encode("utf-8")) > 200:
        name = name[:-1]
    return "d" + name if name in ("", ".", "..") else name


@pytest.mark.tmux
@settings(max_examples=12)
@given(
    args=st.lists(hostile_text(), min_size=1, max_size=5),
    cwd_name=hostile_text(slash=False),
    db_name=hostile_text(slash=False),
)
def test_spawned_agent_gets_exact_argv_directory_and_environment(
    server: TmuxHarness, tmp_path_factory: pytest.TempPathFactory, args: list[str],
    cwd_name: str, db_name: str,
) -> None:  # fmt: skip
    base = tmp_path_factory.mktemp("spawn")
    cwd = base / _component(cwd_name)
    cwd.mkdir()
    url = f"sqlite:///{base / _component(db_name) / 'cafleet.db'}"
    agent = str(server.bin_dir / "claude")
    before = server_state(server)
    pane = server.backend().split_window(
        window_id=server.window_id,
        argv=[agent, *args],
        cwd=str(cwd),
        env={"CAFLEET_DATABASE_URL": url},
    )
    try:
        record = util.start_record(pane, timeout=20)
        assert record["argv"] == [agent, *args]
        assert record["cwd"] == str(cwd)
        assert record["db_url"] == url
    finally:
        server.tmux("kill-pane", "-t", pane)
    assert server_state(server) == before
    assert no_pwned(server)
