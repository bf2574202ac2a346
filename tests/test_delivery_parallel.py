"""Parallel delivery across panes (docs/runtime.md §4.10), against the private tmux server with
fake agents.

Concurrency is proved by what was recorded, never by wall time: the shim logs every tmux call on
entry, so each pane's typing is the interval from its text (`send-keys -l`) to its Enter, and two
panes typed at once have overlapping intervals. A plain fake's screen is `unknown`, so each
interval holds today's 1.0 s settle.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from tests.delivery_helpers import (
    expected_line,
    message_row,
    record_of,
    rows,
    sql_write,
    typed_ids,
    warning,
)
from tests.factories import build_world, connect
from tests.harness import util
from tests.test_delivery_send import occupy_loop_slot

pytestmark = pytest.mark.tmux

MEMBERS = ("m1", "m2", "m3", "m4")


def typing_intervals(panes: list[str]) -> dict[str, tuple[float, float]]:
    """Each pane's first text call and its first Enter after it, from the shim's log."""
    found: dict[str, tuple[float, float]] = {}
    text_at: dict[str, float] = {}
    for call in util.shim_calls():
        if call.get("command") != "send-keys" or call.get("target") not in panes:
            continue
        pane, argv = call["target"], call.get("argv") or []
        if "-l" in argv and pane not in text_at:
            text_at[pane] = call["t"]
        elif argv and argv[-1] == "Enter" and pane in text_at and pane not in found:
            found[pane] = (text_at[pane], call["t"])
    return found


def overlapping(intervals: dict[str, tuple[float, float]]) -> list[tuple[str, str]]:
    panes = sorted(intervals)
    return [
        (a, b)
        for i, a in enumerate(panes)
        for b in panes[i + 1 :]
        if intervals[a][0] < intervals[b][1] and intervals[b][0] < intervals[a][1]
    ]


def deliveries_of(h: Any, summary_id: int) -> dict[int, int]:
    return dict(
        rows(
            h.db_path,
            "SELECT owner_member_id, message_id FROM messages WHERE origin_message_id = ? "
            "AND type = 'unicast'",
            summary_id,
        )
    )


def broadcast(h: Any, sender: int, text: str, workers: int) -> tuple[Any, dict[int, int]]:
    result = h.cli(
        "message",
        "broadcast",
        "--from-member-id",
        str(sender),
        text,
        env={"CAFLEET_DELIVERY_WORKERS": str(workers)},
    )
    assert result.returncode == 0, result.stderr
    summary_id = int(result.stdout.split()[1].split("=")[1])
    return result, deliveries_of(h, summary_id)


def test_broadcast_types_into_different_panes_at_the_same_time(tmux_db) -> None:
    h = tmux_db
    w = build_world(h.db_path, harness=h, members=MEMBERS)
    occupy_loop_slot(h, w)
    sender = w.members["m1"]
    result, deliveries = broadcast(h, sender, "all at once", workers=8)
    recipients = [w.monitor] + [w.members[n] for n in MEMBERS[1:]]
    assert result.stderr == ""
    assert result.stdout.endswith(f"recipients={len(recipients) + 1} notified=4\n")
    for member in recipients:
        # exactly one line each, exactly the notification, stamped
        assert util.line_bytes(w.pane(member)) == [
            record_of(expected_line(deliveries[member], "m1", sender, "all at once"))
        ]
        assert message_row(h.db_path, deliveries[member])["notified_at"] is not None
    intervals = typing_intervals([w.pane(m) for m in recipients])
    assert len(intervals) == len(recipients)
    assert overlapping(intervals), intervals


def test_one_worker_types_one_pane_after_another_in_id_order(tmux_db) -> None:
    h = tmux_db
    w = build_world(h.db_path, harness=h, members=MEMBERS)
    occupy_loop_slot(h, w)
    result, deliveries = broadcast(h, w.members["m1"], "one by one", workers=1)
    assert result.stderr == ""
    recipients = sorted([w.monitor] + [w.members[n] for n in MEMBERS[1:]])
    intervals = typing_intervals([w.pane(m) for m in recipients])
    assert overlapping(intervals) == []
    starts = [intervals[w.pane(m)][0] for m in recipients]
    assert starts == sorted(starts)  # ascending member id, as before
    for member in recipients:
        assert typed_ids(w.pane(member)) == [deliveries[member]]


def test_a_failing_pane_keeps_its_message_pending_and_the_summary_in_order(tmux_db) -> None:
    """Two panes fail (the Enter is refused); the others are notified; the warnings come in
    recipient order whatever order the workers ended in; the failed ones stay pending."""
    h = tmux_db
    w = build_world(h.db_path, harness=h, members=MEMBERS)
    occupy_loop_slot(h, w)
    failing = [w.members["m2"], w.members["m4"]]
    h.set_faults(
        [
            {"command": "send-keys", "target": w.pane(m), "last": "Enter", "action": "fail"}
            for m in failing
        ]
    )
    result, deliveries = broadcast(h, w.members["m1"], "some fail", workers=8)
    assert result.stdout.endswith("notified=2\n")
    assert result.stderr.splitlines() == [
        warning(
            deliveries[m],
            m,
            f"typing into pane {w.pane(m)} failed: tmux send-keys failed: injected",
        )
        for m in sorted(failing)
    ]
    for member in failing:
        assert message_row(h.db_path, deliveries[member])["notified_at"] is None
    for member in (w.monitor, w.members["m3"]):
        assert message_row(h.db_path, deliveries[member])["notified_at"] is not None


def test_a_hung_pane_does_not_hold_up_the_others(tmux_db, monkeypatch, tmp_path: Path) -> None:
    """The first recipient's pane hangs in its status probe until a file appears; the test
    creates the file only once every other recipient's line arrived. One after another that
    could never happen (the others would wait behind the hang); in parallel every line
    arrives, the hung one last."""
    import cafleet.mux.tmux as tmux_mod
    from cafleet.delivery.drains import drain_recipients

    h = tmux_db
    w = build_world(h.db_path, harness=h, members=MEMBERS)
    recipients = sorted([w.monitor] + [w.members[n] for n in MEMBERS])
    hung, others = recipients[0], recipients[1:]
    release = tmp_path / "release"
    h.set_faults(
        [
            {
                "command": "display-message",
                "target": w.pane(hung),
                "action": "pause_until",
                "path": str(release),
                "times": 1,
            }
        ]
    )
    monkeypatch.setattr(tmux_mod, "DEFAULT_TIMEOUT", 120.0)  # the hang outlasts the watcher
    with connect(h.db_path) as conn:
        from cafleet import broker

        ids = {
            m: broker.send_message(conn, from_member_id=w.director, to_member_id=m, text="go")
            for m in recipients
        }
    watched: dict[str, Any] = {}

    def watch() -> None:
        try:
            for m in others:
                util.wait_records(w.pane(m), 1, timeout=90)
            watched["others_first"] = True
        except AssertionError as exc:
            watched["others_first"] = str(exc)
        finally:
            release.touch()

    watcher = threading.Thread(target=watch)
    watcher.start()
    with connect(h.db_path) as conn:
        report = drain_recipients(
            conn, recipients, attempted=set(), lock_timeout=1, env=h.env, workers=4
        )
    watcher.join()
    assert watched["others_first"] is True
    assert sorted(report.notified) == sorted((ids[m].message_id, m) for m in recipients)
    assert report.failures == []
    for m in recipients:
        assert typed_ids(w.pane(m)) == [ids[m].message_id]


def test_stamps_run_on_the_calling_thread_under_the_pane_lock(tmux_db, monkeypatch) -> None:
    """Every stamp of a parallel drain runs on the thread that owns the connection, while the
    pane it typed into is still locked (a second, non-blocking try from here fails), and only
    after the line arrived."""
    from cafleet import broker
    from cafleet.delivery.drains import drain_fleet
    from cafleet.mux import PaneKey
    from cafleet.mux.locks import try_pane_lock

    h = tmux_db
    w = build_world(h.db_path, harness=h, members=MEMBERS)
    recipients = [w.monitor] + [w.members[n] for n in MEMBERS]
    with connect(h.db_path) as conn:
        ids = {
            broker.send_message(
                conn, from_member_id=w.director, to_member_id=m, text="x"
            ).message_id: m
            for m in recipients
        }
    seen: list[tuple[int, bool, bool, bool]] = []
    caller = threading.get_ident()
    real = broker.stamp_notified

    def stamp(conn: Any, *, message_id: int) -> bool:
        pane = w.pane(ids[message_id])
        probe = try_pane_lock(str(Path(h.db_path).parent), PaneKey("tmux", w.session, pane))
        locked = probe is None
        if probe is not None:
            probe.release()
        arrived = message_id in typed_ids(pane)
        seen.append((message_id, threading.get_ident() == caller, locked, arrived))
        return real(conn, message_id=message_id)

    monkeypatch.setattr(broker, "stamp_notified", stamp)
    blocked: set[int] = set()
    with connect(h.db_path) as conn:
        report = drain_fleet(
            conn, w.fleet_id, attempted=set(), blocked=blocked, lock_timeout=1, env=h.env, workers=8
        )
    assert sorted(seen) == sorted((mid, True, True, True) for mid in ids)
    assert sorted(report.notified) == sorted(ids.items())
    assert blocked == set()
    intervals = typing_intervals([w.pane(m) for m in recipients])
    assert overlapping(intervals), intervals


def test_placements_sharing_a_pane_are_typed_one_after_another(tmux_db) -> None:
    """Two members whose placements name one pane share its lock: their lines go one after
    the other (one worker), whatever the pool's size."""
    h = tmux_db
    w = build_world(h.db_path, harness=h, members=MEMBERS)
    occupy_loop_slot(h, w)
    shared = w.pane(w.members["m2"])
    sql_write(
        h.db_path,
        "UPDATE member_placements SET mux_pane_id = ? WHERE member_id = ?",
        shared,
        w.members["m3"],
    )
    result, deliveries = broadcast(h, w.members["m1"], "shared", workers=8)
    assert result.stderr == ""
    assert result.stdout.endswith("notified=4\n")
    assert typed_ids(shared) == [deliveries[w.members["m2"]], deliveries[w.members["m3"]]]
    # the two lines' typing intervals in the shared pane do not overlap
    calls = [
        c
        for c in util.shim_calls()
        if c.get("command") == "send-keys"
        and c.get("target") == shared
        and ("-l" in c["argv"] or c["argv"][-1] == "Enter")
    ]
    kinds = ["L" if "-l" in c["argv"] else "E" for c in calls]
    assert kinds == ["L", "E", "L", "E"]
