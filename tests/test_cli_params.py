"""Shared input rules of cafleet/cli/params.py (docs/cli.md §1.9) and stream encoding (§1.3)."""

from __future__ import annotations

import os
from pathlib import Path

import click
import pytest

from cafleet.cli import params
from tests.cli_helpers import run_cli
from tests.factories import Db


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "x" * (params.BODY_LIMIT + 1),
            f"text is too long (1048577 bytes; the limit is {params.BODY_LIMIT})",
        ),
        ("bad \udcff byte", "text is not valid UTF-8"),
        ("nul\x00", "text may not contain NUL characters"),
        ("", "text may not be empty"),
        ("   ", "text may not be empty"),
        ("\t\n", "text may not be empty"),
    ],
)
def test_inline_body_errors(text: str, message: str) -> None:
    with pytest.raises(ValueError) as info:
        params.check_inline_body(text)
    assert str(info.value) == message


def test_inline_body_accepts_exact_text() -> None:
    body = "\ufeffline\r\nwith \x1b control"
    assert params.check_inline_body(body) == body
    assert params.check_inline_body("é" * (params.BODY_LIMIT // 2)) == "é" * (
        params.BODY_LIMIT // 2
    )


def _read(path: str, flag: str = "--file") -> str:
    return params.read_body_file(path, flag)


def _error(path: str, flag: str = "--file") -> str:
    with pytest.raises(click.ClickException) as info:
        _read(path, flag)
    assert not isinstance(info.value, click.UsageError)  # exit 1
    return info.value.format_message()


def test_file_body_errors(tmp_path: Path) -> None:
    missing = tmp_path / "missing.txt"
    assert _error(str(missing)) == f"--file {missing}: file does not exist or is not a regular file"
    assert (
        _error(str(tmp_path)) == f"--file {tmp_path}: file does not exist or is not a regular file"
    )
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert _error(str(fifo)) == f"--file {fifo}: file does not exist or is not a regular file"
    assert _error("/dev/stdin") == "--file /dev/stdin: file does not exist or is not a regular file"
    cases = {
        b"": "file is empty",
        b" \n\t": "file is empty",
        b"\xff\xfe": "file is not valid UTF-8",
        b"a\x00b": "file contains NUL characters",
        b"x" * (params.BODY_LIMIT + 1): f"file is too long (more than {params.BODY_LIMIT} bytes)",
    }
    for i, (data, message) in enumerate(cases.items()):
        path = tmp_path / f"body{i}"
        path.write_bytes(data)
        assert _error(str(path)) == f"--file {path}: {message}"
    assert _error(str(missing), "--monitor-file").startswith(f"--monitor-file {missing}: ")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads everything")
def test_unreadable_file(tmp_path: Path) -> None:
    path = tmp_path / "secret"
    path.write_text("x")
    path.chmod(0)
    assert _error(str(path)) == f"--file {path}: file is not readable"


def test_file_body_exact(tmp_path: Path) -> None:
    path = tmp_path / "body"
    data = "\ufeffcrlf\r\nstays\x07".encode() + b"x" * 10
    path.write_bytes(data)
    assert _read(str(path)).encode() == data
    full = tmp_path / "full"
    full.write_bytes(b"y" * params.BODY_LIMIT)
    assert len(_read(str(full))) == params.BODY_LIMIT


@pytest.mark.parametrize(
    ("value", "limit", "message"),
    [
        ("a\udcffb", 100, "--name is not valid UTF-8"),
        ("a\nb", 100, "--name may not contain control characters"),
        ("a\x85b", 100, "--name may not contain control characters"),
        ("   ", 100, "--name may not be empty"),
        ("", 100, "--name may not be empty"),
        ("x" * 101, 100, "--name is too long (101 characters; the limit is 100)"),
    ],
)
def test_label_rules(value: str, limit: int, message: str) -> None:
    with pytest.raises(click.BadParameter) as info:
        params.check_label(value, "--name", limit)
    assert info.value.message == message


def test_label_accepts_limit() -> None:
    assert params.check_label("é" * 100, "--name", 100) == "é" * 100


def test_body_choice() -> None:
    with pytest.raises(click.UsageError, match="^give either TEXT or --file, not both$"):
        params.check_body_choice("a", "f")
    with pytest.raises(click.UsageError, match="^missing PROMPT or --file$"):
        params.check_body_choice(None, None, "PROMPT")
    params.check_body_choice("a", None)
    params.check_body_choice(None, "-")


def test_streams_are_utf8_whatever_the_locale(head_db: Path) -> None:
    with Db(head_db) as db:
        db.fleet("équipe ✓")
    env = {"PYTHONIOENCODING": "ascii", "LC_ALL": "C", "LANG": "C"}
    code, out, err = run_cli("fleet", "list", env=env)
    assert (code, err) == (0, "")
    assert "équipe ✓" in out
    code, out, err = run_cli("fleet", "show", "99", env=env)
    assert err == "Error: fleet 99 not found\n"
    code, out, _ = run_cli("doctor", env=env)
    assert "✗ multiplexer" in out
