"""Statements of `cafleet.broker.monitor` (docs/storage.md §7.7, docs/runtime.md §5)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import case, exists, func, insert, null, select, update

from cafleet.db.schema import fleets, host_loops, member_placements, members, monitor_runtime
from cafleet.db.statements import active_monitor_id, const, param

_rt = monitor_runtime.c
_RUNTIME_FIELDS = (
    "fleet_id",
    "pid",
    "started_at",
    "last_tick_at",
    "tick_seconds",
    "last_wake_at",
    "wake_interval_seconds",
    "wake_requested_at",
)
_r = monitor_runtime.alias("r")
_f = fleets.alias("f")

FLEET_STATE = select(fleets.c.deleted_at).where(fleets.c.fleet_id == param("fleet_id"))
RUNTIME = select(*[_rt[n] for n in _RUNTIME_FIELDS]).where(_rt.fleet_id == param("fleet_id"))
# Every live fleet's runtime row: what a command reads to see whether a loop needs restarting
# (monitor_runtime is one row per fleet that ever ran a loop; fleets by primary key).
LIVE_FLEET_RUNTIMES = (
    select(*[_r.c[n].label(n) for n in _RUNTIME_FIELDS])
    .select_from(_r.join(_f, _f.c.fleet_id == _r.c.fleet_id))
    .where(_f.c.deleted_at.is_(None))
    .order_by(_r.c.fleet_id)
)
INSERT_WITH_TICK = insert(monitor_runtime).values(
    fleet_id=param("fleet_id"),
    pid=param("pid"),
    started_at=param("now"),
    last_tick_at=param("now"),
    tick_seconds=param("tick"),
    wake_interval_seconds=param("interval"),
)
INSERT_DEFAULT_TICK = insert(monitor_runtime).values(  # the column default (5) applies
    fleet_id=param("fleet_id"),
    pid=param("pid"),
    started_at=param("now"),
    last_tick_at=param("now"),
    wake_interval_seconds=param("interval"),
)
TAKE_OVER = (
    update(monitor_runtime)
    .where(_rt.fleet_id == param("fleet_id"))
    .values(
        pid=param("pid"),
        started_at=param("now"),
        last_tick_at=param("now"),
        wake_interval_seconds=param("interval"),
        tick_seconds=func.coalesce(param("tick"), _rt.tick_seconds),
        wake_requested_at=null(),
    )
)
_OWNED = (_rt.fleet_id == param("fleet_id"), _rt.pid == param("pid"))
HEARTBEAT = update(monitor_runtime).where(*_OWNED).values(last_tick_at=param("now"))
CLEAR = (
    update(monitor_runtime)
    .where(*_OWNED)
    .values(pid=null(), started_at=null(), last_tick_at=null())
)
RECORD_WAKE = (
    update(monitor_runtime)
    .where(*_OWNED)
    .values(
        last_wake_at=param("now"),
        wake_requested_at=case(
            (_rt.wake_requested_at.is_not_distinct_from(param("seen")), null()),
            else_=_rt.wake_requested_at,
        ),
    )
)
REQUEST_WAKE = (
    update(monitor_runtime)
    .where(_rt.fleet_id == param("fleet_id"))
    .values(wake_requested_at=func.coalesce(_rt.wake_requested_at, param("now")))
    .returning(_rt.wake_requested_at)
)
SET_INTERVAL = (
    update(monitor_runtime)
    .where(_rt.fleet_id == param("fleet_id"))
    .values(wake_interval_seconds=param("seconds"))
)


# --- host delivery loops (`host_loops`, revision 0006; docs/runtime.md §10.4) ------------------

_hl = host_loops.c
_HOST_LOOP_FIELDS = ("host_id", "pid", "started_at", "last_tick_at", "tick_seconds")
HOST_LOOP = select(*[_hl[n] for n in _HOST_LOOP_FIELDS]).where(_hl.host_id == param("host"))
HOST_LOOPS = select(*[_hl[n] for n in _HOST_LOOP_FIELDS]).order_by(_hl.host_id)
INSERT_HOST_LOOP = insert(host_loops).values(
    host_id=param("host"),
    pid=param("pid"),
    started_at=param("now"),
    last_tick_at=param("now"),
    tick_seconds=param("tick"),
)
TAKE_OVER_HOST_LOOP = (
    update(host_loops)
    .where(_hl.host_id == param("host"))
    .values(
        pid=param("pid"),
        started_at=param("now"),
        last_tick_at=param("now"),
        tick_seconds=param("tick"),
    )
)
_HOST_OWNED = (_hl.host_id == param("host"), _hl.pid == param("pid"))
HOST_HEARTBEAT = update(host_loops).where(*_HOST_OWNED).values(last_tick_at=param("now"))
CLEAR_HOST_LOOP = (
    update(host_loops)
    .where(*_HOST_OWNED)
    .values(pid=null(), started_at=null(), last_tick_at=null())
)
_m, _mf, _mp = members.alias("m"), fleets.alias("mf"), member_placements.alias("mp")
_dp = member_placements.alias("dp")
# Whether any active member of a live fleet has its pane on the host while the fleet's root
# Director is on another one: the host's loop has something to serve.
HOST_SERVES = select(
    exists(
        select(const(1))
        .select_from(
            _m.join(_mf, _mf.c.fleet_id == _m.c.fleet_id)
            .join(_mp, _mp.c.member_id == _m.c.member_id)
            .outerjoin(_dp, _dp.c.member_id == _mf.c.director_member_id)
        )
        .where(
            _m.c.status == const("active"),
            _mf.c.deleted_at.is_(None),
            _mp.c.host_id == param("host"),
            _dp.c.host_id.is_distinct_from(param("host")),
        )
    )
)
_wp, _wd = member_placements.alias("wp"), member_placements.alias("wd")
# The runtime rows of the live fleets whose active monitor member has its pane on the host while
# the root Director is recorded on another one: the host's loop types their wake lines
# (docs/runtime.md §10.4). One read per pass of the host loop.
REMOTE_MONITOR_RUNTIMES = (
    select(*[_r.c[n].label(n) for n in _RUNTIME_FIELDS])
    .select_from(
        _r.join(_f, _f.c.fleet_id == _r.c.fleet_id)
        .join(_wp, _wp.c.member_id == active_monitor_id(_f.c.fleet_id))
        .join(_wd, _wd.c.member_id == _f.c.director_member_id)
    )
    .where(
        _f.c.deleted_at.is_(None),
        _wp.c.host_id == param("host"),
        _wd.c.host_id.is_not(None),
        _wd.c.host_id != param("host"),
    )
    .order_by(_r.c.fleet_id)
)

STATEMENTS: dict[str, Any] = {
    "FLEET_STATE": FLEET_STATE,
    "RUNTIME": RUNTIME,
    "LIVE_FLEET_RUNTIMES": LIVE_FLEET_RUNTIMES,
    "INSERT_WITH_TICK": INSERT_WITH_TICK,
    "INSERT_DEFAULT_TICK": INSERT_DEFAULT_TICK,
    "TAKE_OVER": TAKE_OVER,
    "HEARTBEAT": HEARTBEAT,
    "CLEAR": CLEAR,
    "RECORD_WAKE": RECORD_WAKE,
    "REQUEST_WAKE": REQUEST_WAKE,
    "SET_INTERVAL": SET_INTERVAL,
    "HOST_LOOP": HOST_LOOP,
    "HOST_LOOPS": HOST_LOOPS,
    "INSERT_HOST_LOOP": INSERT_HOST_LOOP,
    "TAKE_OVER_HOST_LOOP": TAKE_OVER_HOST_LOOP,
    "HOST_HEARTBEAT": HOST_HEARTBEAT,
    "CLEAR_HOST_LOOP": CLEAR_HOST_LOOP,
    "HOST_SERVES": HOST_SERVES,
    "REMOTE_MONITOR_RUNTIMES": REMOTE_MONITOR_RUNTIMES,
}
