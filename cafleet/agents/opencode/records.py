"""opencode's session records (docs/runtime.md §9.3): a SQLite database,
``<XDG_DATA_HOME or $HOME/.local/share>/opencode/opencode.db`` (opencode 1.x), read read-only.
Its ``session`` table holds each session's id, directory, creation time (ms), model and running
token totals, which opencode keeps itself: reading a session's usage is one row, so there is no
offset to remember. ``opencode --session <id>`` continues a session.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import closing, contextmanager
from typing import Any
from urllib.parse import quote

from cafleet.sessions import (
    RecordUnreadable,
    SessionRecord,
    Tally,
    add_timed,
    count,
    epoch,
    prompt_matches,
)


def database_path(env: Mapping[str, str]) -> str | None:
    data = env.get("XDG_DATA_HOME")
    if not data:
        home = env.get("HOME")
        if not home:
            return None
        data = os.path.join(home, ".local", "share")
    return os.path.join(data, "opencode", "opencode.db")


@contextmanager
def _connect(path: str) -> Iterator[sqlite3.Connection]:
    if not os.path.isfile(path):
        raise RecordUnreadable(f"{path} does not exist")
    try:
        conn = sqlite3.connect(f"file:{quote(path)}?mode=ro", uri=True, timeout=2.0)
    except sqlite3.Error as exc:
        raise RecordUnreadable(f"{path}: {exc}") from None
    with closing(conn):
        try:
            yield conn
        except sqlite3.Error as exc:
            raise RecordUnreadable(f"{path}: {exc}") from None


def _first_text(conn: sqlite3.Connection, session_id: str) -> str:
    row = conn.execute(
        "SELECT m.id FROM message m WHERE m.session_id = ? "
        "AND json_extract(m.data, '$.role') = 'user' ORDER BY m.time_created LIMIT 1",
        (session_id,),
    ).fetchone()
    if row is None:
        return ""
    texts = []
    for (data,) in conn.execute(
        "SELECT data FROM part WHERE message_id = ? ORDER BY time_created, id", (row[0],)
    ):
        try:
            part = json.loads(data)
        except ValueError:
            continue
        if isinstance(part, dict) and part.get("type") == "text" and not part.get("synthetic"):
            texts.append(str(part.get("text", "")))
    return "".join(texts)


class OpencodeRecords:
    def find(
        self, env: Mapping[str, str], *, since: float, cwd: str | None, prompt: str
    ) -> list[SessionRecord]:
        path = database_path(env)
        if path is None:
            return []
        found = []
        try:
            with _connect(path) as conn:
                rows = conn.execute(
                    "SELECT id, directory, time_created FROM session "
                    "WHERE parent_id IS NULL AND time_created >= ? ORDER BY time_created",
                    (int(since * 1000),),
                ).fetchall()
                for session_id, directory, created in rows:
                    if cwd is not None and directory != cwd:
                        continue
                    if prompt_matches(prompt, _first_text(conn, session_id)):
                        found.append(SessionRecord(session_id, path, directory, created / 1000))
        except RecordUnreadable:
            return []
        return found

    def locate(self, env: Mapping[str, str], session_id: str) -> SessionRecord | None:
        path = database_path(env)
        if path is None:
            return None
        try:
            with _connect(path) as conn:
                row = conn.execute(
                    "SELECT id, directory, time_created FROM session WHERE id = ?", (session_id,)
                ).fetchone()
        except RecordUnreadable:
            return None
        return None if row is None else SessionRecord(row[0], path, row[1], row[2] / 1000)

    def read_usage(self, record: SessionRecord, state: dict[str, Any]) -> dict[str, Any]:
        with _connect(record.path) as conn:
            row = conn.execute(
                "SELECT tokens_input, tokens_output, tokens_cache_read, tokens_cache_write, "
                "model FROM session WHERE id = ?",
                (record.session_id,),
            ).fetchone()
        if row is None:
            raise RecordUnreadable(f"session {record.session_id} is no longer in {record.path}")
        model = "unknown"
        try:
            described = json.loads(row[4]) if row[4] else None
        except ValueError:
            described = None
        if isinstance(described, dict) and described.get("id"):
            model = str(described["id"])
        tally = Tally()
        tally.add(model, (count(row[0]), count(row[1]), count(row[2]), count(row[3])))
        state["tally"] = tally.to_json()
        state["timed"] = _timed(record, model)
        return state


def _timed(record: SessionRecord, model: str) -> dict[str, Any]:
    """The session's usage per span of time, from each assistant message's own counts."""
    spans: dict[str, Any] = {}
    with _connect(record.path) as conn:
        rows = conn.execute(
            "SELECT time_created, data FROM message WHERE session_id = ?", (record.session_id,)
        ).fetchall()
    for created, data in rows:
        try:
            message = json.loads(data)
        except (TypeError, ValueError):
            continue
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        tokens = message.get("tokens")
        if not isinstance(tokens, dict):
            continue
        cache = tokens.get("cache")
        cache = cache if isinstance(cache, dict) else {}
        counts = (
            count(tokens.get("input")),
            count(tokens.get("output")),
            count(cache.get("read")),
            count(cache.get("write")),
        )
        add_timed(spans, epoch(created), str(message.get("modelID") or model), counts)
    return dict(spans.get("timed") or {})


READER = OpencodeRecords()


def holds_line(path: str, session_id: str, frame: str) -> bool:
    """A user message part of the session in opencode's database holds ``frame``."""
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
