"""One error style (docs/cli.md §1.4): one not-found sentence everywhere, `--json` errors as one
JSON object on stderr, file-system errors as sentences naming the path and the remedy, and the
one map of exit statuses (`cafleet.status`)."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import tempfile
from pathlib import Path

import pytest

from cafleet import status
from cafleet.errors import CafleetError
from tests.cli_helpers import run_cli
from tests.factories import Db


def test_every_not_found_reads_the_same(head_db: Path) -> None:
    with Db(head_db) as db:
        fleet = db.fleet()
        director = fleet.director.member_id
    for argv, text in (
        (["fleet", "show", "999"], "fleet 999 not found"),
        (["fleet", "delete", "999"], "fleet 999 not found"),
        (["member", "list", "999"], "fleet 999 not found"),
        (["member", "show", "999"], "member 999 not found"),
        (["member", "delete", "999"], "member 999 not found"),
        (["message", "poll", "999"], "member 999 not found"),
        (["message", "wait", "999", "--timeout", "0"], "member 999 not found"),
        (["message", "show", "999"], "message 999 not found"),
        (["message", "ack", "999"], "message 999 not found"),
        (
            ["message", "send", "--from-member-id", "999", "--to-member-id", str(director), "x"],
            "member 999 not found",
        ),
        (
            ["message", "send", "--from-member-id", str(director), "--to-member-id", "999", "x"],
            "member 999 not found",
        ),
        (["monitor", "scan", "999"], "fleet 999 not found"),
        (["monitor", "stop", "999"], "fleet 999 not found"),
    ):
        assert run_cli(*argv) == (1, "", f"Error: {text}\n"), argv
        code, out, err = run_cli(*argv, "--json")
        assert (code, out) == (1, ""), argv
        assert err.count("\n") == 1 and json.loads(err) == {
            "error": {"code": "not_found", "message": text}
        }, argv


def test_json_errors_cover_usage_deregistered_and_settings(head_db: Path) -> None:
    with Db(head_db) as db:
        fleet = db.fleet()
        gone = db.member(fleet.fleet.fleet_id, "gone").member_id
        db.deregister(gone)
    code, out, err = run_cli("message", "send", "--json")  # usage: no usage line under --json
    assert (code, out) == (2, "")
    assert json.loads(err) == {
        "error": {"code": "usage", "message": "Missing option '--from-member-id'."}
    }
    code, _, err = run_cli("member", "delete", str(gone), "--json")
    assert (code, json.loads(err)) == (
        1,
        {"error": {"code": "deregistered", "message": f"member {gone} is deregistered"}},
    )
    # a deregistered member can still be shown (and polled, tests/test_cli_member.py)
    code, out, _ = run_cli("member", "show", str(gone), "--json")
    assert code == 0 and json.loads(out)["status"] == "deregistered"
    code, _, err = run_cli("fleet", "list", "--json", env={"CAFLEET_MAX_TEXT_LEN": "x"})
    assert (code, json.loads(err)["error"]["code"]) == (1, "error")
    # `--json` after `--` is a body, not the option
    code, _, err = run_cli("message", "poll", "--", "--json")
    assert code == 2 and not err.startswith("{")


def test_setup_under_a_file_names_the_path_and_the_remedy(tmp_path: Path) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where a directory should be")
    url = f"sqlite:///{blocker}/db/cafleet.db"
    code, out, err = run_cli("setup", "--coding-agent", "claude", env={"CAFLEET_DATABASE_URL": url})
    assert code == 1
    # the db half's sentence; the assets half still installs (and says it could not record)
    assert err == (
        f"db half failed: cannot create directory {blocker}/db: not a directory; a component of "
        "the path is a file, not a directory; fix the path\n"
        "assets half failed: claude: installed but not recorded: the db half failed\n"
        "Error: db and assets half failed\n"
    )
    assert not blocker.with_name("db").exists() and blocker.read_text().startswith("a file")


def test_setup_on_a_read_only_file_system_names_the_path_and_the_remedy() -> None:
    mount = Path(tempfile.mkdtemp(prefix="cafleet-ro-", dir="/tmp"))
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m,ro", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        os.rmdir(mount)
        pytest.fail(f"cannot mount a read-only tmpfs (root is needed): {done.stderr.strip()}")
    try:
        code, out, err = run_cli("setup", env={"CAFLEET_DATABASE_URL": f"sqlite:///{mount}/c.db"})
        assert (code, out) == (1, "")
        assert err == (
            f"Error: cannot create {mount}/locks: read-only file system; the database needs a "
            "writable file system: set CAFLEET_DATABASE_URL=sqlite:///<absolute path> to a "
            "writable location\n"
        )
        assert os.listdir(mount) == []
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)
        os.rmdir(mount)


def test_the_one_map() -> None:
    codes = ("usage", "timeout", "not_found", "error", "os", "internal", "unknown")
    assert [status.exit_status(c) for c in codes] == [2, 124, 1, 1, 1, 70, 75]
    from cafleet.broker.errors import FleetDeleted, MemberDeregistered, MemberNotFound
    from cafleet.db.errors import DatabaseBusy
    from cafleet.mux import MultiplexerUnavailable

    for exc, code in (
        (MemberNotFound(3), "not_found"),
        (MemberDeregistered(3), "deregistered"),
        (FleetDeleted(3), "deleted"),
        (DatabaseBusy(), "busy"),
        (MultiplexerUnavailable("x"), "tmux"),
        (PermissionError(errno.EACCES, "Permission denied", "/x"), "os"),
        (CafleetError("x"), "error"),
        (ValueError("x"), "internal"),  # a bug (docs/cli.md §1.4)
    ):
        assert status.error_code(exc) == code, exc
    assert isinstance(MemberDeregistered(3), MemberNotFound)  # old handlers still catch it
    full = OSError(errno.ENOSPC, "No space left on device", "/d/cafleet.db")
    assert status.os_error_text(full, "write") == (
        "cannot write /d/cafleet.db: no space left on device; free some disk space, then re-run "
        "the command"
    )
    assert status.os_error_text(OSError(errno.EIO, "Input/output error")) == "input/output error"
