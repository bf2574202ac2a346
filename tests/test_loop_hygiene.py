"""Loop hygiene (docs/runtime.md §5.4, §5.9): a loop that stops for any reason, a full disk included,
releases its slot and logs the whole cause; loop logs are per database; setup says when it waits
for another setup's lock."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from cafleet.config import monitor_log_path
from tests.fleet_helpers import START_RE, TS, create_fleet, runtime_row, stop_loop
from tests.harness.fixtures import TmuxHarness
from tests.harness.util import pid_alive, retry_until


@pytest.fixture
def small_fs(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private 6 MiB tmpfs holding this test's database (the disk that fills up)."""
    mount = Path(tempfile.mkdtemp(prefix="cafleet-fs-", dir="/tmp"))
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=6m,mode=0700", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:  # a full disk needs a file system of its own
        os.rmdir(mount)
        pytest.fail(f"cannot mount a small tmpfs (root is needed): {done.stderr.strip()}")
    monkeypatch.setenv("CAFLEET_DATABASE_URL", f"sqlite:///{mount}/cafleet.db")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)
        with contextlib.suppress(OSError):
            os.rmdir(mount)


def _fill(directory: Path) -> Path:
    """Write a file until the file system refuses (ENOSPC)."""
    filler = directory / "filler"
    chunk = b"\0" * 65536
    with open(filler, "wb", buffering=0) as fh:
        try:
            while True:
                fh.write(chunk)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc
    # top off what a whole chunk could not use
    with open(filler, "ab", buffering=0) as fh, contextlib.suppress(OSError):
        while True:
            fh.write(b"\0" * 512)
    return filler


@pytest.mark.tmux
def test_a_loop_stopped_by_a_full_disk_releases_its_slot_and_logs_every_traceback(
    small_fs: Path, tmux_harness: TmuxHarness
) -> None:
    h = tmux_harness
    assert h.cli("setup").returncode == 0
    ids = create_fleet(h)
    stop_loop(h, ids.fleet_id)
    log = small_fs / "loop.log"  # on the disk that fills, like the detached loop's log
    with open(log, "ab") as fh:
        proc = h.popen_cli("monitor", str(ids.fleet_id), "--tick", "1", stdout=fh, stderr=fh)
    retry_until(
        lambda: (r := runtime_row(h, ids.fleet_id)) is not None and r["pid"] == proc.pid,
        timeout=15,
        message=lambda: log.read_text(errors="replace"),
    )
    _fill(small_fs)
    assert proc.wait(timeout=60) == 1
    text = log.read_text(encoding="utf-8", errors="replace")
    lines = text.splitlines()
    assert START_RE.match(lines[0]), lines[:3]
    failed = [x for x in lines if re.fullmatch(rf"{TS} tick failed: .*disk is full.*", x)]
    assert len(failed) == 3, text
    # every traceback is whole: each one ends with its exception line
    assert text.count("Traceback (most recent call last):") >= 3, text
    assert len(re.findall(r"^\S*OperationalError: .*disk is full.*$", text, re.M)) >= 3, text
    assert any(re.fullmatch(rf"{TS} 3 consecutive failed ticks; stopping", x) for x in lines)
    assert lines[-1] == f"monitor loop stopped (fleet {ids.fleet_id}, pid {proc.pid})", text
    # the slot was released although the disk is still full
    row = runtime_row(h, ids.fleet_id)
    assert row is not None and (row["pid"], row["last_tick_at"]) == (None, None), (row, text)


@pytest.mark.tmux
def test_databases_sharing_a_directory_log_their_loops_apart(tmux_db: TmuxHarness) -> None:
    """Fleet 1 of two databases in one directory: two loops, two log files, each its own."""
    h = tmux_db
    first = create_fleet(h)
    other_db = h.db_path.parent / "other.db"
    env = {"CAFLEET_DATABASE_URL": f"sqlite:///{other_db}"}
    assert h.cli("setup", env=env).returncode == 0
    created = h.cli("fleet", "create", "--name", "b", "--coding-agent", "claude", env=env)
    assert created.returncode == 0, created.stderr
    second_pid = int(created.stdout.splitlines()[1].removeprefix("monitor loop: pid "))
    assert first.fleet_id == 1 and created.stdout.startswith("1 ")
    logs = [Path(monitor_log_path(str(db), 1)) for db in (h.db_path, other_db)]
    assert logs[0] != logs[1] and logs[0].parent == logs[1].parent
    for path, pid in zip(logs, (first.loop_pid, second_pid), strict=True):
        starts = [x for x in path.read_text().splitlines() if START_RE.match(x)]
        assert [int(START_RE.match(x).group(4)) for x in starts] == [pid]  # type: ignore[union-attr]
    for pid in (first.loop_pid, second_pid):
        os.kill(pid, 15)
    retry_until(lambda: not pid_alive(first.loop_pid) and not pid_alive(second_pid), timeout=15)


def test_setup_says_it_waits_for_another_setups_lock(db_path: Path) -> None:
    from cafleet.db.migrate import setup_lock_path

    lock = Path(setup_lock_path(str(db_path)))
    lock.parent.mkdir(parents=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    proc = subprocess.Popen(
        [sys.executable, "-m", "cafleet", "setup"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert line == f"Waiting for another 'cafleet setup' to finish (it holds {lock})...\n"
        assert proc.poll() is None and not db_path.exists()  # still waiting, nothing written
    finally:
        os.close(fd)  # the other setup is done
    out, rest = proc.communicate(timeout=60)
    assert proc.returncode == 0, rest
    assert out.startswith(f"Created {db_path} ") and rest == ""
