"""The pane-input lock (docs/runtime.md §3) against a second process holding it."""

from __future__ import annotations

import hashlib
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from cafleet.mux import PaneKey
from cafleet.mux.locks import (
    PaneLockAbandoned,
    PaneLockTimeout,
    acquire_pane_locks,
    lock_file_name,
    pane_input_lock,
    pane_lock_path,
    read_holder,
    sort_keys_by_lock_file,
    try_pane_lock,
)
from tests.harness.util import hold_pane_lock

KEY = PaneKey("tmux", "fleet test", "%3")


def held_elsewhere(
    db_dir: Path, key: PaneKey = KEY, purpose: str = "test"
) -> AbstractContextManager[subprocess.Popen[str]]:
    return hold_pane_lock(db_dir, key, purpose)


@pytest.fixture
def db_dir(tmp_path: Path) -> Path:
    return tmp_path / "db"


# --------------------------------------------------------------------------- identity


def test_file_name_is_sha256_of_key(db_dir: Path) -> None:
    h = hashlib.sha256(b"tmux\x00fleet test\x00%3").hexdigest()
    assert lock_file_name(KEY) == f"pane-{h}.lock"
    assert pane_lock_path(str(db_dir), KEY) == str(db_dir / "locks" / f"pane-{h}.lock")


def test_surrogates_in_key_use_surrogatepass() -> None:
    key = PaneKey("tmux", "s\udc80", "%1")
    expected = hashlib.sha256("tmux\x00s\udc80\x00%1".encode("utf-8", "surrogatepass")).hexdigest()
    assert lock_file_name(key) == f"pane-{expected}.lock"


def test_same_key_same_file_different_panes_different_files(db_dir: Path) -> None:
    same = PaneKey("tmux", "fleet test", "%3")
    assert pane_lock_path(str(db_dir), same) == pane_lock_path(str(db_dir), KEY)
    others = [
        PaneKey("tmux", "fleet test", "%4"),
        PaneKey("tmux", "other", "%3"),
        PaneKey("herdr", "fleet test", "%3"),
    ]
    paths = {pane_lock_path(str(db_dir), k) for k in [KEY, *others]}
    assert len(paths) == 4


def test_files_persist_with_modes_and_holder_record(db_dir: Path) -> None:
    with pane_input_lock(str(db_dir), KEY, timeout=1, purpose="notify msg 7") as lock:
        holder = read_holder(lock.path)
        assert holder is not None
        assert holder.pid == os.getpid() and holder.purpose == "notify msg 7"
        assert len(holder.ts) == 32 and holder.ts.endswith("+00:00")
        raw = Path(lock.path).read_text()
        assert raw == f"{holder.pid} {holder.ts} notify msg 7\n"
    path = Path(pane_lock_path(str(db_dir), KEY))
    assert path.exists()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE((db_dir / "locks").stat().st_mode) == 0o700
    # Re-acquiring reuses the same file and rewrites the record.
    with pane_input_lock(str(db_dir), KEY, timeout=1, purpose="member delete 2"):
        assert read_holder(str(path)).purpose == "member delete 2"  # type: ignore[union-attr]
    assert sorted(os.listdir(db_dir / "locks")) == [path.name]


# --------------------------------------------------------------------------- contention


def test_timeout_reports_holder(db_dir: Path) -> None:
    with held_elsewhere(db_dir) as proc:
        start = time.monotonic()
        with (
            pytest.raises(PaneLockTimeout) as exc,
            pane_input_lock(str(db_dir), KEY, timeout=0.3, purpose="x"),
        ):
            pytest.fail("acquired a held lock")
        elapsed = time.monotonic() - start
    # The 0.3 s timeout ended the wait (the holder holds until the block ends).
    assert 0.3 <= exc.value.waited <= elapsed < 30
    assert exc.value.pane_id == "%3"
    assert exc.value.key == KEY
    assert exc.value.holder is not None
    assert exc.value.holder.pid == proc.pid
    assert exc.value.holder.purpose == "test"


def test_timeout_zero_is_a_single_try(db_dir: Path) -> None:
    calls = []
    with (
        held_elsewhere(db_dir),
        pytest.raises(PaneLockTimeout) as exc,
        pane_input_lock(
            str(db_dir), KEY, timeout=0, purpose="ping member 1",
            keep_waiting=lambda: calls.append(1) or True,
        ),
    ):  # fmt: skip
        pass
    # A second try comes only after asking keep_waiting: none was made (no clock involved).
    assert calls == []
    assert exc.value.holder is not None
    assert try_pane_lock(str(db_dir), KEY) is not None  # released by the holder's death


def test_other_panes_are_independent(db_dir: Path) -> None:
    with held_elsewhere(db_dir):
        other = PaneKey("tmux", "fleet test", "%4")
        with pane_input_lock(str(db_dir), other, timeout=0, purpose="x") as lock:
            assert lock.held


def test_wait_succeeds_once_released(db_dir: Path) -> None:
    with held_elsewhere(db_dir) as proc:
        threading.Timer(0.3, lambda: proc.stdin.close()).start()  # type: ignore[union-attr]
        start = time.monotonic()
        with pane_input_lock(str(db_dir), KEY, timeout=10, purpose="x"):
            waited = time.monotonic() - start
    assert 0.2 < waited < 5


def test_keep_waiting_abandons(db_dir: Path) -> None:
    calls: list[float] = []

    def keep_waiting() -> bool:
        calls.append(time.monotonic())
        return len(calls) < 3

    with held_elsewhere(db_dir):
        start = time.monotonic()
        with (
            pytest.raises(PaneLockAbandoned) as exc,
            pane_input_lock(str(db_dir), KEY, timeout=30, purpose="x", keep_waiting=keep_waiting),
        ):
            pass
        elapsed = time.monotonic() - start
    assert exc.value.pane_id == "%3"
    assert len(calls) == 3
    assert elapsed < 15  # abandoned by keep_waiting, not by the 30 s timeout
    # Tries were spaced by about 50 ms.
    assert calls[2] - calls[0] >= 0.08


def test_sigkilled_holder_does_not_delay(db_dir: Path) -> None:
    with held_elsewhere(db_dir) as proc:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        # timeout=0 is one try: acquiring proves the dead holder's lock was free at once.
        with pane_input_lock(str(db_dir), KEY, timeout=0, purpose="x") as lock:
            assert lock.held


def test_same_process_second_acquisition_is_excluded(db_dir: Path) -> None:
    """flock belongs to the open file description, so threads exclude each other too."""
    with pane_input_lock(str(db_dir), KEY, timeout=0, purpose="a"):
        with (
            pytest.raises(PaneLockTimeout),
            pane_input_lock(str(db_dir), KEY, timeout=0.1, purpose="b"),
        ):
            pass
        result: list[object] = []

        def other_thread() -> None:
            try:
                with pane_input_lock(str(db_dir), KEY, timeout=0, purpose="c"):
                    result.append("acquired")
            except PaneLockTimeout as exc:
                result.append(exc)

        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join()
        assert isinstance(result[0], PaneLockTimeout)
    with pane_input_lock(str(db_dir), KEY, timeout=0, purpose="d"):
        pass


def test_try_pane_lock(db_dir: Path) -> None:
    with held_elsewhere(db_dir):
        assert try_pane_lock(str(db_dir), KEY) is None
    lock = try_pane_lock(str(db_dir), KEY, purpose="fleet delete 4")
    assert lock is not None and lock.held
    assert read_holder(lock.path).purpose == "fleet delete 4"  # type: ignore[union-attr]
    assert try_pane_lock(str(db_dir), KEY) is None
    lock.release()
    lock.release()  # idempotent
    assert not lock.held
    again = try_pane_lock(str(db_dir), KEY)
    assert again is not None
    again.release()


# --------------------------------------------------------------------------- several locks


def keys(n: int) -> list[PaneKey]:
    return [PaneKey("tmux", "fleet test", f"%{i}") for i in range(n)]


def test_acquire_many_in_ascending_file_name_order(db_dir: Path) -> None:
    wanted = keys(6)
    ordered = sort_keys_by_lock_file(wanted + wanted[:2])
    assert [lock_file_name(k) for k in ordered] == sorted(lock_file_name(k) for k in wanted)
    with acquire_pane_locks(
        str(db_dir), reversed(wanted), timeout=1, purpose="fleet delete 1"
    ) as held:
        assert [lock.key for lock in held.locks] == ordered
        assert held.keys == frozenset(wanted)
        for key in wanted:
            assert try_pane_lock(str(db_dir), key) is None
        extra = PaneKey("tmux", "fleet test", "%99")
        assert held.try_add(extra) is True
        assert extra in held
        assert held.try_add(wanted[0]) is True  # already held
    for key in [*wanted, extra]:
        lock = try_pane_lock(str(db_dir), key)
        assert lock is not None
        lock.release()


def test_acquire_many_releases_everything_on_timeout(db_dir: Path) -> None:
    wanted = keys(5)
    ordered = sort_keys_by_lock_file(wanted)
    busy = ordered[2]
    with held_elsewhere(db_dir, busy) as proc:
        with pytest.raises(PaneLockTimeout) as exc:
            acquire_pane_locks(str(db_dir), wanted, timeout=0.2, purpose="fleet delete 1")
        assert exc.value.key == busy and exc.value.pane_id == busy.pane_id
        assert exc.value.holder is not None and exc.value.holder.pid == proc.pid
        for key in wanted:
            if key != busy:
                lock = try_pane_lock(str(db_dir), key)
                assert lock is not None, key
                lock.release()
        # try_add on a busy key fails without raising.
        with acquire_pane_locks(str(db_dir), [ordered[0]], timeout=0, purpose="p") as held:
            assert held.try_add(busy) is False
            assert busy not in held


def test_lock_module_does_not_import_sqlalchemy() -> None:
    code = "import sys, cafleet.mux.locks; print('sqlalchemy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
