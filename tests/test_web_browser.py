"""The WebUI page in real headless Chromium (Debian's /usr/bin/chromium driven by Playwright),
against the real `cafleet server`, real files and a private tmux server with fake agents."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Any

from tests.delivery_helpers import expected_line, rows
from tests.factories import build_world, connect
from tests.fleet_helpers import start_loop, stop_loop
from tests.harness import util
from tests.harness.fixtures import TmuxHarness
from tests.web_helpers import insert_messages, poll, serve, start_server

HOSTILE_BODIES = (
    "<script>window.__xss = 1</script>",
    '"><img src=x onerror="window.__xss = 2">',
)
HOSTILE_NAME = "<img src=x onerror=window.__xss=3>"


def texts(page: Any, selector: str) -> list[str]:
    return [t.strip() for t in page.locator(selector).all_inner_texts()]


def test_roster_timeline_groups_and_hostile_text(tmux_db: TmuxHarness, page: Any) -> None:
    from cafleet import broker

    world = build_world(
        tmux_db.db_path,
        members=("alice", "bob", HOSTILE_NAME),
        unplaced=(HOSTILE_NAME,),
        harness=tmux_db,
    )
    alice, bob, odd = (world.members[n] for n in ("alice", "bob", HOSTILE_NAME))
    with connect(tmux_db.db_path) as conn:
        broker.send_message(conn, from_member_id=alice, to_member_id=bob, text="plain words")
        cast = broker.broadcast_message(conn, from_member_id=world.director, text="hello team")
        broker.ack_message(conn, message_id=cast.deliveries[1].message_id)
        for body in HOSTILE_BODIES:
            broker.send_message(conn, from_member_id=odd, to_member_id=alice, text=body)
    server = serve(tmux_db)
    try:
        page.goto(server.url)
        poll(
            lambda: page.locator("[data-testid=member]").count() == 5, message="roster never filled"
        )
        assert texts(page, "[data-testid=member-name]") == [
            "Director",
            "monitor",
            "alice",
            "bob",
            HOSTILE_NAME,
        ]
        states = dict(
            zip(
                [
                    int(x)
                    for x in page.locator("[data-testid=member]").evaluate_all(
                        "els => els.map(e => e.dataset.memberId)"
                    )
                ],
                texts(page, "[data-testid=member-pane-state]"),
                strict=True,
            )
        )
        # The fake agent draws no cues the classifier knows: alive, activity unknown
        # (docs/webui.md: the pane state is the check's answer plus the classifier's state).
        assert states[alice] == "alive (unknown)" and states[odd] == "none"
        alice_row = page.locator(f"[data-testid=member][data-member-id='{alice}']")
        assert "2 un-ACKed" in alice_row.inner_text()  # the two hostile bodies
        assert "claude" in alice_row.inner_text() and world.panes[alice] in alice_row.inner_text()
        # the only live fleet is picked by default
        assert page.locator("[data-testid=fleet-picker]").input_value() == str(world.fleet_id)

        # one broadcast group with its counts and per-recipient ACK times
        poll(lambda: page.locator("[data-testid=broadcast]").count() == 1)
        group = page.locator("[data-testid=broadcast]")
        assert group.locator("[data-testid=recipient-count]").inner_text() == "4 recipients"
        assert group.locator("[data-testid=ack-count]").inner_text() == "1 ACKed"
        assert group.locator("[data-testid=recipient]").count() == 4
        acked = group.locator("[data-testid=ack-time]")
        assert acked.count() == 1
        stamp = rows(tmux_db.db_path, "SELECT status_timestamp FROM messages WHERE message_id = ?",
                     cast.deliveries[1].message_id)[0][0]  # fmt: skip
        assert acked.get_attribute("title") == stamp
        assert group.locator("[data-testid=body]").inner_text() == "hello team"
        bodies = texts(page, "[data-testid=unicast] [data-testid=body]")
        assert bodies == ["plain words", *HOSTILE_BODIES]  # creation order
        assert page.locator("[data-testid=limit-note]").is_hidden()

        # hostile strings are text: no element was made from them and no script ran
        assert page.evaluate("window.__xss") is None
        assert page.locator("main img").count() == 0
        assert page.locator("#timeline script").count() == 0

        # the pane view shows the member's capture
        alice_row.click()
        poll(lambda: "fake-claude ready" in page.locator("[data-testid=pane-text]").inner_text())
        assert page.locator("[data-testid=pane-title]").inner_text() == f"alice ({alice})"
    finally:
        assert server.stop() == 0


def test_limit_note_when_200_deliveries_are_shown(head_db: Path, page: Any, tmp_path: Path) -> None:
    world = build_world(head_db, members=("alice",))
    ts = "2026-01-01T00:00:00.000000+00:00"
    alice = world.members["alice"]
    insert_messages(
        head_db,
        [
            (alice, world.director, alice, "unicast", ts, "input_required", ts, None, f"m{i}")
            for i in range(201)
        ],
    )
    server = start_server(cwd=tmp_path)
    try:
        page.goto(server.url)
        note = page.locator("[data-testid=limit-note]")
        poll(lambda: note.is_visible(), message="no limit note")
        assert "newest 200 deliveries" in note.inner_text()
        assert page.locator("[data-testid=unicast]").count() == 200
    finally:
        server.stop()


def test_composed_messages_become_rows_and_reach_the_fake_agent(
    tmux_db: TmuxHarness, page: Any
) -> None:
    world = build_world(tmux_db.db_path, members=("alice", "bob"), harness=tmux_db)
    alice = world.members["alice"]
    server = serve(tmux_db)
    try:
        page.goto(server.url)
        poll(lambda: page.locator("[data-testid=member]").count() == 4)
        page.locator("[data-testid=compose-text]").fill("@alice hello from the web")
        page.locator("[data-testid=compose-send]").click()
        result = page.locator("[data-testid=compose-result]")
        poll(
            lambda: "Sent message" in result.inner_text(),
            timeout=30,
            message=lambda: result.inner_text(),
        )
        assert "notified" in result.inner_text()
        poll(
            lambda: (
                texts(page, "[data-testid=unicast] [data-testid=body]") == ["hello from the web"]
            )
        )
        (message_id,) = [r[0] for r in rows(tmux_db.db_path, "SELECT message_id FROM messages")]
        line = expected_line(message_id, "Director", world.director, "hello from the web")
        poll(lambda: util.line_bytes(world.pane(alice)) == [line.encode()], timeout=20,
             message=lambda: str(util.line_bytes(world.pane(alice))))  # fmt: skip
        assert rows(
            tmux_db.db_path, "SELECT from_member_id, notified_at IS NOT NULL FROM messages"
        ) == [(world.director, 1)]

        # @all broadcasts: one group, every other active member typed into
        page.locator("[data-testid=compose-text]").fill("@all standup")
        page.locator("[data-testid=compose-send]").click()
        poll(lambda: "Broadcast to 3 recipients, 3 notified." in result.inner_text(), timeout=40,
             message=lambda: result.inner_text())  # fmt: skip
        poll(
            lambda: (
                page.locator("[data-testid=broadcast] [data-testid=recipient-count]").count() == 1
            )
        )
        assert (
            page.locator("[data-testid=broadcast] [data-testid=recipient-count]").inner_text()
            == "3 recipients"
        )
        for member in (world.monitor, alice, world.members["bob"]):
            poll(
                lambda m=member: any(b"standup" in b for b in util.line_bytes(world.pane(m))),
                timeout=20,
            )

        # an unknown name is refused on the page, nothing is sent
        page.locator("[data-testid=compose-text]").fill("@nobody hi")
        page.locator("[data-testid=compose-send]").click()
        poll(
            lambda: (
                result.inner_text() == "No active member is named nobody; the active members "
                "are @Director, @monitor, @alice, @bob."
            )
        )
        assert len(rows(tmux_db.db_path, "SELECT 1 FROM messages")) == 1 + 4
    finally:
        server.stop()


def test_monitor_popover_sets_the_interval_and_wakes_the_monitor(
    tmux_db: TmuxHarness, page: Any
) -> None:
    world = build_world(tmux_db.db_path, members=("alice",), harness=tmux_db)
    loop = start_loop(tmux_db, world.fleet_id, "--interval", "0")
    server = serve(tmux_db)
    try:
        page.goto(server.url)
        page.locator("[data-testid=monitor-toggle]").click()
        state = page.locator("[data-testid=monitor-state]")
        poll(lambda: state.inner_text() == "Loop live")
        assert page.locator("[data-testid=monitor-pid]").inner_text() == str(loop.proc.pid)
        page.locator("[data-testid=interval]").fill("77")
        page.locator("[data-testid=interval-save]").click()
        out = page.locator("[data-testid=monitor-result]")
        poll(lambda: out.inner_text() == "Wake interval set to 77s.")
        assert rows(tmux_db.db_path, "SELECT wake_interval_seconds FROM monitor_runtime") == [(77,)]

        before = len(util.line_bytes(world.pane(world.monitor)))
        page.locator("[data-testid=wake]").click()
        poll(lambda: out.inner_text().startswith("Wake requested at"))
        poll(lambda: any(b"[cafleet] tick: fleet" in b for b in util.line_bytes(world.pane(world.monitor))[before:]),
             timeout=30, message="the monitor pane got no wake line")  # fmt: skip

        stop_loop(tmux_db, world.fleet_id)
        poll(lambda: state.inner_text() == "Loop stopped", timeout=20)
        assert page.locator("[data-testid=wake]").is_disabled()
        assert page.locator("[data-testid=monitor-pid]").inner_text() == "-"
        assert page.locator("[data-testid=monitor-wake-interval]").inner_text() == "77s"
    finally:
        server.stop()


def test_read_only_page_has_no_composer_or_controls(
    head_db: Path, page: Any, tmp_path: Path
) -> None:
    build_world(head_db, members=("alice",))
    server = start_server("--read-only", cwd=tmp_path)
    try:
        page.goto(server.url)
        poll(lambda: page.locator("[data-testid=member]").count() == 3)
        assert page.locator("[data-testid=composer]").is_hidden()
        page.locator("[data-testid=monitor-toggle]").click()
        assert page.locator("[data-testid=wake]").is_hidden()
        assert "read-only" in page.locator("[data-testid=status]").inner_text()
    finally:
        server.stop()


def test_a_fleet_across_hosts_shows_each_members_host_and_its_loop(
    head_db: Path, page: Any, tmp_path: Path
) -> None:
    """docs/runtime.md §10.5: the WebUI served on host-a (the Director's) shows each member's
    host, and flags the members of a host whose delivery loop is not running: host-b's loop
    beats (live, by its heartbeat alone from here), host-c's heartbeat is a minute old, and the
    Director's host is served by the fleet loop (live while its pid runs here)."""
    import os

    from cafleet.db.timefmt import now_ts
    from tests.delivery_helpers import sql_write

    world = build_world(head_db, members=("alice", "bob", "cee"))
    hosts = {world.members["bob"]: "host-b", world.members["cee"]: "host-c"}
    sql_write(head_db, "UPDATE member_placements SET host_id = 'host-a'")
    for member, host in hosts.items():
        sql_write(
            head_db, "UPDATE member_placements SET host_id = ? WHERE member_id = ?", host, member
        )
    old = "2026-01-01T00:00:00.000000+00:00"
    not_here = 2**22 + 7  # above every pid_max: no process of this host has it
    sql_write(
        head_db,
        "INSERT INTO host_loops (host_id, pid, started_at, last_tick_at, tick_seconds) "
        "VALUES ('host-b', ?, ?, ?, 5), ('host-c', ?, ?, ?, 5)",
        not_here, now_ts(), now_ts(), not_here, old, old,
    )  # fmt: skip
    sql_write(  # the fleet loop: this test process stands in for its pid on host-a
        head_db,
        "INSERT INTO monitor_runtime (fleet_id, pid, started_at, last_tick_at, tick_seconds) "
        "VALUES (?, ?, ?, ?, 3600)",
        world.fleet_id, os.getpid(), now_ts(), now_ts(),
    )  # fmt: skip

    def shown() -> dict[str, str]:
        names = texts(page, "[data-testid=member-name]")
        badges = [
            item.locator("[data-testid=member-host]").inner_text().strip()
            for item in page.locator("[data-testid=member]").all()
        ]
        return dict(zip(names, badges, strict=True))

    def flagged() -> list[str]:
        return texts(page, "[data-testid=member-host].gone")

    server = start_server(cwd=tmp_path, env={**os.environ, "CAFLEET_HOST_ID": "host-a"})
    try:
        page.goto(server.url)
        poll(lambda: page.locator("[data-testid=member-host]").count() == 5, message="no hosts")
        assert shown() == {
            "Director": "· host host-a",
            "monitor": "· host host-a",
            "alice": "· host host-a",
            "bob": "· host host-b",
            "cee": "· host host-c (its loop is not running)",
        }
        assert flagged() == ["· host host-c (its loop is not running)"]
        # The fleet loop gone: the Director's host is flagged too; host-b's heartbeat stopped:
        # it reads live from here only while it is at most 15 s old.
        sql_write(head_db, "UPDATE monitor_runtime SET pid = NULL, last_tick_at = NULL")
        sql_write(head_db, "UPDATE host_loops SET last_tick_at = ? WHERE host_id = 'host-b'", old)
        page.reload()
        poll(lambda: len(flagged()) == 5, message="dead loops never flagged")
        assert set(shown().values()) == {
            f"· host {h} (its loop is not running)" for h in ("host-a", "host-b", "host-c")
        }
    finally:
        assert server.stop() == 0


def test_one_clock_un_acked_agent_states_and_forgiving_names(
    tmux_db: TmuxHarness, chromium: Any
) -> None:
    """docs/webui.md: every time on one 24-hour local clock (the monitor panel too, never a raw
    ISO string), un-ACKed called un-ACKed, a live pane with its agent's state, and `@name` in any
    letter case, with the nearest names when there is no such member."""
    from zoneinfo import ZoneInfo

    from cafleet import broker

    world = build_world(tmux_db.db_path, members=("alice", "bob"), harness=tmux_db)
    alice = world.members["alice"]
    with connect(tmux_db.db_path) as conn:
        hi = broker.send_message(conn, from_member_id=alice, to_member_id=world.director, text="hi")
        # The Director's hook reports that line in its context (docs/runtime.md §4.12).
        broker.record_hook(
            conn, world.director, state="working", event="prompt", text="",
            message_ids=[hi.message_id],
        )  # fmt: skip
        received = broker.fleet_receipts(conn, world.fleet_id)[world.director]
        broker.pause_member(conn, member_id=world.members["bob"], reason="budget")
    start_loop(tmux_db, world.fleet_id, "--interval", "0")
    server = serve(tmux_db)
    # A 12-hour locale and a zone away from UTC: the page must still show local 24-hour times.
    context = chromium.new_context(
        viewport={"width": 1400, "height": 900}, locale="en-US", timezone_id="Asia/Kolkata"
    )
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    clock = r"(\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d"
    try:
        page.goto(server.url)
        poll(lambda: page.locator("[data-testid=member]").count() == 4)
        poll(lambda: page.locator("[data-testid=status]").inner_text().startswith("Updated"))
        assert re.fullmatch(
            r"Updated \d\d:\d\d:\d\d", page.locator("[data-testid=status]").inner_text()
        )
        local = datetime.fromisoformat(hi.created_at).astimezone(ZoneInfo("Asia/Kolkata"))
        shown = page.locator("[data-testid=unicast] time").inner_text()
        assert re.fullmatch(clock, shown) and shown.endswith(local.strftime("%H:%M:%S")), shown

        page.locator("[data-testid=monitor-toggle]").click()
        poll(lambda: page.locator("[data-testid=monitor-state]").inner_text() == "Loop live")
        for field in ("started", "last-tick"):
            value = page.locator(f"[data-testid=monitor-{field}]")
            assert re.fullmatch(clock, value.inner_text()), value.inner_text()
            assert "T" in (value.get_attribute("title") or "")  # the stored time, on hover
        roster = page.locator("[data-testid=wake-roster]").inner_text()
        assert f"Director ({world.director}): 1 un-ACKed" in roster and "pending" not in roster
        body = page.locator("body").inner_text()
        assert not re.search(r"\b(AM|PM)\b", body), body
        page.locator("[data-testid=monitor-toggle]").click()  # closed again: it covers the composer

        state = page.locator(
            f"[data-testid=member][data-member-id='{alice}'] [data-testid=member-pane-state]"
        )
        assert state.inner_text() == "alive (unknown)"  # the fake draws no cue the classifier knows
        paused = page.locator(
            f"[data-testid=member][data-member-id='{world.members['bob']}'] "
            "[data-testid=member-pane-state]"
        )
        assert paused.inner_text() == "paused (budget)"  # a live pane, its lines held
        # the Director's receipt: on the same local clock, the stored time on hover
        got = page.locator(
            f"[data-testid=member][data-member-id='{world.director}'] [data-testid=member-received]"
        )
        local_received = datetime.fromisoformat(received).astimezone(ZoneInfo("Asia/Kolkata"))
        assert re.fullmatch(rf" · received {clock}", got.inner_text()), got.inner_text()
        assert got.inner_text().endswith(local_received.strftime("%H:%M:%S"))
        assert received in (got.get_attribute("title") or "")

        result = page.locator("[data-testid=compose-result]")
        page.locator("[data-testid=compose-text]").fill("@ALICE hello in capitals")
        page.locator("[data-testid=compose-send]").click()
        poll(
            lambda: "Sent message" in result.inner_text(),
            timeout=30,
            message=lambda: result.inner_text(),
        )
        assert rows(tmux_db.db_path, "SELECT to_member_id FROM messages WHERE text = ?",
                    "hello in capitals") == [(alice,)]  # fmt: skip
        page.locator("[data-testid=compose-text]").fill("@alcie hi")
        page.locator("[data-testid=compose-send]").click()
        poll(lambda: result.inner_text() == "No active member is named alcie. Did you mean @alice?")
    finally:
        context.close()
        stop_loop(tmux_db, world.fleet_id)
        server.stop()
    assert errors == []
