"""Gemini CLI's session records (docs/runtime.md §9.2): one chat jsonl per session,
``<GEMINI_CLI_HOME or HOME>/.gemini/tmp/<project>/chats/session-<time>-<first 8 of the id>.jsonl``.
Its first line holds ``sessionId`` and ``startTime``; the project directory's ``.project_root``
holds the directory the session ran in. Messages are lines of their own (``"type": "user"``
with ``content[].text``, ``"type": "gemini"`` with ``tokens`` and ``model``), and a
``{"$set": {"messages": [...]}}`` line rewrites the list (at start, and again on ``--resume``,
which appends to the same file, repeating the earlier messages).

Usage: each ``gemini`` message's ``tokens`` (``input`` includes ``cached``; ``thoughts`` are
billed as output), counted once by message id. The first user message is Gemini's own
``<session_context>``: the spawn prompt is the first one after it.
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Iterator, Mapping
from typing import Any

from cafleet.sessions import SessionRecord, Tally, count, epoch, prompt_matches
from cafleet.sessions.jsonl import head_objects, new_objects
from cafleet.sessions.witness import tail_records

_SAFE_ID = re.compile(r"^[A-Za-z0-9-]+$")
CONTEXT_MARK = "<session_context>"
SEEN_LIMIT = 5000  # message ids remembered against double counting (a long session's turns)


def gemini_root(env: Mapping[str, str]) -> str | None:
    """Its `.gemini` directory: under GEMINI_CLI_HOME when set, else under HOME."""
    base = env.get("GEMINI_CLI_HOME") or env.get("HOME")
    return os.path.join(base, ".gemini") if base else None


def _chats(root: str, id8: str = "*") -> list[str]:
    pattern = os.path.join(glob.escape(root), "tmp", "*", "chats", f"session-*-{id8}.jsonl")
    return sorted(glob.glob(pattern))


def _project_root(path: str) -> str | None:
    try:
        with open(os.path.join(os.path.dirname(os.path.dirname(path)), ".project_root")) as fh:
            return fh.read().strip() or None
    except OSError:
        return None


def _messages(rec: dict[str, Any]) -> list[dict[str, Any]]:
    """The messages a line holds: itself, or a `$set` of the list."""
    update = rec.get("$set")
    if isinstance(update, dict):
        listed = update.get("messages")
        return [m for m in listed if isinstance(m, dict)] if isinstance(listed, list) else []
    return [rec] if "type" in rec else []


def user_text(message: dict[str, Any]) -> str | None:
    """A user message's text, None for another message or Gemini's session context."""
    if message.get("type") != "user":
        return None
    content = message.get("content")
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        text = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    else:
        return None
    return None if text.lstrip().startswith(CONTEXT_MARK) else text


def _session_info(path: str) -> tuple[SessionRecord | None, str]:
    """The session a chat file holds and its first user message (after the context)."""
    record: SessionRecord | None = None
    for rec in head_objects(path, limit=50):
        if record is None:
            session_id = rec.get("sessionId")
            if not isinstance(session_id, str):
                return None, ""
            created = epoch(rec.get("startTime")) or os.stat(path).st_mtime
            record = SessionRecord(session_id, path, _project_root(path), created)
            continue
        for message in _messages(rec):
            text = user_text(message)
            if text is not None:
                return record, text
    return record, ""


class GeminiRecords:
    def find(
        self, env: Mapping[str, str], *, since: float, cwd: str | None, prompt: str
    ) -> list[SessionRecord]:
        root = gemini_root(env)
        if root is None:
            return []
        found = []
        for path in _chats(root):
            try:
                if os.stat(path).st_mtime < since:
                    continue
            except OSError:
                continue
            record, first = _session_info(path)
            if record is None or record.created < since:
                continue
            if cwd is not None and record.cwd is not None and record.cwd != cwd:
                continue
            if prompt_matches(prompt, first):
                found.append(record)
        return found

    def locate(self, env: Mapping[str, str], session_id: str) -> SessionRecord | None:
        """The session's oldest file: `--resume` appends to it (and may leave a second file
        with the same id holding only the context)."""
        root = gemini_root(env)
        if root is None or not _SAFE_ID.match(session_id):
            return None
        return _oldest(_chats(root, session_id[:8]), session_id)

    def read_usage(self, record: SessionRecord, state: dict[str, Any]) -> dict[str, Any]:
        tally = Tally.from_json(state.get("tally"))
        model = str(state.get("model") or "unknown")
        seen = list(state.get("seen") or [])
        known = set(seen)
        for message in _all_messages(new_objects(record.path, state)):
            tokens = message.get("tokens")
            key = message.get("id")
            if message.get("type") != "gemini" or not isinstance(tokens, dict) or key in known:
                continue
            if isinstance(key, str):
                known.add(key)
                seen.append(key)
            if isinstance(message.get("model"), str):
                model = message["model"]
            cached = count(tokens.get("cached"))
            tally.add(
                model,
                (
                    max(count(tokens.get("input")) - cached, 0),
                    count(tokens.get("output")) + count(tokens.get("thoughts")),
                    cached,
                    0,
                ),
            )
        state["tally"] = tally.to_json()
        state["model"] = model
        state["seen"] = seen[-SEEN_LIMIT:]
        return state


def _all_messages(records: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for rec in records:
        yield from _messages(rec)


def _oldest(paths: list[str], session_id: str) -> SessionRecord | None:
    for path in paths:  # session-<time>-…: oldest first
        record, _ = _session_info(path)
        if record is not None and record.session_id == session_id:
            return record
    return None


READER = GeminiRecords()


def locate_remembered(session_id: str, remembered: SessionRecord) -> SessionRecord | None:
    """The remembered file, while its first line still names the session."""
    record, _ = _session_info(remembered.path)
    return record if record is not None and record.session_id == session_id else None


def session_of_payload(payload: Mapping[str, Any]) -> SessionRecord | None:
    """A hook payload's session (`session_id`, `transcript_path`): only a chat file whose first
    line names that session."""
    sid, path = payload.get("session_id"), payload.get("transcript_path")
    if not isinstance(sid, str) or not isinstance(path, str) or not os.path.isfile(path):
        return None
    record, _ = _session_info(path)
    return record if record is not None and record.session_id == sid else None


def holds_line(path: str, session_id: str, frame: str) -> bool:
    """A user message of the chat holds ``frame`` (cafleet.sessions.witness)."""
    for rec in tail_records(path, frame):
        for message in _messages(rec):
            text = user_text(message)
            if text is not None and frame in text:
                return True
    return False
