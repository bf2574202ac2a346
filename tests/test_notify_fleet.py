"""Notifications and budgets in a running fleet (docs/cli.md §2.35, §2.36): a real tmux server with fake agents, the real monitor loop, and a real webhook
receiver on 127.0.0.1."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from tests.fleet_helpers import FleetIds, create_fleet, create_member, ok, sql_write, stop_loop
from tests.fleet_helpers import start_loop as start_loop_
from tests.harness.fixtures import TmuxHarness
from tests.harness.util import fake_log, line_records, retry_until, start_record
from tests.test_escalation import director_inbox, prompting_member, wait_ticks
from tests.test_notify import Receiver
from tests.test_sessions import T0, claude_session, claude_user, iso

MODEL = "claude-sonnet-4-5-20250929"


@pytest.fixture
def fleet(tmux_db: TmuxHarness) -> FleetIds:
    ids = create_fleet(tmux_db)
    stop_loop(tmux_db, ids.fleet_id)
    return ids


@pytest.fixture
def hook() -> Any:
    r = Receiver()
    yield r
    r.close()


def add_webhook(h: TmuxHarness, fleet_id: int, url: str, *extra: str) -> int:
    out = ok(h.cli("notify", "add", "--fleet-id", str(fleet_id), "webhook", url, *extra, "--json"))
    return int(json.loads(out.stdout)["channel_id"])


def events(hook: Receiver, name: str) -> list[dict[str, Any]]:
    return [b for b in hook.bodies if b.get("event") == name]


def test_an_escalation_reaches_the_webhook_with_its_choices_and_answer_link(
    tmux_db: TmuxHarness, fleet: FleetIds, hook: Receiver
) -> None:
    h, f = tmux_db, fleet.fleet_id
    add_webhook(h, f, hook.url, "--answer-base", "https://phone.example/cafleet/")
    member, _pane = prompting_member(h, f)
    loop = start_loop_(h, f, "--tick", "1", "--interval", "0", env={"CAFLEET_ESCALATE_AFTER": "0"})
    logged = loop.wait_line(rf"tick -> escalated: member {member} waits at prompt", timeout=30)
    digest = re.search(r"at prompt ([0-9a-f]{8}) ", logged[-1]).group(1)  # type: ignore[union-attr]
    retry_until(lambda: events(hook, "escalation"), timeout=30, message="no escalation POST")
    (got,) = events(hook, "escalation")
    assert got["fleet_id"] == f and got["member_id"] == member
    assert got["member_name"] == "claude-coder" and got["prompt_id"] == digest
    assert got["question"] == "Do you want to proceed?"
    assert [c["number"] for c in got["choices"]] == [1, 2, 3]
    assert got["choices"][0]["label"] == "Yes"
    assert re.fullmatch(r"https://phone\.example/cafleet/answer/[\w-]{20,}", got["answer_url"])
    inbox = [m["text"] for m in director_inbox(h, fleet.director_id)]
    assert got["text"] in inbox  # the same report the Director got
    loop.stop()
    assert len(events(hook, "escalation")) == 1


def record_usage(member: int, h: TmuxHarness, tokens: int) -> None:
    """The member's Claude Code session record, with ``tokens`` of usage, as the session
    cafleet learned for it."""
    reply = {"type": "assistant", "requestId": "r1", "timestamp": iso(T0 + 50),
             "message": {"id": "r1", "model": MODEL, "role": "assistant", "content": [],
                         "usage": {"input_tokens": tokens, "output_tokens": 0}}}  # fmt: skip
    claude_session(Path(os.environ["HOME"]), "/p", f"s-{member}", [claude_user("hi", "/p"), reply])
    sql_write(
        h,
        "UPDATE member_spawns SET agent_session_id = ? WHERE member_id = ?",
        f"s-{member}",
        member,
    )


def typed(pane: str, words: str) -> bool:
    return any(words in r["text"] for r in line_records(pane))


def test_a_member_over_its_budget_is_paused_until_resumed(
    tmux_db: TmuxHarness, fleet: FleetIds, hook: Receiver
) -> None:
    h, f, d = tmux_db, fleet.fleet_id, fleet.director_id
    add_webhook(h, f, hook.url, "--events", "budget")
    member, pane = create_member(h, f, "coder", "hello", "--budget-tokens", "1000")
    other, _ = create_member(h, f, "other", "hello")
    start_record(pane)
    record_usage(member, h, 1500)
    record_usage(other, h, 5000)  # no budget: never paused
    loop = start_loop_(h, f, "--tick", "1", "--interval", "0")
    loop.wait_line(rf"tick -> budget: member {member} paused", timeout=30)
    retry_until(lambda: events(hook, "budget"), timeout=30, message="no budget POST")
    (got,) = events(hook, "budget")
    assert got["member_id"] == member and "1500 tokens of a 1000-token budget" in got["text"]
    reports = [m for m in director_inbox(h, d) if f"member {member} (coder) is paused" in m["text"]]
    assert len(reports) == 1
    table = ok(h.cli("member", "list", str(f))).stdout
    row = next(x for x in table.splitlines() if x.split()[:2] == [str(member), "coder"])
    assert "paused (budget)" in row, table
    assert "paused" not in next(
        x for x in table.splitlines() if x.split()[:2] == [str(other), "other"]
    )
    assert f"1 paused (budget) (member {member})" in ok(h.cli("fleet", "show", str(f))).stdout
    listed = json.loads(ok(h.cli("member", "list", str(f), "--json")).stdout)
    assert {r["member_id"]: r["paused"] for r in listed if r["member_id"] in (member, other)} == {
        member: "budget",
        other: None,
    }
    from tests.web_helpers import client, fleet_headers, make_app

    with client(make_app(h.db_path)) as api:
        shown = api.get("/api/members/panes", headers=fleet_headers(f)).json()["panes"]
    assert {p["member_id"]: p["paused"] for p in shown} == {
        p["member_id"]: ("budget" if p["member_id"] == member else None) for p in shown
    }

    # A line for it waits, stored and untyped, while the loop ticks.
    sent = ok(h.cli("message", "send", "--from-member-id", str(d), "--to-member-id", str(member),
                    "after the pause"))  # fmt: skip
    assert "paused (budget)" in sent.stderr, sent.stderr
    msg = int(re.search(r"message (\d+)", sent.stderr).group(1))  # type: ignore[union-attr]
    wait_ticks(h, f, 2)
    assert not typed(pane, "after the pause")
    assert h.sqlite("SELECT notified_at FROM messages WHERE message_id = ?", msg) == [(None,)]

    out = ok(h.cli("member", "resume", str(member), "--budget-tokens", "100000")).stdout
    assert out == f"Member {member}: budget 100000 tokens, running.\n"
    retry_until(
        lambda: typed(pane, "after the pause"),
        timeout=30,
        message="the held line never went out after resume",
    )
    loop.stop()
    assert loop.count(rf"tick -> budget: member {member} paused") == 1
    assert len(events(hook, "budget")) == 1
    assert fake_log(pane)


def test_a_dollar_budget_and_the_fleets_budget_pause_their_members(
    tmux_db: TmuxHarness, fleet: FleetIds
) -> None:
    """A member's dollar budget (priced from its model) and the fleet's token budget (the
    members' sum) each pause, once; a member under the fleet's stays running until the sum
    reaches it (here: the budget is lowered)."""
    h, f, d = tmux_db, fleet.fleet_id, fleet.director_id
    ok(h.cli("fleet", "budget", str(f), "--budget-tokens", "6000"))
    priced, _ = create_member(h, f, "priced", "hello", "--model", MODEL, "--budget-usd", "0.01")
    plain, _ = create_member(h, f, "plain", "hello")
    record_usage(priced, h, 5000)  # $0.015 at the model's $3 per million input tokens
    record_usage(plain, h, 500)  # the fleet's sum: 5,500 of 6,000
    loop = start_loop_(h, f, "--tick", "1", "--interval", "0")
    loop.wait_line(rf"tick -> budget: member {priced} paused \(\$0\.0150 of a \$0\.01 budget\)")
    wait_ticks(h, f, 2)
    assert loop.count(rf"tick -> budget: member {plain} paused") == 0
    ok(h.cli("fleet", "budget", str(f), "--budget-tokens", "5000"))  # the sum is now over
    loop.wait_line(rf"tick -> budget: member {plain} paused \(5500 tokens of a 5000-token budget\)")
    texts = [m["text"] for m in director_inbox(h, d)]
    assert (
        sum(f"member {priced} (priced) is paused" in t and "(its budget)" in t for t in texts) == 1
    )
    assert (
        sum(f"member {plain} (plain) is paused" in t and "(the fleet's budget)" in t for t in texts)
        == 1
    )
    listed = json.loads(ok(h.cli("member", "list", str(f), "--json")).stdout)
    assert {r["member_id"]: r["paused"] for r in listed if r["member_id"] in (priced, plain)} == {
        priced: "budget",
        plain: "budget",
    }
    wait_ticks(h, f, 2)
    loop.stop()
    assert loop.count(r"tick -> budget: member \d+ paused") == 2


def test_budget_options_are_checked_before_anything_is_spawned(
    tmux_db: TmuxHarness, fleet: FleetIds
) -> None:
    h, f = tmux_db, fleet.fleet_id
    before = h.sqlite("SELECT count(*) FROM members")
    r = h.cli("member", "create", "--fleet-id", str(f), "--name", "x", "--description", "x",
              "--budget-usd", "-3", "hi")  # fmt: skip
    assert (r.returncode, r.stdout) == (2, "") and "Error: --budget-usd must be a positive" in (
        r.stderr
    )
    assert h.sqlite("SELECT count(*) FROM members") == before
    r = h.cli("member", "create", "--fleet-id", str(f), "--name", "y", "--description", "y",
              "--model", "no-such-model-1", "--budget-usd", "2", "hi")  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "Note: model no-such-model-1 has no price: the member is budgeted by tokens only" in (
        r.stderr
    )
    ok(h.cli("fleet", "budget", str(f), "--budget-tokens", "10"))
    assert h.sqlite("SELECT tokens, usd_micros FROM fleet_budgets WHERE fleet_id = ?", f) == [
        (10, None)
    ]


def test_fleet_create_takes_a_fleet_budget_and_refuses_a_bad_one_first(
    tmux_db: TmuxHarness,
) -> None:
    h = tmux_db
    r = h.cli("fleet", "create", "--name", "x", "--coding-agent", "claude", "--budget-usd", "nan")
    assert (r.returncode, r.stdout) == (2, ""), r.stderr
    assert "Error: --budget-usd must be a positive number of dollars (got nan)" in r.stderr
    assert h.sqlite("SELECT count(*) FROM fleets") == [(0,)]
    ids = create_fleet(h, "--budget-tokens", "5000", "--budget-usd", "2.5")
    stop_loop(h, ids.fleet_id)
    assert h.sqlite(
        "SELECT tokens, usd_micros FROM fleet_budgets WHERE fleet_id = ?", ids.fleet_id
    ) == [(5000, 2_500_000)]


def test_the_phone_page_answers_a_prompt_once_without_the_server_token(
    tmux_db: TmuxHarness, fleet: FleetIds, hook: Receiver, chromium: Any
) -> None:
    """An escalation's answer link, opened in a phone-sized Chromium: the prompt, a button per
    choice, the answer typed into the pane; the link then refuses (used), as does an expired
    one and one whose prompt left the screen."""
    from datetime import timedelta

    from cafleet.db.timefmt import format_ts, utcnow
    from cafleet.monitor.answerlinks import new_link, token_hash
    from tests.factories import connect
    from tests.web_helpers import serve

    h, f = tmux_db, fleet.fleet_id
    server = serve(h)
    assert server.token is not None  # the server has a token; the link never carries it
    add_webhook(h, f, hook.url, "--answer-base", server.base)
    member, pane = prompting_member(h, f)
    loop = start_loop_(h, f, "--tick", "1", "--interval", "0", env={"CAFLEET_ESCALATE_AFTER": "0"})
    retry_until(lambda: events(hook, "escalation"), timeout=30, message="no escalation POST")
    loop.stop()
    (got,) = events(hook, "escalation")
    url = got["answer_url"]
    assert url.startswith(f"{server.base}/answer/") and server.token not in url
    with connect(h.db_path) as conn:
        spare = new_link(conn, server.base, member, got["prompt_id"])
        old = new_link(conn, server.base, member, got["prompt_id"])
    past = format_ts(utcnow() - timedelta(minutes=1))
    sql_write(
        h, "UPDATE answer_links SET expires_at = ? WHERE token_hash = ?", past,
        token_hash(old.rsplit("/", 1)[1]),
    )  # fmt: skip
    context = chromium.new_context(
        viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True
    )
    try:
        page = context.new_page()
        page.goto(old)
        assert "expired" in page.locator("[data-testid=refused]").inner_text()
        page.goto(url)
        shown = page.locator("[data-testid=prompt]").inner_text()
        assert "Do you want to proceed?" in shown and "cafleet message ack 12" in shown
        buttons = page.locator("[data-testid=choice]").all_inner_texts()
        assert [b.split(".")[0] for b in buttons] == ["1", "2", "3"]
        page.locator("[data-testid=choice]").first.click()
        assert page.locator("[data-testid=answered]").inner_text() == "Answered: 1. Yes"
        pressed = [(k["key"], k["text"]) for k in fake_log(pane) if k.get("kind") == "prompt-key"]
        assert pressed == [("text", "1")]
        page.goto(url)
        assert "already used" in page.locator("[data-testid=refused]").inner_text()
        page.goto(spare)
        assert "no longer shows this prompt" in page.locator("[data-testid=refused]").inner_text()
        page.goto(f"{server.base}/answer/{'x' * 32}")
        assert "not valid" in page.locator("[data-testid=refused]").inner_text()
        assert len([k for k in fake_log(pane) if k.get("kind") == "prompt-key"]) == 1
    finally:
        context.close()
        server.stop()


def test_a_lost_pane_reaches_the_webhook_once(
    tmux_db: TmuxHarness, fleet: FleetIds, hook: Receiver
) -> None:
    h, f = tmux_db, fleet.fleet_id
    add_webhook(h, f, hook.url, "--events", "lost_pane")
    member, pane = create_member(h, f, "coder", "hello")
    loop = start_loop_(h, f, "--tick", "1", "--interval", "0")
    h.tmux("kill-pane", "-t", pane)
    loop.wait_line(rf"tick -> pane lost: member {member} pane {pane}", timeout=30)
    retry_until(lambda: events(hook, "lost_pane"), timeout=30, message="no lost_pane POST")
    wait_ticks(h, f, 2)
    loop.stop()
    (got,) = events(hook, "lost_pane")
    assert got["member_id"] == member and got["pane_id"] == pane
    assert f"cafleet member respawn {member}" in got["text"]
    assert [b["event"] for b in hook.bodies] == ["lost_pane"]  # only the events it takes
