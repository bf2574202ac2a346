"""Codex CLI's session records (docs/runtime.md §9.2): one "rollout" jsonl per session,
``<CODEX_HOME or $HOME/.codex>/sessions/YYYY/MM/DD/rollout-<time>-<session id>.jsonl``; its first
record (``session_meta``) holds the id and the directory; ``codex resume <id>`` continues it.

Usage: ``event_msg`` records of type ``token_count`` carry the session's running total
(``info.total_token_usage``) and the last request's (``info.last_token_usage``); the last
request's counts are added each time the running total changes (a repeated event adds nothing).
OpenAI's ``input_tokens`` include the cached ones: uncached input is their difference.
The model is the latest ``turn_context``'s.
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Mapping
from typing import Any

from cafleet.sessions import SessionRecord, Tally, add_timed, count, epoch, prompt_matches
from cafleet.sessions.jsonl import head_objects, new_objects, text_of
from cafleet.sessions.witness import tail_records, texts

_SAFE_ID = re.compile(r"^[A-Za-z0-9_-]+$")


def codex_home(env: Mapping[str, str]) -> str | None:
    explicit = env.get("CODEX_HOME")
    if explicit:
        return explicit
    home = env.get("HOME")
    return os.path.join(home, ".codex") if home else None


def _rollouts(root: str, session_id: str = "*") -> list[str]:
    pattern = os.path.join(
        glob.escape(root), "sessions", "*", "*", "*", f"rollout-*-{session_id}.jsonl"
    )
    return sorted(glob.glob(pattern))


def _session_info(path: str) -> tuple[SessionRecord | None, str]:
    """The session a rollout holds and its first user message."""
    record: SessionRecord | None = None
    for rec in head_objects(path, limit=400):
        payload = rec.get("payload")
        if not isinstance(payload, dict):
            continue
        if record is None and rec.get("type") == "session_meta":
            session_id = payload.get("id")
            if not isinstance(session_id, str):
                return None, ""
            created = epoch(payload.get("timestamp")) or epoch(rec.get("timestamp"))
            cwd = payload.get("cwd") if isinstance(payload.get("cwd"), str) else None
            record = SessionRecord(session_id, path, cwd, created or os.stat(path).st_mtime)
            continue
        item = payload.get("item")
        if (
            record is not None
            and payload.get("type") == "item_completed"
            and isinstance(item, dict)
            and item.get("type") == "UserMessage"
        ):
            return record, text_of(item.get("content"))
    return record, ""


class CodexRecords:
    def find(
        self, env: Mapping[str, str], *, since: float, cwd: str | None, prompt: str
    ) -> list[SessionRecord]:
        root = codex_home(env)
        if root is None:
            return []
        found = []
        for path in _rollouts(root):
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
        root = codex_home(env)
        if root is None or not _SAFE_ID.match(session_id):
            return None
        for path in _rollouts(root, session_id):
            record, _ = _session_info(path)
            if record is not None and record.session_id == session_id:
                return record
        return None

    def read_usage(self, record: SessionRecord, state: dict[str, Any]) -> dict[str, Any]:
        tally = Tally.from_json(state.get("tally"))
        state.setdefault("timed", {})
        model = str(state.get("model") or "unknown")
        last_total = state.get("last_total")
        for rec in new_objects(record.path, state):
            payload = rec.get("payload")
            if not isinstance(payload, dict):
                continue
            if rec.get("type") == "turn_context" and isinstance(payload.get("model"), str):
                model = payload["model"]
                continue
            if rec.get("type") != "event_msg" or payload.get("type") != "token_count":
                continue
            info = payload.get("info")
            if not isinstance(info, dict):
                continue
            total = info.get("total_token_usage")
            last = info.get("last_token_usage")
            if not isinstance(last, dict) or total == last_total:
                continue
            last_total = total
            cached = count(last.get("cached_input_tokens"))
            counts = (
                max(count(last.get("input_tokens")) - cached, 0),
                count(last.get("output_tokens")),
                cached,
                0,
            )
            tally.add(model, counts)
            add_timed(state, epoch(rec.get("timestamp")), model, counts)
        state["tally"] = tally.to_json()
        state["model"] = model
        state["last_total"] = last_total
        return state


READER = CodexRecords()


def holds_line(path: str, session_id: str, frame: str) -> bool:
    """A user response item or the user-message event holds ``frame``
    (cafleet.sessions.witness)."""
    for rec in tail_records(path, frame):
        payload = rec.get("payload") or {}
        if payload.get("role") == "user":
            found = texts(payload.get("content"))
        elif payload.get("type") == "user_message":
            found = texts(payload.get("message"))
        else:
            continue
        if any(frame in text for text in found):
            return True
    return False
