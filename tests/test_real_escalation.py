"""A real member blocked at a real permission prompt (docs/runtime.md §5.12, docs/cli.md §2.26):
a real Claude Code spawned by `cafleet member create`, driven by the scripted model
(tests/harness/scripted_model.py), is given a task that writes a file; its own permission
prompt blocks it; the monitor loop reports the prompt to the Director's inbox; `member answer`
approves it; the file is written, the member reports and ACKs. Judged by the database, the file
on disk and the scripted model's record of the tool results the agent sent back.

The member is created with `--permissions ask` (docs/permissions.md): its agent asks the human
before an edit, which is the prompt the loop escalates.
"""

from __future__ import annotations

import json
import re
from importlib import resources
from typing import Any

import pytest

from tests.fleet_helpers import create_fleet, ok, start_loop, stop_loop
from tests.harness.fixtures import TmuxHarness
from tests.harness.real_agents import require_binary
from tests.harness.real_member import RealMember
from tests.harness.util import retry_until

pytestmark = [pytest.mark.real_agent, pytest.mark.tmux]
CONTENT = "approved by the Director"
REPORT_RX = re.compile(r"member (\d+) prompt ([0-9a-f]{8})")


def member_prompt() -> str:
    return (resources.files("cafleet.data") / "member_prompt.md").read_text(encoding="utf-8")


# The member asks before it edits a file because it runs with the `ask` permission profile
# (docs/permissions.md): Claude Code's default permission mode, opencode's `cafleet-ask` preset.
ASK = ("--permissions", "ask")


def real_member(h: TmuxHarness, model_server: Any, agent: str = "claude") -> RealMember:
    """A real agent to be spawned by `member create`, its model the scripted one."""
    member = RealMember(h, agent, f"real-{agent}", model_url=model_server.base_url("member"))
    # The member's cafleet commands run with its private HOME: set cafleet up there, as a user
    # who runs the agent with that HOME would (for its own agent and the Director's, claude:
    # a send checks the recipient's agent has the skills).
    who = {k: member.real.env[k] for k in ("HOME", "CLAUDE_CONFIG_DIR", "XDG_CONFIG_HOME")}
    agents = sorted({"claude", agent})
    ok(h.cli("setup", *(x for a in agents for x in ("--coding-agent", a)), env=who))
    return member


def real_claude_member(h: TmuxHarness, model_server: Any) -> RealMember:
    return real_member(h, model_server, "claude")


QUESTION = {"claude": "Do you want to create approved.txt?", "opencode": "Permission required"}
FIRST = {"claude": "1. Yes", "opencode": "1. Allow once"}


def inbox(h: TmuxHarness, member_id: int) -> list[dict[str, Any]]:
    """The member's un-ACKed messages (poll does not ACK)."""
    got = json.loads(ok(h.cli("message", "poll", str(member_id), "--json")).stdout)
    assert isinstance(got, list)
    return got


def wait_message(
    h: TmuxHarness, member_id: int, pattern: str, timeout: float, member: RealMember
) -> dict[str, Any]:
    rx = re.compile(pattern)
    found: list[dict[str, Any]] = []

    def check() -> bool:
        found[:] = [m for m in inbox(h, member_id) if rx.search(str(m["text"]))]
        return bool(found)

    retry_until(
        check,
        timeout=timeout,
        interval=0.5,
        message=lambda: (
            f"no message matching {pattern!r}\n--- the member's screen:\n"
            f"{screen_of(member)}\n--- model commands: {member.real.env.get('ANTHROPIC_BASE_URL')}"
        ),
    )
    return found[0]


def screen_of(member: RealMember) -> str:
    try:
        return member.real.capture()
    except Exception as exc:  # a diagnostic must not hide the failure it explains
        return f"(capture failed: {exc})"


@pytest.mark.parametrize("agent", ["claude", "opencode"])
def test_a_real_member_blocked_at_its_permission_prompt_is_reported_and_answered(
    tmux_db: TmuxHarness, model_server: Any, agent: str
) -> None:
    require_binary(agent)
    h = tmux_db
    ids = create_fleet(h)  # the Director is the harness's pane; the monitor a fake
    stop_loop(h, ids.fleet_id)
    loop = start_loop(
        h, ids.fleet_id, "--tick", "1", "--interval", "0", env={"CAFLEET_ESCALATE_AFTER": "3"}
    )
    d = ids.director_id
    member = real_member(h, model_server, agent)
    try:
        member.create(ids.fleet_id, member_prompt(), *ASK)
        m = member.member_id
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

        # The member blocks at Claude Code's own prompt; the Director's inbox gets one report.
        report = wait_message(h, d, rf"\[cafleet\] member {m} prompt ", timeout=240, member=member)
        text = str(report["text"])
        found = REPORT_RX.search(text)
        assert found is not None and int(found.group(1)) == m, text
        digest = found.group(2)
        assert report["from_member_id"] == ids.monitor_id
        assert "approved.txt" in text and QUESTION[agent] in text, text
        assert f"  {FIRST[agent]}" in text and f"--prompt {digest}" in text, text
        assert not target.exists()
        listed = json.loads(ok(h.cli("member", "list", str(ids.fleet_id), "--json")).stdout)
        assert {r["member_id"]: r["agent_state"] for r in listed}[m] == "awaiting_user"
        assert loop.count(rf"tick -> escalated: member {m} ") == 1

        r = h.cli("member", "answer", str(m), "9", "--prompt", digest)
        assert r.returncode == 1 and "is not a choice" in r.stderr, r.stderr
        assert not target.exists()
        r = ok(h.cli("member", "answer", str(m), "1", "--prompt", digest))
        assert r.stdout.startswith(f"Answered prompt {digest} of member real-{agent} ({m}, "), r

        # The task completes: the file, the member's report, its ACK of the task.
        retry_until(
            lambda: target.exists() and target.read_text(encoding="utf-8") == CONTENT,
            timeout=240,
            message=lambda: f"the file was never written\n{screen_of(member)}",
        )
        done = wait_message(
            h, d, rf"^done {task_id}: wrote approved.txt$", timeout=240, member=member
        )
        assert done["from_member_id"] == m
        retry_until(
            lambda: (
                h.sqlite("SELECT status_state FROM messages WHERE message_id = ?", task_id)[0][0]
                == "completed"
            ),
            timeout=240,
            message=lambda: f"the task was never ACKed\n{screen_of(member)}",
        )
        # The agent ran the Write tool and sent its result back to the model.
        results = [
            part
            for rec in model_server.client_requests("member")
            for msg in rec.body.get("messages") or []
            if isinstance(msg.get("content"), list)
            for part in msg["content"]
            if isinstance(part, dict) and part.get("type") == "tool_result"
        ]
        assert any("approved.txt" in json.dumps(p) for p in results), results
        # One report for the one prompt, however many ticks saw it.
        reports = [x for x in inbox(h, d) if f"member {m} prompt " in str(x["text"])]
        assert len(reports) == 1 and loop.count(rf"tick -> escalated: member {m} ") == 1
    finally:
        member.stop()
        loop.stop()
