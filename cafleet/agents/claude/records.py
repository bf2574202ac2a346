"""Claude Code's session records (docs/runtime.md §9.1): one jsonl per session,
``<config>/projects/<cwd, each non-alphanumeric character a '-'>/<session id>.jsonl``, where
``<config>`` is ``$CLAUDE_CONFIG_DIR`` or ``$HOME/.claude``. ``--resume <id>`` continues the same
file, and only from the directory the session ran in.

Usage: each ``"type": "assistant"`` record's ``message.usage``. Claude Code writes one record per
content block of a reply, each with the reply's ``message.id`` (and ``requestId``) and its usage so
far, so consecutive records of one reply count once, with the last record's numbers.
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


def config_dir(env: Mapping[str, str]) -> str | None:
    explicit = env.get("CLAUDE_CONFIG_DIR")
    if explicit:
        return explicit
    home = env.get("HOME")
    return os.path.join(home, ".claude") if home else None


def project_dir_name(cwd: str) -> str:
    return re.sub(r"[^A-Za-z0-9]", "-", cwd)


def _session_info(path: str) -> tuple[str | None, float | None, str]:
    """(cwd, time of the first record, first user message text) of a session file."""
    cwd: str | None = None
    first: float | None = None
    for rec in head_objects(path):
        if first is None:
            first = epoch(rec.get("timestamp"))
        if cwd is None and isinstance(rec.get("cwd"), str):
            cwd = rec["cwd"]
        if rec.get("type") == "user" and not rec.get("isMeta"):
            message = rec.get("message") or {}
            text = text_of(message.get("content") if isinstance(message, dict) else None)
            if text:
                return cwd, first, text
    return cwd, first, ""


def _record(path: str, cwd: str | None, created: float | None) -> SessionRecord:
    if created is None:
        created = os.stat(path).st_mtime
    return SessionRecord(os.path.basename(path)[: -len(".jsonl")], path, cwd, created)


def session_of_payload(payload: Mapping[str, Any]) -> SessionRecord | None:
    """A hook payload's session (`session_id`, `transcript_path`): only a record file that
    exists and is named after that id."""
    sid, path = payload.get("session_id"), payload.get("transcript_path")
    if not isinstance(sid, str) or not isinstance(path, str) or not _SAFE_ID.match(sid):
        return None
    if os.path.basename(path) != f"{sid}.jsonl" or not os.path.isfile(path):
        return None
    session_cwd, created, _ = _session_info(path)
    return _record(path, session_cwd, created)


class ClaudeRecords:
    def find(
        self, env: Mapping[str, str], *, since: float, cwd: str | None, prompt: str
    ) -> list[SessionRecord]:
        root = config_dir(env)
        if root is None:
            return []
        found = []
        for path in glob.glob(os.path.join(glob.escape(root), "projects", "*", "*.jsonl")):
            try:
                if os.stat(path).st_mtime < since:
                    continue  # not written since the spawn: cheap to rule out
            except OSError:
                continue
            session_cwd, created, first = _session_info(path)
            if created is not None and created < since:
                continue  # an older session written to since (a resumed one)
            if cwd is not None and session_cwd is not None and session_cwd != cwd:
                continue
            if prompt_matches(prompt, first):
                found.append(_record(path, session_cwd, created))
        return found

    def locate(self, env: Mapping[str, str], session_id: str) -> SessionRecord | None:
        root = config_dir(env)
        if root is None or not _SAFE_ID.match(session_id):
            return None
        pattern = os.path.join(glob.escape(root), "projects", "*", session_id + ".jsonl")
        for path in sorted(glob.glob(pattern)):
            session_cwd, created, _ = _session_info(path)
            return _record(path, session_cwd, created)
        return None

    def read_usage(self, record: SessionRecord, state: dict[str, Any]) -> dict[str, Any]:
        tally = Tally.from_json(state.get("tally"))
        state.setdefault("timed", {})
        last_key = state.get("last_key")
        last_counts = state.get("last_counts")
        for rec in new_objects(record.path, state):
            kind = rec.get("type")
            if kind == "user":
                last_key = None  # a new request follows: an id seen again is a new reply
                continue
            if kind != "assistant":
                continue
            message = rec.get("message")
            if not isinstance(message, dict) or not isinstance(message.get("usage"), dict):
                continue
            usage = message["usage"]
            model = str(message.get("model") or "unknown")
            if model == "<synthetic>":
                continue  # written by Claude Code itself, no request behind it
            counts = (
                count(usage.get("input_tokens")),
                count(usage.get("output_tokens")),
                count(usage.get("cache_read_input_tokens")),
                count(usage.get("cache_creation_input_tokens")),
            )
            key = [message.get("id"), rec.get("requestId")]
            if key[0] is not None and key == last_key and isinstance(last_counts, list):
                # Another block of the same reply: replace its earlier numbers.
                d = [c - p for c, p in zip(counts, last_counts, strict=True)]
                added = (d[0], d[1], d[2], d[3])
            else:
                added = counts
            tally.add(model, added)
            add_timed(state, epoch(rec.get("timestamp")), model, added)
            last_key, last_counts = key, list(counts)
        state["tally"] = tally.to_json()
        state["last_key"] = last_key
        state["last_counts"] = last_counts
        return state


READER = ClaudeRecords()


def holds_line(path: str, session_id: str, frame: str) -> bool:
    """A line queued while Claude Code works (a ``queue-operation`` enqueue) or a user record
    holds ``frame`` (cafleet.sessions.witness)."""
    for rec in tail_records(path, frame):
        if rec.get("type") == "queue-operation" and rec.get("operation") == "enqueue":
            found = texts(rec.get("content"))
        elif rec.get("type") == "user":
            found = texts((rec.get("message") or {}).get("content"))
        else:
            continue
        if any(frame in text for text in found):
            return True
    return False
