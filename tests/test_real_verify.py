"""No false "not verified" (docs/runtime.md §4.9) with a real opencode member, the agent that
showed most of them: driven by the scripted model, it works on a task (a shell `sleep`) when a
second message arrives. That send prints no warning, the line is stamped, and opencode's own
record holds it exactly once. The full soak (three agents, 36 messages each, `fleet restore`)
is `python -m benchmarks.verify_soak`.

Runs when opencode is installed (.ci/install-agents; required in CI).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.fleet_helpers import create_fleet, ok, start_loop, stop_loop
from tests.harness.fixtures import TmuxHarness
from tests.harness.real_agents import require_binary
from tests.harness.real_member import arrivals
from tests.harness.scripted_model import ScriptedModel
from tests.harness.util import retry_until
from tests.test_real_escalation import acked, member_prompt, real_member, screen_of

pytestmark = [pytest.mark.real_agent, pytest.mark.tmux]


def _send(h: TmuxHarness, director: int, member: int, body: str) -> tuple[dict[str, Any], str]:
    r = ok(
        h.cli(
            "message", "send", "--from-member-id", str(director), "--to-member-id",
            str(member), body, "--json",
        )
    )  # fmt: skip
    return json.loads(r.stdout), r.stderr


def test_a_line_sent_while_a_real_opencode_works_is_stamped_without_a_warning(
    tmux_db: TmuxHarness, model_server: ScriptedModel
) -> None:
    require_binary("opencode")
    h = tmux_db
    ids = create_fleet(h)  # the Director is the harness's pane; the monitor a fake
    stop_loop(h, ids.fleet_id)
    start_loop(h, ids.fleet_id, "--tick", "1", "--interval", "0")
    d = ids.director_id
    member = real_member(h, model_server, "opencode")
    try:
        member.create(ids.fleet_id, member_prompt())
        m = member.member_id
        retry_until(
            lambda: h.sqlite("SELECT 1 FROM messages WHERE from_member_id = ?", m),
            timeout=300,
            interval=1.0,
            message=lambda: f"no ready from the member\n{screen_of(member)}",
        )
        # The loop has learned the member's session (where its record is).
        retry_until(
            lambda: json.loads(ok(h.cli("member", "show", str(m), "--json")).stdout)[
                "agent_session_id"
            ],
            timeout=60,
            interval=1.0,
            message="the member's session id was never learned",
        )
        first, _ = _send(h, d, m, "run: sleep 8 && echo first")
        retry_until(
            lambda: "sleep 8 && echo first" in model_server.commands("member"),
            timeout=120,
            interval=0.5,
            message=lambda: f"the member never ran the task\n{screen_of(member)}",
        )
        sent, stderr = _send(h, d, m, "run: echo second")
        second = int(sent["message"]["message_id"])
        # No warning: typed and verified here, or the loop's tick took it first: still typing it
        # (`Pending:`), or done already, so the send found nothing to type and said nothing.
        assert not stderr.startswith("Warning:"), f"{stderr}\n{screen_of(member)}"
        if not sent["notification_sent"] and not stderr.startswith(f"Pending: message {second} "):
            assert stderr == "", stderr
            stamped = h.sqlite("SELECT notified_at FROM messages WHERE message_id = ?", second)
            assert stamped[0][0], "not typed by the send, nor by the loop before it"
        for message_id in (int(first["message"]["message_id"]), second):
            retry_until(
                lambda message_id=message_id: h.sqlite(
                    "SELECT notified_at FROM messages WHERE message_id = ?", message_id
                )[0][0],
                timeout=60,
                message=f"message {message_id} was never stamped",
            )
            retry_until(lambda message_id=message_id: acked(h, message_id), timeout=240)
        frame = f"[cafleet msg {second} from"
        texts = [text for text, _, _ in arrivals(member) if frame in text]
        assert len(texts) == 1, texts
    finally:
        member.stop()
