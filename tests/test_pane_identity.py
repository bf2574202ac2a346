"""One identity per pane (docs/cli.md §1.5): from an active member's pane, a command acts as that
member only. Sending as another member, reading another's inbox or ACKing another's message is
refused (exit 1, nothing written) naming the pane's member; plain shells, panes no member is
placed in, another server's pane with the same id and the WebUI keep today's rule."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence

import pytest

from tests.fleet_helpers import FleetIds, create_fleet, create_member, ok, table_dump
from tests.harness.fixtures import TmuxHarness

pytestmark = pytest.mark.tmux


def _from(h: TmuxHarness, pane: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The command as the agent in ``pane`` runs it (its TMUX and TMUX_PANE)."""
    return h.cli(*args, env={"TMUX_PANE": pane})


def _refused(
    h: TmuxHarness, pane: str, args: Sequence[str], error: str
) -> subprocess.CompletedProcess[str]:
    before = table_dump(h)
    result = _from(h, pane, *args)
    assert (result.returncode, result.stdout, result.stderr) == (1, "", f"Error: {error}\n")
    assert table_dump(h) == before
    return result


@pytest.fixture
def fleet(tmux_db: TmuxHarness) -> tuple[FleetIds, int, str, int, str]:
    h = tmux_db
    ids = create_fleet(h)
    a, a_pane = create_member(h, ids.fleet_id, "alpha")
    b, b_pane = create_member(h, ids.fleet_id, "beta")
    return ids, a, a_pane, b, b_pane


def test_a_members_pane_acts_as_that_member_only(
    tmux_db: TmuxHarness, fleet: tuple[FleetIds, int, str, int, str]
) -> None:
    h = tmux_db
    ids, a, a_pane, b, _ = fleet
    to_b = ok(_from(h, a_pane, "message", "send", "--from-member-id", str(a),
                    "--to-member-id", str(b), "for beta", "--json"))  # fmt: skip
    for_b = json.loads(to_b.stdout)["message"]["message_id"]
    to_a = ok(h.cli("message", "send", "--from-member-id", str(ids.director_id),
                    "--to-member-id", str(a), "for alpha", "--json"))  # fmt: skip
    for_a = json.loads(to_a.stdout)["message"]["message_id"]

    acts = f"this pane is member {a} (alpha); a command run here acts as member {a} only"
    _refused(h, a_pane, ["message", "send", "--from-member-id", str(b), "--to-member-id",
                         str(ids.director_id), "as beta"], f"{acts}, not as member {b}")  # fmt: skip
    _refused(h, a_pane, ["message", "broadcast", "--from-member-id", str(ids.director_id), "all"],
             f"{acts}, not as member {ids.director_id}")  # fmt: skip
    for command in (["poll", str(b)], ["wait", str(b), "--timeout", "0"],
                    ["stream", str(b), "--timeout", "0"]):  # fmt: skip
        _refused(h, a_pane, ["message", *command], f"{acts}, not as member {b}")
    _refused(
        h, a_pane, ["message", "ack", str(for_b)],
        f"message {for_b} is addressed to member {b}, not to member {a} (alpha) whose pane this "
        f"is; ACK only your own messages (cafleet message poll {a})",
    )  # fmt: skip

    # As itself, everything works.
    polled = ok(_from(h, a_pane, "message", "poll", str(a), "--json"))
    assert [m["message_id"] for m in json.loads(polled.stdout)] == [for_a]
    ok(_from(h, a_pane, "message", "ack", str(for_a)))
    waited = _from(h, a_pane, "message", "wait", str(a), "--timeout", "0")
    assert (waited.returncode, waited.stderr) == (
        124, f"Error: timed out after 0 s with no message for member {a}\n"
    )  # fmt: skip

    # The Director's pane is the Director's placement.
    _refused(
        h, h.director_pane,
        ["message", "send", "--from-member-id", str(a), "--to-member-id", str(b), "x"],
        f"this pane is member {ids.director_id} (Director); a command run here acts as member "
        f"{ids.director_id} only, not as member {a}",
    )  # fmt: skip


def test_task_commands_from_a_members_pane_act_as_that_member_only(
    tmux_db: TmuxHarness, fleet: tuple[FleetIds, int, str, int, str]
) -> None:
    """`--member-id` of claim, done and block is checked like `--from-member-id`."""
    h = tmux_db
    ids, a, a_pane, b, _ = fleet
    created = ok(h.cli("task", "create", "--fleet-id", str(ids.fleet_id), "--title", "t",
                       "--json"))  # fmt: skip
    task = str(json.loads(created.stdout)["task"]["task_id"])
    acts = f"this pane is member {a} (alpha); a command run here acts as member {a} only"
    for args in (["claim", task], ["done", task], ["block", task, "--reason", "r"]):
        _refused(h, a_pane, ["task", *args, "--member-id", str(b)], f"{acts}, not as member {b}")
    claimed = json.loads(ok(_from(h, a_pane, "task", "claim", task, "--member-id", str(a),
                                  "--json")).stdout)  # fmt: skip
    assert claimed["task"]["assignee_member_id"] == a


def test_plain_shells_other_panes_and_the_webui_keep_todays_rule(
    tmux_db: TmuxHarness,
    fleet: tuple[FleetIds, int, str, int, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tests.web_helpers import client, fleet_headers, make_app

    h = tmux_db
    ids, a, a_pane, b, _ = fleet
    send_as_b = ["message", "send", "--from-member-id", str(b), "--to-member-id", str(a), "hi"]
    # No pane at all, or inside tmux but in no pane (TMUX without TMUX_PANE).
    ok(h.cli(*send_as_b, unset=("TMUX", "TMUX_PANE")))
    ok(h.cli(*send_as_b, unset=("TMUX_PANE",)))
    # A pane no member is placed in.
    stranger = h.spawn_fake()
    ok(_from(h, stranger, *send_as_b))
    # The same pane id on another tmux server is another pane.
    elsewhere = {"TMUX": f"{h.dir}/another-server,1,0", "TMUX_PANE": a_pane}
    ok(h.cli(*send_as_b, env=elsewhere))
    # The WebUI sends as the root Director, even from a server started in a member's pane.
    monkeypatch.setenv("TMUX", h.env["TMUX"])
    monkeypatch.setenv("TMUX_PANE", a_pane)
    response = client(make_app(h.db_path)).post(
        "/api/messages/send",
        headers=fleet_headers(ids.fleet_id),
        json={"to_member_id": b, "text": "from the web"},
    )
    assert response.status_code == 200, response.text
    rows = h.sqlite("SELECT from_member_id FROM messages WHERE text = 'from the web'")
    assert rows == [(ids.director_id,)]
    # A member that was deleted no longer owns its pane's identity.
    ok(h.cli("member", "delete", str(a)))
    ok(_from(h, a_pane, "message", "poll", str(b)))
