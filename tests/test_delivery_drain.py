"""`drain_recipients` / `drain_fleet` called in this process (docs/runtime.md §4.3, §4.4), against the
private tmux server. The test process never has TMUX set; the drains get the CLI environment
through their ``env`` argument.
"""

from __future__ import annotations

import pytest

from cafleet.db.shapes import HEAD_REVISION, HEAD_VERSION
from tests.delivery_helpers import (
    expected_line,
    local_dir,
    message_row,
    notified_at,
    record_of,
    shorten_verification,
    sql_write,
    typed_ids,
)
from tests.factories import build_world, connect
from tests.harness import util

pytestmark = pytest.mark.tmux


def put(conn, frm: int, to: int, text: str) -> int:
    """Store a message without draining (the repository alone)."""
    from cafleet import broker

    return broker.send_message(conn, from_member_id=frm, to_member_id=to, text=text).message_id


def test_fleet_drain_skips_without_attempts_and_reports_tmux_unusable(tmux_db) -> None:
    from cafleet.delivery.drains import drain_fleet

    h = tmux_db
    w = build_world(h.db_path, harness=h, members=("alice", "bob"))
    a, b = w.members["alice"], w.members["bob"]
    with connect(h.db_path) as conn:
        # nothing pending: no tmux call at all, even without TMUX
        report = drain_fleet(conn, w.fleet_id, attempted=set(), blocked=set(), lock_timeout=1)
        assert (report.notified, report.failures, report.not_attempted) == ([], [], None)
        assert util.shim_calls() == []

        m1 = put(conn, a, b, "one")
        # tmux unusable in this process: fleet-level reason, nothing counts as attempted
        attempted: set[int] = set()
        no_tmux = {k: v for k, v in h.env.items() if k != "TMUX"}
        report = drain_fleet(
            conn, w.fleet_id, attempted=attempted, blocked=set(), lock_timeout=1, env=no_tmux
        )
        assert report.not_attempted == "not inside a tmux session (TMUX is not set)"
        assert (report.notified, report.failures, attempted) == ([], [], set())

        # a pane missing from the live set, or a blocked recipient: skipped, no attempt, no failure
        for live, blocked in ((frozenset({"%999"}), set()), (None, {b})):
            attempted = set()
            report = drain_fleet(
                conn,
                w.fleet_id,
                attempted=attempted,
                blocked=set(blocked),
                lock_timeout=1,
                live_panes=live,
                env=h.env,
            )
            assert (report.notified, report.failures, report.not_attempted) == ([], [], None)
            assert attempted == set()
        assert notified_at(h.db_path, m1) is None

        # before_attempt ends the drain without a failure; the message counts as attempted
        attempted = set()
        report = drain_fleet(
            conn,
            w.fleet_id,
            attempted=attempted,
            blocked=set(),
            lock_timeout=1,
            before_attempt=lambda: False,
            env=h.env,
        )
        assert (report.notified, report.failures) == ([], [])
        assert attempted == {m1}
        # and a drain that already attempted it leaves it alone
        report = drain_fleet(
            conn, w.fleet_id, attempted=attempted, blocked=set(), lock_timeout=1, env=h.env
        )
        assert (report.notified, report.failures) == ([], [])
    assert util.line_records(w.pane(b)) == []
    assert not any(c.get("command") == "send-keys" for c in util.shim_calls())


def test_recheck_under_the_lock_rebound_and_not_pending(tmux_db) -> None:
    from cafleet import broker
    from cafleet.delivery.drains import DrainFailure, drain_recipients

    h = tmux_db
    w = build_world(h.db_path, harness=h, members=("alice", "bob"))
    a, b = w.members["alice"], w.members["bob"]
    with connect(h.db_path) as conn:
        m1 = put(conn, a, b, "rebound")

        def rebind() -> bool:
            sql_write(
                h.db_path,
                "UPDATE member_placements SET mux_pane_id = ? WHERE member_id = ?",
                w.pane(a),
                b,
            )
            return True

        report = drain_recipients(
            conn, [b], attempted=set(), lock_timeout=1, before_attempt=rebind, env=h.env
        )
        assert report.failures == [
            DrainFailure(m1, b, w.pane(b), "placement changed during delivery")
        ]
        assert report.notified == []
        sql_write(
            h.db_path,
            "UPDATE member_placements SET mux_pane_id = ? WHERE member_id = ?",
            w.pane(b),
            b,
        )

        def ack_first() -> bool:
            broker.ack_message(conn, message_id=m1)
            return True

        # ACKed between selection and the lock: not pending any more, not a failure
        report = drain_recipients(
            conn, [b], attempted=set(), lock_timeout=1, before_attempt=ack_first, env=h.env
        )
        assert (report.notified, report.failures) == ([], [])
    assert util.line_records(w.pane(b)) == []
    assert util.line_records(w.pane(a)) == []
    assert notified_at(h.db_path, m1) is None


def test_stamp_failure_after_typing_is_reported_and_leaves_the_row_pending(tmux_db) -> None:
    from cafleet.delivery.drains import DrainFailure, drain_recipients

    h = tmux_db
    w = build_world(h.db_path, harness=h, members=("alice", "bob"))
    a, b = w.members["alice"], w.members["bob"]
    with connect(h.db_path) as conn:
        m1 = put(conn, a, b, "stamp me")

        def change_schema() -> bool:  # the stamp's write-time ledger check then refuses
            sql_write(
                h.db_path, f"UPDATE alembic_version SET version_num = '{HEAD_VERSION + 1:04d}'"
            )
            return True

        try:
            report = drain_recipients(
                conn, [b], attempted=set(), lock_timeout=1, before_attempt=change_schema, env=h.env
            )
        finally:
            sql_write(h.db_path, f"UPDATE alembic_version SET version_num = '{HEAD_REVISION}'")
    pane = w.pane(b)
    assert report.notified == []
    assert report.failures == [
        DrainFailure(
            m1,
            b,
            pane,
            f"typed into pane {pane} but could not record it: the database schema changed while "
            f"this command was running (validated schema {HEAD_VERSION}, now schema "
            f"{HEAD_VERSION + 1}); re-run the command; "
            "the next attempt records it without typing it again",
        )
    ]
    assert util.line_bytes(pane) == [record_of(expected_line(m1, "alice", a, "stamp me"))]
    assert notified_at(h.db_path, m1) is None
    # The database is back: the next drains stamp the line the first one typed, and never type
    # it again (one line per message, however many attempts follow an outage).
    with connect(h.db_path) as conn:
        first = drain_recipients(conn, [b], attempted=set(), lock_timeout=1, env=h.env)
        later = [
            drain_recipients(conn, [b], attempted=set(), lock_timeout=1, env=h.env)
            for _ in range(2)
        ]
    assert (first.notified, first.failures) == ([(m1, b)], [])
    assert all((r.notified, r.failures) == ([], []) for r in later)
    assert notified_at(h.db_path, m1) is not None
    assert util.line_bytes(pane) == [record_of(expected_line(m1, "alice", a, "stamp me"))]


def test_fleet_drain_is_oldest_first_and_blocks_only_the_failed_recipient(tmux_db) -> None:
    from cafleet.delivery.drains import drain_fleet

    h = tmux_db
    w = build_world(h.db_path, harness=h, members=("alice", "bob", "carol"))
    a, b, c = w.members["alice"], w.members["bob"], w.members["carol"]
    h.tmux("copy-mode", "-t", w.pane(b))
    with connect(h.db_path) as conn:
        b1 = put(conn, a, b, "b1")
        c1 = put(conn, a, c, "c1")
        b2 = put(conn, a, b, "b2")
        d1 = put(conn, a, w.director, "never typed")
        attempted: set[int] = set()
        blocked: set[int] = set()
        report = drain_fleet(
            conn, w.fleet_id, attempted=attempted, blocked=blocked, lock_timeout=1, env=h.env
        )
    reason = f"typing into pane {w.pane(b)} failed: pane is in copy-mode"
    assert [(f.message_id, f.recipient_id, f.reason) for f in report.failures] == [(b1, b, reason)]
    assert report.notified == [(c1, c)]
    assert blocked == {b}
    assert attempted == {b1, c1}  # b2 was never attempted: its recipient was blocked
    assert d1 not in attempted
    assert typed_ids(w.pane(c)) == [c1]
    assert util.line_records(w.pane(b)) == []
    assert util.line_records(w.director_pane) == []
    for mid in (b1, b2, d1):
        assert notified_at(h.db_path, mid) is None
    assert message_row(h.db_path, c1)["status_state"] == "input_required"


def test_pending_placement_and_deregistered_recipients(tmux_db) -> None:
    from cafleet import broker
    from cafleet.delivery.drains import drain_fleet, drain_recipients
    from cafleet.mux import PaneKey
    from cafleet.mux.locks import pane_input_lock

    h = tmux_db
    w = build_world(h.db_path, harness=h, members=("alice", "carol", "dave"), pending=("carol",))
    a, c, d = w.members["alice"], w.members["carol"], w.members["dave"]
    with connect(h.db_path) as conn:
        for_carol = put(conn, a, c, "to a pending placement")
        for_dave = put(conn, a, d, "to someone about to leave")
        broker.deregister_member(conn, member_id=d)
        report = drain_recipients(conn, [c], attempted=set(), lock_timeout=1, env=h.env)
        assert (report.notified, report.failures, report.tmux_usable) == ([], [], False)
        report = drain_fleet(conn, w.fleet_id, attempted=set(), blocked=set(), lock_timeout=1)
        assert (report.notified, report.failures, report.not_attempted) == ([], [], None)

        pane = h.spawn_fake()
        with pane_input_lock(
            str(local_dir(h.db_path)), PaneKey("tmux", w.session, pane), timeout=5, purpose="test"
        ):
            broker.set_placement_pane(conn, member_id=c, pane_id=pane)
        report = drain_fleet(
            conn, w.fleet_id, attempted=set(), blocked=set(), lock_timeout=1, env=h.env
        )
        assert report.notified == [(for_carol, c)] and report.failures == []
    assert util.line_bytes(pane) == [
        record_of(expected_line(for_carol, "alice", a, "to a pending placement"))
    ]
    assert util.line_records(w.pane(d)) == []
    assert notified_at(h.db_path, for_dave) is None


def test_a_hook_receipt_verifies_a_line_the_screen_never_shows_taken(tmux_db, monkeypatch) -> None:
    """An agent that took the line and said so through its hook while its screen went on
    showing the line in the composer (seen from the real Gemini CLI under load: the retry typed
    it a second time). The hook's receipt is the agent's own word: the attempt is verified and
    stamped, and the line is typed once (docs/runtime.md §4.9, §4.12)."""
    import threading

    from cafleet import broker
    from cafleet.delivery.drains import drain_recipients

    # The freeze (8 s) outlasts the verification (3 s): without the receipt it would fail.
    shorten_verification(monkeypatch, verify=3.0, agents=("claude",))
    h = tmux_db
    w = build_world(h.db_path, harness=h, members=("alice", "bob"), screen="late=8")
    a, b = w.members["alice"], w.members["bob"]
    pane = w.pane(b)
    errors: list[BaseException] = []

    def hook() -> None:  # the agent's hook fires once the agent has the line
        try:
            util.wait_records(pane, 1, timeout=30)
            with connect(h.db_path) as other:
                broker.record_hook(
                    other, b, state="working", event="UserPromptSubmit", text="", message_ids=[m1]
                )
        except BaseException as exc:  # reported by the test, not lost in the thread
            errors.append(exc)

    with connect(h.db_path) as conn:
        m1 = put(conn, a, b, "taken, says the hook")
        reporter = threading.Thread(target=hook)
        reporter.start()
        outcome = drain_recipients(conn, [b], attempted=set(), lock_timeout=5, env=h.env)
        reporter.join(timeout=60)
        assert errors == []
        assert (outcome.notified, outcome.failures) == ([(m1, b)], [])
        again = drain_recipients(conn, [b], attempted=set(), lock_timeout=5, env=h.env)
        assert (again.notified, again.failures) == ([], [])
    assert notified_at(h.db_path, m1) is not None
    line = expected_line(m1, "alice", a, "taken, says the hook")
    assert [r["text"] for r in util.line_records(pane)] == [line]  # typed once


def test_a_line_its_agent_reported_received_is_stamped_and_never_typed_again(tmux_db) -> None:
    """A retry after the agent's hook reported the line received (an earlier attempt typed it;
    its screen, here one no cue reads, never showed it taken): the line is recorded and nothing
    is typed, whatever the screen says (docs/runtime.md §4.12)."""
    from cafleet import broker
    from cafleet.delivery.drains import drain_recipients

    h = tmux_db
    w = build_world(h.db_path, harness=h, members=("alice", "bob"))
    a, b = w.members["alice"], w.members["bob"]
    pane = w.pane(b)
    with connect(h.db_path) as conn:
        m1 = put(conn, a, b, "already had it")
        broker.record_hook(
            conn, b, state="working", event="UserPromptSubmit", text="", message_ids=[m1]
        )
        calls_before = len(util.shim_calls())
        outcome = drain_recipients(conn, [b], attempted=set(), lock_timeout=5, env=h.env)
        assert (outcome.notified, outcome.failures) == ([(m1, b)], [])
    assert notified_at(h.db_path, m1) is not None
    assert util.line_records(pane) == []
    typing = [
        c for c in util.shim_calls()[calls_before:]
        if c.get("target") == pane and c.get("command") in ("send-keys", "paste-buffer")
    ]  # fmt: skip
    assert typing == []


def test_a_retry_finds_the_line_an_unverified_attempt_typed_and_never_types_it_twice(
    tmux_db, monkeypatch
) -> None:
    """An agent that redraws late (seen from opencode under load): the first attempt's
    verification gives up while the screen still shows the line in the composer, though the
    agent took it. The next drain finds the message's frame taken on screen and stamps it
    without typing the line again (docs/runtime.md §4.9)."""
    from cafleet.delivery.drains import DrainFailure, drain_recipients
    from cafleet.delivery.screens import composer_text
    from cafleet.mux import get_backend

    # Only the waits shrink (so the freeze outlasts the verification with a wide margin):
    # what the verification concludes is the same as with 15 s and 3 s.
    shorten_verification(monkeypatch, verify=1.0, agents=("claude",))
    h = tmux_db
    w = build_world(h.db_path, harness=h, members=("alice", "bob"), screen="late=8")
    a, b = w.members["alice"], w.members["bob"]
    pane = w.pane(b)
    with connect(h.db_path) as conn:
        m1 = put(conn, a, b, "redrawn late")
        first = drain_recipients(conn, [b], attempted=set(), lock_timeout=5, env=h.env)
        assert first.notified == []
        assert first.failures == [
            DrainFailure(
                m1,
                b,
                pane,
                f"typed into pane {pane} but not verified: the line is still in the composer "
                "after 3 Enter",
            )
        ]
        assert notified_at(h.db_path, m1) is None
        line = expected_line(m1, "alice", a, "redrawn late")
        assert [r["text"] for r in util.line_records(pane)] == [line]

        # The agent's screen catches up: the line is in its transcript, the composer empty.
        backend = get_backend("tmux", env=h.env)
        util.retry_until(lambda: composer_text("claude", backend.screen(pane)) == "", timeout=30)
        calls_before = len(util.shim_calls())
        second = drain_recipients(conn, [b], attempted=set(), lock_timeout=5, env=h.env)
        assert (second.notified, second.failures) == ([(m1, b)], [])
    assert notified_at(h.db_path, m1) is not None
    assert len(util.line_records(pane)) == 1  # taken once, never typed twice
    typing = [
        c for c in util.shim_calls()[calls_before:]
        if c.get("target") == pane and c.get("command") in ("send-keys", "paste-buffer")
    ]  # fmt: skip
    assert typing == []
