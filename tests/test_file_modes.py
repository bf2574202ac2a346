"""What cafleet creates is the user's alone (docs/operations.md §2): the database, its `-wal` and
`-shm`, lock files, loop logs, holds and caches are `0600` in `0700` directories whatever the
umask, and `setup` tightens an existing database, saying so. Every command here runs under
umask 000, where anything left to the umask would be world-readable (and writable)."""

from __future__ import annotations

import contextlib
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cafleet.db.shapes import HEAD_VERSION
from tests.cli_helpers import cli_env
from tests.factories import Db


def mode(path: Path | str) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def cli_umask0(*args: str) -> subprocess.CompletedProcess[str]:
    """`python -m cafleet <args>` under umask 000."""
    return subprocess.run(
        [sys.executable, "-m", "cafleet", *args],
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=lambda: os.umask(0),
        check=False,
    )


@contextlib.contextmanager
def umask0() -> Iterator[None]:
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def tree_modes(top: Path) -> dict[str, int]:
    """Every directory and file under ``top`` (itself included): its mode."""
    found = {".": mode(top)}
    for root, dirs, files in os.walk(top):
        for name in dirs + files:
            path = Path(root, name)
            found[str(path.relative_to(top))] = mode(path)
    return found


def test_a_new_database_and_what_is_beside_it_are_private(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    top = tmp_path / "data"
    db_path = top / "deep" / "cafleet.db"
    monkeypatch.setenv("CAFLEET_DATABASE_URL", f"sqlite:///{db_path}")
    r = cli_umask0("setup", "--coding-agent", "claude")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"Created {db_path} and applied migrations")
    with umask0(), Db(db_path) as db:  # an open connection: `-wal` and `-shm` exist
        db.fleet()
        found = tree_modes(top)
    assert found == {
        ".": 0o700,
        "deep": 0o700,
        "deep/locks": 0o700,
        "deep/cafleet.db": 0o600,
        "deep/cafleet.db-wal": 0o600,
        "deep/cafleet.db-shm": 0o600,
        "deep/locks/setup.lock": 0o600,
        "deep/locks/db-write.lock": 0o600,
    }


def test_setup_tightens_an_existing_database_and_says_so(head_db: Path) -> None:
    companions = [Path(f"{head_db}{suffix}") for suffix in ("-wal", "-shm")]
    with Db(head_db) as db:
        db.fleet()
        for path in [head_db, *companions]:
            os.chmod(path, 0o644)
        r = cli_umask0("setup", "--coding-agent", "claude")
        assert r.returncode == 0, r.stderr
        assert r.stdout.splitlines()[:4] == [
            f"Already at head ({HEAD_VERSION}); nothing to do.",
            f"Made {head_db} readable by you alone (mode 0600; it was 0644).",
            f"Made {head_db}-wal readable by you alone (mode 0600; it was 0644).",
            f"Made {head_db}-shm readable by you alone (mode 0600; it was 0644).",
        ]
        assert [mode(p) for p in [head_db, *companions]] == [0o600] * 3
    again = cli_umask0("setup", "--coding-agent", "claude")
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines()[0] == f"Already at head ({HEAD_VERSION}); nothing to do."
    assert "readable by you alone" not in again.stdout  # nothing left to tighten


def test_setup_leaves_a_file_it_refuses_as_it_was(db_path: Path) -> None:
    db_path.parent.mkdir(parents=True)
    db_path.write_text("not a database, and not cafleet's\n")
    os.chmod(db_path, 0o644)
    r = cli_umask0("setup", "--coding-agent", "claude")
    assert r.returncode == 1
    assert mode(db_path) == 0o644


def test_loop_logs_holds_pane_locks_and_caches_are_private(head_db: Path, tmp_path: Path) -> None:
    from cafleet.monitor.detached import spawn_detached
    from cafleet.mux.locks import pane_lock_path, try_pane_lock
    from cafleet.records import PaneKey
    from cafleet.sessions.usage import _save, cache_path

    with Db(head_db) as db:
        fleet_id = db.fleet().fleet.fleet_id
    top = tmp_path / "loop"
    with umask0():
        child = spawn_detached(
            ["true"], log_path=str(top / "logs" / "a.log"), cwd=str(top / "cwd"), env=os.environ
        )
        child.wait(timeout=30)
        key = PaneKey("tmux", "s", "%1")
        lock = try_pane_lock(str(head_db.parent), key)
        assert lock is not None
        lock.release()
        _save(cache_path(str(head_db.parent)), {})
    assert tree_modes(top) == {".": 0o700, "logs": 0o700, "logs/a.log": 0o600, "cwd": 0o700}
    assert mode(pane_lock_path(str(head_db.parent), key)) == 0o600
    assert mode(cache_path(str(head_db.parent))) == 0o600
    # `monitor stop`'s and `monitor host stop`'s holds.
    r = cli_umask0("monitor", "stop", str(fleet_id))
    assert r.returncode == 0, r.stderr
    assert mode(f"{head_db}.monitor-{fleet_id}.stopped") == 0o600
    r = cli_umask0("monitor", "host", "stop")
    assert r.returncode == 0, r.stderr
    (hold,) = head_db.parent.glob("cafleet.db.host-*.stopped")
    assert mode(hold) == 0o600


@pytest.mark.parametrize("dialect", ["postgresql"], indirect=True)
def test_a_postgresql_database_s_local_directory_is_private(bare_head_db: Path) -> None:
    """The local directory under `$HOME/.local/share/cafleet/` and every parent setup creates."""
    home = Path(os.environ["HOME"])
    assert not (home / ".local").exists()
    r = cli_umask0("setup", "--coding-agent", "claude")
    assert r.returncode == 0, r.stderr
    found = tree_modes(home / ".local")
    (state,) = (
        name for name in found if name.startswith("share/cafleet/pg-") and "/" not in name[14:]
    )
    assert found == {
        ".": 0o700,
        "share": 0o700,
        "share/cafleet": 0o700,
        state: 0o700,
        f"{state}/locks": 0o700,
        f"{state}/locks/setup.lock": 0o600,
    }
