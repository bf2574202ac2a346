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
from contextlib import closing
from typing import Any
from urllib.parse import quote

TAIL_BYTES = 1 << 20  # a line just taken is among the last records


def holds_line(agent: str, path: str, session_id: str, frame: str) -> bool:
    """Whether ``agent``'s record at ``path`` (session ``session_id``) holds a user message
    whose text has ``frame``."""
    try:
        if agent == "opencode":
            return _opencode(path, session_id, frame)
        if agent in ("claude", "codex"):
            return any(_user_text_has(agent, rec, frame) for rec in _tail_records(path, frame))
    except (OSError, sqlite3.Error):
        return False
    return False


def _tail_records(path: str, frame: str) -> list[dict[str, Any]]:
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


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [
            str(part.get("text", ""))
            for part in content
            if isinstance(part, dict) and part.get("type") in ("text", "input_text")
        ]
    return []


def _user_text_has(agent: str, rec: dict[str, Any], frame: str) -> bool:
    if agent == "claude":
        if rec.get("type") == "queue-operation" and rec.get("operation") == "enqueue":
            texts = _texts(rec.get("content"))
        elif rec.get("type") == "user":
            texts = _texts((rec.get("message") or {}).get("content"))
        else:
            return False
    else:  # codex: a response item of the user, or the user-message event
        payload = rec.get("payload") or {}
        if payload.get("role") == "user":
            texts = _texts(payload.get("content"))
        elif payload.get("type") == "user_message":
            texts = _texts(payload.get("message"))
        else:
            return False
    return any(frame in text for text in texts)


def _opencode(path: str, session_id: str, frame: str) -> bool:
    if not os.path.isfile(path):
        return False
    pattern = "%" + frame.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    conn = sqlite3.connect(f"file:{quote(path)}?mode=ro", uri=True, timeout=1.0)
    with closing(conn):
        rows = conn.execute(
            "SELECT p.data FROM part p JOIN message m ON m.id = p.message_id "
            "WHERE p.session_id = ? AND p.data LIKE ? ESCAPE '\\' "
            "AND json_extract(m.data, '$.role') = 'user'",
            (session_id, pattern),
        ).fetchall()
    for (data,) in rows:
        try:
            part = json.loads(data)
        except ValueError:
            continue
        if (
            isinstance(part, dict)
            and part.get("type") == "text"
            and frame in str(part.get("text", ""))
            and not part.get("synthetic")
        ):
            return True
    return False


__all__ = ["TAIL_BYTES", "holds_line"]
