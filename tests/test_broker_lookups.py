"""Lookups shared by the CLI and the monitor: the active member, the Director's placement."""

from __future__ import annotations

from pathlib import Path

import pytest

from cafleet import broker
from cafleet.broker.errors import FleetNotFound, MemberNotFound
from cafleet.db.runtime import Connection
from tests.broker_helpers import raw_connect
from tests.factories import FakePane, add_member, make_fleet


def test_get_active_member_refuses_unknown_and_deregistered_ids(conn: Connection) -> None:
    boot = make_fleet(conn)
    worker = add_member(conn, boot.fleet.fleet_id)
    assert broker.get_active_member(conn, worker.member_id) == worker
    broker.deregister_member(conn, member_id=worker.member_id)
    for member_id, text in ((worker.member_id, "is deregistered"), (999, "not found")):
        with pytest.raises(MemberNotFound) as exc:  # MemberDeregistered is a MemberNotFound
            broker.get_active_member(conn, member_id)
        assert str(exc.value) == f"member {member_id} {text}"
    assert broker.get_member(conn, worker.member_id).status == "deregistered"  # still readable


def test_director_placement_concrete_pending_missing_and_unknown_fleet(
    conn: Connection, head_db: Path
) -> None:
    boot = make_fleet(conn, director_pane=FakePane("sess", "@2", "%5"))
    fleet_id, director_id = boot.fleet.fleet_id, boot.director.member_id
    placement = broker.director_placement(conn, fleet_id)
    assert placement == boot.director.placement
    assert placement is not None and placement.pane_key == ("tmux", "sess", "%5")

    db = raw_connect(head_db)
    try:
        db.execute(
            "UPDATE member_placements SET mux_pane_id = NULL WHERE member_id = ?", (director_id,)
        )
        pending = broker.director_placement(conn, fleet_id)
        assert pending is not None and pending.mux_pane_id is None and pending.pane_key is None
        db.execute("DELETE FROM member_placements WHERE member_id = ?", (director_id,))
    finally:
        db.close()
    assert broker.director_placement(conn, fleet_id) is None
    with pytest.raises(FleetNotFound):
        broker.director_placement(conn, 999)
