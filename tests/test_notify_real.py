"""Notifications and budgets with a real Claude Code member driven by the scripted model
(docs/cli.md §2.35, §2.36): its real permission prompt reaches a real webhook on 127.0.0.1 as an
`escalation` event; its real usage (the agent's own records) reaching a budget pauses it, its
next message waits untyped, and `member resume` sends it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fleet_helpers import create_fleet, ok, start_loop, stop_loop
from tests.harness.fixtures import TmuxHarness
from tests.harness.real_agents import require_binary
from tests.harness.util import retry_until
from tests.test_notify import Receiver
from tests.test_real_escalation import ASK, Blocked, member_prompt, real_member, wait_message

pytestmark = [pytest.mark.real_agent, pytest.mark.tmux]


def test_a_real_member_s_prompt_reaches_the_webhook_and_its_budget_pauses_it(
    tmux_db: TmuxHarness, model_server: Any
) -> None:
    require_binary("claude")
    h = tmux_db
    hook = Receiver()
    ids = create_fleet(h)
    stop_loop(h, ids.fleet_id)
    f, d = ids.fleet_id, ids.director_id
    ok(h.cli("notify", "add", "--fleet-id", str(f), "webhook", hook.url))
    loop = start_loop(h, f, "--tick", "1", "--interval", "0", env={"CAFLEET_ESCALATE_AFTER": "1"})
    member = real_member(h, model_server, "claude")
    try:
        member.create(f, member_prompt(), *ASK)
        m = member.member_id
        ready = wait_message(h, d, r"^ready$", timeout=240, member=member)
        ok(h.cli("message", "ack", str(ready["message_id"])))
        blocked = Blocked(h, ids, member, loop)
        blocked.send("write approved.txt: approved by the Director")
        digest, _text = blocked.report()
        retry_until(
            lambda: [b for b in hook.bodies if b["event"] == "escalation"],
            timeout=30,
            message="no escalation POST",
        )
        (got,) = [b for b in hook.bodies if b["event"] == "escalation"]
        assert got["member_id"] == m and got["prompt_id"] == digest
        assert got["question"] == "Do you want to create approved.txt?"
        assert got["choices"][0] == {"number": 1, "label": "Yes"}
        blocked.answer("1", digest)

        # Its usage so far is over a one-token budget: the loop pauses it.
        ok(h.cli("member", "budget", str(m), "--budget-tokens", "1"))
        loop.wait_line(rf"tick -> budget: member {m} paused", timeout=120)
        retry_until(
            lambda: [b for b in hook.bodies if b["event"] == "budget"],
            timeout=30,
            message="no budget POST",
        )
        held = blocked.send("write held.txt: after the pause")
        rows = h.sqlite("SELECT notified_at FROM messages WHERE message_id = ?", held)
        assert rows == [(None,)]
        ok(h.cli("member", "resume", str(m), "--budget-tokens", "100000000"))
        retry_until(
            lambda: (
                h.sqlite("SELECT notified_at FROM messages WHERE message_id = ?", held) != [(None,)]
            ),
            timeout=120,
            message="the held message was never typed after resume",
        )
    finally:
        member.stop()
        loop.stop()
        hook.close()
