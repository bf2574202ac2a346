"""Monitor runtime rows (docs/runtime.md §5.2, docs/storage.md §7.7; §9 item 58) and asset installs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cafleet import broker
from cafleet.broker.errors import FleetDeleted, FleetNotFound
from cafleet.db.runtime import Connection
from cafleet.records import AssetInstall, MonitorRuntime
from tests.broker_helpers import raw_connect, ts
from tests.factories import make_fleet


@pytest.fixture
def head_db(bare_head_db: Path) -> Path:
    """These tests write asset_installs rows as their probe: the db half only, no asset rows."""
    return bare_head_db


ALWAYS_LIVE = lambda row, now: True  # noqa: E731
NEVER_LIVE = lambda row, now: False  # noqa: E731


def test_claim_inserts_with_default_tick_and_refuses_a_live_row(conn: Connection) -> None:
    fid = make_fleet(conn).fleet.fleet_id
    assert broker.get_monitor_runtime(conn, fid) is None  # no row: no loop ever ran
    assert broker.claim_monitor(
        conn,
        fleet_id=fid,
        pid=111,
        tick_seconds=None,
        wake_interval_seconds=0,
        is_live=ALWAYS_LIVE,
        now=ts(),
    )
    t0 = "2026-01-02T03:04:05.000000+00:00"
    assert broker.get_monitor_runtime(conn, fid) == MonitorRuntime(
        fleet_id=fid,
        pid=111,
        started_at=t0,
        last_tick_at=t0,
        tick_seconds=5,
        last_wake_at=None,
        wake_interval_seconds=0,
        wake_requested_at=None,
    )
    seen: list[MonitorRuntime] = []

    def live(row: MonitorRuntime, now: object) -> bool:
        seen.append(row)
        return True

    assert not broker.claim_monitor(
        conn,
        fleet_id=fid,
        pid=222,
        tick_seconds=9,
        wake_interval_seconds=60,
        is_live=live,
        now=ts(1),
    )
    assert seen and seen[0].pid == 111
    assert broker.get_monitor_runtime(conn, fid).pid == 111  # type: ignore[union-attr]


def test_stale_row_is_taken_over_keeping_last_wake(conn: Connection) -> None:
    fid = make_fleet(conn).fleet.fleet_id
    assert broker.claim_monitor(
        conn, fleet_id=fid, pid=1, tick_seconds=7, wake_interval_seconds=30, now=ts(0)
    )
    assert broker.record_monitor_wake(conn, fleet_id=fid, pid=1, seen_request=None, now=ts(1))
    assert broker.request_monitor_wake(conn, fleet_id=fid, now=ts(2)) is not None
    assert broker.claim_monitor(
        conn,
        fleet_id=fid,
        pid=2,
        tick_seconds=None,
        wake_interval_seconds=45,
        is_live=NEVER_LIVE,
        now=ts(10),
    )
    row = broker.get_monitor_runtime(conn, fid)
    t = lambda s: f"2026-01-02T03:04:{5 + s:02d}.000000+00:00"  # noqa: E731
    assert row == MonitorRuntime(
        fleet_id=fid,
        pid=2,
        started_at=t(10),
        last_tick_at=t(10),
        tick_seconds=7,
        last_wake_at=t(1),
        wake_interval_seconds=45,
        wake_requested_at=None,
    )
    assert broker.claim_monitor(
        conn,
        fleet_id=fid,
        pid=3,
        tick_seconds=2,
        wake_interval_seconds=45,
        is_live=NEVER_LIVE,
        now=ts(20),
    )
    assert broker.get_monitor_runtime(conn, fid).tick_seconds == 2  # type: ignore[union-attr]


def test_claim_on_missing_or_deleted_fleet(conn: Connection) -> None:
    with pytest.raises(FleetNotFound, match=r"^fleet 8 not found$"):
        broker.claim_monitor(conn, fleet_id=8, pid=1, tick_seconds=None, wake_interval_seconds=1)
    fid = make_fleet(conn).fleet.fleet_id
    broker.delete_fleet(conn, fleet_id=fid, locked_panes=set(), try_lock=lambda k: True)
    with pytest.raises(FleetDeleted, match=rf"^fleet {fid} is deleted$"):
        broker.claim_monitor(conn, fleet_id=fid, pid=1, tick_seconds=None, wake_interval_seconds=1)


def test_heartbeat_clear_and_wake_record_need_the_pid(conn: Connection) -> None:
    fid = make_fleet(conn).fleet.fleet_id
    assert not broker.heartbeat(conn, fleet_id=fid, pid=5)  # no row
    broker.claim_monitor(conn, fleet_id=fid, pid=5, tick_seconds=5, wake_interval_seconds=9)
    assert broker.heartbeat(conn, fleet_id=fid, pid=5, now=ts(3))
    assert not broker.heartbeat(conn, fleet_id=fid, pid=6, now=ts(4))
    row = broker.get_monitor_runtime(conn, fid)
    assert row is not None and row.last_tick_at == "2026-01-02T03:04:08.000000+00:00"
    # a request made during the wake stays pending
    first = broker.request_monitor_wake(conn, fleet_id=fid, now=ts(10))
    assert first == "2026-01-02T03:04:15.000000+00:00"
    assert broker.request_monitor_wake(conn, fleet_id=fid, now=ts(11)) == first  # COALESCE
    assert not broker.record_monitor_wake(conn, fleet_id=fid, pid=6, seen_request=first)
    assert broker.record_monitor_wake(
        conn, fleet_id=fid, pid=5, seen_request="2026-01-02T03:04:00.000000+00:00", now=ts(12)
    )
    row = broker.get_monitor_runtime(conn, fid)
    assert row is not None and row.wake_requested_at == first
    assert row.last_wake_at == "2026-01-02T03:04:17.000000+00:00"
    assert broker.record_monitor_wake(conn, fleet_id=fid, pid=5, seen_request=first, now=ts(13))
    row = broker.get_monitor_runtime(conn, fid)
    assert row is not None and row.wake_requested_at is None
    assert not broker.clear_monitor(conn, fleet_id=fid, pid=6)
    assert broker.clear_monitor(conn, fleet_id=fid, pid=5)
    row = broker.get_monitor_runtime(conn, fid)
    assert row is not None
    assert (row.pid, row.started_at, row.last_tick_at) == (None, None, None)
    assert row.last_wake_at == "2026-01-02T03:04:18.000000+00:00"  # survives clear
    assert (row.tick_seconds, row.wake_interval_seconds) == (5, 9)


def test_remote_monitor_runtimes_are_the_fleets_whose_monitor_is_on_the_host_alone(
    conn: Connection, head_db: Path
) -> None:
    """docs/runtime.md §10.4: host `b`'s loop wakes the monitors on `b` of fleets directed from
    another recorded host; none when no host is recorded (one host) or the Director is on `b`."""
    made = make_fleet(conn)
    fid = made.fleet.fleet_id
    monitor = broker.get_active_monitor(conn, fid)
    assert monitor is not None and made.fleet.director_member_id is not None
    broker.claim_monitor(conn, fleet_id=fid, pid=5, tick_seconds=5, wake_interval_seconds=9)

    def place(member_id: int, host: str | None) -> None:
        db = raw_connect(head_db)
        db.execute(
            "UPDATE member_placements SET host_id = ? WHERE member_id = ?", (host, member_id)
        )
        db.close()

    place(made.fleet.director_member_id, None)  # rows written before hosts were recorded
    place(monitor.member_id, None)
    assert broker.remote_monitor_runtimes(conn, "b") == []  # no host recorded: one host
    place(monitor.member_id, "b")
    assert broker.remote_monitor_runtimes(conn, "b") == []  # the Director's host not recorded
    place(made.fleet.director_member_id, "a")
    rows = broker.remote_monitor_runtimes(conn, "b")
    assert [(r.fleet_id, r.pid, r.wake_interval_seconds) for r in rows] == [(fid, 5, 9)]
    assert broker.remote_monitor_runtimes(conn, "a") == []
    place(made.fleet.director_member_id, "b")
    assert broker.remote_monitor_runtimes(conn, "b") == []  # its own fleet loop wakes it


def test_request_and_interval_without_row(conn: Connection) -> None:
    fid = make_fleet(conn).fleet.fleet_id
    assert broker.request_monitor_wake(conn, fleet_id=fid) is None
    assert broker.set_wake_interval(conn, fleet_id=fid, seconds=5) is False
    assert broker.get_monitor_runtime(conn, fid) is None


def test_null_interval_stays_none_never_zero(conn: Connection, head_db: Path) -> None:
    fid = make_fleet(conn).fleet.fleet_id
    db = raw_connect(head_db)  # a legacy row with a NULL interval
    db.execute("INSERT INTO monitor_runtime (fleet_id, pid) VALUES (?, NULL)", (fid,))
    db.close()
    row = broker.get_monitor_runtime(conn, fid)
    assert row is not None and row.wake_interval_seconds is None and row.tick_seconds == 5
    assert broker.set_wake_interval(conn, fleet_id=fid, seconds=0)
    assert broker.get_monitor_runtime(conn, fid).wake_interval_seconds == 0  # type: ignore[union-attr]
    assert broker.set_wake_interval(conn, fleet_id=fid, seconds=None)
    assert broker.get_monitor_runtime(conn, fid).wake_interval_seconds is None  # type: ignore[union-attr]
    with pytest.raises(ValueError):
        broker.claim_monitor(
            conn,
            fleet_id=fid,
            pid=1,
            tick_seconds=None,
            wake_interval_seconds=None,  # type: ignore[arg-type]
        )
    assert broker.get_monitor_runtime(conn, fid).wake_interval_seconds is None  # type: ignore[union-attr]


def test_is_live() -> None:
    def row(pid: int | None, tick: str | None, tick_seconds: int = 5) -> MonitorRuntime:
        return MonitorRuntime(1, pid, tick, tick, tick_seconds, None, 60, None)

    fresh = "2026-01-02T03:04:05.000000+00:00"
    me = os.getpid()
    assert broker.is_live(row(me, fresh), ts(15))
    assert not broker.is_live(row(me, fresh), ts(16))  # max(3 x 5, 15) s
    assert broker.is_live(row(me, fresh, 10), ts(30))
    assert not broker.is_live(row(None, fresh), ts(1))
    assert not broker.is_live(row(me, None), ts(1))
    assert not broker.is_live(row(me, "garbage"), ts(1))
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert not broker.is_live(row(child.pid, fresh), ts(1))  # no such process
    assert broker.is_live(row(1, fresh), ts(1))  # pid 1 exists; PermissionError counts as live


# --- asset installs ------------------------------------------------------------------------------


def test_asset_installs_upsert_and_order(conn: Connection) -> None:
    assert broker.asset_installs_for(conn, "claude") == []
    first = broker.record_asset_install(
        conn, coding_agent="claude", path="/b/skills", cafleet_version="1.0", now=ts(0)
    )
    broker.record_asset_install(
        conn, coding_agent="claude", path="/a/skills", cafleet_version="1.0", now=ts(1)
    )
    broker.record_asset_install(
        conn, coding_agent="codex", path="/b/skills", cafleet_version="0.9", now=ts(1)
    )
    again = broker.record_asset_install(
        conn, coding_agent="claude", path="/b/skills", cafleet_version="1.1", now=ts(2)
    )
    assert first.installed_at != again.installed_at
    assert broker.asset_installs_for(conn, "claude") == [
        AssetInstall("claude", "/a/skills", "1.0", "2026-01-02T03:04:06.000000+00:00"),
        AssetInstall("claude", "/b/skills", "1.1", "2026-01-02T03:04:07.000000+00:00"),
    ]
    assert [a.cafleet_version for a in broker.asset_installs_for(conn, "codex")] == ["0.9"]
