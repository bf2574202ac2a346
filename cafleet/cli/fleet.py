"""`cafleet fleet …` commands (cli.md §2.3–§2.6)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from cafleet.cli.app import fleet_group
from cafleet.cli.context import fail, invocation, lock_busy_message
from cafleet.cli.params import id_argument, json_option
from cafleet.output import (
    cell,
    counted_table,
    fleet_dict,
    label_lines,
    out,
    out_json,
    out_lines,
    plural,
)

if TYPE_CHECKING:
    from cafleet.records import FleetSummary, PaneKey, Placement

SHOW_LABEL_WIDTH = 12
FLEET_ID_HELP = "Fleet ID."


# --- fleet list ----------------------------------------------------------------------------------


@fleet_group.command("list", help="List live fleets, newest first.")
@json_option
def fleet_list(as_json: bool) -> None:
    conn = invocation().connection()
    from cafleet.broker.fleets import list_fleets

    fleets = list_fleets(conn)
    if as_json:
        out_json([fleet_dict(f) for f in fleets])
        return
    headers = ("fleet_id", "name", "director", "monitor", "members", "created_at")
    rows = [
        (
            str(f.fleet_id),
            cell(f.name),
            cell(f.director_member_id),
            cell(f.monitor_member_id),
            str(f.member_count),
            cell(f.created_at),
        )
        for f in fleets
    ]
    out_lines(counted_table("fleet", headers, rows))


# --- fleet show ----------------------------------------------------------------------------------


def fleet_show_lines(summary: FleetSummary) -> list[str]:
    pairs = [
        ("fleet_id", str(summary.fleet_id)),
        ("name", cell(summary.name)),
        ("created_at", cell(summary.created_at)),
    ]
    if summary.deleted_at is not None:
        pairs.append(("deleted_at", cell(summary.deleted_at)))
    pairs += [
        ("director", cell(summary.director_member_id)),
        ("monitor", cell(summary.monitor_member_id)),
        ("members", str(summary.member_count)),
    ]
    return label_lines(pairs, SHOW_LABEL_WIDTH)


@fleet_group.command("show", help="Show one fleet, soft-deleted fleets included.")
@id_argument("fleet_id", FLEET_ID_HELP)
@json_option
def fleet_show(fleet_id: int, as_json: bool) -> None:
    conn = invocation().connection()
    from cafleet.broker.fleets import fleet_summary

    summary = fleet_summary(conn, fleet_id)
    if as_json:
        out_json(fleet_dict(summary))
    else:
        out_lines(fleet_show_lines(summary))


# --- fleet delete --------------------------------------------------------------------------------


@contextlib.contextmanager
def _fleet_pane_locks(
    db_dir: str, fleet_id: int, placements: list[Placement], timeout: int
) -> Iterator[tuple[set[PaneKey], Callable[[PaneKey], bool]]]:
    """Take each concrete placement's pane lock once, in ascending lock-file order, waiting at
    most `timeout` seconds each (runtime.md §3.3). Yields the locked keys and the one-try
    callback `delete_fleet` uses for a placement that gained its pane meanwhile. Everything is
    released on exit. A busy lock fails with §1.11's message naming that placement's member.
    """
    from cafleet import signals
    from cafleet.mux.locks import PaneLockAbandoned, PaneLockTimeout, acquire_pane_locks

    owners: dict[PaneKey, int] = {}
    for placement in placements:
        if placement.pane_key is not None:
            owners.setdefault(placement.pane_key, placement.member_id)
    try:
        held = acquire_pane_locks(
            db_dir,
            owners,
            timeout=timeout,
            purpose=f"fleet delete {fleet_id}",
            keep_waiting=signals.keep_waiting,
        )
    except PaneLockAbandoned:
        signals.check()
        raise
    except PaneLockTimeout as exc:
        fail(lock_busy_message(owners[exc.key]))
    with held:
        yield set(held.keys), held.try_add


@fleet_group.command(
    "delete",
    help=(
        "Soft-delete a fleet: deregister its members and drop their placements "
        "(panes are not killed; messages stay)."
    ),
)
@id_argument("fleet_id", FLEET_ID_HELP)
@json_option
def fleet_delete(fleet_id: int, as_json: bool) -> None:
    inv = invocation()
    conn = inv.connection()
    from cafleet import signals
    from cafleet.broker.errors import PlacementsChanged
    from cafleet.broker.fleets import delete_fleet, fleet_placements, get_fleet

    get_fleet(conn, fleet_id)  # unknown: `fleet '<id>' not found.`
    placements = fleet_placements(conn, fleet_id)
    with _fleet_pane_locks(inv.db_dir, fleet_id, placements, inv.settings.pane_lock_timeout) as (
        locked,
        try_lock,
    ):
        signals.check()
        try:
            count = delete_fleet(conn, fleet_id=fleet_id, locked_panes=locked, try_lock=try_lock)
        except PlacementsChanged as exc:
            fail(lock_busy_message(exc.member_id))
    if as_json:
        out_json({"fleet_id": fleet_id, "deregistered_count": count})
    else:
        out(f"Deleted fleet {fleet_id}. Deregistered {plural(count, 'member')}.")
