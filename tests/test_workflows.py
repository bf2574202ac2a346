"""The workflow layer called directly, as the WebUI calls it: typed results, typed errors whose
text is what the CLI prints, and no output of its own (no tmux needed for these paths)."""

from __future__ import annotations

import os

import pytest

from cafleet import broker
from cafleet.workflows import fleets, members, panes
from cafleet.workflows.errors import WorkflowError
from cafleet.workflows.spawning import WorkflowUsageError
from tests.broker_helpers import table_counts
from tests.factories import add_member, make_fleet


@pytest.fixture
def settings(head_db):
    from cafleet.config import load_settings

    return load_settings()


def test_member_delete_without_a_pane_returns_its_status(conn, settings, capsys) -> None:
    fid = make_fleet(conn).fleet.fleet_id
    pending = add_member(conn, fid, name="pending", pane_id=None)
    unplaced = add_member(conn, fid, name="unplaced", placed=False)
    assert members.delete(conn, settings, pending.member_id) == members.Deleted(
        pending.member_id, None, "pending", None
    )
    assert members.delete(conn, settings, unplaced.member_id) == members.Deleted(
        unplaced.member_id, None, "no_placement", None
    )
    assert capsys.readouterr() == ("", "")


def test_member_refusals_carry_the_cli_text(conn, settings, head_db) -> None:
    boot = make_fleet(conn)
    fid = boot.fleet.fleet_id
    pending = add_member(conn, fid, name="pending", pane_id=None)
    unplaced = add_member(conn, fid, name="unplaced", placed=False)
    director = boot.director.member_id
    before = table_counts(head_db)
    from cafleet.mux.locks import acquire_pane_lock
    from cafleet.workflows.halfmade import creation_key

    # Its `member create` is still running: it holds the creation lock (docs/cli.md §2.7).
    creating = acquire_pane_lock(
        settings.db_dir, creation_key(fid, "pending"), timeout=0, purpose="test"
    )

    with pytest.raises(WorkflowError) as refused:
        members.prompt(conn, settings, director, "hi")
    assert str(refused.value) == (
        f"cafleet never types into the root Director's pane (member {director})"
    )
    with pytest.raises(WorkflowError) as refused:
        panes.capture_member(conn, pending.member_id, lines=5)
    assert str(refused.value) == (
        f"member {pending.member_id} has no pane yet (pending placement) \u2014 nothing to capture"
    )
    with pytest.raises(WorkflowError) as refused:
        members.ping(conn, settings, unplaced.member_id)
    assert str(refused.value) == (
        f"member {unplaced.member_id} has no placement row; it was not spawned via "
        "'cafleet member create'"
    )
    pinged = members.ping(conn, settings, pending.member_id)
    assert (pinged.pane_id, pinged.skipped, pinged.reason) == (None, True, "pending_placement")
    # Once no create holds it, the pending member is half-made: its create was interrupted.
    creating.release()
    with pytest.raises(WorkflowError) as refused:
        members.ping(conn, settings, pending.member_id)
    assert str(refused.value) == (
        f"member {pending.member_id} (pending) has no pane: the 'cafleet member create' (pid "
        f"{os.getpid()}) that registered it was interrupted; run 'cafleet member respawn "
        f"{pending.member_id}' (or remove it: 'cafleet member delete {pending.member_id}')"
    )
    assert table_counts(head_db) == before


def test_member_create_checks_options_before_reading_the_prompt(conn, settings) -> None:
    fid = make_fleet(conn).fleet.fleet_id
    read: list[str] = []

    def prompt() -> str:
        read.append("read")
        return "hello {member_id}"

    with pytest.raises(WorkflowUsageError) as bad:
        members.create(
            conn,
            settings,
            fleet_id=fid,
            name="w",
            description="d",
            coding_agent="claude",
            model=None,
            effort="nonsense",
            role=None,
            prompt=prompt,
        )
    assert "--effort" in str(bad.value)
    assert read == []


def test_fleet_delete_returns_the_count(conn, settings) -> None:
    boot = make_fleet(conn)
    fid = boot.fleet.fleet_id
    a = add_member(conn, fid, name="a")
    deleted = fleets.delete(conn, settings, fid, keep_panes=True)
    assert (deleted.fleet_id, deleted.deregistered_count, deleted.loop_stopped) == (fid, 3, None)
    assert [(r.member_id, r.status) for r in deleted.panes] == [
        (boot.director.member_id, "director"),
        (boot.monitor.member_id, "kept"),
        (a.member_id, "kept"),
    ]
    # Without --keep-panes and outside tmux, the panes cannot be killed: nothing happens.
    other = make_fleet(conn, name="other")
    with pytest.raises(WorkflowError, match="^cannot kill the panes of fleet "):
        fleets.delete(conn, settings, other.fleet.fleet_id)
    assert broker.get_fleet(conn, other.fleet.fleet_id).deleted_at is None


def test_inbox_wait_and_stream_return_messages_and_warn_nothing_without_panes(
    conn, settings, head_db
) -> None:
    from cafleet import broker
    from cafleet.cli.guard import open_validated_connection
    from cafleet.db.runtime import close_connection
    from cafleet.workflows import inbox
    from cafleet.workflows.errors import WaitTimedOut

    boot = make_fleet(conn)
    fid = boot.fleet.fleet_id
    a = add_member(conn, fid, name="a", placed=False)
    b = add_member(conn, fid, name="b", placed=False)
    warned: list[str] = []
    with pytest.raises(WaitTimedOut) as timed_out:  # an empty inbox at the deadline
        inbox.wait(conn, settings, b.member_id, timeout=0, warn=warned.append)
    assert (timed_out.value.error_code, str(timed_out.value)) == (
        "timeout",
        f"timed out after 0 s with no message for member {b.member_id}",
    )
    m1 = broker.send_message(conn, from_member_id=a.member_id, to_member_id=b.member_id, text="1")
    m2 = broker.send_message(conn, from_member_id=a.member_id, to_member_id=b.member_id, text="2")
    waited = inbox.wait(conn, settings, b.member_id, timeout=5, warn=warned.append)
    assert [m.message_id for m in waited] == [m1.message_id, m2.message_id]  # oldest first
    streamed = inbox.stream(conn, b.member_id, timeout=0)
    assert [m.message_id for m in streamed] == [m1.message_id, m2.message_id]
    assert warned == []
    endless = inbox.stream(conn, b.member_id, timeout=None)
    assert [next(endless).message_id, next(endless).message_id] == [m1.message_id, m2.message_id]
    other = open_validated_connection(str(head_db))  # data_version moves for others' commits
    try:
        broker.deregister_member(other, member_id=b.member_id)
    finally:
        close_connection(other)
    with pytest.raises(WorkflowError) as gone:
        next(endless)
    assert str(gone.value) == f"member {b.member_id} was deregistered"
