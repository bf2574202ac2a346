"""The second witness of a verified submit (docs/runtime.md §4.9): does the agent's own record
of its session hold a user message with a line's frame (`[cafleet msg <id> from`)?

The screen is the first witness, but an agent may take a line and draw it seconds later (opencode
under load, or while a resumed session's transcript loads) or draw it where the visible screen no
longer shows it. Each agent writes a line it takes to its record at once (Claude Code's
``queue-operation`` for a line queued while it works, a ``user`` record otherwise; Codex's user
message; opencode's user message part), so finding it there means the line was taken.

Only the text of user messages counts (a tool's output quoting a notification, say a captured
screen, is not the agent receiving it); the frame may stand anywhere in it (Claude Code joins
lines queued while it worked into one message). A record that cannot be read says no. Claude's and Codex's files are read from their last `TAIL_BYTES` only.
"""

from __future__ import annotations

import json
import os
import sqlite3
from typing import Any

from cafleet.agents.registry import find_agent

TAIL_BYTES = 1 << 20  # a line just taken is among the last records


def holds_line(agent: str, path: str, session_id: str, frame: str) -> bool:
    """Whether ``agent``'s record at ``path`` (session ``session_id``) holds a user message
    whose text has ``frame``; each agent reads its own record (`CodingAgent.holds_line`)."""
    found = find_agent(agent)
    if found is None:
        return False
    try:
        return found.holds_line(path, session_id, frame)
    except (OSError, sqlite3.Error):
        return False


def tail_records(path: str, frame: str) -> list[dict[str, Any]]:
    """The records among a jsonl file's last `TAIL_BYTES` whose line holds ``frame``."""
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        fh.seek(max(0, size - TAIL_BYTES))
        data = fh.read(TAIL_BYTES)
    needle = frame.encode("utf-8")
    out = []
    for raw in data.split(b"\n"):
        if needle not in raw:
            continue
        try:
            rec = json.loads(raw)
        except ValueError:
            continue  # the cut first line, or one being written
        if isinstance(rec, dict):
            out.append(rec)
    return out


def texts(content: Any) -> list[str]:
    """The texts of a message's content (a string, or a list of text parts)."""
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [
            str(part.get("text", ""))
            for part in content
            if isinstance(part, dict) and part.get("type") in ("text", "input_text")
        ]
    return []


__all__ = ["TAIL_BYTES", "holds_line", "tail_records", "texts"]
