"""A scripted model on loopback: drives real Claude Code, Codex CLI and opencode offline.

Test code only (never shipped in the package). `ScriptedModel` serves, on 127.0.0.1 and a free
port, the two APIs the agents speak (/work/shared/real-clients.md, "A local model endpoint"):

- Anthropic Messages, ``POST /v1/messages`` (with or without ``?beta=true``), streamed as
  server-sent events (``message_start``, ``content_block_start`` / ``content_block_delta``
  (``text_delta`` or ``input_json_delta``) / ``content_block_stop``, ``message_delta`` with
  ``stop_reason`` and ``usage``, ``message_stop``) or as one JSON body when ``stream`` is false;
  ``POST /v1/messages/count_tokens`` answers ``{"input_tokens": n}``. Claude Code and opencode.
- OpenAI Responses, ``POST /v1/responses``, streamed (``response.created``,
  ``response.output_item.added`` / ``.done``, ``response.output_text.delta``,
  ``response.completed`` with ``usage``). Codex CLI.
- Gemini API, ``POST /v1beta/models/<model>:generateContent`` (Gemini CLI's routing call, whose
  ``responseJsonSchema`` gets JSON of that shape, `schema_value`) and
  ``:streamGenerateContent?alt=sse`` (one ``data:`` event: a ``functionCall`` part or text, with
  ``usageMetadata``); ``:countTokens``. Gemini CLI.

Each agent gets its own base URL with a *client label* in the path (`base_url`):
``http://127.0.0.1:<port>/c/<label>``; the label names the client in the request log and in the
usage totals, which count exactly the tokens each response reported (`usage_totals`), so a test
can compare them with what the agent recorded.

What the model says comes from `decide`: a stateless function of the conversation in the
request, following the installed ``cafleet`` skill (cafleet/data/skills/cafleet/):

- **member** (a conversation whose first prompt holds ``YOUR MEMBER ID: <n>``): on the spawn
  prompt it sends ``ready`` to its Director; on a ``[cafleet msg N from …]`` line it runs
  ``cafleet message poll <me>``, then for every message the poll lists does the task its body
  names (`parse_task`: ``write <path>: <content>`` writes a file with the agent's write tool;
  ``run: <command>`` runs a shell command; a body starting ``run the last line:`` runs its last
  line exactly as the poll printed it), reports with ``cafleet message send`` and ACKs it
  with ``cafleet message ack <id>``; then ends its turn. A task's assignment
  (``[cafleet] task T is ready for you: …``, `task_steps`) is first claimed with the line it
  names, and reported with ``--task T``; after the ACK, the task is marked done with the
  ``Finish it:`` line, the report as its result.
- **director** (a prompt holding a ``FLEET PLAN`` block, `director_plan`): runs
  ``cafleet fleet create``, ``cafleet member create`` for each planned member, sends each its
  task, then ``cafleet message wait <me>`` / ``cafleet message ack`` until every member replied,
  and ends its turn with a summary. A plan of ``work`` lines instead creates one task per line
  (``cafleet task create … --assign <member> --after <task>``; one after none is assigned with
  ``cafleet task assign`` once all exist) and ends its turn: the tasks move by themselves.

Tool calls use the request's own tools (Claude Code: ``Bash`` / ``Write``; opencode: ``bash`` /
``write``; Codex: its shell tool, see `_codex_call`; Gemini CLI: ``run_shell_command`` /
``write_file``). Anything else (title and summary side
requests, a conversation with no script) gets a short text reply. Standard library only.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import os
import re
import shlex
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MEMBER_ID_RX = re.compile(r"YOUR MEMBER ID: (\d+)")
DIRECTOR_ID_RX = re.compile(r"DIRECTOR MEMBER ID: (\d+)")
TRIGGER_RX = re.compile(r"\[cafleet msg (\d+) from [^\]]*\((\d+)\)\]")
# A text envelope of `cafleet message poll` / `wait` (docs/cli.md §1.10): a header
# `[<id> | from:<name> (<sender id>) | <timestamp>…]` (a bare id when the name is not known),
# then the body up to a blank line.
ENVELOPE_RX = re.compile(
    r"^\[(\d+) \| from:(?:[^\n]*? \()?(\d+)\)? \| [^\]\n]*\]\n(?P<body>(?:.+\n?)*)", re.M
)
PLAN_MARK = "FLEET PLAN"
# The assignment cafleet sends when a task is ready (cafleet.broker.tasks.assignment_text).
TASK_READY_RX = re.compile(r"^\[cafleet\] task (\d+) is ready for you: ")
REPLY_PREFIX = "done"


# --------------------------------------------------------------------------- conversation


@dataclass(frozen=True)
class Call:
    """One tool call the model made, and its result (None until the agent sends it)."""

    kind: str  # "shell" | "write"
    args: dict[str, Any]
    result: str | None


@dataclass
class Conversation:
    """An API request reduced to what the scripts read: the user texts in order, the calls
    the model made after the last user text, the working directory the agent announced."""

    texts: list[str] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)  # since the last user text
    system: str = ""
    # Codex: a command its sandbox refused may be run again outside it, if the user approves
    # (`sandbox_permissions: require_escalated`), as a model does after such a refusal.
    can_escalate: bool = False

    @property
    def first(self) -> str:
        return "\n".join(self.texts[:1])

    @property
    def last(self) -> str:
        return self.texts[-1] if self.texts else ""

    @property
    def all_text(self) -> str:
        return "\n".join(self.texts)


@dataclass(frozen=True)
class Action:
    """The model's next move: a tool call (``kind`` shell/write) or a text that ends the turn."""

    kind: str  # "shell" | "write" | "text"
    command: str = ""  # shell
    path: str = ""  # write
    content: str = ""  # write
    text: str = ""  # text
    escalate: bool = False  # Codex: ask to run outside the sandbox


def shell(command: str) -> Action:
    return Action("shell", command=command)


def say(text: str) -> Action:
    return Action("text", text=text)


# --------------------------------------------------------------------------- the scripts


@dataclass(frozen=True)
class Task:
    """What a message body asks of a member: files to write, commands to run, in order."""

    steps: tuple[tuple[str, str, str], ...]  # ("write", path, content) | ("run", command, "")


# A body whose first line is this asks to run its last line exactly as it reads (the way an
# agent runs the command a long task ends with): a cut body runs whatever its cut line says.
RUN_LAST_LINE = "run the last line:"


def parse_task(body: str) -> Task:
    """``write <path>: <content>`` and ``run: <command>`` clauses, separated by `` ; `` or new
    lines; or a body that starts with `RUN_LAST_LINE`, which runs its last line; anything else
    is not a task (an empty Task)."""
    lines = body.split("\n")
    if len(lines) > 1 and lines[0].strip() == RUN_LAST_LINE:
        return Task((("run", lines[-1], ""),))
    steps: list[tuple[str, str, str]] = []
    for raw in re.split(r"\s;\s|\n", body):
        clause = raw.strip()
        m = re.fullmatch(r"write (\S+): (.*)", clause, re.S)
        if m:
            steps.append(("write", m.group(1), m.group(2)))
            continue
        m = re.fullmatch(r"run: (.+)", clause, re.S)
        if m:
            steps.append(("run", m.group(1), ""))
    return Task(tuple(steps))


def envelopes(text: str) -> list[tuple[int, int, str]]:
    """(message id, sender id, body) of each envelope in poll/wait output, in order."""
    out = []
    for m in ENVELOPE_RX.finditer(text):
        out.append((int(m.group(1)), int(m.group(2)), m.group("body").strip()))
    return out


def _resolve(cwd: str, path: str) -> str:
    return path if os.path.isabs(path) or not cwd else os.path.join(cwd, path)


def member_plan(conv: Conversation, cwd: str) -> list[Action] | None:
    """The member's actions for the turn the last user text started; None: not a member."""
    m = MEMBER_ID_RX.search(conv.all_text)
    if m is None:
        return None
    me = int(m.group(1))
    last = conv.last
    triggers = TRIGGER_RX.findall(last)
    if not triggers:
        if MEMBER_ID_RX.search(last):  # the spawn prompt: report ready
            d = DIRECTOR_ID_RX.search(last)
            if d is None:
                return [say("I have no Director id.")]
            return [
                shell(
                    f'cafleet message send --from-member-id {me} --to-member-id {d.group(1)} "ready"'
                )
            ]
        return []
    plan: list[Action] = [shell(f"cafleet message poll {me}")]
    polled = conv.calls[0].result if conv.calls else None
    if polled is None:
        return plan
    for message_id, sender, body in reversed(envelopes(polled)):  # oldest first
        back = sent_back_steps(body)
        if back is not None:  # a merge sent the task back: merge the target in, then done
            plan += [shell(command) for command in back.commands]
            report = f"{REPLY_PREFIX} {message_id}: merged {back.target} into my branch"
            plan.append(
                shell(
                    f"cafleet message send --from-member-id {me} --to-member-id {sender} "
                    f"--task {back.task_id} " + shlex.quote(report)
                )
            )
            plan.append(shell(f"cafleet message ack {message_id}"))
            plan.append(shell(back.finish.replace(RESULT_SLOT, shlex.quote(report))))
            continue
        task = parse_task(body)
        assigned = task_steps(body)
        if assigned is not None:
            plan.append(shell(assigned.claim))
        done: list[str] = []
        for kind, a, b in task.steps:
            if kind == "write":
                plan.append(Action("write", path=_resolve(cwd, a), content=b))
                done.append(f"wrote {a}")
            else:
                plan.append(shell(a))
                done.append(f"ran {a}")
        report = f"{REPLY_PREFIX} {message_id}: " + ("; ".join(done) or "nothing to do")
        about = f"--task {assigned.task_id} " if assigned is not None else ""
        plan.append(
            shell(
                f"cafleet message send --from-member-id {me} --to-member-id {sender} "
                + about
                + shlex.quote(report)
            )
        )
        plan.append(shell(f"cafleet message ack {message_id}"))
        if assigned is not None:
            plan.append(shell(assigned.finish.replace(RESULT_SLOT, shlex.quote(report))))
    return plan


@dataclass(frozen=True)
class Assignment:
    """A task's assignment: its id and the exact claim and done lines it names."""

    task_id: int
    claim: str
    finish: str  # holds RESULT_SLOT where the result goes


RESULT_SLOT = '"<what you did>"'


def task_steps(body: str) -> Assignment | None:
    """The assignment a message body is (its ``Start it:`` and ``Finish it:`` lines), or None."""
    m = TASK_READY_RX.match(body)
    start = re.search(r"^Start it: (cafleet task claim .+)$", body, re.M)
    finish = re.search(r"^Finish it: (cafleet task done .+)$", body, re.M)
    if m is None or start is None or finish is None or RESULT_SLOT not in finish.group(1):
        return None
    return Assignment(int(m.group(1)), start.group(1), finish.group(1))


@dataclass(frozen=True)
class SentBack:
    """A task `task merge` sent back (docs/cli.md §2.37): the commands that merge its target
    into the member's branch, keeping both sides of every conflicting file, and the done line."""

    task_id: int
    target: str
    commands: tuple[str, ...]
    finish: str  # holds RESULT_SLOT


def sent_back_steps(body: str) -> SentBack | None:
    """What a member does with a ``[cafleet] task T (…) was not merged`` message, or None."""
    m = re.match(r"\[cafleet\] task (\d+) \(.*\) was not merged: ", body)
    files = re.search(r"^Conflicting files: (.+)$", body, re.M)
    target = re.search(r"git merge (\S+), resolve", body)
    finish = re.search(r"then (cafleet task done \d+ --member-id \d+ --result .+)$", body, re.M)
    if m is None or files is None or target is None or finish is None:
        return None
    paths = " ".join(shlex.quote(p) for p in files.group(1).split(", "))
    markers = "/^<<<<<<< /d; /^=======$/d; /^>>>>>>> /d"
    commands = (
        f"git merge {shlex.quote(target.group(1))} || true",
        f"sed -i {shlex.quote(markers)} {paths}",
        f"git commit -qam {shlex.quote('merge ' + target.group(1))}",
    )
    return SentBack(int(m.group(1)), target.group(1), commands, finish.group(1))


@dataclass(frozen=True)
class DirectorPlan:
    fleet: str
    agent: str
    members: tuple[tuple[str, str], ...]  # (name, coding agent)
    tasks: tuple[tuple[str, str], ...]  # (member name, body)
    wait: float = 60.0
    # (member name, the member whose work comes first or "", body): one task each
    work: tuple[tuple[str, str, str], ...] = ()


def director_plan(text: str) -> DirectorPlan | None:
    """A ``FLEET PLAN`` block: ``fleet: <name> <agent>``, ``member: <name> <agent>``,
    ``task <member>: <body>`` lines (``wait: <s>`` optional), or ``work <member>[ after
    <member>]: <body>`` lines (a task each, in order)."""
    if PLAN_MARK not in text:
        return None
    fleet = ("fleet", "claude")
    members: list[tuple[str, str]] = []
    tasks: list[tuple[str, str]] = []
    work: list[tuple[str, str, str]] = []
    wait = 60.0
    for line in text.split(PLAN_MARK, 1)[1].splitlines():
        line = line.strip()
        if m := re.fullmatch(r"fleet: (\S+) (\S+)", line):
            fleet = (m.group(1), m.group(2))
        elif m := re.fullmatch(r"member: (\S+) (\S+)", line):
            members.append((m.group(1), m.group(2)))
        elif m := re.fullmatch(r"task (\S+): (.+)", line):
            tasks.append((m.group(1), m.group(2)))
        elif m := re.fullmatch(r"wait: (\d+(?:\.\d+)?)", line):
            wait = float(m.group(1))
        elif m := re.fullmatch(r"work (\S+)(?: after (\S+))?: (.+)", line):
            work.append((m.group(1), m.group(2) or "", m.group(3)))
    return DirectorPlan(fleet[0], fleet[1], tuple(members), tuple(tasks), wait, tuple(work))


def director_actions(conv: Conversation, plan: DirectorPlan) -> Action:
    """The Director's next move, from the results of its calls so far this turn."""
    calls = conv.calls
    step = len(calls)
    if step == 0:
        return shell(f"cafleet fleet create --name {plan.fleet} --coding-agent {plan.agent}")
    created = calls[0].result or ""
    m = re.search(r"^(\d+) director=(\d+) monitor=(\d+)", created, re.M)
    if m is None:
        return say(f"fleet create failed: {created.strip()[-300:]}")
    fleet_id, me = int(m.group(1)), int(m.group(2))
    ids: dict[str, int] = {}
    for i, (name, agent) in enumerate(plan.members):
        if step == 1 + i:
            return shell(
                f"cafleet member create --fleet-id {fleet_id} --name {name} "
                f"--description {shlex.quote('fleet member ' + name)} --coding-agent {agent}"
            )
        result = calls[1 + i].result or ""
        mm = re.search(rf"^(\d+) {re.escape(name)} agent=", result, re.M)
        if mm is None:
            return say(f"member create {name} failed: {result.strip()[-300:]}")
        ids[name] = int(mm.group(1))
    base = 1 + len(plan.members)
    if plan.work:
        return _create_tasks(calls[base:], plan, fleet_id, ids)
    for i, (name, body) in enumerate(plan.tasks):
        if step == base + i:
            return shell(
                f"cafleet message send --from-member-id {me} --to-member-id {ids[name]} "
                + shlex.quote(body)
            )
    # Then: wait, ACK what it returned, until every tasked member replied with "done".
    expected = {ids[name] for name, _ in plan.tasks}
    replied: set[int] = set()
    pending: list[int] = []
    for call in calls[base + len(plan.tasks) :]:
        command = call.args.get("command", "")
        if " message wait " in f" {command} " and call.result is not None:
            for message_id, sender, body in envelopes(call.result):
                pending.append(message_id)
                if body.startswith(REPLY_PREFIX + " "):
                    replied.add(sender)
        elif command.startswith("cafleet message ack "):
            acked = int(command.rsplit(" ", 1)[1])
            pending = [p for p in pending if p != acked]
    if pending:
        return shell(f"cafleet message ack {pending[0]}")
    if expected <= replied:
        return say(f"All {len(expected)} members replied.")
    return shell(f"cafleet message wait {me} --timeout {plan.wait:g}")


def _create_tasks(
    calls: list[Call], plan: DirectorPlan, fleet_id: int, ids: dict[str, int]
) -> Action:
    """One `task create` per ``work`` line, then the turn ends: the tasks reach their members by
    themselves. A task after another's is assigned as it is created; one after none is created
    unassigned and assigned once every task exists (so none is done before the board is laid
    out)."""
    task_of: dict[str, int] = {}
    for i, (name, after, body) in enumerate(plan.work):
        if i == len(calls):
            command = (
                f"cafleet task create --fleet-id {fleet_id} --title {shlex.quote('work for ' + name)}"
                f" --body {shlex.quote(body)}"
            )
            return shell(
                command + (f" --assign {ids[name]} --after {task_of[after]}" if after else "")
            )
        result = calls[i].result or ""
        m = re.search(r"^Task (\d+) created\.", result, re.M)
        if m is None:
            return say(f"task create for {name} failed: {result.strip()[-300:]}")
        task_of[name] = int(m.group(1))
    first = [name for name, after, _ in plan.work if not after]
    for i, name in enumerate(first):
        if len(plan.work) + i == len(calls):
            return shell(f"cafleet task assign {task_of[name]} {ids[name]}")
    return say(f"Created {len(task_of)} tasks.")


# What a sandbox's refusal of a write looks like in a command's output.
SANDBOX_DENIED = re.compile(r"Read-only file system|Permission denied|Operation not permitted")


def _escalated(call: Call) -> bool:
    return call.args.get("sandbox_permissions") == "require_escalated"


def plan_position(conv: Conversation) -> tuple[int, bool]:
    """(how many plan steps the calls so far did, whether the last one is to be run again
    outside the sandbox): a sandbox refusal (Codex only) is retried once, escalated."""
    position, retry = 0, False
    for call in conv.calls:
        denied = call.result is not None and SANDBOX_DENIED.search(call.result) is not None
        if conv.can_escalate and not retry and not _escalated(call) and denied:
            retry = True
            continue
        retry = False
        position += 1
    return position, retry


def decide(conv: Conversation, cwd: str = "") -> Action:
    """The scripted model's answer to a conversation (see the module docstring)."""
    plan = director_plan(conv.first) if conv.texts else None
    if plan is not None and len(conv.texts) == 1:
        return director_actions(conv, plan)
    steps = member_plan(conv, cwd)
    if steps is None:
        return say("OK.")
    position, retry = plan_position(conv)
    if position < len(steps):
        step = steps[position]
        return dataclasses.replace(step, escalate=True) if retry else step
    return say("Done.")


# --------------------------------------------------------------------------- API adapters


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(p.get("text", ""))
            for p in content
            if isinstance(p, dict) and p.get("type") in ("text", "input_text", "output_text")
        )
    return ""


def _is_reminder(text: str) -> bool:
    """Claude Code's own additions to a user message (skills lists, context notes)."""
    stripped = text.strip()
    return stripped.startswith("<system-reminder>") or stripped.startswith("<command-")


def _kind(name: str) -> str:
    low = name.lower()
    if low in ("write",):
        return "write"
    return "shell"


def _call_args(name: str, raw: Any) -> dict[str, Any]:
    args: dict[str, Any]
    if isinstance(raw, str):
        try:
            args = json.loads(raw) if raw else {}
        except ValueError:
            args = {"input": raw}
    else:
        args = dict(raw or {})
    command = args.get("command") or args.get("cmd")
    if isinstance(command, list):  # codex's `shell` tool: ["bash", "-lc", "<command>"]
        command = command[-1] if command else ""
    if command is not None:
        args["command"] = str(command)
    return args


def anthropic_conversation(body: dict[str, Any]) -> Conversation:
    conv = Conversation()
    system = body.get("system")
    conv.system = _text_of(system) if not isinstance(system, str) else system
    pending: dict[str, tuple[str, Any]] = {}
    order: list[str] = []
    results: dict[str, str] = {}
    for message in body.get("messages") or []:
        content = message.get("content")
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        role = message.get("role")
        for part in parts:
            if not isinstance(part, dict):
                continue
            kind = part.get("type")
            if role in ("user", "system") and kind == "text":
                text = str(part.get("text", ""))
                # Claude Code hands a line queued while it worked to the model in the next
                # request as a `system` message ("The user sent a new message while you were
                # working: …"; Claude Code 2.1.197) or a system reminder: the user's too.
                ours = role == "user" and not _is_reminder(text)
                if text.strip() and (ours or TRIGGER_RX.search(text)):
                    conv.texts.append(text)
                    pending, order, results = {}, [], {}
            elif role == "assistant" and kind == "tool_use":
                call_id = str(part.get("id"))
                pending[call_id] = (str(part.get("name", "")), part.get("input") or {})
                order.append(call_id)
            elif role == "user" and kind == "tool_result":
                content = part.get("content")
                results[str(part.get("tool_use_id"))] = _text_of(content)
                # ... or inside the tool result, as one of its text blocks.
                queued = [
                    str(p.get("text", ""))
                    for p in (content if isinstance(content, list) else [])
                    if isinstance(p, dict)
                    and _is_reminder(str(p.get("text", "")))
                    and TRIGGER_RX.search(str(p.get("text", "")))
                ]
                if queued:
                    conv.texts.append(queued[-1])
                    pending, order, results = {}, [], {}
    conv.calls = [
        Call(_kind(pending[i][0]), _call_args(pending[i][0], pending[i][1]), results.get(i))
        for i in order
    ]
    return conv


def responses_conversation(body: dict[str, Any]) -> Conversation:
    conv = Conversation(system=str(body.get("instructions") or ""), can_escalate=True)
    pending: dict[str, tuple[str, Any]] = {}
    order: list[str] = []
    results: dict[str, str] = {}
    items = body.get("input") or []
    if isinstance(items, str):
        items = [{"type": "message", "role": "user", "content": items}]
    for item in items:
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "message")
        if kind == "message" and item.get("role") == "user":
            text = _text_of(item.get("content"))
            if text.strip() and not _codex_context(text):
                conv.texts.append(text)
                pending, order, results = {}, [], {}
        elif kind in ("function_call", "custom_tool_call", "local_shell_call"):
            call_id = str(item.get("call_id") or item.get("id"))
            raw = item.get("arguments", item.get("input", item.get("action")))
            pending[call_id] = (str(item.get("name", "shell")), raw)
            order.append(call_id)
        elif kind in ("function_call_output", "custom_tool_call_output", "local_shell_call_output"):
            output = item.get("output")
            if isinstance(output, dict):
                output = output.get("content", json.dumps(output))
            elif isinstance(output, list):
                output = _text_of(output)
            results[str(item.get("call_id"))] = str(output)
    conv.calls = [
        Call(
            "write" if pending[i][0] == "apply_patch" else "shell",
            _call_args(pending[i][0], pending[i][1]),
            results.get(i),
        )
        for i in order
    ]
    return conv


def gemini_conversation(body: dict[str, Any]) -> Conversation:
    """A Gemini API request: ``contents[]`` of ``user`` / ``model`` turns whose parts are
    ``text``, ``functionCall`` or ``functionResponse``. A response names its call's ``id``: a
    line typed while a tool ran can come before that tool's response, and the response then
    belongs to the turn that line ended, not to the new one (without ids, a response answers
    the oldest call still open)."""
    instruction = body.get("systemInstruction") or {}
    conv = Conversation(system=_gemini_text(instruction.get("parts")))
    calls: list[tuple[str | None, str, dict[str, Any]]] = []
    by_id: dict[str, str] = {}
    in_order: list[str] = []
    for content in body.get("contents") or []:
        if not isinstance(content, dict):
            continue
        role = content.get("role")
        for part in content.get("parts") or []:
            if not isinstance(part, dict):
                continue
            if role == "user" and isinstance(part.get("text"), str):
                text = part["text"]
                if text.strip() and not text.lstrip().startswith("<session_context>"):
                    conv.texts.append(text)
                    calls, in_order = [], []
            elif role == "model" and isinstance(part.get("functionCall"), dict):
                call = part["functionCall"]
                call_id = call.get("id")
                calls.append(
                    (
                        call_id if isinstance(call_id, str) else None,
                        str(call.get("name", "")),
                        dict(call.get("args") or {}),
                    )
                )
            elif isinstance(part.get("functionResponse"), dict):
                answer = part["functionResponse"]
                response = answer.get("response")
                if isinstance(response, dict) and isinstance(response.get("output"), str):
                    output = _gemini_shell_output(response["output"])
                else:
                    output = json.dumps(response)
                if isinstance(answer.get("id"), str):
                    by_id[answer["id"]] = output
                else:
                    in_order.append(output)
    conv.calls = [
        Call(
            "write" if name == "write_file" else "shell",
            _call_args(name, args),
            by_id.get(call_id)
            if call_id is not None
            else (in_order[i] if i < len(in_order) else None),
        )
        for i, (call_id, name, args) in enumerate(calls)
    ]
    return conv


def _gemini_shell_output(text: str) -> str:
    """What a command printed, from Gemini CLI 0.61's shell result: ``<untrusted_context>``,
    ``Output: <output>``, ``Process Group PGID: <n>``, ``</untrusted_context>``."""
    text = re.sub(r"^<untrusted_context>\n|\n?</untrusted_context>$", "", text)
    text = re.sub(r"\nProcess Group PGID: \d+$", "", text)
    return text[len("Output: ") :] if text.startswith("Output: ") else text


def _gemini_text(parts: Any) -> str:
    if not isinstance(parts, list):
        return ""
    return "\n".join(str(p.get("text", "")) for p in parts if isinstance(p, dict))


def schema_value(schema: Any) -> Any:
    """A value of the JSON schema's shape (Gemini's upper-case type names too): the routing
    call's ``{complexity_reasoning, complexity_score}``; an enum's ``user`` where offered (a
    next-speaker check must hand the turn back), else its first value."""
    if not isinstance(schema, dict):
        return None
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return "user" if "user" in enum else enum[0]
    kind = str(schema.get("type", "object")).lower()
    if kind == "object":
        props = schema.get("properties") or {}
        return {str(k): schema_value(v) for k, v in props.items()}
    if kind == "array":
        return [schema_value(schema.get("items"))]
    if kind in ("integer", "number"):
        return max(1, int(schema.get("minimum") or 1))
    if kind == "boolean":
        return False
    return "simple"


def _codex_context(text: str) -> bool:
    """Codex's own user-role items (environment context, AGENTS.md, skills)."""
    stripped = text.lstrip()
    return stripped.startswith(("<environment_context>", "<user_instructions>", "# AGENTS.md"))


def working_dir(conv: Conversation, body: dict[str, Any]) -> str:
    """The working directory the agent told the model about (system prompt or context)."""
    turns = body.get("input") or body.get("messages") or body.get("contents") or []
    haystack = conv.system + "\n" + json.dumps(turns)
    for rx in (
        r"<cwd>([^<]+)</cwd>",
        r"Primary working directory: (\S+)",
        r"Working directory: (\S+)",
        r"Workspace Directories:\*\*(?:\\n|\n)\s*- (/[^\s\\]+)",  # Gemini CLI's session context
    ):
        m = re.search(rx, haystack)
        if m:
            return m.group(1).replace("\\n", "").strip()
    return ""


def tokens(payload: Any) -> int:
    """The token count the model reports for a payload: deterministic, about 4 bytes/token."""
    return max(1, len(json.dumps(payload, sort_keys=True)) // 4)


# --------------------------------------------------------------------------- the server


@dataclass
class Recorded:
    """One request: when, the client label, the path, the parsed body, the action answered
    and the usage reported."""

    at: float
    client: str
    path: str
    body: dict[str, Any]
    action: Action | None = None
    usage: dict[str, int] = field(default_factory=dict)
    response_id: str = ""  # the message / response id the model answered with


# A test's own script: the next action for a conversation, or None to use `decide`.
Script = Callable[[Conversation, str], "Action | None"]


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


class _Handler(BaseHTTPRequestHandler):
    server_version = "scripted-model/1"
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        client, path = self.server.model.split_path(self.path)
        if path.startswith("/v1/models"):
            return self._json({"data": [{"id": "scripted", "object": "model"}], "models": []})
        self._json({"error": {"type": "not_found", "message": path}}, status=404)

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        if not isinstance(body, dict):
            body = {}
        model = self.server.model
        client, path = model.split_path(self.path)
        rec = Recorded(time.time(), client, self.path, body)
        model.record(rec)
        bare = path.split("?", 1)[0].rstrip("/")
        if bare.endswith("/messages/count_tokens"):
            return self._json({"input_tokens": tokens(body.get("messages"))})
        if bare.endswith("/messages"):
            return self._anthropic(rec, body)
        if bare.endswith("/responses"):
            return self._responses(rec, body)
        if bare.endswith(":countTokens"):
            return self._json({"totalTokens": tokens(body.get("contents"))})
        if bare.endswith(":generateContent"):
            return self._gemini_json(rec, body)
        if bare.endswith(":streamGenerateContent"):
            return self._gemini_stream(rec, body)
        self._json({"error": {"type": "not_found", "message": path}}, status=404)

    # ------------------------------------------------------------------ shared

    def _json(self, payload: dict[str, Any], status: int = 200) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, chunks: Sequence[bytes]) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()
        with contextlib.suppress(OSError):
            for chunk in chunks:
                self.wfile.write(chunk)
            self.wfile.flush()
        self.close_connection = True

    # ------------------------------------------------------------------ Anthropic Messages

    def _anthropic(self, rec: Recorded, body: dict[str, Any]) -> None:
        model = self.server.model
        tools = [t for t in body.get("tools") or [] if isinstance(t, dict) and t.get("name")]
        names = {str(t["name"]).lower(): str(t["name"]) for t in tools}
        action: Action
        if "bash" not in names:
            action = say(model.side_text)  # titles, summaries: no tools offered
        else:
            conv = anthropic_conversation(body)
            action = model.decide(conv, working_dir(conv, body))
        if action.kind == "write" and "write" not in names:
            action = shell(_write_command(action))
        block: dict[str, Any]
        if action.kind == "text":
            block = {"type": "text", "text": action.text}
        elif action.kind == "write":
            key = "file_path" if names["write"] == "Write" else "filePath"
            block = {
                "type": "tool_use",
                "name": names["write"],
                "input": {key: action.path, "content": action.content},
            }
        else:
            block = {
                "type": "tool_use",
                "name": names["bash"],
                "input": {"command": action.command, "description": "cafleet step"},
            }
        if block["type"] == "tool_use":
            block["id"] = f"toolu_{next(model.ids):08d}"
        rec.action = action
        usage = {
            "input_tokens": tokens(body.get("messages")),
            "output_tokens": tokens(block),
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        }
        rec.usage = usage
        model.count(rec.client, usage["input_tokens"], usage["output_tokens"])
        stop = "tool_use" if block["type"] == "tool_use" else "end_turn"
        rec.response_id = f"msg_{next(model.ids):08d}"
        message: dict[str, Any] = {
            "id": rec.response_id,
            "type": "message",
            "role": "assistant",
            "model": str(body.get("model") or "scripted"),
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {**usage, "output_tokens": 0},
        }
        if not body.get("stream"):
            message.update(content=[block], stop_reason=stop, usage=usage)
            return self._json(message)
        chunks = [_sse("message_start", {"type": "message_start", "message": message})]
        if block["type"] == "tool_use":
            start = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        else:
            start = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        chunks += [
            _sse("content_block_start", {"type": "content_block_start", "index": 0, "content_block": start}),
            _sse("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
            _sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
            _sse(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": usage["output_tokens"]},
                },
            ),
            _sse("message_stop", {"type": "message_stop"}),
        ]  # fmt: skip
        self._stream(chunks)

    # ------------------------------------------------------------------ OpenAI Responses

    def _responses(self, rec: Recorded, body: dict[str, Any]) -> None:
        model = self.server.model
        tools = [t for t in body.get("tools") or [] if isinstance(t, dict)]
        conv = responses_conversation(body)
        action = model.decide(conv, working_dir(conv, body)) if tools else say(model.side_text)
        if action.kind == "write":
            action = dataclasses.replace(shell(_write_command(action)), escalate=action.escalate)
        rec.action = action
        item_id = f"item_{next(model.ids):08d}"
        item: dict[str, Any]
        if action.kind == "text":
            item = {
                "type": "message",
                "id": item_id,
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": action.text, "annotations": []}],
            }
        else:
            item = _codex_call(tools, action, item_id, f"call_{next(model.ids):08d}")
        usage_in, usage_out = tokens(body.get("input")), tokens(item)
        rec.usage = {"input_tokens": usage_in, "output_tokens": usage_out}
        model.count(rec.client, usage_in, usage_out)
        response_id = rec.response_id = f"resp_{next(model.ids):08d}"
        base = {
            "id": response_id,
            "object": "response",
            "created_at": int(time.time()),
            "model": str(body.get("model") or "scripted"),
            "status": "in_progress",
            "output": [],
        }
        done = {
            **base,
            "status": "completed",
            "output": [item],
            "usage": {
                "input_tokens": usage_in,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": usage_out,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": usage_in + usage_out,
            },
        }
        if not body.get("stream"):
            return self._json(done)
        seq = itertools.count()

        def event(kind: str, **data: Any) -> bytes:
            return _sse(kind, {"type": kind, "sequence_number": next(seq), **data})

        chunks = [
            event("response.created", response=base),
            event("response.in_progress", response=base),
        ]
        if item["type"] == "message":
            empty = {**item, "status": "in_progress", "content": []}
            part = {"type": "output_text", "text": "", "annotations": []}
            chunks += [
                event("response.output_item.added", output_index=0, item=empty),
                event("response.content_part.added", item_id=item_id, output_index=0, content_index=0, part=part),
                event("response.output_text.delta", item_id=item_id, output_index=0, content_index=0, delta=action.text),
                event("response.output_text.done", item_id=item_id, output_index=0, content_index=0, text=action.text),
            ]  # fmt: skip
        else:
            chunks.append(event("response.output_item.added", output_index=0, item=item))
        chunks += [
            event("response.output_item.done", output_index=0, item=item),
            event("response.completed", response=done),
        ]
        self._stream(chunks)

    # ------------------------------------------------------------------ Gemini API

    def _gemini_json(self, rec: Recorded, body: dict[str, Any]) -> None:
        """A side call (Gemini CLI's routing, next-speaker or summary requests): JSON of the
        asked schema, else text; no usage (Gemini CLI records none for them)."""
        config = body.get("generationConfig") or {}
        schema = config.get("responseJsonSchema") or config.get("responseSchema")
        text = json.dumps(schema_value(schema)) if schema else self.server.model.side_text
        rec.action = say(text)
        rec.usage = {"input_tokens": 0, "output_tokens": 0}
        self.server.model.count(rec.client, 0, 0)  # served, with no usage to report
        parts = [{"text": text}]
        self._json({"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}]})  # fmt: skip

    def _gemini_stream(self, rec: Recorded, body: dict[str, Any]) -> None:
        model = self.server.model
        names = {
            str(f.get("name"))
            for t in body.get("tools") or []
            if isinstance(t, dict)
            for f in t.get("functionDeclarations") or []
            if isinstance(f, dict)
        }
        action = say(model.side_text)
        if "run_shell_command" in names:
            conv = gemini_conversation(body)
            action = model.decide(conv, working_dir(conv, body))
        if action.kind == "write" and "write_file" not in names:
            action = shell(_write_command(action))
        rec.action = action
        part: dict[str, Any]
        if action.kind == "text":
            part = {"text": action.text}
        elif action.kind == "write":
            args = {"file_path": action.path, "content": action.content}
            part = {"functionCall": {"name": "write_file", "args": args}}
        else:
            args = {"command": action.command, "description": "cafleet step"}
            part = {"functionCall": {"name": "run_shell_command", "args": args}}
        usage_in, usage_out = tokens(body.get("contents")), tokens(part)
        rec.usage = {"input_tokens": usage_in, "output_tokens": usage_out}
        model.count(rec.client, usage_in, usage_out)
        rec.response_id = f"gem_{next(model.ids):08d}"
        event = {
            "candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": usage_in, "candidatesTokenCount": usage_out, "totalTokenCount": usage_in + usage_out},
            "modelVersion": rec.path.rsplit("/models/", 1)[-1].split(":", 1)[0],
            "responseId": rec.response_id,
        }  # fmt: skip
        self._stream([f"data: {json.dumps(event)}\n\n".encode()])


def _write_command(action: Action) -> str:
    """A shell command writing ``action.content`` to ``action.path`` (for an agent whose
    tools have no plain write tool)."""
    return f"printf '%s' {shlex.quote(action.content)} > {shlex.quote(action.path)}"


def _codex_call(
    tools: list[dict[str, Any]], action: Action, item_id: str, call_id: str
) -> dict[str, Any]:
    """A function call of Codex's shell tool: ``shell_command`` (``command``: a string),
    ``exec_command`` (``cmd``) or ``shell`` (``command``: argv)."""
    names = {str(t.get("name")) for t in tools}
    args: dict[str, Any]
    if "shell_command" in names:
        name, args = "shell_command", {"command": action.command}
    elif "exec_command" in names:
        # Not a login shell: the test's PATH (with `cafleet` on it) is what the agent inherited.
        name, args = "exec_command", {"cmd": action.command, "login": False}
        if action.escalate:
            args["sandbox_permissions"] = "require_escalated"
            args["justification"] = f"Allow running {action.command!r} outside the sandbox?"
    else:
        name, args = "shell", {"command": ["bash", "-lc", action.command]}
    return {
        "type": "function_call",
        "id": item_id,
        "call_id": call_id,
        "name": name,
        "arguments": json.dumps(args),
        "status": "completed",
    }


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    model: ScriptedModel


class ScriptedModel:
    """The server; use as a context manager (or `start` / `stop`). Attributes: ``port``,
    ``requests`` (every `Recorded`, in arrival order)."""

    side_text = "Fleet task"

    def __init__(self, script: Script | None = None) -> None:
        self.script = script
        self.requests: list[Recorded] = []
        self.totals: dict[str, dict[str, int]] = {}
        self.ids = itertools.count(1)
        self._lock = threading.Lock()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> ScriptedModel:
        server = _Server(("127.0.0.1", 0), _Handler)
        server.model = self
        self._server = server
        self.port = int(server.server_address[1])
        self._thread = threading.Thread(target=server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> ScriptedModel:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ addresses

    def base_url(self, client: str = "default") -> str:
        """The base URL for one client: ANTHROPIC_BASE_URL as is; opencode's baseURL and
        Codex's ``base_url`` add ``/v1``."""
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", client):
            raise ValueError(f"bad client label {client!r}")
        return f"http://127.0.0.1:{self.port}/c/{client}"

    @staticmethod
    def split_path(path: str) -> tuple[str, str]:
        m = re.match(r"/c/([A-Za-z0-9_.-]+)(/.*)?$", path)
        if m:
            return m.group(1), m.group(2) or "/"
        return "default", path

    # ------------------------------------------------------------------ the script

    def decide(self, conv: Conversation, cwd: str) -> Action:
        """The test's own ``script`` first (None: no opinion), then the cafleet scripts."""
        if self.script is not None:
            action = self.script(conv, cwd)
            if action is not None:
                return action
        return decide(conv, cwd)

    # ------------------------------------------------------------------ records

    def record(self, rec: Recorded) -> None:
        with self._lock:
            self.requests.append(rec)

    def dump(self, path: str | os.PathLike[str]) -> None:
        """Write the request log (bodies and answers) as JSON Lines, for a failing test's
        diagnosis."""
        with self._lock, open(path, "w", encoding="utf-8") as fh:
            for rec in self.requests:
                action = dataclasses.asdict(rec.action) if rec.action is not None else None
                fh.write(json.dumps({"at": rec.at, "client": rec.client, "path": rec.path,
                                     "body": rec.body, "action": action}) + "\n")  # fmt: skip

    def count(self, client: str, input_tokens: int, output_tokens: int) -> None:
        with self._lock:
            total = self.totals.setdefault(
                client, {"input_tokens": 0, "output_tokens": 0, "responses": 0}
            )
            total["input_tokens"] += input_tokens
            total["output_tokens"] += output_tokens
            total["responses"] += 1

    def usage_totals(self) -> dict[str, dict[str, int]]:
        """client label -> {input_tokens, output_tokens, responses} reported so far."""
        with self._lock:
            return {k: dict(v) for k, v in self.totals.items()}

    def client_requests(self, client: str) -> list[Recorded]:
        with self._lock:
            return [r for r in self.requests if r.client == client]

    def commands(self, client: str | None = None) -> list[str]:
        """Every shell command the model asked for (of one client), in order."""
        with self._lock:
            return [
                r.action.command
                for r in self.requests
                if r.action is not None
                and r.action.kind == "shell"
                and (client is None or r.client == client)
            ]


@contextlib.contextmanager
def scripted_model(script: Script | None = None) -> Iterator[ScriptedModel]:
    """A started `ScriptedModel`, stopped on exit."""
    model = ScriptedModel(script).start()
    try:
        yield model
    finally:
        model.stop()


__all__ = [
    "Action",
    "Assignment",
    "Call",
    "Conversation",
    "DirectorPlan",
    "Recorded",
    "Script",
    "ScriptedModel",
    "Task",
    "anthropic_conversation",
    "decide",
    "director_plan",
    "envelopes",
    "gemini_conversation",
    "member_plan",
    "parse_task",
    "responses_conversation",
    "schema_value",
    "scripted_model",
    "task_steps",
    "tokens",
]
