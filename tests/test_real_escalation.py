"""A real member blocked at a real permission prompt (docs/runtime.md §5.12, docs/cli.md §2.26,
docs/permissions.md §5): a real Claude Code, Codex or opencode spawned by `cafleet member
create`, driven by the scripted model (tests/harness/scripted_model.py), is given a task that
writes a file; its own permission prompt blocks it; the monitor loop reports the prompt to the
Director's inbox; `member answer` approves it; the file is written, the member reports and
ACKs. opencode's other two buttons follow in the same agent start ("Allow always" with its
confirmation, "Reject"). Judged by the database, the files on disk, the tool results the agent
sent back to the model and opencode's own record.

The member is created with `--permissions ask` (docs/permissions.md): its agent asks the human
before an edit, which is the prompt the loop escalates (this is also the `ask` column of
docs/permissions.md §3).
"""

from __future__ import annotations

import json
import re
from importlib import resources
from typing import Any

import pytest

from tests.fleet_helpers import create_fleet, ok, start_loop, stop_loop
from tests.harness.fixtures import TmuxHarness
from tests.harness.real_agents import agent_cases, require_binary
from tests.harness.real_member import RealMember
from tests.harness.util import retry_until
from tests.test_permission_profiles_real import EXPECTED

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
    who = {
        k: member.real.env[k]
        for k in ("HOME", "CLAUDE_CONFIG_DIR", "CODEX_HOME", "XDG_CONFIG_HOME", "GEMINI_CLI_HOME")
    }
    agents = sorted({"claude", agent})
    ok(h.cli("setup", *(x for a in agents for x in ("--coding-agent", a)), env=who))
    return member


def real_claude_member(h: TmuxHarness, model_server: Any) -> RealMember:
    return real_member(h, model_server, "claude")


QUESTION = {
    "claude": "Do you want to create approved.txt?",
    "codex": "Would you like to run the following command?",
    "opencode": "Permission required",
    "gemini": "Apply this change?",
}
FIRST = {
    "claude": "1. Yes",
    "codex": "1. Yes, proceed",
    "opencode": "1. Allow once",
    "gemini": "1. Allow once",
}


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


def tool_results(model_server: Any, client: str) -> list[str]:
    """Every tool result the agent sent back to the model, as JSON text: Anthropic
    `tool_result` blocks (Claude Code, opencode), Responses `function_call_output` items
    (Codex), Gemini `functionResponse` parts."""
    out = []
    for rec in model_server.client_requests(client):
        for msg in rec.body.get("messages") or []:
            if isinstance(msg.get("content"), list):
                out += [
                    json.dumps(part)
                    for part in msg["content"]
                    if isinstance(part, dict) and part.get("type") == "tool_result"
                ]
        for item in rec.body.get("input") or []:
            if isinstance(item, dict) and item.get("type") == "function_call_output":
                out.append(json.dumps(item))
        for content in rec.body.get("contents") or []:  # Gemini: functionResponse parts
            out += [
                json.dumps(part)
                for part in content.get("parts") or []
                if isinstance(part, dict) and "functionResponse" in part
            ]
    return out


def acked(h: TmuxHarness, message_id: int) -> bool:
    rows = h.sqlite("SELECT status_state FROM messages WHERE message_id = ?", message_id)
    return bool(rows) and rows[0][0] == "completed"


class Blocked:
    """One real member under `ask`, its Director (the harness's CLI) and the monitor loop."""

    def __init__(self, h: TmuxHarness, ids: Any, member: RealMember, loop: Any) -> None:
        self.h, self.ids, self.member, self.loop = h, ids, member, loop
        self.m = member.member_id
        self.reports = 0

    def send(self, body: str) -> int:
        r = ok(
            self.h.cli(
                "message", "send", "--from-member-id", str(self.ids.director_id),
                "--to-member-id", str(self.m), body, "--json",
            )
        )  # fmt: skip
        return int(json.loads(r.stdout)["message"]["message_id"])

    def report(self) -> tuple[str, str]:
        """The loop's one report of the member's next prompt (then ACKed): (digest, text)."""
        h, m = self.h, self.m
        report = wait_message(
            h, self.ids.director_id, rf"\[cafleet\] member {m} prompt ", timeout=240,
            member=self.member,
        )  # fmt: skip
        text = str(report["text"])
        found = REPORT_RX.search(text)
        assert found is not None and int(found.group(1)) == m, text
        assert report["from_member_id"] == self.ids.monitor_id

        def listed_state() -> str:
            out = ok(h.cli("member", "list", str(self.ids.fleet_id), "--json")).stdout
            return str({r["member_id"]: r["agent_state"] for r in json.loads(out)}[m])

        # The prompt stays until answered; one capture may catch the TUI mid-redraw (unread),
        # where the hook's older `working` speaks instead.
        retry_until(lambda: listed_state() == "awaiting_user", timeout=30, message=listed_state)
        self.reports += 1
        assert self.loop.count(rf"tick -> escalated: member {m} ") == self.reports
        ok(h.cli("message", "ack", str(report["message_id"])))
        return found.group(2), text

    def answer(self, choice: str, digest: str) -> None:
        r = ok(self.h.cli("member", "answer", str(self.m), choice, "--prompt", digest))
        assert r.stdout.startswith(
            f"Answered prompt {digest} of member {self.member.name} ({self.m}, "
        ), r.stdout

    def done(self, task_id: int, report: str) -> None:
        """The member's reply to ``task_id`` and its ACK of the task."""
        h = self.h
        got = wait_message(
            h, self.ids.director_id, rf"^done {task_id}: {re.escape(report)}$", timeout=240,
            member=self.member,
        )  # fmt: skip
        assert got["from_member_id"] == self.m
        ok(h.cli("message", "ack", str(got["message_id"])))
        retry_until(
            lambda: acked(h, task_id),
            timeout=240,
            message=lambda: f"task {task_id} was never ACKed\n{screen_of(self.member)}",
        )


@pytest.mark.parametrize("agent", agent_cases("opencode"))
def test_a_real_member_blocked_at_its_permission_prompt_is_reported_and_answered(
    tmux_db: TmuxHarness, model_server: Any, agent: str
) -> None:
    """Claude Code's and Codex's prompts are answered with their first choice; opencode's
    dialog with each of its three buttons in turn (one agent start): "Allow once" writes the
    file, "Allow always" writes it and lets the next edit run without asking, "Reject" refuses
    the command (it never runs) and opencode tells the model so."""
    require_binary(agent)
    h = tmux_db
    ids = create_fleet(h)  # the Director is the harness's pane; the monitor a fake
    stop_loop(h, ids.fleet_id)
    loop = start_loop(
        h, ids.fleet_id, "--tick", "1", "--interval", "0", env={"CAFLEET_ESCALATE_AFTER": "1"}
    )
    d = ids.director_id
    member = real_member(h, model_server, agent)
    try:
        member.create(ids.fleet_id, member_prompt(), *ASK)
        m = member.member_id
        ready = wait_message(h, d, r"^ready$", timeout=240, member=member)
        ok(h.cli("message", "ack", str(ready["message_id"])))
        blocked = Blocked(h, ids, member, loop)
        target = member.real.cwd / "approved.txt"
        task_id = blocked.send(f"write approved.txt: {CONTENT}")

        # The member blocks at its agent's own prompt; the Director's inbox gets one report.
        digest, text = blocked.report()
        assert "approved.txt" in text and QUESTION[agent] in text, text
        assert f"  {FIRST[agent]}" in text and f"--prompt {digest}" in text, text
        assert not target.exists()
        # The `ask` cell of docs/permissions.md §3 (tests/test_permission_profiles_real.py
        # leaves it to this test): the edit is not done, the agent asks.
        assert EXPECTED[agent]["ask"] == {"edit": "asks"}

        r = h.cli("member", "answer", str(m), "9", "--prompt", digest)
        assert r.returncode == 1 and "is not a choice" in r.stderr, r.stderr
        assert not target.exists()
        blocked.answer("1", digest)

        # The task completes: the file, the member's report, its ACK of the task.
        retry_until(
            lambda: target.exists() and target.read_text(encoding="utf-8") == CONTENT,
            timeout=240,
            message=lambda: f"the file was never written\n{screen_of(member)}",
        )
        blocked.done(task_id, "wrote approved.txt")
        # The agent ran the write and sent its result back to the model.
        assert any("approved.txt" in p for p in tool_results(model_server, "member"))
        # One report for the one prompt, however many ticks saw it.
        assert not [x for x in inbox(h, d) if f"member {m} prompt " in str(x["text"])]
        assert loop.count(rf"tick -> escalated: member {m} ") == 1
        if agent == "opencode":
            opencode_always_and_reject(blocked)
    finally:
        member.stop()
        loop.stop()


def opencode_always_and_reject(blocked: Blocked) -> None:
    """opencode's other two buttons, by their words."""
    cwd = blocked.member.real.cwd
    # "Allow always": this edit runs, and so does the next one, without a prompt.
    task_id = blocked.send("write always.txt: allowed always")
    digest, text = blocked.report()
    assert "always.txt" in text and "  2. Allow always" in text, text
    blocked.answer("Allow always", digest)
    blocked.done(task_id, "wrote always.txt")
    assert (cwd / "always.txt").read_text(encoding="utf-8") == "allowed always"
    task_id = blocked.send("write again.txt: no prompt this time")
    blocked.done(task_id, "wrote again.txt")
    assert (cwd / "again.txt").read_text(encoding="utf-8") == "no prompt this time"
    assert blocked.reports == 2
    # "Reject": a command (asked for under `ask`) never runs; opencode records the call as
    # rejected and ends the turn (it does not ask the model again).
    task_id = blocked.send("run: echo ran > rejected.txt")
    digest, text = blocked.report()
    assert "echo ran > rejected.txt" in text and "  3. Reject" in text, text
    blocked.answer("reject", digest)
    member = blocked.member.real

    def rejected_calls() -> list[dict[str, Any]]:
        """opencode's own record of the command's tool call, once it has an outcome."""
        return [
            part["state"]
            for message in member._opencode_messages()
            for part in message.get("parts", [])
            if part.get("type") == "tool"
            and (part["state"].get("input") or {}).get("command") == "echo ran > rejected.txt"
            and part["state"].get("status") in ("error", "completed")
        ]

    calls = retry_until(
        rejected_calls,
        timeout=120,
        interval=2.0,
        message=lambda: f"opencode recorded no outcome\n{screen_of(blocked.member)}",
    )
    assert [c.get("status") for c in calls] == ["error"], calls
    assert "rejected" in str(calls[0].get("error")).lower(), calls
    assert not (cwd / "rejected.txt").exists()
    assert not acked(blocked.h, task_id)
