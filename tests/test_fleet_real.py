"""A whole fleet of real agents does work, offline (docs/permissions.md; tests/harness/real_fleet.py).

A real Claude Code Director, driven by the scripted model (tests/harness/scripted_model.py),
runs `cafleet fleet create`, `cafleet member create` for one Claude Code, one Codex, one
opencode and one Gemini CLI member (default profile: workspace), sends each a task (write a named file, run a named
command); each member polls, does it, replies and ACKs; the Director's `message wait` returns the
replies and it ACKs them. Judged by the database, the files on disk, each agent's own session
record and the scripted model's request log.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.fleet_helpers import ok, pane_captures
from tests.harness.fixtures import TmuxHarness
from tests.harness.real_fleet import RealFleet, plan_text
from tests.harness.scripted_model import (
    MEMBER_ID_RX,
    Call,
    ScriptedModel,
    anthropic_conversation,
    gemini_conversation,
    responses_conversation,
)
from tests.harness.util import read_jsonl, retry_until

pytestmark = [pytest.mark.real_agent, pytest.mark.tmux]
MEMBERS = (("alpha", "claude"), ("beta", "codex"), ("gamma", "opencode"), ("delta", "gemini"))
DONE = "All 4 members replied."


def _task(name: str) -> str:
    return f"write {name}.txt: written by {name} ; run: echo {name}-ran > {name}-ran.txt"


def _director_done(model: ScriptedModel) -> bool:
    return any(
        r.action is not None and r.action.kind == "text" and r.action.text == DONE
        for r in model.client_requests("director")
    )


def test_a_real_director_runs_a_fleet_of_the_four_real_agents(
    tmux_db: TmuxHarness, model_server: ScriptedModel
) -> None:
    h = tmux_db
    fleet = RealFleet(h, model_server, MEMBERS)
    prompt = plan_text("e2e", MEMBERS, [(name, _task(name)) for name, _ in MEMBERS])
    try:
        fleet.start(prompt)
        retry_until(
            lambda: _director_done(model_server),
            timeout=600,
            interval=2.0,
            message=lambda: _diagnosis(h, fleet, model_server),
        )
        project = fleet.project
        # Files on disk: each member wrote its file and ran its command, in the project.
        for name, _ in MEMBERS:
            assert (project / f"{name}.txt").read_text() == f"written by {name}"
            assert (project / f"{name}-ran.txt").read_text() == f"{name}-ran\n"
        # The database: the fleet, its Director (the Director's own pane), four members.
        fleet_rows = h.sqlite("SELECT fleet_id, name, director_member_id FROM fleets")
        assert len(fleet_rows) == 1 and fleet_rows[0][1] == "e2e"
        fleet_id, _, director_id = fleet_rows[0]
        roster = json.loads(ok(h.cli("member", "list", str(fleet_id), "--json")).stdout)
        members = {
            r["name"]: r["placement"]["coding_agent"] for r in roster if r["kind"] == "member"
        }
        assert members == dict(MEMBERS)
        # The default profile: each could edit and run in its working directory.
        assert {r["permissions"] for r in roster if r["kind"] == "member"} == {"workspace"}
        director_pane = h.sqlite(
            "SELECT mux_pane_id FROM member_placements WHERE member_id = ?", director_id
        )[0][0]
        assert director_pane == fleet.director.pane
        ids = dict(h.sqlite("SELECT name, member_id FROM members WHERE fleet_id = ?", fleet_id))
        # Every message is ACKed: the tasks by the members, the replies and readies by the
        # Director; each exactly once (a second ACK would have failed and been retried, and
        # the model log shows one ACK command per message).
        rows = h.sqlite(
            "SELECT message_id, from_member_id, to_member_id, text, status_state FROM messages"
        )
        assert rows and not [r for r in rows if r[4] != "completed"], rows
        tasks = {r[2]: r[0] for r in rows if r[1] == director_id}
        assert set(tasks) == {ids[name] for name, _ in MEMBERS}
        for name, _ in MEMBERS:
            replies = [
                r
                for r in rows
                if r[1] == ids[name] and r[3].startswith(f"done {tasks[ids[name]]}:")
            ]
            assert len(replies) == 1, rows
        acks = Counter(
            int(c.rsplit(" ", 1)[1])
            for c in model_server.commands()
            if c.startswith("cafleet message ack ")
        )
        assert acks == Counter({r[0]: 1 for r in rows}), (acks, rows)
        # Each agent's own record: the Director got its plan; each member got its task line
        # as its own user message, and none was interrupted.
        assert any("FLEET PLAN" in t for t in fleet.director.received())
        assert fleet.director.interruptions() == 0
        for name, _ in MEMBERS:
            member = fleet.members[name].real
            records = member.records()
            line = f"[cafleet msg {tasks[ids[name]]} from Director ({director_id})]"
            # Claude Code records a line typed while it works twice (its enqueue record, then
            # the user message when its turn comes): one arrival, so queued and direct records
            # are counted apart (tests/harness/real_member.py, arrived_count).
            queued = sum(r.queued and r.text.startswith(line) for r in records)
            direct = sum(not r.queued and r.text.startswith(line) for r in records)
            assert max(queued, direct) == 1, (name, [(r.text, r.queued) for r in records])
            assert member.interruptions() == 0, name
        # The Director's `message wait` returned the four replies (its tool results).
        waits = [
            c.result or ""
            for r in model_server.client_requests("director")[-1:]
            for c in _calls(r.body)
            if c.args.get("command", "").startswith("cafleet message wait ")
        ]
        seen = "\n".join(waits)
        for name, _ in MEMBERS:
            assert f"done {tasks[ids[name]]}:" in seen, seen
        # The Director's own record keeps, for each model message, the usage the model
        # reported for it.
        reported = {r.response_id: r.usage for r in model_server.client_requests("director")}
        recorded = _claude_usage(fleet.director.claude_config)
        assert recorded and set(recorded) <= set(reported)
        for message_id, usage in recorded.items():
            assert usage["output_tokens"] == reported[message_id]["output_tokens"], message_id
            assert usage["input_tokens"] == reported[message_id]["input_tokens"], message_id
        # Each pane's model requests carry its own label: the monitor `fleet create` spawned
        # (a Claude Code, like member alpha) has its own, and no label holds another pane's
        # conversation (each one's first prompt names its member id: YOUR MEMBER ID).
        monitor_id = next(r["member_id"] for r in roster if r["kind"] == "monitor")
        own = {"monitor": monitor_id, **{name: ids[name] for name, _ in MEMBERS}}
        for label, member_id in own.items():
            named = {x for r in model_server.client_requests(label) if (x := _member_of(r.body))}
            assert named == {member_id}, (label, named, own)
        assert any(
            "You are the monitor of cafleet fleet" in json.dumps(r.body)
            for r in model_server.client_requests("monitor")
        )
        assert set(model_server.usage_totals()) == {"director", *own}
        assert any(
            "You are the monitor of cafleet fleet" in t for t in fleet.monitor.real.received()
        )
        assert not any("You are the monitor" in t for t in fleet.members["alpha"].real.received())
        # The model reported usage in every response and kept per-client totals.
        totals = model_server.usage_totals()
        for label in ("director", "monitor", *(n for n, _ in MEMBERS)):
            served = [r for r in model_server.client_requests(label) if r.action is not None]
            assert totals[label]["responses"] == len(served) > 0
            assert totals[label]["output_tokens"] == sum(r.usage["output_tokens"] for r in served)
    finally:
        keep = os.environ.get("CAFLEET_KEEP_MODEL_LOG")  # a path: keep the request log there
        if keep:
            model_server.dump(keep)
        fleet.stop()


def _claude_usage(config_dir: Path) -> dict[str, dict[str, int]]:
    """message id -> usage, from Claude Code's session records (assistant records)."""
    out: dict[str, dict[str, int]] = {}
    for path in sorted((config_dir / "projects").glob("*/*.jsonl")):
        for rec in read_jsonl(path):
            message = rec.get("message") or {}
            if rec.get("type") == "assistant" and isinstance(message.get("usage"), dict):
                out[str(message.get("id"))] = message["usage"]
    return out


def _member_of(body: dict[str, Any]) -> int | None:
    """The member id the conversation's first prompt names (None: none, e.g. a title request)."""
    if "contents" in body:
        conv = gemini_conversation(body)
    else:
        conv = anthropic_conversation(body) if "messages" in body else responses_conversation(body)
    m = MEMBER_ID_RX.search(conv.first)
    return int(m.group(1)) if m else None


def _calls(body: dict[str, Any]) -> list[Call]:
    return anthropic_conversation(body).calls


def _diagnosis(h: TmuxHarness, fleet: RealFleet, model: ScriptedModel) -> str:
    parts = [
        f"messages: {h.sqlite('SELECT message_id, from_member_id, to_member_id, text, status_state FROM messages')}"
    ]
    parts.append("director commands: " + "\n".join(model.commands("director")[-12:]))
    return "\n".join([*parts, *pane_captures(h)])
