"""`cafleet hook EVENT --member-id M [PAYLOAD]`: what an agent's own hook reports
(docs/cli.md §2.38, docs/runtime.md §4.12).

The agents run it on each of their hook events, so it must cost little and never hurt them: it
imports no Click and no SQLAlchemy, prints nothing (Claude Code adds a `UserPromptSubmit` hook's
stdout to the model's context), waits at most `HOOK_WAIT` seconds for a busy database and then
skips the report, and exits 0 whatever happens (an absent, locked or foreign database, a bad
payload, an unknown member). The payload is JSON: the last argument (Codex's `notify`) or, when
there is none, stdin (Claude Code, Gemini CLI, cafleet's opencode plugin), read with a deadline.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from cafleet import broker
from cafleet.config import db_dir_of, resolve_database_path
from cafleet.db.guard import open_validated_connection
from cafleet.db.runtime import bound_waits, close_connection

# Event -> the state it reports.
EVENTS: dict[str, str] = {
    "prompt": "working",  # a prompt entered the context (its receipts are read from it)
    "tool": "working",  # a tool is about to run
    "stop": "ready",  # the turn ended
    "turn": "ready",  # the turn ended; the payload holds the turn's input (receipts)
    "idle": "ready",  # the session went idle
    "permission": "awaiting_user",  # a permission prompt waits for the user
}
HOOK_WAIT = 0.2  # seconds: the bound on the writer lock and SQLite's busy wait
STDIN_WAIT = 1.0  # seconds: the bound on reading a payload from stdin
MAX_PAYLOAD = 1 << 20
TEXT_LIMIT = 200
FRAME = re.compile(r"\[cafleet msg (\d{1,18}) from ")


def parse_args(args: Sequence[str]) -> tuple[str, int, str | None] | None:
    """(event, member id, payload argument) or None for arguments this does not know."""
    event: str | None = None
    member_id: int | None = None
    payload: str | None = None
    rest = list(args)
    while rest:
        arg = rest.pop(0)
        if arg == "--member-id" and rest:
            value = rest.pop(0)
            member_id = int(value) if value.isdigit() else None
        elif arg.startswith("--member-id="):
            value = arg.split("=", 1)[1]
            member_id = int(value) if value.isdigit() else None
        elif event is None:
            event = arg
        else:
            payload = arg
    if event not in EVENTS or member_id is None or member_id < 1:
        return None
    return event, member_id, payload


def read_stdin(deadline: float = STDIN_WAIT) -> str:
    """stdin's text up to EOF, or what arrived within ``deadline``; nothing from a terminal."""
    import select
    import time

    try:
        fd = sys.stdin.fileno()
    except (AttributeError, OSError, ValueError):
        return ""
    if os.isatty(fd):
        return ""
    end = time.monotonic() + deadline
    chunks: list[bytes] = []
    size = 0
    while size < MAX_PAYLOAD:
        left = end - time.monotonic()
        if left <= 0:
            break
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            break
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    if isinstance(value, dict):
        return [s for item in value.values() for s in _strings(item)]
    return []


class Report:
    """What one payload says: its text and the message ids it holds."""

    def __init__(self, event: str, payload: Mapping[str, Any]) -> None:
        # The prompt's text: Claude Code's and Gemini CLI's `prompt`, Codex's `input-messages`,
        # the plugin's `parts`.
        held: list[str] = []
        if event in ("prompt", "turn"):
            for key in ("prompt", "input-messages", "input_messages", "parts", "text"):
                held += _strings(payload.get(key))
        self.message_ids = tuple(int(m) for s in held for m in FRAME.findall(s))
        text = ""
        for key in ("message", "tool_name", "title", "type"):
            value = payload.get(key)
            if isinstance(value, str) and value:
                text = value
                break
        self.text = " ".join(text.split())[:TEXT_LIMIT]


def _payload(raw: str) -> dict[str, Any]:
    try:
        value = json.loads(raw) if raw.strip() else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def database_path(member_id: int, env: Mapping[str, str]) -> str:
    """The member's database: its pane's `CAFLEET_MEMBER=<id>@<P>` when that names this member
    and a file, else the usual resolution (docs/operations.md)."""
    marker = env.get("CAFLEET_MEMBER", "")
    owner, _, path = marker.partition("@")
    # An absolute path is a file; a PostgreSQL URL never starts with "/".
    if owner == str(member_id) and path.startswith("/"):
        return path
    return resolve_database_path(env)


def record(event: str, member_id: int, payload: Mapping[str, Any], path: str) -> None:
    """Write one report; a database that is absent, foreign or busy past `HOOK_WAIT` raises."""
    report = Report(event, payload)
    bound_waits(HOOK_WAIT)
    conn = open_validated_connection(path)
    try:
        broker.record_hook(
            conn,
            member_id,
            state=EVENTS[event],
            event=event,
            text=report.text,
            message_ids=report.message_ids,
        )
        if event == "prompt" and "session_id" in payload:
            learn_session(conn, member_id, payload)
    finally:
        close_connection(conn)


def learn_session(conn: Any, member_id: int, payload: Mapping[str, Any]) -> None:
    """The session the payload names, for a member whose session is not known yet, stored as
    `/proc` learning stores it (its id, and where its record is: docs/runtime.md §9.4), when
    the member's agent says where (Claude Code) and no other member holds it."""
    if broker.session_id(conn, member_id) is not None:
        return  # the usual case: one read, nothing more imported
    from cafleet.agents.registry import find_agent
    from cafleet.sessions.usage import remember_session

    member = broker.get_member(conn, member_id)
    placement = member.placement
    agent = find_agent(placement.coding_agent if placement is not None else None)
    record = agent.session_from_hook(payload) if agent is not None else None
    if agent is None or record is None or not member.is_active:
        return
    if broker.session_owner(conn, record.session_id) not in (None, member_id):
        return  # another member's session: never crossed
    if broker.set_session_id(conn, member_id, record.session_id):
        remember_session(db_dir_of(conn.info["cafleet.path"]), member_id, agent.name, record)


def run_hook(args: Sequence[str], env: Mapping[str, str] | None = None) -> int:
    """The whole command: always 0, never a line on stdout."""
    try:
        parsed = parse_args(args)
        if parsed is None:
            return 0
        event, member_id, argument = parsed
        raw_payload = argument if argument is not None else read_stdin()
        environ = os.environ if env is None else env
        record(event, member_id, _payload(raw_payload), database_path(member_id, environ))
    except BaseException:  # noqa: BLE001 - a hook never fails its agent
        return 0
    return 0


__all__ = [
    "EVENTS",
    "HOOK_WAIT",
    "Report",
    "database_path",
    "learn_session",
    "parse_args",
    "record",
    "run_hook",
]
