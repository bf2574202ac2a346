"""A task arrives whole (docs/cli.md §1.3): a real Claude Code member, driven by the scripted
model (tests/harness/scripted_model.py), gets a 2,000-character task whose last line is the
command to run. The model reads the task as the member's own `cafleet message poll` prints it
and runs its last line exactly; the member must run exactly the command the Director wrote (a
poll that cut the body would hand it the cut line instead).

Runs when Claude Code is installed (.ci/install-agents; required in CI).
"""

from __future__ import annotations

import json

import pytest

from tests.fleet_helpers import create_fleet, ok, start_loop, stop_loop
from tests.harness.fixtures import TmuxHarness
from tests.harness.real_agents import require_binary
from tests.harness.scripted_model import RUN_LAST_LINE, ScriptedModel
from tests.harness.util import retry_until
from tests.test_real_escalation import acked, member_prompt, real_member, screen_of, wait_message

pytestmark = [pytest.mark.real_agent, pytest.mark.tmux]
COMMAND = "printf '%s\\n' 'the whole task arrived' > whole-task.txt"


def long_task(size: int = 2000) -> str:
    """``size`` characters: the instruction, lines of context, then the command on its own line."""
    lines = [RUN_LAST_LINE]
    n = 0
    while sum(len(x) + 1 for x in [*lines, COMMAND]) < size - 90:
        n += 1
        lines.append(f"context {n}: the parser keeps its grammar in one table; read it first.")
    pad = size - sum(len(x) + 1 for x in [*lines, COMMAND])
    lines.append("x" * pad)
    body = "\n".join([*lines, COMMAND])
    assert len(body) == size
    return body


def test_a_real_member_runs_exactly_the_last_line_of_a_long_task(
    tmux_db: TmuxHarness, model_server: ScriptedModel
) -> None:
    require_binary("claude")
    h = tmux_db
    ids = create_fleet(h)  # the Director is the harness's pane; the monitor a fake
    stop_loop(h, ids.fleet_id)
    loop = start_loop(h, ids.fleet_id, "--tick", "1", "--interval", "0")
    d = ids.director_id
    member = real_member(h, model_server, "claude")
    try:
        member.create(ids.fleet_id, member_prompt())
        m = member.member_id
        ready = wait_message(h, d, r"^ready$", timeout=240, member=member)
        ok(h.cli("message", "ack", str(ready["message_id"])))
        body = long_task()
        sent = ok(
            h.cli(
                "message", "send", "--from-member-id", str(d), "--to-member-id", str(m), body,
                "--json",
            )
        )  # fmt: skip
        task_id = int(json.loads(sent.stdout)["message"]["message_id"])
        reply = wait_message(h, d, rf"^done {task_id}: ", timeout=240, member=member)
        retry_until(
            lambda: acked(h, task_id),
            timeout=240,
            message=lambda: f"task {task_id} was never ACKed\n{screen_of(member)}",
        )

        # The member ran exactly the command the task ends with, and only that for the task.
        run = [
            r.action.command
            for r in model_server.client_requests("member")
            if r.action is not None and r.action.kind == "shell"
            and not r.action.command.startswith("cafleet ")
        ]  # fmt: skip
        assert run == [COMMAND], run
        assert reply["text"] == f"done {task_id}: ran {COMMAND}"
        written = member.real.cwd / "whole-task.txt"
        assert written.read_text(encoding="utf-8") == "the whole task arrived\n"
    finally:
        member.stop()
        loop.stop()
