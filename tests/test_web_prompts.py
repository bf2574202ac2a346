"""A member waiting at a prompt in the WebUI (docs/webui.md, docs/runtime.md §5.12), in real
headless Chromium against the real `cafleet server`: the roster says `waiting (permission)` and
shows the question with one button per choice; a button answers that prompt (the fake agent gets
the key, the prompt goes); a read-only server shows no buttons and refuses the answer.

And the same with a real Claude Code member at its real permission prompt (the scripted model,
as in tests/test_real_escalation.py): the task completes after the click. A server started from
a plain shell (TMUX unset) reads and answers a prompt through the placement's own tmux server;
a prompt's report shows on the page whole.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.fleet_helpers import create_fleet, ok, start_loop, stop_loop
from tests.harness.fixtures import TmuxHarness
from tests.harness.util import fake_log
from tests.test_escalation import prompting_member
from tests.web_helpers import poll, serve


def row(page: Any, member: int) -> Any:
    return page.locator(f"[data-testid=member][data-member-id='{member}']")


def keys(pane: str) -> list[tuple[str, str]]:
    return [(k["key"], k["text"]) for k in fake_log(pane) if k.get("kind") == "prompt-key"]


def post_answer(page: Any, fleet_id: int, member: int, body: dict[str, str]) -> Any:
    """The page's own same-origin fetch (its token cookie), as its buttons send it."""
    return page.evaluate(
        """async ([fleet, member, body]) => {
            const r = await fetch(`/api/members/${member}/answer`, {
                method: "POST", credentials: "same-origin",
                headers: {"Content-Type": "application/json", "X-Fleet-Id": String(fleet)},
                body: JSON.stringify(body)});
            return [r.status, await r.json()];
        }""",
        [fleet_id, member, body],
    )


def test_the_page_shows_the_question_and_a_button_answers_it(
    tmux_db: TmuxHarness, page: Any
) -> None:
    h = tmux_db
    ids = create_fleet(h)
    stop_loop(h, ids.fleet_id)
    member, pane = prompting_member(h, ids.fleet_id)
    server = serve(h)
    try:
        page.goto(server.url)
        box = row(page, member).locator("[data-testid=member-prompt]")
        poll(lambda: box.locator("[data-testid=prompt-choice]").count() == 3, timeout=30,
             message="no prompt buttons")  # fmt: skip
        state = row(page, member).locator("[data-testid=member-pane-state]")
        assert state.inner_text() == "waiting (permission)"
        question = box.locator("[data-testid=prompt-question]")
        assert question.inner_text().splitlines() == [
            "Bash command",
            "cafleet message ack 12",
            "Do you want to proceed?",
        ]
        digest = question.get_attribute("data-prompt-id")
        assert digest is not None and len(digest) == 8
        labels = [x.strip() for x in box.locator("[data-testid=prompt-choice]").all_inner_texts()]
        assert labels == [
            "1. Yes",
            "2. Yes, and don't ask again for: cafleet message *",
            "3. No, and tell Claude what to do differently (esc)",
        ]
        # A stale prompt id and an unknown choice are refused, nothing typed.
        status, data = post_answer(
            page, ids.fleet_id, member, {"choice": "1", "prompt_id": "0" * 8}
        )
        assert status == 409 and "is no longer on member" in data["detail"], data
        status, data = post_answer(page, ids.fleet_id, member, {"choice": "9", "prompt_id": digest})
        assert status == 409 and "is not a choice" in data["detail"], data
        assert keys(pane) == []

        box.locator("[data-testid=prompt-choice][data-choice='1']").click()
        poll(lambda: keys(pane) == [("text", "1")], timeout=30, message=lambda: str(keys(pane)))
        poll(lambda: state.inner_text() != "waiting (permission)", timeout=30)
        assert row(page, member).locator("[data-testid=member-prompt]").count() == 0
        assert "working" in state.inner_text()
        assert [x["text"] for x in fake_log(pane) if x.get("kind") == "line"] == ["run the tests"]
        # Nothing to answer now: refused.
        status, data = post_answer(page, ids.fleet_id, member, {"choice": "1", "prompt_id": digest})
        assert status == 409 and "shows no prompt" in data["detail"], data
    finally:
        assert server.stop() == 0


def test_a_read_only_page_shows_the_question_without_buttons_and_refuses_answers(
    tmux_db: TmuxHarness, page: Any
) -> None:
    h = tmux_db
    ids = create_fleet(h)
    stop_loop(h, ids.fleet_id)
    member, pane = prompting_member(h, ids.fleet_id)
    server = serve(h, "--read-only")
    try:
        page.goto(server.url)
        box = row(page, member).locator("[data-testid=member-prompt]")
        poll(lambda: box.locator("[data-testid=prompt-question]").count() == 1, timeout=30)
        assert "Do you want to proceed?" in box.inner_text()
        buttons = box.locator("[data-testid=prompt-choice]")
        assert buttons.count() == 3 and all(not buttons.nth(i).is_visible() for i in range(3))
        digest = box.locator("[data-testid=prompt-question]").get_attribute("data-prompt-id")
        status, data = post_answer(page, ids.fleet_id, member, {"choice": "1", "prompt_id": digest})
        assert status == 403, data
        assert keys(pane) == []
    finally:
        assert server.stop() == 0


# Opt-in: the default run proves a real agent's prompt reported and answered
# (test_real_escalation, opencode) and the page's button answering (the fake-agent tests here).
@pytest.mark.real_agent
@pytest.mark.agent_matrix
def test_a_real_claude_member_s_prompt_is_answered_from_the_page(
    tmux_db: TmuxHarness, page: Any, model_server: Any
) -> None:
    from tests.harness.real_agents import require_binary
    from tests.test_real_escalation import (
        ASK,
        CONTENT,
        member_prompt,
        real_claude_member,
        screen_of,
        wait_message,
    )

    require_binary("claude")
    h = tmux_db
    ids = create_fleet(h)
    stop_loop(h, ids.fleet_id)
    loop = start_loop(
        h, ids.fleet_id, "--tick", "1", "--interval", "0", env={"CAFLEET_ESCALATE_AFTER": "3"}
    )
    member = real_claude_member(h, model_server)
    server = serve(h)
    try:
        member.create(ids.fleet_id, member_prompt(), *ASK)
        m, d = member.member_id, ids.director_id
        ready = wait_message(h, d, r"^ready$", timeout=240, member=member)
        ok(h.cli("message", "ack", str(ready["message_id"])))
        target = member.real.cwd / "approved.txt"
        r = ok(
            h.cli(
                "message", "send", "--from-member-id", str(d), "--to-member-id", str(m),
                f"write approved.txt: {CONTENT}", "--json",
            )
        )  # fmt: skip
        task_id = json.loads(r.stdout)["message"]["message_id"]
        wait_message(h, d, rf"\[cafleet\] member {m} prompt ", timeout=240, member=member)

        page.goto(server.url)
        box = row(page, member.member_id).locator("[data-testid=member-prompt]")
        poll(lambda: box.locator("[data-testid=prompt-choice]").count() >= 2, timeout=60,
             message=lambda: f"no buttons\n{screen_of(member)}")  # fmt: skip
        assert "Do you want to create approved.txt?" in box.inner_text()
        assert not target.exists()
        box.locator("[data-testid=prompt-choice][data-choice='1']").click()
        result = box.locator("[data-testid=prompt-result]")
        poll(lambda: target.exists() and target.read_text(encoding="utf-8") == CONTENT,
             timeout=240, message=lambda: f"{result.all_inner_texts()}\n{screen_of(member)}")  # fmt: skip
        wait_message(h, d, rf"^done {task_id}: wrote approved.txt$", timeout=240, member=member)
        poll(lambda: h.sqlite("SELECT status_state FROM messages WHERE message_id = ?", task_id)
             [0][0] == "completed", timeout=240)  # fmt: skip
    finally:
        server.stop()
        member.stop()
        loop.stop()


def test_a_server_started_from_a_plain_shell_captures_reads_and_answers_a_prompt(
    tmux_db: TmuxHarness,
) -> None:
    """`cafleet server` run outside tmux (TMUX unset, as the README starts it) reaches each
    member's pane through the tmux server its placement records: the capture, the prompt and
    the answer all work."""
    from tests.web_helpers import http, start_server

    h = tmux_db
    ids = create_fleet(h)
    stop_loop(h, ids.fleet_id)
    member, pane = prompting_member(h, ids.fleet_id)
    plain = {k: v for k, v in h.env.items() if k not in ("TMUX", "TMUX_PANE")}
    server = start_server(env=plain, cwd=h.project_dir, track=h.track)
    headers = {"X-Fleet-Id": str(ids.fleet_id), **server.auth}
    api = f"{server.base}/api/members/{member}"
    try:
        status, _, body = http("GET", f"{api}/capture?lines=40", headers=headers)
        assert status == 200, body
        assert "Do you want to proceed?" in body.decode()
        status, _, body = http("GET", f"{api}/prompt", headers=headers)
        assert status == 200, body
        shown = json.loads(body)
        assert shown["state"] == "awaiting_user" and shown["pane_id"] == pane
        digest = shown["prompt"]["prompt_id"]
        assert "cafleet message ack 12" in shown["prompt"]["details"]
        status, _, body = http(
            "POST", f"{api}/answer", headers=headers, body={"choice": "1", "prompt_id": digest}
        )
        assert status == 200, body
        assert json.loads(body)["choice"] == {"number": 1, "label": "Yes"}
        assert keys(pane) == [("text", "1")]
    finally:
        assert server.stop() == 0


def test_the_page_shows_a_prompt_report_whole(head_db: Any, page: Any, tmp_path: Any) -> None:
    """The report of a real Claude Code Write prompt (tests/data/screens), in the Director's
    inbox, reads on the page line for line as it was sent."""
    from cafleet.delivery.screens.prompts import read_prompt
    from cafleet.monitor.escalate import escalation_text
    from cafleet.records import Member
    from tests.factories import build_world
    from tests.test_escalation import screen
    from tests.web_helpers import insert_messages, start_server

    world = build_world(head_db, members=("coder",))
    coder = world.members["coder"]
    member = Member(
        member_id=coder, fleet_id=world.fleet_id, name="coder", description="d", kind="member",
        status="active", registered_at="t", deregistered_at=None, skills=[], placement=None,
    )  # fmt: skip
    prompt = read_prompt("claude", screen("claude", "permission-write-1.txt"))
    assert prompt is not None
    report = escalation_text(member, "%5", prompt, 30)
    ts = "2026-01-01T00:00:00.000000+00:00"
    insert_messages(
        head_db,
        [(world.director, world.monitor, world.director, "unicast", ts, "input_required", ts,
          None, report)],
    )  # fmt: skip
    server = start_server(cwd=tmp_path)
    try:
        page.goto(server.url)
        body = page.locator("[data-testid=unicast] [data-testid=body]")
        poll(lambda: body.count() == 1, message="no report on the page")
        shown = body.inner_text()
        assert shown.splitlines() == report.splitlines(), shown
        assert "  approved.txt" in shown and "  Do you want to create approved.txt?" in shown
        assert shown.splitlines()[-1].startswith(f"Answer with: cafleet member answer {coder} ")
    finally:
        assert server.stop() == 0
