"""The scripted model server (tests/harness/scripted_model.py): its two wire protocols, its
usage accounting, its loopback-only binding, and the member and Director scripts on
conversations shaped like the real agents' requests (tool names and argument shapes as Claude
Code 2.1.197, Codex CLI 0.171.0 and opencode 1.18.33 send them)."""

from __future__ import annotations

import json
import socket
import urllib.request
from typing import Any

import pytest

from cafleet.broker.tasks import assignment_text
from cafleet.records.tasks import Task
from tests.harness.scripted_model import (
    ScriptedModel,
    anthropic_conversation,
    decide,
    director_plan,
    envelopes,
    parse_task,
    responses_conversation,
    task_steps,
    tokens,
)

POLL = (
    "[12 | from:Director (1) | 2026-12-02T01:00:00.000Z]\n"
    "write out/a.txt: hello from a ; run: echo ran-a\n"
    "\n"
    "[11 | from:1 | 2026-12-02T00:59:00.000Z]\n"
    "run: true\n"
)
SPAWN = "FLEET ID: 2\nYOUR MEMBER ID: 7\nDIRECTOR MEMBER ID: 1\nCODING AGENT: claude\n"
LINE = "[cafleet msg 12 from Director (1)] write out/a.txt: … — ack with: cafleet message ack 12"
CLAUDE_TOOLS = [{"name": "Bash"}, {"name": "Write"}, {"name": "Read"}]
OPENCODE_TOOLS = [{"name": "bash"}, {"name": "write"}]
CODEX_TOOLS = [{"type": "function", "name": "exec_command"}, {"type": "web_search"}]


def _post(url: str, body: dict[str, Any]) -> tuple[str, bytes]:
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"content-type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        return str(resp.headers.get("content-type")), resp.read()


def _events(raw: bytes) -> list[dict[str, Any]]:
    out = []
    for block in raw.decode().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "data" in lines:
            data = json.loads(lines["data"])
            assert data["type"] == lines["event"]
            out.append(data)
    return out


def _anthropic_turn(
    texts: list[str], calls: list[tuple[str, dict[str, Any], str | None]]
) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [
        {
            "role": "user",
            "content": [{"type": "text", "text": "<system-reminder>skills…</system-reminder>"}],
        }
    ]
    for text in texts:
        messages.append({"role": "user", "content": [{"type": "text", "text": text}]})
        messages.append({"role": "assistant", "content": [{"type": "text", "text": "Done."}]})
    messages.pop()
    for i, (name, args, result) in enumerate(calls):
        messages.append(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": f"t{i}", "name": name, "input": args}],
            }
        )
        if result is not None:
            messages.append(
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": result}],
                }
            )
    return {"model": "m", "stream": True, "messages": messages, "tools": CLAUDE_TOOLS,
            "system": [{"type": "text", "text": " - Primary working directory: /p/w\n"}]}  # fmt: skip


# --------------------------------------------------------------------------- the scripts


def test_parse_task_and_envelopes() -> None:
    assert envelopes(POLL) == [
        (12, 1, "write out/a.txt: hello from a ; run: echo ran-a"),
        (11, 1, "run: true"),
    ]
    assert parse_task("write out/a.txt: hello from a ; run: echo ran-a").steps == (
        ("write", "out/a.txt", "hello from a"),
        ("run", "echo ran-a", ""),
    )
    assert parse_task("ready").steps == ()
    # A long task that ends with its command: the last line is run exactly, whatever it says.
    task = "run the last line:\nsome context ; run: not this\n  ls -la 'a b' ; echo x "
    assert parse_task(task).steps == (("run", "  ls -la 'a b' ; echo x ", ""),)


def test_member_script_follows_the_skill_step_by_step() -> None:
    conv = anthropic_conversation(_anthropic_turn([SPAWN], []))
    assert (
        decide(conv).command == 'cafleet message send --from-member-id 7 --to-member-id 1 "ready"'
    )
    ready = ("Bash", {"command": "cafleet message send … ready"}, "Message sent.")
    assert decide(anthropic_conversation(_anthropic_turn([SPAWN], [ready]))).kind == "text"

    calls: list[tuple[str, dict[str, Any], str | None]] = []
    expected = [
        ("shell", "cafleet message poll 7"),
        ("shell", "true"),
        ("shell", "cafleet message send --from-member-id 7 --to-member-id 1 'done 11: ran true'"),
        ("shell", "cafleet message ack 11"),
        ("write", "/p/w/out/a.txt"),
        ("shell", "echo ran-a"),
        ("shell", "cafleet message send --from-member-id 7 --to-member-id 1 "
                  "'done 12: wrote out/a.txt; ran echo ran-a'"),
        ("shell", "cafleet message ack 12"),
    ]  # fmt: skip
    for kind, what in expected:
        body = _anthropic_turn([SPAWN, LINE], calls)
        conv = anthropic_conversation(body)
        action = decide(conv, "/p/w")
        assert action.kind == kind
        assert (action.path if kind == "write" else action.command) == what
        if kind == "write":
            assert action.content == "hello from a"
        result = POLL if what.endswith("poll 7") else "ok"
        calls.append(("Write" if kind == "write" else "Bash", {"command": what}, result))
    assert decide(anthropic_conversation(_anthropic_turn([SPAWN, LINE], calls))).kind == "text"


def test_member_script_claims_reports_on_and_finishes_a_task() -> None:
    """A task's assignment (the text cafleet sends): claim, the work, a report filed under the
    task, the ACK, then `task done` with the report as the result."""
    task = Task(task_id=5, fleet_id=2, title="work for a", body="run: echo ran-a", state="ready",
                creator_member_id=1, assignee_member_id=7, reason=None, result=None,
                created_at="t", started_at=None, finished_at=None, state_since="t")  # fmt: skip
    poll = f"[13 | from:Director (1) | t]\n{assignment_text(task)}\n"
    line = (
        "[cafleet msg 13 from Director (1)] [cafleet] task 5 … — ack with: cafleet message ack 13"
    )
    calls: list[tuple[str, dict[str, Any], str | None]] = []
    expected = [
        "cafleet message poll 7",
        "cafleet task claim 5 --member-id 7",
        "echo ran-a",
        "cafleet message send --from-member-id 7 --to-member-id 1 --task 5 'done 13: ran echo ran-a'",
        "cafleet message ack 13",
        "cafleet task done 5 --member-id 7 --result 'done 13: ran echo ran-a'",
    ]
    for what in expected:
        action = decide(anthropic_conversation(_anthropic_turn([SPAWN, line], calls)), "/p/w")
        assert (action.kind, action.command) == ("shell", what)
        calls.append(("Bash", {"command": what}, poll if what.endswith("poll 7") else "ok"))
    assert decide(anthropic_conversation(_anthropic_turn([SPAWN, line], calls))).kind == "text"
    assert task_steps("[cafleet] task 5 is ready for you: x") is None  # no commands: not one


def test_director_script_lays_out_dependent_tasks_then_starts_them() -> None:
    text = (
        "FLEET PLAN\nfleet: demo claude\nmember: alpha claude\nmember: beta codex\n"
        "work alpha: write a.txt: A\nwork beta after alpha: run: echo B\n"
    )
    plan = director_plan(text)
    assert plan is not None and plan.work == (
        ("alpha", "", "write a.txt: A"),
        ("beta", "alpha", "run: echo B"),
    )
    results = [
        "4 director=1 monitor=2\nmonitor loop: pid 9\n",
        "3 alpha agent=claude pane=%3\n",
        "5 beta agent=codex pane=%4\n",
        "Task 8 created.\ntask 8: work for alpha\n",
        "Task 9 created.\ntask 9: work for beta\n",
        "Task 8 assigned.",
    ]
    expected = [
        "cafleet fleet create --name demo --coding-agent claude",
        "cafleet member create --fleet-id 4 --name alpha --description 'fleet member alpha' --coding-agent claude",
        "cafleet member create --fleet-id 4 --name beta --description 'fleet member beta' --coding-agent codex",
        "cafleet task create --fleet-id 4 --title 'work for alpha' --body 'write a.txt: A'",
        "cafleet task create --fleet-id 4 --title 'work for beta' --body 'run: echo B' --assign 5 --after 8",
        "cafleet task assign 8 3",
    ]
    calls: list[tuple[str, dict[str, Any], str | None]] = []
    for command, result in zip(expected, results, strict=True):
        action = decide(anthropic_conversation(_anthropic_turn([text], calls)))
        assert action.command == command
        calls.append(("Bash", {"command": command}, result))
    final = decide(anthropic_conversation(_anthropic_turn([text], calls)))
    assert (final.kind, final.text) == ("text", "Created 2 tasks.")


def test_member_script_on_codex_responses_input() -> None:
    body = {
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<environment_context><cwd>/c/w</cwd></environment_context>"}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": SPAWN}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": LINE}]},
            {"type": "function_call", "name": "exec_command", "call_id": "c1",
             "arguments": json.dumps({"cmd": "cafleet message poll 7"})},
            {"type": "function_call_output", "call_id": "c1", "output": "Chunk ID: x\nOutput:\n" + POLL},
        ],
        "tools": CODEX_TOOLS,
    }  # fmt: skip
    conv = responses_conversation(body)
    assert [c.args["command"] for c in conv.calls] == ["cafleet message poll 7"]
    assert decide(conv).command == "true"


def test_codex_retries_a_sandbox_refusal_escalated_once() -> None:
    """After its sandbox refused a write, the model asks to run it outside (Codex's
    `sandbox_permissions: require_escalated`), once; then it goes on."""
    items: list[dict[str, Any]] = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": SPAWN}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": LINE}]},
    ]

    def call(n: int, args: dict[str, Any], output: str) -> None:
        items.append({"type": "function_call", "name": "exec_command", "call_id": f"c{n}",
                      "arguments": json.dumps(args)})  # fmt: skip
        items.append({"type": "function_call_output", "call_id": f"c{n}", "output": output})

    def next_action() -> Any:
        return decide(responses_conversation({"input": items, "tools": CODEX_TOOLS}), "/c/w")

    call(1, {"cmd": "cafleet message poll 7"}, POLL)
    first = next_action()
    assert (first.command, first.escalate) == ("true", False)
    call(2, {"cmd": "true"}, "touch: cannot touch 'x': Read-only file system")
    retry = next_action()
    assert (retry.command, retry.escalate) == ("true", True)
    call(3, {"cmd": "true", "sandbox_permissions": "require_escalated"}, "rejected by user")
    after = next_action()
    assert after.command.startswith("cafleet message send") and not after.escalate


def test_director_script_creates_sends_waits_and_acks() -> None:
    text = (
        "Run this.\nFLEET PLAN\nfleet: demo claude\nmember: alpha claude\nmember: beta codex\n"
        "task alpha: write a.txt: A\ntask beta: run: echo B\nwait: 30\n"
    )
    plan = director_plan(text)
    assert plan is not None and plan.members == (("alpha", "claude"), ("beta", "codex"))
    results = [
        "4 director=1 monitor=2\nmonitor loop: pid 9\n",
        "3 alpha agent=claude pane=%3\n",
        "5 beta agent=codex pane=%4\n",
        "Message sent.",
        "Message sent.",
        "[20 | from:alpha (3) | t]\nready\n\n[21 | from:be (t) a (5) | t]\ndone 8: ran echo B\n",
        "Message acknowledged.",
        "Message acknowledged.",
        "[22 | from:3 | t]\ndone 7: wrote a.txt\n",
        "Message acknowledged.",
    ]
    expected = [
        "cafleet fleet create --name demo --coding-agent claude",
        "cafleet member create --fleet-id 4 --name alpha --description 'fleet member alpha' --coding-agent claude",
        "cafleet member create --fleet-id 4 --name beta --description 'fleet member beta' --coding-agent codex",
        "cafleet message send --from-member-id 1 --to-member-id 3 'write a.txt: A'",
        "cafleet message send --from-member-id 1 --to-member-id 5 'run: echo B'",
        "cafleet message wait 1 --timeout 30",
        "cafleet message ack 20",
        "cafleet message ack 21",
        "cafleet message wait 1 --timeout 30",
        "cafleet message ack 22",
    ]
    calls: list[tuple[str, dict[str, Any], str | None]] = []
    for command, result in zip(expected, results, strict=True):
        action = decide(anthropic_conversation(_anthropic_turn([text], calls)))
        assert action.command == command
        calls.append(("Bash", {"command": command}, result))
    final = decide(anthropic_conversation(_anthropic_turn([text], calls)))
    assert final.kind == "text" and "2 members replied" in final.text


# --------------------------------------------------------------------------- the server


@pytest.fixture
def model() -> Any:
    with ScriptedModel() as m:
        yield m


def test_anthropic_stream_tool_use_and_usage(model: ScriptedModel) -> None:
    body = _anthropic_turn([SPAWN], [])
    ctype, raw = _post(model.base_url("alpha") + "/v1/messages?beta=true", body)
    assert ctype.startswith("text/event-stream")
    events = _events(raw)
    assert [e["type"] for e in events] == [
        "message_start", "content_block_start", "content_block_delta", "content_block_stop",
        "message_delta", "message_stop",
    ]  # fmt: skip
    block = events[1]["content_block"]
    assert block["type"] == "tool_use" and block["name"] == "Bash"
    args = json.loads(events[2]["delta"]["partial_json"])
    assert args["command"].startswith("cafleet message send --from-member-id 7")
    assert events[4]["delta"]["stop_reason"] == "tool_use"
    usage_in = events[0]["message"]["usage"]["input_tokens"]
    usage_out = events[4]["usage"]["output_tokens"]
    assert usage_in == tokens(body["messages"]) and usage_out > 0
    # A side request without tools (a title) gets text; count_tokens gets a count.
    _, raw = _post(
        model.base_url("alpha") + "/v1/messages", {"stream": True, "messages": body["messages"]}
    )
    side = _events(raw)
    assert side[2]["delta"] == {"type": "text_delta", "text": ScriptedModel.side_text}
    _, raw = _post(
        model.base_url("alpha") + "/v1/messages/count_tokens", {"messages": body["messages"]}
    )
    assert json.loads(raw) == {"input_tokens": usage_in}
    totals = model.usage_totals()["alpha"]
    side_in = side[0]["message"]["usage"]["input_tokens"]
    assert totals == {
        "input_tokens": usage_in + side_in,
        "output_tokens": usage_out + side[4]["usage"]["output_tokens"],
        "responses": 2,
    }
    assert [r.client for r in model.requests] == ["alpha"] * 3


def test_opencode_write_uses_its_own_argument_names(model: ScriptedModel) -> None:
    body = _anthropic_turn([SPAWN, LINE], [("bash", {"command": "cafleet message poll 7"}, POLL)])
    body["tools"] = OPENCODE_TOOLS
    body["stream"] = False
    # Non-streamed: one JSON message. The oldest message (11) is a `run`, so the next call is bash.
    _, raw = _post(model.base_url("oc") + "/v1/messages", body)
    reply = json.loads(raw)
    assert (
        reply["content"][0]["name"] == "bash" and reply["content"][0]["input"]["command"] == "true"
    )
    assert reply["stop_reason"] == "tool_use" and reply["usage"]["output_tokens"] > 0


def test_responses_stream_function_call_and_usage(model: ScriptedModel) -> None:
    body = {
        "model": "gpt-5", "stream": True, "tools": CODEX_TOOLS,
        "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": SPAWN}]}],
    }  # fmt: skip
    _, raw = _post(model.base_url("cx") + "/v1/responses", body)
    events = _events(raw)
    kinds = [e["type"] for e in events]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    done = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    assert done[0]["type"] == "function_call" and done[0]["name"] == "exec_command"
    assert json.loads(done[0]["arguments"])["cmd"].endswith('--to-member-id 1 "ready"')
    usage = events[-1]["response"]["usage"]
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    assert model.usage_totals()["cx"]["output_tokens"] == usage["output_tokens"]


def test_binds_loopback_only_and_stops() -> None:
    with ScriptedModel() as m:
        port = m.port
        assert m.base_url().startswith("http://127.0.0.1:")
        assert m._server is not None and m._server.server_address[0] == "127.0.0.1"
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=2):
        pass


def test_a_line_claude_queued_while_working_is_a_new_user_text() -> None:
    """Claude Code sends a line typed during a turn as a system reminder next to the tool
    result; the member script then handles that message."""
    body = _anthropic_turn([SPAWN], [])
    body["messages"] += [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t0", "name": "Bash",
                                           "input": {"command": "cafleet message send … ready"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t0", "content": "Message sent."},
            {"type": "text", "text": "<system-reminder>\nThe user sent the following message:\n"
                                     + LINE + "\n</system-reminder>"},
        ]},
    ]  # fmt: skip
    action = decide(anthropic_conversation(body))
    assert action.command == "cafleet message poll 7"
    # As Claude Code 2.1.197 sends it: a message of role `system` after the tool result.
    body["messages"][-1]["content"] = [
        {"type": "tool_result", "tool_use_id": "t0", "content": "Message sent."}
    ]
    body["messages"].append({"role": "system", "content": (
        "The user sent a new message while you were working:\n" + LINE + "\n\nIMPORTANT: After "
        "completing your current task, you MUST address the user's message above."
    )})  # fmt: skip
    action = decide(anthropic_conversation(body))
    assert action.command == "cafleet message poll 7"
    body["messages"].pop()
    # The same reminder as a text block of the tool result itself.
    body["messages"][-1]["content"] = [
        {"type": "tool_result", "tool_use_id": "t0", "content": [
            {"type": "text", "text": "Message sent."},
            {"type": "text", "text": "<system-reminder>\nThe user sent a new message while you "
                                     "were working:\n" + LINE + "\n</system-reminder>"},
        ]},
    ]  # fmt: skip
    action = decide(anthropic_conversation(body))
    assert action.command == "cafleet message poll 7"
