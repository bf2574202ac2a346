"""The delivery gate seen from the commands (docs/runtime.md §4.9): `message send` to a held pane,
the monitor loop delivering it later, `member ping` reporting the state, `member prompt`
refusing a held pane and a line it could not verify, the wake held while the monitor starts.

Members run the fakes in screen mode (`#fake screen <options>` in the spawn prompt), so the gate
sees Claude Code's real screens in a real private tmux server.
"""

from __future__ import annotations

import json
import re

import pytest

from tests.delivery_helpers import shorten_verification
from tests.fleet_helpers import (
    TS,
    FleetIds,
    create_fleet,
    create_member,
    inproc,
    ok,
    start_loop,
    stop_loop,
)
from tests.harness import util
from tests.harness.fixtures import TmuxHarness
from tests.harness.util import fake_log, line_records, retry_until, start_record

pytestmark = pytest.mark.tmux
EM = "\u2014"


@pytest.fixture
def fleet(tmux_db: TmuxHarness) -> FleetIds:
    ids = create_fleet(tmux_db)
    stop_loop(tmux_db, ids.fleet_id)
    return ids


def screen_member(h: TmuxHarness, fleet_id: int, name: str, options: str) -> tuple[int, str]:
    member_id, pane = create_member(h, fleet_id, name, f"#fake screen {options}\nhello")
    start_record(pane)
    if "start=" not in options:  # its first screen drawn, so the gate never reads `starting`
        util.wait_drawn(pane, h.env)
    return member_id, pane


def send(h: TmuxHarness, sender: int, to: int, text: str, *extra: str) -> tuple[int, str]:
    r = ok(
        h.cli(
            "message", "send", "--from-member-id", str(sender), "--to-member-id", str(to),
            text, "--json", *extra,
        )
    )  # fmt: skip
    data = json.loads(r.stdout)
    # Not typed: the JSON says why, in the words stderr printed about this message.
    note = data["notification_note"]
    assert data["notification_sent"] or (note is not None and note + "\n" in r.stderr), data
    assert note is None or f"message {data['message']['message_id']} " in note, note
    return data["message"]["message_id"], r.stderr


def notified_at(h: TmuxHarness, message_id: int) -> str | None:
    return h.sqlite("SELECT notified_at FROM messages WHERE message_id = ?", message_id)[0][0]


def test_a_message_to_a_starting_member_is_held_then_delivered_by_the_loop(
    tmux_db: TmuxHarness, fleet: FleetIds
) -> None:
    h = tmux_db
    f, d = fleet.fleet_id, fleet.director_id
    m, pane = screen_member(h, f, "late", "start=14")
    loop = start_loop(h, f, "--tick", "1", "--interval", "0")
    msg, stderr = send(h, d, m, "welcome")
    # Not a warning: the line is pending and the loop has it.
    assert stderr == (
        f"Held: message {msg} for member {m} waits while pane {pane} is starting; the monitor "
        "loop will deliver it\n"
    )
    assert notified_at(h, msg) is None and line_records(pane) == []
    loop.wait_line(
        rf"^{TS} tick -> held msg {msg} member {m}: pane {re.escape(pane)} is starting; "
        "the line is held$"
    )
    loop.wait_line(rf"^{TS} tick -> notify msg {msg} member {m}$", timeout=60)
    line = (
        f"[cafleet msg {msg} from Director ({d})] welcome {EM} ack with: cafleet message ack {msg}"
    )
    assert [r["text"] for r in line_records(pane)] == [line]
    # Logged once, not every tick it waited; stamped after the agent had it.
    assert loop.count(rf"held msg {msg} ") == 1
    stamped = notified_at(h, msg)
    assert stamped is not None
    from cafleet.db.timefmt import parse_ts

    got = line_records(pane)[0]["t"]
    stamp = parse_ts(stamped)
    assert stamp is not None and stamp.timestamp() >= got
    assert not [r for r in fake_log(pane) if r.get("kind") in ("dropped", "enter-lost")]


def test_ping_reports_the_pane_state_and_prompt_refuses_what_it_cannot_deliver(
    tmux_db: TmuxHarness, fleet: FleetIds, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = tmux_db
    f = fleet.fleet_id
    slow, slow_pane = screen_member(h, f, "slow", "start=600")
    r = ok(h.cli("member", "ping", str(slow)))
    assert r.stdout == f"Member slow ({slow}, pane {slow_pane}) is starting; ping skipped.\n"
    data = json.loads(ok(h.cli("member", "ping", str(slow), "--json")).stdout)
    assert (data["skipped"], data["reason"], data["state"]) == (True, "held", "starting")
    r = h.cli("member", "prompt", str(slow), "do it")
    assert (r.returncode, r.stdout, r.stderr) == (
        1,
        "",
        f"Error: member {slow}'s pane {slow_pane} is starting; nothing was typed (retry when it "
        "is ready)\n",
    )

    busy, pane = screen_member(h, f, "busy", "work=600")
    r = ok(h.cli("member", "ping", str(busy)))
    assert r.stdout == f"Pinged member busy ({busy}, pane {pane}, ready).\n"
    # The ping started a (600 s) turn: the next ping and a prompt are queued behind it.
    r = ok(h.cli("member", "ping", str(busy)))
    assert r.stdout == f"Pinged member busy ({busy}, pane {pane}, working).\n"
    ok(h.cli("member", "prompt", str(busy), "then this"))
    records = line_records(pane)
    assert [(x["text"][:20], x["queued"]) for x in records] == [
        ("[cafleet] ping: run ", False),
        ("[cafleet] ping: run ", True),
        ("then this", True),
    ]
    assert not [x for x in fake_log(pane) if x.get("kind") == "interrupted"]

    deaf, deaf_pane = screen_member(h, f, "deaf", "swallow-enter=9")
    # In this process, so only the verification's waits shrink (the fake swallows 9 Enters).
    shorten_verification(monkeypatch, verify=2.0, agents=("claude",))
    r = inproc("member", "prompt", str(deaf), "are you there", env=dict(h.env))
    assert (r.returncode, r.stdout) == (1, "")
    assert r.stderr == (
        f"Error: typed into pane {deaf_pane} but not verified: the line is still in the composer "
        "after 3 Enter\n"
    )
    # The pending member and the Director are refused before any screen is read.
    assert inproc("member", "ping", str(fleet.director_id)).returncode == 1


def test_the_wake_waits_while_the_monitor_starts(tmux_db: TmuxHarness) -> None:
    h = tmux_db
    h.tmux("set-environment", "-g", "CAFLEET_FAKE_SCREEN", "start=16")  # every new pane
    ids = create_fleet(h)
    stop_loop(h, ids.fleet_id)
    f, mon = ids.fleet_id, ids.monitor_id
    loop = start_loop(h, f, "--tick", "1", "--interval", "1")
    loop.wait_line(
        rf"^{TS} tick -> wake monitor {mon} held: pane {re.escape(ids.monitor_pane)} is "
        "starting; the line is held$"
    )
    loop.wait_line(rf"^{TS} tick -> wake monitor {mon} \(0 members\)$", timeout=60)
    assert loop.count("held:") == 1
    wakes = [r["text"] for r in line_records(ids.monitor_pane) if "tick: fleet" in r["text"]]
    assert wakes and all(w.startswith(f"[cafleet] tick: fleet {f} {EM}") for w in wakes)
    rows = h.sqlite("SELECT last_wake_at FROM monitor_runtime WHERE fleet_id = ?", f)
    assert rows[0][0] is not None
    retry_until(lambda: loop.count("wake monitor") >= 3, timeout=30)
