"""Fleets that survive their tmux server (docs/runtime.md §9; docs/cli.md §2.25), with the real
agents and the scripted model (tests/harness/scripted_model.py): a real member does two turns
(its spawn prompt, then a message), its tmux server is killed, `fleet restore` from a pane of a
new server brings it back continuing its own session (the agent's record keeps one session, and
the third turn's request carries the earlier turns), and `member usage` equals the tokens the
model server reported for that session's requests.

Runs when the agent binaries are installed (.ci/install-agents; required in CI).
"""

from __future__ import annotations

import json
import shlex
from typing import Any

import pytest

from cafleet.agents.prompt import load_default_member_prompt
from tests.fleet_helpers import create_fleet, new_server, ok, start_loop, stop_loop
from tests.harness.fixtures import TmuxHarness
from tests.harness.real_agents import agent_cases, require_binary
from tests.harness.real_member import RealMember
from tests.harness.scripted_model import (
    ScriptedModel,
    anthropic_conversation,
    gemini_conversation,
    responses_conversation,
)
from tests.harness.util import retry_until

pytestmark = [pytest.mark.real_agent, pytest.mark.tmux]
IDENTITY = (
    "HOME", "CLAUDE_CONFIG_DIR", "CODEX_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "GEMINI_CLI_HOME",
)  # fmt: skip


def _cli_json(h: TmuxHarness, *args: str, env: dict[str, str] | None = None) -> Any:
    return json.loads(ok(h.cli(*args, "--json", env=env, timeout=120)).stdout)


def _send(h: TmuxHarness, director: int, member: int, body: str) -> int:
    sent = _cli_json(
        h, "message", "send", "--from-member-id", str(director), "--to-member-id", str(member), body
    )
    return int(sent["message"]["message_id"])


def _acked(h: TmuxHarness, message_id: int) -> bool:
    rows = h.sqlite("SELECT status_state FROM messages WHERE message_id = ?", message_id)
    return bool(rows) and rows[0][0] == "completed"


def _reported(h: TmuxHarness, director: int, member: int, text: str) -> bool:
    rows = h.sqlite(
        "SELECT text FROM messages WHERE owner_member_id = ? AND from_member_id = ?",
        director,
        member,
    )
    return any(text in r[0] for r in rows)


def _why(h: TmuxHarness, fleet_id: int, member: RealMember) -> str:
    """What a failed wait shows: the messages, the loop log's tail and the member's screen."""
    from tests.fleet_helpers import log_path

    try:
        log = log_path(h, fleet_id).read_text(encoding="utf-8")[-3000:]
    except OSError as exc:
        log = f"(no log: {exc})"
    return f"{h.sqlite('SELECT * FROM messages')}\n{log}\n{member.real.capture()}"


def _conversation_requests(model: ScriptedModel, label: str) -> list[Any]:
    """The requests of the member's conversation: the ones offering tools (titles and other
    side requests offer none, and the agents keep no record of them)."""
    return [r for r in model.client_requests(label) if r.body.get("tools")]


def _request_table(model: ScriptedModel, label: str) -> list[tuple[Any, ...]]:
    return [
        (r.path, bool(r.body.get("tools")), r.usage, r.action and r.action.kind,
         r.action and (r.action.text or r.action.command)[:40])
        for r in model.client_requests(label)
    ]  # fmt: skip


def _texts(agent: str, body: dict[str, Any]) -> list[str]:
    if agent == "gemini":
        return gemini_conversation(body).texts
    conv = responses_conversation(body) if agent == "codex" else anthropic_conversation(body)
    return conv.texts


def _usage_matches(h: TmuxHarness, model: ScriptedModel, label: str, m: int) -> None:
    """`member usage` equals the tokens the model reported for the conversation's requests,
    once the turn has ended (the model's last reply was a text) and the agent recorded it
    (polled with a deadline)."""

    def matches() -> bool:
        requests = _conversation_requests(model, label)
        if not requests or requests[-1].action is None or requests[-1].action.kind != "text":
            return False  # the turn has not ended: its last reply is a text
        want_in = sum(r.usage["input_tokens"] for r in requests)
        want_out = sum(r.usage["output_tokens"] for r in requests)
        u = _cli_json(h, "member", "usage", str(m))[0]["usage"]
        return u is not None and (u["input"] + u["cache_read"], u["output"]) == (want_in, want_out)

    retry_until(matches, timeout=60, interval=1.0,
                message=lambda: f"{_cli_json(h, 'member', 'usage', str(m))}; requests: "
                f"{_request_table(model, label)}")  # fmt: skip


@pytest.mark.parametrize("agent", agent_cases("claude"))
def test_restore_resumes_each_real_agent_and_usage_matches_the_model(
    tmux_db: TmuxHarness, model_server: ScriptedModel, agent: str
) -> None:
    require_binary(agent)
    h = tmux_db
    ids = create_fleet(h)  # the Director and the monitor are fakes; the member is real
    stop_loop(h, ids.fleet_id)
    start_loop(h, ids.fleet_id, "--tick", "1", "--interval", "0")
    d = ids.director_id
    label = f"m-{agent}"
    member = RealMember(h, agent, f"real-{agent}", model_url=model_server.base_url(label))
    path_env = {"PATH": f"{member.bin_dir}:{h.env['PATH']}"}
    # The member's cafleet commands run with the agent's private HOME: install the skills there,
    # its own and the Director's (`message send` to the Director checks the recipient's agent).
    identity = {k: v for k, v in member.real.env.items() if k in IDENTITY}
    agents = ["--coding-agent", "claude"] + (["--coding-agent", agent] if agent != "claude" else [])
    ok(h.cli("setup", *agents, env=identity, timeout=120))
    if agent == "codex":
        # Codex runs commands in a login shell, whose /etc/profile resets PATH: give the private
        # HOME a profile that puts the pane's PATH (with `cafleet`) back.
        profile = member.real.home / ".bash_profile"
        profile.write_text(f"export PATH={shlex.quote(h.env['PATH'])}\n", encoding="utf-8")
    try:
        member.create(ids.fleet_id, load_default_member_prompt())
        m = member.member_id
        # Turn 1: the spawn prompt (the scripted member reports "ready").
        retry_until(lambda: _reported(h, d, m, "ready"), timeout=240, interval=1.0,
                    message=lambda: _why(h, ids.fleet_id, member))  # fmt: skip
        shown = retry_until(
            lambda: _cli_json(h, "member", "show", str(m))["agent_session_id"],
            timeout=60,
            interval=1.0,
            message="the member's session id was never learned",
        )
        # Turn 2: a message (poll, run, report, ack).
        second = _send(h, d, m, "run: echo turn-two")
        retry_until(lambda: _acked(h, second), timeout=240, interval=1.0,
                    message=lambda: _why(h, ids.fleet_id, member))  # fmt: skip

        # Two turns done and recorded: the agent has written every reply the model served (the
        # turn's last reply follows the ACK), and its usage so far is the model's.
        _usage_matches(h, model_server, label, m)
        # The tmux server dies (the loop stops with it: the Director's pane is gone).
        h.tmux("kill-server", check=False)
        # Codex's daemon and Gemini CLI (node) outlive their server's ptys.
        retry_until(lambda: not member.real.alive() or agent in ("codex", "gemini"), timeout=30,
                    message="the agent outlived its tmux server")  # fmt: skip
        pane, here = new_server(h)
        restored = ok(h.cli("fleet", "restore", str(ids.fleet_id), env={**here, **path_env},
                            timeout=180))  # fmt: skip
        lines = restored.stdout.splitlines()
        assert lines[0].startswith(f"Director: pane {pane} (adopted; was "), lines
        mine = [line for line in lines if line.startswith(f"member {m} (")]
        assert len(mine) == 1 and f"resumed session {shown} in pane %" in mine[0], lines
        monitor = [line for line in lines if line.startswith(f"member {ids.monitor_id} (")]
        assert len(monitor) == 1 and "started afresh" in monitor[0], lines
        new_pane = _cli_json(h, "member", "show", str(m))["placement"]["mux_pane_id"]
        member.pane = member.real.pane = new_pane
        # Idempotent: a second run leaves every member alone.
        again = ok(h.cli("fleet", "restore", str(ids.fleet_id), env={**here, **path_env},
                         timeout=180))  # fmt: skip
        assert "already this pane" in again.stdout.splitlines()[0]
        assert all("alive in pane" in line for line in again.stdout.splitlines()[1:-1]), again

        # Turn 3, in the resumed session: its request carries the earlier turns.
        third = _send(h, d, m, "run: echo turn-three")
        retry_until(lambda: _acked(h, third), timeout=240, interval=1.0,
                    message=lambda: _why(h, ids.fleet_id, member))  # fmt: skip
        after = _cli_json(h, "member", "show", str(m))
        assert after["agent_session_id"] == shown  # the same session, still this member's
        requests = _conversation_requests(model_server, label)
        last_texts = _texts(agent, requests[-1].body)
        assert any("YOUR MEMBER ID: " + str(m) in t for t in last_texts), last_texts
        assert any(f"cafleet msg {second} " in t for t in last_texts), last_texts
        assert any(f"cafleet msg {third} " in t for t in last_texts), last_texts
        # The agent's own record: one session of this member, holding all three turns.
        received = member.real.received()
        for needle in ("YOUR MEMBER ID: " + str(m), f"cafleet msg {second} ",
                       f"cafleet msg {third} "):  # fmt: skip
            assert sum(needle in t for t in received) >= 1, (needle, received)

        # Usage: exactly the tokens the model reported for the session's requests.
        _usage_matches(h, model_server, label, m)
    finally:
        member.stop()
