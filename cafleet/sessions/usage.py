"""Usage per member, read incrementally (docs/runtime.md §9.5).

Where the reading position is kept: a cache file beside the database,
``<db dir>/usage-cache.json``, not a table. Usage is derived data: every number in it can be
read again from the agents' own records, so losing the file costs one full re-read and nothing
else, and reading usage (a read-only command) never takes the database's writer lock. The file
maps each member to the sessions it has had, each with its record's path, the byte offset read up
to, the file's identity and the counts so far; it is replaced atomically (write, then rename), so
two readers at once leave one complete file.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cafleet.files import read_regular
from cafleet.sessions import RecordUnreadable, SessionRecord, Tally, records_of

CACHE_NAME = "usage-cache.json"
CACHE_VERSION = 2  # 2: usage per span of time too (an older cache is read again)
CACHE_LIMIT = 64 * 1024 * 1024  # a larger cache is read as none (usage is read again)


@dataclass(frozen=True, slots=True)
class MemberUsage:
    """A member's usage: ``tally`` None means `unknown`, with ``reason`` saying why."""

    member_id: int
    tally: Tally | None
    reason: str | None = None
    # Usage per span of time (`cafleet.sessions.add_timed`) over every session; None when a
    # session's agent records no times.
    timed: dict[str, Any] | None = None

    @property
    def known(self) -> bool:
        return self.tally is not None


@dataclass(frozen=True, slots=True)
class Subject:
    """What usage is read for: a member, its agent and its current session id (None: not
    learned yet)."""

    member_id: int
    coding_agent: str
    session_id: str | None


def cache_path(db_dir: str) -> str:
    return os.path.join(db_dir, CACHE_NAME)


def _load(path: str) -> dict[str, Any]:
    try:
        data = json.loads(read_regular(path, CACHE_LIMIT))
    except (OSError, ValueError, RecursionError):
        return {}
    if not isinstance(data, dict) or data.get("version") != CACHE_VERSION:
        return {}
    members = data.get("members")
    return members if isinstance(members, dict) else {}


def _save(path: str, members: dict[str, Any]) -> None:
    """Replace the cache atomically; a cache that cannot be written is only a slower next read."""
    directory = os.path.dirname(path) or "."
    try:
        fd, tmp = tempfile.mkstemp(prefix=".usage-cache.", dir=directory)
    except OSError:
        return
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump({"version": CACHE_VERSION, "members": members}, fh)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def _record_of(session: dict[str, Any]) -> SessionRecord | None:
    try:
        return SessionRecord(
            str(session["session_id"]),
            str(session["path"]),
            session.get("cwd"),
            float(session.get("created") or 0),
        )
    except (KeyError, TypeError, ValueError):
        return None


def remember_session(db_dir: str, member_id: int, agent: str, record: SessionRecord) -> None:
    """Note where a member's session is recorded (learned from its pane's own environment), so
    its usage is found later even from a process whose HOME differs."""
    path = cache_path(db_dir)
    members = _load(path)
    entry = members.setdefault(str(member_id), {})
    sessions = entry.setdefault("sessions", {})
    known = sessions.get(record.session_id)
    if isinstance(known, dict) and known.get("path") == record.path:
        return
    sessions[record.session_id] = _new_session(agent, record)
    _save(path, members)


def _new_session(agent: str, record: SessionRecord) -> dict[str, Any]:
    return {
        "agent": agent,
        "session_id": record.session_id,
        "path": record.path,
        "cwd": record.cwd,
        "created": record.created,
        "state": {},
    }


def known_record(db_dir: str, member_id: int, session_id: str) -> SessionRecord | None:
    """The record remembered for a member's session, if any."""
    entry = _load(cache_path(db_dir)).get(str(member_id))
    if not isinstance(entry, dict):
        return None
    session = (entry.get("sessions") or {}).get(session_id)
    return _record_of(session) if isinstance(session, dict) else None


def read_usage(
    db_dir: str, subjects: list[Subject], env: Mapping[str, str] | None = None
) -> list[MemberUsage]:
    """Each subject's usage summed over the sessions it has had (the cached ones and its
    current one), reading only what was appended since the last read."""
    env = os.environ if env is None else env
    path = cache_path(db_dir)
    members = _load(path)
    out = []
    changed = False
    for subject in subjects:
        entry = members.setdefault(str(subject.member_id), {})
        sessions = entry.setdefault("sessions", {})
        if subject.session_id is None:
            out.append(MemberUsage(subject.member_id, None, "no session known yet"))
            continue
        if subject.session_id not in sessions:
            record = records_of(subject.coding_agent).locate(env, subject.session_id)
            if record is None:
                out.append(
                    MemberUsage(
                        subject.member_id, None, f"session {subject.session_id} has no record"
                    )
                )
                continue
            sessions[subject.session_id] = _new_session(subject.coding_agent, record)
            changed = True
        tally = Tally()
        timed: dict[str, Any] | None = {}
        reason: str | None = None
        for session in sessions.values():
            record = _record_of(session) if isinstance(session, dict) else None
            if record is None:
                continue
            state = dict(session.get("state") or {})
            try:
                state = records_of(str(session.get("agent"))).read_usage(record, state)
            except (RecordUnreadable, ValueError) as exc:
                reason = str(exc)
                continue
            if state != session.get("state"):
                session["state"] = state
                changed = True
            tally.merge(Tally.from_json(state.get("tally")))
            timed = _merge_timed(timed, state.get("timed"))
        tally_or_none = None if reason else tally
        out.append(
            MemberUsage(
                subject.member_id, tally_or_none, reason, None if tally_or_none is None else timed
            )
        )
    if changed:
        _save(path, members)
    return out


def _merge_timed(into: dict[str, Any] | None, spans: Any) -> dict[str, Any] | None:
    if into is None or not isinstance(spans, dict):
        return None
    for key, by_model in spans.items():
        merged = Tally.from_json(into.get(key))
        merged.merge(Tally.from_json(by_model))
        into[key] = merged.to_json()
    return into
