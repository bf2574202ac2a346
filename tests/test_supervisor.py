"""The one supervisor behind the fleet and host loops (`cafleet.monitor.supervisor`): a scope
that only this test defines (its slot a file under tmp_path) runs under it unchanged, with the
same start, heartbeat, stop, failure, outage and release rules as the two real scopes."""

from __future__ import annotations

import ast
import functools
import io
import os
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from cafleet.db.errors import DatabaseBusy
from cafleet.db.runtime import Connection
from cafleet.monitor import supervisor
from cafleet.monitor.hostloop import HostScope
from cafleet.monitor.loop import FleetScope
from cafleet.monitor.supervisor import LoopLog, LoopStartError, LoopStop, Scope


class FileScope(Scope):
    """A test-only scope: its slot is a file holding the pid; ``steps`` says what each pass
    does (raise, or return)."""

    slot_name = "file slot"
    words = ("test", "file", "loop")
    tick_seconds = 0  # passes back to back: the test takes no tick's length

    def __init__(self, conn: Connection, root: Path, steps: list[Callable[[], None]]) -> None:
        super().__init__(conn)
        self.title = "file loop"
        self.slot = root / "slot"
        self.root = root
        self.steps = steps
        self.dues: list[bool] = []

    @property
    def log_path(self) -> str:
        return str(self.root / "file.log")

    @property
    def hold_path(self) -> str:
        return str(self.root / "file.hold")

    def slot_pid(self) -> int | None:
        return int(self.slot.read_text()) if self.slot.exists() else None

    def live_pid(self) -> int | None:
        return self.slot_pid()

    def child(self, env: Mapping[str, str] | None) -> tuple[str, dict[str, str]]:
        return str(self.root), dict(os.environ if env is None else env)

    def open(self, pid: int, log: LoopLog) -> str:
        if self.slot.exists():
            raise LoopStartError("file loop already running")
        self.slot.write_text(str(pid))
        return f"file loop started (pid {pid})"

    def step(self, due: bool) -> None:
        self.dues.append(due)
        self.steps.pop(0)()

    def release(self, pid: int) -> None:
        if self.slot_pid() == pid:
            self.slot.unlink()

    def stopped_line(self, pid: int) -> str:
        return f"file loop stopped (pid {pid})"


def _ok() -> None:
    return None


def _stop() -> None:
    raise LoopStop("file slot taken over by another loop; stopping")


def _fail() -> None:
    raise ValueError("the pass broke")


def _busy() -> None:
    raise DatabaseBusy()


def _run(scope: Scope, **kwargs: object) -> tuple[int, list[str], str]:
    out, err = io.StringIO(), io.StringIO()
    code = supervisor.run(scope, out=out, err=err, **kwargs)  # type: ignore[arg-type]
    return code, out.getvalue().splitlines(), err.getvalue()


def test_a_scope_of_its_own_runs_under_the_supervisor(conn: Connection, tmp_path: Path) -> None:
    scope = FileScope(conn, tmp_path, [_ok, _ok, _stop])
    code, lines, _err = _run(scope)
    pid = os.getpid()
    assert code == 0
    assert lines[0] == f"file loop started (pid {pid})"
    assert lines[-2].endswith(" file slot taken over by another loop; stopping")
    assert lines[-1] == f"file loop stopped (pid {pid})"
    assert scope.dues == [True, True, True]  # a pass every tick, each one due
    assert not scope.slot.exists()  # released


def test_a_claimed_slot_refuses_a_second_start_and_is_left_alone(
    conn: Connection, tmp_path: Path
) -> None:
    scope = FileScope(conn, tmp_path, [])
    scope.slot.write_text("4242")
    with pytest.raises(LoopStartError, match="already running"):
        _run(scope)
    assert scope.slot_pid() == 4242


def test_three_failed_passes_stop_the_loop_and_release_the_slot(
    conn: Connection, tmp_path: Path
) -> None:
    scope = FileScope(conn, tmp_path, [_fail, _ok, _fail, _fail, _fail])
    code, lines, err = _run(scope)
    assert code == 1
    failed = [line for line in lines if "tick failed: the pass broke" in line]
    assert len(failed) == 4  # the pass that succeeded reset the count
    assert lines[-2].endswith(" 3 consecutive failed ticks; stopping")
    assert "ValueError: the pass broke" in err
    assert not scope.slot.exists()


def test_a_busy_database_is_waited_out_not_counted(conn: Connection, tmp_path: Path) -> None:
    scope = FileScope(conn, tmp_path, [_busy, _busy, _busy, _ok, _stop])
    code, lines, _err = _run(scope)
    assert code == 0
    assert not any("tick failed" in line for line in lines)
    assert sum("database unavailable: database is locked" in line for line in lines) == 1
    assert any("database available again after" in line for line in lines)


def test_a_refused_schema_exits_1_with_its_error(conn: Connection, tmp_path: Path) -> None:
    def refuse(_conn: Connection) -> None:
        raise RuntimeError("the database is at revision 0099, newer than this cafleet")

    scope = FileScope(conn, tmp_path, [_ok])
    code, lines, err = _run(scope, recheck_schema=refuse)
    assert code == 1
    assert err.strip() == "Error: the database is at revision 0099, newer than this cafleet"
    assert scope.dues == []  # refused before the first pass
    assert not scope.slot.exists()


def test_stop_holds_a_scope_whose_loop_is_not_running(conn: Connection, tmp_path: Path) -> None:
    scope = FileScope(conn, tmp_path, [])
    assert supervisor.stop(scope) is None
    assert supervisor.is_held(scope)
    supervisor.lift_hold(scope)
    assert not supervisor.is_held(scope)


def test_the_fleet_and_host_loops_are_scopes_of_the_one_supervisor(conn: Connection) -> None:
    fleet, host = FleetScope(conn, 7), HostScope(conn, "h1")
    assert (fleet.title, fleet.words) == ("monitor loop for fleet 7", ("monitor", "7"))
    assert (host.title, host.words) == ("delivery loop for host h1", ("monitor", "host", "run"))
    assert not fleet.wakes_on_change and host.wakes_on_change
    assert fleet.live_pid() is None and host.live_pid() is None  # no row: no loop ever ran


# --- one of each: the code that runs a loop or a drain exists once ---------------------------


def _callers(path: Path, called: str) -> set[str]:
    """The top-level functions and classes of ``path`` whose bodies call ``called`` (a name or
    an attribute)."""
    return {top for top, name in _calls(path) if name == called}


@functools.cache
def _calls(path: Path) -> frozenset[tuple[str, str]]:
    """(top-level definition, name called) for every call in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[tuple[str, str]] = set()
    for top in tree.body:
        for node in ast.walk(top):
            if isinstance(node, ast.Call):
                fn = node.func
                name = fn.id if isinstance(fn, ast.Name) else getattr(fn, "attr", None)
                if name is not None:
                    found.add((getattr(top, "name", "<module>"), name))
    return frozenset(found)


PACKAGE = Path(__file__).resolve().parent.parent / "cafleet"


def _callers_in_package(called: str) -> set[str]:
    return {
        f"{path.relative_to(PACKAGE).as_posix()}:{name}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if called in path.read_text(encoding="utf-8")  # parse only the files that name it
        for name in _callers(path, called)
    }


def test_one_schedule_one_start_one_stop_for_every_loop() -> None:
    assert _callers_in_package("Outage") == {"monitor/supervisor.py:_schedule"}
    assert _callers_in_package("spawn_detached") == {"monitor/supervisor.py:start_detached"}
    assert _callers_in_package("terminate_and_wait") == {"monitor/supervisor.py:stop"}


def test_one_drain_over_heads() -> None:
    drains = PACKAGE / "delivery" / "drains.py"
    # The attempts of every drain (recipients, a fleet, a host) are made by one chain per
    # recipient, or the one heap across recipients, and run in parallel by one pool.
    assert _callers(drains, "step") == {"_drain_chain", "_drain_by_age"}
    assert _callers(drains, "Coordinator") == {"_drain_parallel"}
    assert _callers(drains, "_drain_heads") == {"drain_recipients", "drain_fleet", "drain_host"}
