"""The pane is ours (docs/runtime.md §1.8): a placement records the tmux server it was made on, and
nothing is typed into, captured from or killed in a pane that is another server's (pane ids are
per server) or that sits in another session or window than the placement names (a reused id).

Two real private tmux servers: the harness's, where the fleet lives, and a second one in the
same private directory, from which the commands are run.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from tests.fleet_helpers import (
    FleetIds,
    create_fleet,
    create_member,
    ok,
    sql_write,
    stop_loop,
    table_dump,
)
from tests.harness.fixtures import TmuxHarness
from tests.harness.util import line_records, start_record

pytestmark = pytest.mark.tmux


@pytest.fixture
def fleet(tmux_db: TmuxHarness) -> FleetIds:
    ids = create_fleet(tmux_db)
    stop_loop(tmux_db, ids.fleet_id)
    return ids


@pytest.fixture
def other_server(tmux_harness: TmuxHarness) -> Iterator[dict[str, str]]:
    """A second tmux server whose first pane runs a fake claude; yields the CLI environment of
    that pane (TMUX, TMUX_PANE). Killed at the end."""
    h = tmux_harness
    name = f"{h.socket_name}-other"
    base = [h.real_tmux, "-L", name, "-f", "/dev/null"]
    subprocess.run(
        [*base, "new-session", "-d", "-s", "other", "-x", "200", "-y", "50",
         str(h.bin_dir / "claude")],
        env=h.server_env, check=True, capture_output=True, timeout=15,
    )  # fmt: skip
    try:
        out = subprocess.run(
            [*base, "display-message", "-p", "-t", "=other:", "#{socket_path}|#{pid}|#{pane_id}"],
            check=True, capture_output=True, text=True, timeout=10,
        ).stdout.strip()  # fmt: skip
        socket, pid, pane = out.split("|")
        start_record(pane, timeout=15)
        yield {"TMUX": f"{socket},{pid},0", "TMUX_PANE": pane, "pane": pane, "socket": socket}
    finally:
        subprocess.run([*base, "kill-server"], capture_output=True, timeout=10)


def _socket(h: TmuxHarness, member_id: int) -> Any:
    return h.sqlite("SELECT mux_socket FROM member_placements WHERE member_id = ?", member_id)[0][0]


def test_placements_record_their_server(tmux_db: TmuxHarness, fleet: FleetIds) -> None:
    h = tmux_db
    member_id, _pane = create_member(h, fleet.fleet_id, "here")
    for mid in (fleet.director_id, fleet.monitor_id, member_id):
        assert _socket(h, mid) == h.socket_path


def test_commands_from_another_server_reach_the_placements_own_pane(
    tmux_db: TmuxHarness, fleet: FleetIds, other_server: dict[str, str]
) -> None:
    """Run from another tmux server's pane, a command reaches a member's pane on the server its
    placement records (docs/cli.md §1.11), never the pane with the same id over there; only
    `member create`, which splits the caller's own window, refuses."""
    h = tmux_db
    member_id, pane = create_member(h, fleet.fleet_id, "here")
    start_record(pane)
    there = {"TMUX": other_server["TMUX"], "TMUX_PANE": other_server["TMUX_PANE"]}
    ok(h.cli("member", "prompt", str(member_id), "via the recorded socket", env=there))
    ok(h.cli("member", "ping", str(member_id), env=there))
    ok(h.cli("member", "capture", str(member_id), env=there))
    sent = ok(
        h.cli(
            "message", "send", "--from-member-id", str(fleet.director_id), "--to-member-id",
            str(member_id), "hello", "--json", env=there,
        )
    )  # fmt: skip
    assert json.loads(sent.stdout)["notification_sent"] is True, sent.stderr
    texts = [r["text"] for r in line_records(pane)]
    assert texts[0] == "via the recorded socket" and len(texts) == 3, texts
    assert line_records(other_server["pane"]) == []
    before = table_dump(h)
    r = h.cli(
        "member", "create", "--fleet-id", str(fleet.fleet_id), "--name", "x", "--description",
        "d", "p", env=there,
    )  # fmt: skip
    assert (r.returncode, r.stderr) == (
        1,
        f"Error: pane {h.director_pane} belongs to another tmux server or was reused\n",
    )
    assert table_dump(h) == before and pane in h.live_panes()


def test_a_pane_id_that_now_names_a_pane_elsewhere_is_not_ours(
    tmux_db: TmuxHarness, fleet: FleetIds
) -> None:
    """The placement names a window the pane is not in (as after a server restart reused the
    id): typed into, captured and killed never."""
    h = tmux_db
    member_id, pane = create_member(h, fleet.fleet_id, "moved")
    start_record(pane)
    refusal = f"Error: pane {pane} belongs to another tmux server or was reused\n"
    sql_write(
        h, "UPDATE member_placements SET mux_window_id = '@999' WHERE member_id = ?", member_id
    )
    for args in (
        ("member", "prompt", str(member_id), "hi"),
        ("member", "capture", str(member_id)),
        ("member", "delete", str(member_id)),
    ):
        r = h.cli(*args)
        assert (r.returncode, r.stderr) == (1, refusal), args
    r = ok(h.cli("monitor", "scan", str(fleet.fleet_id)))
    assert f"capture failed: pane {pane} belongs to another tmux server or was reused" in r.stdout
    assert line_records(pane) == [] and pane in h.live_panes()
    # A placement from before revision 0003 (no socket) is still checked by session and window.
    sql_write(h, "UPDATE member_placements SET mux_socket = NULL WHERE member_id = ?", member_id)
    assert h.cli("member", "prompt", str(member_id), "hi").stderr == refusal
    sql_write(
        h,
        "UPDATE member_placements SET mux_window_id = ? WHERE member_id = ?",
        h.window_id,
        member_id,
    )
    ok(h.cli("member", "prompt", str(member_id), "back home"))
    assert [r["text"] for r in line_records(pane)] == ["back home"]


def test_respawn_and_fleet_delete_from_another_server_touch_nothing(
    tmux_db: TmuxHarness, fleet: FleetIds, other_server: dict[str, str]
) -> None:
    """Life's recovery and teardown go through the same check: from another tmux server,
    `member respawn` refuses to split there (the Director's pane is not on it) and `fleet
    delete` refuses to kill panes it cannot call its own; nothing is killed, split or written."""
    h = tmux_db
    member_id, pane = create_member(h, fleet.fleet_id, "lost")
    start_record(pane)
    h.tmux("kill-pane", "-t", pane)
    there = {"TMUX": other_server["TMUX"], "TMUX_PANE": other_server["TMUX_PANE"]}
    before, panes, calls = table_dump(h), h.live_panes(), len(h.shim_calls())

    r = h.cli("member", "respawn", str(member_id), env=there)
    assert (r.returncode, r.stdout, r.stderr) == (
        1,
        "",
        f"Error: pane {h.director_pane} belongs to another tmux server or was reused\n",
    )
    r = h.cli("fleet", "delete", str(fleet.fleet_id), env=there)
    assert (r.returncode, r.stdout) == (1, "")
    assert r.stderr == (
        f"Error: cannot kill the panes of fleet {fleet.fleet_id}: pane {fleet.monitor_pane} "
        "belongs to another tmux server or was reused; run the command inside the fleet's tmux "
        "server, or pass --keep-panes to leave the panes running\n"
    )
    assert table_dump(h) == before and h.live_panes() == panes
    touched = [
        c for c in h.shim_calls()[calls:]
        if c.get("command") in ("kill-pane", "split-window", "new-window")
    ]  # fmt: skip
    assert touched == []
    assert other_server["pane"] in _other_panes(h)

    # From the fleet's own server the respawn records this server in the moved placement.
    sql_write(h, "UPDATE member_placements SET mux_socket = NULL WHERE member_id = ?", member_id)
    ok(h.cli("member", "respawn", str(member_id)))
    assert _socket(h, member_id) == h.socket_path


def _other_panes(h: TmuxHarness) -> list[str]:
    out = subprocess.run(
        [h.real_tmux, "-L", f"{h.socket_name}-other", "list-panes", "-a", "-F", "#{pane_id}"],
        env=h.server_env, check=True, capture_output=True, text=True, timeout=10,
    ).stdout  # fmt: skip
    return out.split()


def test_a_reused_pane_id_is_not_killed_by_fleet_delete_nor_blocks_respawn(
    tmux_db: TmuxHarness, fleet: FleetIds
) -> None:
    """A placement whose pane id now names a pane in another window of the same server: its own
    pane is gone, so `member respawn` re-creates it without touching the other pane, and `fleet
    delete` reports it `already gone` and leaves that pane running."""
    h = tmux_db
    member_id, pane = create_member(h, fleet.fleet_id, "moved")
    start_record(pane)
    sql_write(
        h, "UPDATE member_placements SET mux_window_id = '@999' WHERE member_id = ?", member_id
    )
    r = ok(h.cli("member", "respawn", str(member_id)))
    assert f"(was {pane};" in r.stdout
    assert pane in h.live_panes()  # the other pane was not killed
    new_pane = h.sqlite("SELECT mux_pane_id FROM member_placements WHERE member_id = ?", member_id)[
        0
    ][0]
    assert new_pane != pane and _socket(h, member_id) == h.socket_path

    second, second_pane = create_member(h, fleet.fleet_id, "reused")
    sql_write(h, "UPDATE member_placements SET mux_window_id = '@999' WHERE member_id = ?", second)
    result = json.loads(ok(h.cli("fleet", "delete", str(fleet.fleet_id), "--json")).stdout)
    statuses = {p["member_id"]: p["pane_status"] for p in result["panes"]}
    assert statuses[second] == "already_gone" and statuses[member_id] == "killed"
    assert second_pane in h.live_panes() and new_pane not in h.live_panes()


def test_fleet_adopt_from_another_server_asks_the_directors_own_server(
    tmux_db: TmuxHarness, fleet: FleetIds, other_server: dict[str, str]
) -> None:
    """Pane ids are per server: `fleet adopt` run in a pane of another tmux server asks the
    Director's own server (its placement's socket) whether the Director's pane is still open.
    Open there: refused, nothing written. Gone: the pane of the other server becomes the
    Director's, with that server recorded; the fleet's panes on the first server are untouched."""
    h = tmux_db
    f, d = fleet.fleet_id, fleet.director_id
    member_id, member_pane = create_member(h, f, "stays")
    there = {"TMUX": other_server["TMUX"], "TMUX_PANE": other_server["TMUX_PANE"]}
    before = table_dump(h)
    r = h.cli("fleet", "adopt", str(f), env=there)
    assert (r.returncode, r.stdout, r.stderr) == (
        1,
        "",
        f"Error: fleet {f}'s root Director pane {h.director_pane} is still open; "
        "'cafleet fleet adopt' replaces a Director pane that is gone\n",
    )
    assert table_dump(h) == before

    h.tmux("kill-pane", "-t", h.director_pane)
    panes = h.live_panes()
    result = ok(h.cli("fleet", "adopt", str(f), env=there))
    assert result.stdout.splitlines()[0] == (
        f"Adopted fleet {f}: its root Director (member {d}) is now pane {other_server['pane']} "
        f"(was {h.director_pane})."
    )
    assert h.sqlite(
        "SELECT mux_session, mux_pane_id, mux_socket FROM member_placements WHERE member_id = ?",
        d,
    ) == [("other", other_server["pane"], other_server["socket"])]
    assert _socket(h, member_id) == h.socket_path and h.live_panes() == panes
    assert member_pane in panes
    ok(h.cli("monitor", "stop", str(f), env=there))
