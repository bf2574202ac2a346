"""Gemini CLI, the fourth agent (cafleet/agents/gemini/): its argv per permission profile, its
policy files, its chat records (session ids, the spawn prompt, usage once per reply across a
`--resume`), the second witness, doctor's check of its policies, its prompt reader, and the
scripted model's Gemini API (unit; the real Gemini CLI runs in the real-agent tests)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

import cafleet
from cafleet.agents import AgentUnavailable, AgentUsageError, get_agent
from cafleet.agents.gemini.policies import PROFILES, policy_files
from cafleet.agents.gemini.rules import check_gemini
from cafleet.sessions import Tally, prices, records_of
from cafleet.sessions.witness import holds_line
from tests.harness.scripted_model import gemini_conversation, schema_value

BIN = "/opt/bin/gemini"
VERSION = cafleet.__version__
SID = "ca9f7e11-2eb9-4b6e-bab0-374ee73293bf"
CONTEXT = "<session_context>\nThis is the Gemini CLI.\n</session_context>"


def build(**kw: Any) -> list[str]:
    args: dict[str, Any] = {"binary_path": BIN, "prompt": "PROMPT", "display_name": "w",
                            "model": None, "effort": None, "monitor": False}  # fmt: skip
    args.update(kw)
    return get_agent("gemini").build_argv(**args)


def test_argv_per_profile_and_for_the_monitor_and_resume(monkeypatch: pytest.MonkeyPatch) -> None:
    home = "/home/u"
    monkeypatch.setenv("HOME", home)
    policy = f"{home}/.gemini/cafleet"
    assert build() == [BIN, "--approval-mode", "auto_edit", "--policy", f"{policy}/workspace.toml",
                       "--prompt-interactive", "PROMPT"]  # fmt: skip
    assert build(permissions="ask")[1:5] == ["--approval-mode", "default", "--policy",
                                             f"{policy}/ask.toml"]  # fmt: skip
    assert build(permissions="readonly")[1:5] == ["--approval-mode", "default", "--policy",
                                                  f"{policy}/readonly.toml"]  # fmt: skip
    assert build(permissions="full") == [BIN, "--approval-mode", "yolo", "--prompt-interactive",
                                         "PROMPT"]  # fmt: skip
    # The monitor: reads and cafleet commands only, whatever the profile.
    assert build(monitor=True, permissions="full", model="gemini-2.5-pro") == [
        BIN, "--approval-mode", "default", "--policy", f"{policy}/readonly.toml",
        "--model", "gemini-2.5-pro", "--prompt-interactive", "PROMPT",
    ]  # fmt: skip
    monkeypatch.setenv("GEMINI_CLI_HOME", "/elsewhere")
    resumed = get_agent("gemini").build_resume_argv(
        binary_path=BIN, session_id=SID, display_name="w", model=None, effort=None,
        monitor=False, permissions="ask",
    )  # fmt: skip
    assert resumed == [BIN, "--approval-mode", "default", "--policy",
                       "/elsewhere/.gemini/cafleet/ask.toml", "--resume", SID]  # fmt: skip
    with pytest.raises(AgentUsageError, match="does not support --effort"):
        get_agent("gemini").validate_effort("high", flag="--effort")


def test_spawning_needs_the_installed_policy_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "gemini").write_text("#!/bin/sh\n", encoding="utf-8")
    (bin_dir / "gemini").chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(AgentUnavailable, match="run 'cafleet setup --coding-agent gemini'"):
        get_agent("gemini").ensure_available()
    folder = tmp_path / ".gemini" / "cafleet"
    folder.mkdir(parents=True)
    for name, data in policy_files(VERSION).items():
        (folder / name).write_bytes(data)
    assert get_agent("gemini").ensure_available() == str(bin_dir / "gemini")


def test_policy_files_allow_cafleet_in_every_profile_and_differ_where_they_should() -> None:
    files = {name: tomllib.loads(data.decode()) for name, data in policy_files(VERSION).items()}
    assert sorted(files) == sorted(f"{p}.toml" for p in PROFILES)
    for name, policy in files.items():
        rules = policy["rule"]
        cafleet_rule = {"toolName": "run_shell_command", "commandPrefix": "cafleet",
                        "decision": "allow", "priority": 900}  # fmt: skip
        assert cafleet_rule in rules, name
        assert all(r["priority"] < 900 for r in rules if r != cafleet_rule and
                   r["toolName"] == "run_shell_command"), name  # fmt: skip
    workspace = files["workspace.toml"]["rule"]
    assert {"toolName": "run_shell_command", "decision": "allow", "priority": 100} in workspace
    assert any("curl" in r.get("commandPrefix", []) and r["decision"] == "ask_user"
               for r in workspace)  # fmt: skip
    readonly = files["readonly.toml"]["rule"]
    denied = next(r for r in readonly if r["decision"] == "deny")
    assert {"run_shell_command", "write_file", "replace"} <= set(denied["toolName"])
    assert [r["decision"] for r in files["ask.toml"]["rule"]] == ["allow", "allow"]


# --- chat records ---------------------------------------------------------------------------


def chat(root: Path, cwd: str, sid: str, lines: list[dict[str, Any]], stamp: str) -> Path:
    project = root / ".gemini" / "tmp" / "project"
    project.mkdir(parents=True, exist_ok=True)
    (project / ".project_root").write_text(cwd, encoding="utf-8")
    path = project / "chats" / f"session-{stamp}-{sid[:8]}.jsonl"
    path.parent.mkdir(exist_ok=True)
    head = {"sessionId": sid, "projectHash": "x", "startTime": "2026-12-03T19:45:19.510Z",
            "lastUpdated": "2026-12-03T19:45:19.510Z", "kind": "main"}  # fmt: skip
    context = {"$set": {"messages": [user("c0", CONTEXT)]}}
    with path.open("a", encoding="utf-8") as fh:
        for rec in [head, context, *lines]:
            fh.write(json.dumps(rec) + "\n")
    return path


def user(mid: str, text: str) -> dict[str, Any]:
    return {"id": mid, "timestamp": "2026-12-03T19:45:20Z", "type": "user",
            "content": [{"text": text}]}  # fmt: skip


def reply(mid: str, tokens: tuple[int, int, int, int], model: str = "gemini-2.5-flash") -> dict:
    i, o, cached, thoughts = tokens
    return {"id": mid, "type": "gemini", "content": "ok", "model": model,
            "tokens": {"input": i, "output": o, "cached": cached, "thoughts": thoughts,
                       "tool": 0, "total": i + o + thoughts}}  # fmt: skip


def test_records_find_locate_usage_across_a_resume(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path)}
    reader = records_of("gemini")
    first = reply("r1", (100, 7, 40, 3))
    path = chat(tmp_path, "/p", SID, [user("u1", "You are member 7."), first],
                "2026-12-03T19-45")  # fmt: skip
    # Another session, other prompt: not this member's.
    chat(tmp_path, "/p", "0badc0de-0000-4000-8000-000000000000", [user("u9", "You are member 71.")],
         "2026-12-03T19-46")  # fmt: skip
    found = reader.find(env, since=0, cwd="/p", prompt="You are member 7")
    assert [(r.session_id, r.path, r.cwd) for r in found] == [(SID, str(path), "/p")]
    assert reader.find(env, since=0, cwd="/elsewhere", prompt="You are member 7") == []
    record = reader.locate(env, SID)
    assert record is not None and record.path == str(path)
    state = reader.read_usage(record, {})
    # Uncached input = input - cached; thoughts are billed as output.
    assert Tally.from_json(state["tally"]).totals() == (60, 10, 40, 0)
    # `--resume` appends to the same file, repeating the earlier messages in a `$set`, and
    # leaves a second file of the same id holding only the context: r1 is not counted twice.
    with path.open("a", encoding="utf-8") as fh:
        for rec in [{"$set": {"messages": [user("c0", CONTEXT), user("u1", "x"), first]}},
                    user("u2", "again"), reply("r2", (200, 5, 0, 0))]:  # fmt: skip
            fh.write(json.dumps(rec) + "\n")
    chat(tmp_path, "/p", SID, [], "2026-12-03T19-51")
    assert reader.locate(env, SID).path == str(path)  # type: ignore[union-attr]
    state = reader.read_usage(record, state)
    assert Tally.from_json(state["tally"]).totals() == (260, 15, 40, 0)
    assert get_agent("gemini").locate_remembered(SID, record) == record
    # GEMINI_CLI_HOME moves the whole `.gemini` directory.
    assert reader.locate({"GEMINI_CLI_HOME": str(tmp_path)}, SID) == record
    assert reader.locate({"HOME": "/nonexistent"}, SID) is None
    assert reader.locate(env, "../etc") is None


def test_the_second_witness_reads_user_messages_only(tmp_path: Path) -> None:
    frame = "[cafleet msg 12 from Director (1)]"
    tool_echo = {"id": "r", "type": "gemini", "content": f"I saw {frame}"}
    path = chat(tmp_path, "/p", SID, [tool_echo], "2026-12-03T19-45")
    assert not holds_line("gemini", str(path), SID, frame)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(user("u", f"{frame} hello")) + "\n")
    assert holds_line("gemini", str(path), SID, frame)


def test_gemini_prices() -> None:
    tally = Tally()
    tally.add("gemini-2.5-flash", (1_000_000, 1_000_000, 1_000_000, 0))
    assert prices.cost(tally, prices.load({})) == pytest.approx(0.3 + 2.5 + 0.03)


# --- doctor ---------------------------------------------------------------------------------


def test_doctor_names_user_policies_and_settings_that_block_cafleet(tmp_path: Path) -> None:
    config = tmp_path / ".gemini"
    (config / "policies").mkdir(parents=True)
    assert check_gemini(str(config), "ok").ok
    (config / "policies" / "mine.toml").write_text(
        '[[rule]]\ntoolName = "run_shell_command"\ncommandPrefix = "cafleet message"\n'
        'decision = "deny"\npriority = 950\n\n'
        '[[rule]]\ntoolName = "run_shell_command"\ndecision = "ask_user"\npriority = 10\n',
        encoding="utf-8",
    )
    row = check_gemini(str(config), "ok")
    assert [(b.rule, b.command) for b in row.blocking] == [
        ("run_shell_command cafleet message: deny (priority 950)", "cafleet message poll 1")
    ]  # the low-priority ask is beaten by the cafleet policy
    (config / "settings.json").write_text(json.dumps({"tools": {"exclude": ["run_shell_command"]}}))
    assert "tools.exclude" in check_gemini(str(config), "ok").blocking[0].rule
    stale = check_gemini(str(tmp_path / "none"), "missing")
    assert stale.error == (
        "the cafleet policy files are missing; run 'cafleet setup --coding-agent gemini'"
    )


# --- the scripted model's Gemini API ----------------------------------------------------------


def test_scripted_model_reads_a_gemini_request() -> None:
    body = {
        "systemInstruction": {"parts": [{"text": "You are Gemini CLI"}]},
        "contents": [
            {"role": "user", "parts": [{"text": CONTEXT}, {"text": "YOUR MEMBER ID: 5"}]},
            {"role": "model", "parts": [{"functionCall": {"name": "run_shell_command",
                                                          "args": {"command": "cafleet x"}}}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "run_shell_command",
             "response": {"output": "<untrusted_context>\nOutput: [6 | from:D (1) | t]\nbody\n"
                                    "Process Group PGID: 9\n</untrusted_context>"}}}]},
        ],
    }  # fmt: skip
    conv = gemini_conversation(body)
    assert conv.texts == ["YOUR MEMBER ID: 5"] and conv.system == "You are Gemini CLI"
    assert [(c.kind, c.args["command"], c.result) for c in conv.calls] == [
        ("shell", "cafleet x", "[6 | from:D (1) | t]\nbody")
    ]
    routing = {"type": "OBJECT", "properties": {"complexity_reasoning": {"type": "STRING"},
               "complexity_score": {"type": "INTEGER"}}}  # fmt: skip
    assert schema_value(routing) == {"complexity_reasoning": "simple", "complexity_score": 1}
    assert schema_value({"type": "STRING", "enum": ["model", "user"]}) == "user"


def test_a_gemini_response_answers_the_call_it_names() -> None:
    """A line typed while a tool ran can reach the request before that tool's response: the
    response (named by its call's id) stays with the old turn, and the new turn's first call
    has no result yet, not the old one's."""

    def call(call_id: str, command: str) -> dict[str, object]:
        return {"role": "model", "parts": [{"functionCall": {
            "id": call_id, "name": "run_shell_command", "args": {"command": command}}}]}  # fmt: skip

    def answer(call_id: str, output: str) -> dict[str, object]:
        return {"role": "user", "parts": [{"functionResponse": {
            "id": call_id, "name": "run_shell_command", "response": {"output": output}}}]}  # fmt: skip

    body = {
        "contents": [
            {"role": "user", "parts": [{"text": "YOUR MEMBER ID: 6"}]},
            call("a", "cafleet message send ready"),
            {"role": "user", "parts": [{"text": "[cafleet msg 7 from D (1)] work"}]},
            answer("a", "Message sent."),
            call("b", "cafleet message poll 6"),
        ]
    }
    conv = gemini_conversation(body)
    assert conv.texts[-1] == "[cafleet msg 7 from D (1)] work"
    assert [(c.args["command"], c.result) for c in conv.calls] == [("cafleet message poll 6", None)]
    body["contents"].append(answer("b", "[7 | from:D (1) | t]\nwork"))
    assert [c.result for c in gemini_conversation(body).calls] == ["[7 | from:D (1) | t]\nwork"]


def test_setup_installs_the_policy_folder_beside_the_skills() -> None:
    from cafleet.assets.bundle import units_for

    units = {unit.rel: unit for unit in units_for("gemini", VERSION)}
    from cafleet.agents.gemini import extension_files

    assert units["cafleet"].files == policy_files(VERSION)  # a folder cafleet owns
    # And an extension holding the members' hooks (docs/runtime.md §4.12).
    assert units["extensions/cafleet"].files == extension_files(VERSION)
    assert "SKILL.md" in units["skills/cafleet"].files


def test_a_gemini_hook_payload_names_its_chat(tmp_path: Path) -> None:
    """docs/runtime.md §9.4: the payload's session and transcript, only when the file's first
    line names that session."""
    from cafleet.agents.registry import load_agent

    sid = "0b6e1c6e-4a9b-4c55-9d7a-2f1f4c1d9e77"
    path = chat(tmp_path, "/p", sid, [user("u1", "hi")], "2026-12-03T19-45")
    agent = load_agent("gemini")
    record = agent.session_from_hook({"session_id": sid, "transcript_path": str(path)})
    assert record is not None and (record.session_id, record.path) == (sid, str(path))
    other = {"session_id": "ffffffff-0000-0000-0000-000000000000", "transcript_path": str(path)}
    assert agent.session_from_hook(other) is None
    missing = {"session_id": sid, "transcript_path": str(tmp_path / "nope.jsonl")}
    assert agent.session_from_hook(missing) is None
    assert load_agent("codex").session_from_hook({"session_id": sid}) is None
