"""The agents' own session records (docs/runtime.md §9): finding a member's session, locating it
again, and usage read incrementally, on records written in each agent's real format (the shapes
seen from Claude Code 2.1.197, Codex CLI 0.171.0 and opencode 1.18.33)."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from cafleet.sessions import RecordUnreadable, Tally, prices, prompt_matches, records_of
from cafleet.sessions.usage import Subject, cache_path, read_usage, remember_session

PROMPT = "You are member 7 of fleet 1. Load the cafleet skill."
T0 = 1_800_000_000.0  # the spawn time used by these tests (epoch seconds)


def iso(t: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(t, UTC).isoformat().replace("+00:00", "Z")


def write_jsonl(path: Path, records: list[dict[str, Any]], mode: str = "w") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open(mode, encoding="utf-8") as fh:
        for rec in records:
            fh.write(json.dumps(rec) + "\n")


# --- Claude Code ---------------------------------------------------------------------------------


def claude_reply(msg_id: str, usage: dict[str, int], *, request: str | None = None,
                 model: str = "claude-sonnet-4-5-20250929") -> dict[str, Any]:  # fmt: skip
    return {
        "type": "assistant",
        "sessionId": "s",
        "cwd": "/p",
        "requestId": request,
        "timestamp": iso(T0 + 5),
        "message": {
            "id": msg_id,
            "model": model,
            "role": "assistant",
            "content": [],
            "usage": usage,
        },  # fmt: skip
    }


def claude_user(text: str, cwd: str, t: float = T0 + 1) -> dict[str, Any]:
    return {"type": "user", "cwd": cwd, "timestamp": iso(t),
            "message": {"role": "user", "content": text}}  # fmt: skip


def claude_session(home: Path, cwd: str, sid: str, records: list[dict[str, Any]]) -> Path:
    path = home / ".claude" / "projects" / cwd.replace("/", "-") / f"{sid}.jsonl"
    first = records[0].get("timestamp", iso(T0 + 1)) if records else iso(T0 + 1)
    head = [{"type": "queue-operation", "operation": "enqueue", "timestamp": first}]
    write_jsonl(path, head + records)
    os.utime(path, (T0 + 10, T0 + 10))  # written after the spawn
    return path


def u(i: int, o: int, cr: int = 0, cw: int = 0) -> dict[str, int]:
    return {"input_tokens": i, "output_tokens": o, "cache_read_input_tokens": cr,
            "cache_creation_input_tokens": cw}  # fmt: skip


def test_claude_find_matches_prompt_directory_and_time(tmp_path: Path) -> None:
    home = tmp_path / "h"
    env = {"HOME": str(home)}
    mine = claude_session(home, "/work/a", "11111111-aaaa", [claude_user(PROMPT, "/work/a")])
    claude_session(home, "/work/a", "22222222-bbbb", [claude_user("another prompt", "/work/a")])
    claude_session(home, "/work/b", "33333333-cccc", [claude_user(PROMPT, "/work/b")])
    old = claude_session(
        home, "/work/a", "44444444-dddd", [claude_user(PROMPT, "/work/a", T0 - 60)]
    )
    os.utime(old, (T0 + 9, T0 + 9))  # written to after the spawn, but created before it
    reader = records_of("claude")
    found = reader.find(env, since=T0, cwd="/work/a", prompt=PROMPT)
    assert [r.session_id for r in found] == ["11111111-aaaa"]
    assert found[0].path == str(mine) and found[0].cwd == "/work/a"
    # Without the directory both sessions started by the prompt after the spawn match.
    ids = {r.session_id for r in reader.find(env, since=T0, cwd=None, prompt=PROMPT)}
    assert ids == {"11111111-aaaa", "33333333-cccc"}
    assert reader.locate(env, "11111111-aaaa") == found[0]
    assert reader.locate(env, "99999999-zzzz") is None
    assert reader.locate(env, "../etc") is None
    assert reader.locate({"CLAUDE_CONFIG_DIR": str(tmp_path / "none")}, "11111111-aaaa") is None


def test_claude_usage_counts_each_reply_once_and_reads_incrementally(tmp_path: Path) -> None:
    home = tmp_path / "h"
    path = claude_session(home, "/p", "s1", [
        claude_user(PROMPT, "/p"),
        # One reply written as two block records with the same id: counted once, last numbers.
        claude_reply("msg_1", u(100, 1, 5, 7), request="req_1"),
        claude_reply("msg_1", u(100, 30, 5, 7), request="req_1"),
        claude_user("tool result", "/p"),
        claude_reply("msg_2", u(10, 20, 300, 0), request="req_2"),
        {"type": "assistant", "message": {"model": "<synthetic>", "usage": u(0, 0)}},
    ])  # fmt: skip
    reader = records_of("claude")
    record = reader.locate({"HOME": str(home)}, "s1")
    assert record is not None
    state = reader.read_usage(record, {})
    assert Tally.from_json(state["tally"]).totals() == (110, 50, 305, 7)
    offset = state["offset"]
    assert offset == path.stat().st_size
    # A partial line is not read until it is complete.
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(claude_user("third", "/p")) + "\n")
        fh.write(json.dumps(claude_reply("msg_3", u(1, 2, 3, 4)))[:40])
    state = reader.read_usage(record, state)
    assert Tally.from_json(state["tally"]).totals() == (110, 50, 305, 7)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(claude_reply("msg_3", u(1, 2, 3, 4)))[40:] + "\n")
    state = reader.read_usage(record, state)
    assert Tally.from_json(state["tally"]).totals() == (111, 52, 308, 11)
    # The same reply id after a user record is a new reply (a scripted server may reuse ids).
    write_jsonl(path, [claude_user("x", "/p"), claude_reply("msg_3", u(1, 1))], mode="a")
    state = reader.read_usage(record, state)
    assert Tally.from_json(state["tally"]).totals() == (112, 53, 308, 11)


def test_usage_reads_to_the_end_in_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A backlog longer than a chunk, and a line longer than a chunk, are read whole in one
    call (a first `member usage` on a long session is complete, not a first slice)."""
    from cafleet.sessions import jsonl

    monkeypatch.setattr(jsonl, "CHUNK", 64)
    home = tmp_path / "h"
    replies = [claude_reply(f"m{i}", u(1, 2, 3, 4), request=f"r{i}") for i in range(50)]
    claude_session(home, "/p", "s1", [claude_user("x" * 500, "/p"), *replies])
    reader = records_of("claude")
    record = reader.locate({"HOME": str(home)}, "s1")
    assert record is not None
    state = reader.read_usage(record, {})
    assert Tally.from_json(state["tally"]).totals() == (50, 100, 150, 200)
    assert state["offset"] == Path(record.path).stat().st_size


def test_rotated_or_missing_record_is_unreadable(tmp_path: Path) -> None:
    home = tmp_path / "h"
    path = claude_session(home, "/p", "s1", [claude_user(PROMPT, "/p"),
                                            claude_reply("m", u(5, 5))])  # fmt: skip
    reader = records_of("claude")
    record = reader.locate({"HOME": str(home)}, "s1")
    assert record is not None
    state = reader.read_usage(record, {})
    replaced = path.with_suffix(".new")
    write_jsonl(replaced, [claude_reply("m", u(1, 1))])
    os.replace(replaced, path)
    with pytest.raises(RecordUnreadable, match="rotated"):
        reader.read_usage(record, dict(state))
    path.write_text("", encoding="utf-8")  # same file, emptied
    state2 = reader.read_usage(record, {})  # fresh state: reads what is there (nothing)
    with path.open("w", encoding="utf-8"):
        pass
    path.unlink()
    with pytest.raises(RecordUnreadable):
        reader.read_usage(record, state2)


# --- Codex CLI -----------------------------------------------------------------------------------


def codex_rollout(home: Path, sid: str, cwd: str, first: str, t: float = T0 + 1,
                  events: list[dict[str, Any]] | None = None) -> Path:  # fmt: skip
    path = (
        home
        / ".codex"
        / "sessions"
        / "2027"
        / "01"
        / "15"
        / f"rollout-2027-01-15T00-00-00-{sid}.jsonl"
    )
    records = [
        {"timestamp": iso(t), "type": "session_meta",
         "payload": {"id": sid, "timestamp": iso(t), "cwd": cwd, "cli_version": "0.171.0"}},
        {"type": "turn_context", "payload": {"cwd": cwd, "model": "gpt-5-codex"}},
        {"type": "response_item", "payload": {"type": "message", "role": "user",
         "content": [{"type": "input_text", "text": "<environment_context>"}]}},
        {"type": "event_msg", "payload": {"type": "item_completed",
         "item": {"type": "UserMessage", "content": [{"type": "text", "text": first}]}}},
    ]  # fmt: skip
    write_jsonl(path, records + (events or []))
    os.utime(path, (T0 + 10, T0 + 10))
    return path


def token_count(total: tuple[int, int, int], last: tuple[int, int, int]) -> dict[str, Any]:
    def usage(v: tuple[int, int, int]) -> dict[str, int]:
        return {"input_tokens": v[0], "cached_input_tokens": v[1], "output_tokens": v[2],
                "reasoning_output_tokens": 0, "total_tokens": v[0] + v[2]}  # fmt: skip

    return {"type": "event_msg", "payload": {"type": "token_count",
            "info": {"total_token_usage": usage(total), "last_token_usage": usage(last)}}}  # fmt: skip


def test_codex_find_locate_and_usage(tmp_path: Path) -> None:
    home = tmp_path / "h"
    env = {"HOME": str(home)}
    sid = "019a0000-0000-7000-8000-000000000001"
    path = codex_rollout(home, sid, "/w", PROMPT, events=[
        token_count((100, 40, 10), (100, 40, 10)),
        token_count((100, 40, 10), (100, 40, 10)),  # repeated: adds nothing
        {"type": "event_msg", "payload": {"type": "token_count", "info": None}},
        token_count((250, 90, 30), (150, 50, 20)),
    ])  # fmt: skip
    codex_rollout(home, "019a0000-0000-7000-8000-000000000002", "/w", "other")
    codex_rollout(home, "019a0000-0000-7000-8000-000000000003", "/w", PROMPT, t=T0 - 5)
    reader = records_of("codex")
    found = reader.find(env, since=T0, cwd="/w", prompt=PROMPT)
    assert [(r.session_id, r.path, r.cwd) for r in found] == [(sid, str(path), "/w")]
    assert reader.find(env, since=T0, cwd="/elsewhere", prompt=PROMPT) == []
    assert reader.locate(env, sid) == found[0]
    assert reader.locate(env, "019a0000-0000-7000-8000-00000000000f") is None
    state = reader.read_usage(found[0], {})
    tally = Tally.from_json(state["tally"])
    assert tally.totals() == (250 - 90, 30, 90, 0)
    assert list(tally.by_model) == ["gpt-5-codex"]
    write_jsonl(path, [token_count((260, 90, 31), (10, 0, 1))], mode="a")
    state = reader.read_usage(found[0], state)
    assert Tally.from_json(state["tally"]).totals() == (170, 31, 90, 0)


# --- opencode ------------------------------------------------------------------------------------


def opencode_db(home: Path) -> sqlite3.Connection:
    path = home / ".local" / "share" / "opencode" / "opencode.db"
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path)
    conn.executescript(
        "CREATE TABLE session (id text PRIMARY KEY, parent_id text, directory text NOT NULL,"
        " tokens_input integer DEFAULT 0 NOT NULL, tokens_output integer DEFAULT 0 NOT NULL,"
        " tokens_reasoning integer DEFAULT 0 NOT NULL, tokens_cache_read integer DEFAULT 0"
        " NOT NULL, tokens_cache_write integer DEFAULT 0 NOT NULL, model text,"
        " time_created integer NOT NULL);"
        "CREATE TABLE message (id text PRIMARY KEY, session_id text NOT NULL,"
        " time_created integer NOT NULL, data text NOT NULL);"
        "CREATE TABLE part (id text PRIMARY KEY, message_id text NOT NULL, session_id text"
        " NOT NULL, time_created integer NOT NULL, data text NOT NULL);"
    )
    return conn


def opencode_session(conn: sqlite3.Connection, sid: str, directory: str, text: str,
                     t: float = T0 + 1, tokens: tuple[int, ...] = (0, 0, 0, 0)) -> None:  # fmt: skip
    model = json.dumps({"id": "claude-sonnet-4-5", "providerID": "anthropic"})
    conn.execute(
        "INSERT INTO session (id, directory, tokens_input, tokens_output, tokens_cache_read,"
        " tokens_cache_write, model, time_created) VALUES (?,?,?,?,?,?,?,?)",
        (sid, directory, *tokens, model, int(t * 1000)),
    )
    conn.execute("INSERT INTO message VALUES (?,?,?,?)",
                 ("msg_" + sid, sid, int(t * 1000), json.dumps({"role": "user"})))  # fmt: skip
    conn.execute("INSERT INTO part VALUES (?,?,?,?,?)", ("prt_" + sid, "msg_" + sid, sid,
                 int(t * 1000), json.dumps({"type": "text", "text": json.dumps(text)})))  # fmt: skip
    conn.commit()


def test_opencode_find_locate_and_usage(tmp_path: Path) -> None:
    home = tmp_path / "h"
    env = {"HOME": str(home)}
    conn = opencode_db(home)
    opencode_session(conn, "ses_mine", "/w", PROMPT, tokens=(20, 40, 7, 3))
    opencode_session(conn, "ses_other", "/w", "something else")
    opencode_session(conn, "ses_old", "/w", PROMPT, t=T0 - 100)
    reader = records_of("opencode")
    found = reader.find(env, since=T0, cwd="/w", prompt=PROMPT)
    assert [r.session_id for r in found] == ["ses_mine"]
    assert reader.locate(env, "ses_mine") == found[0]
    assert reader.locate(env, "ses_gone") is None
    state = reader.read_usage(found[0], {})
    assert Tally.from_json(state["tally"]).by_model == {"claude-sonnet-4-5": [20, 40, 7, 3]}
    conn.execute("DELETE FROM session WHERE id = 'ses_mine'")
    conn.commit()
    with pytest.raises(RecordUnreadable):
        reader.read_usage(found[0], state)
    assert reader.find({"HOME": str(tmp_path / "nobody")}, since=0, cwd=None, prompt=PROMPT) == []


# --- the cache and prices ------------------------------------------------------------------------


def test_usage_cache_sums_sessions_and_survives_loss(tmp_path: Path) -> None:
    home = tmp_path / "h"
    env = {"HOME": str(home)}
    db_dir = tmp_path / "db"
    db_dir.mkdir()
    claude_session(home, "/p", "s1", [claude_user(PROMPT, "/p"), claude_reply("a", u(10, 1))])
    path2 = claude_session(
        home, "/p", "s2", [claude_user(PROMPT, "/p"), claude_reply("b", u(5, 2))]
    )
    first = read_usage(str(db_dir), [Subject(7, "claude", "s1"), Subject(8, "claude", None)], env)
    assert first[0].tally is not None and first[0].tally.totals() == (10, 1, 0, 0)
    assert first[1].tally is None and first[1].reason == "no session known yet"
    # A fresh respawn gave member 7 a second session: both are summed.
    again = read_usage(str(db_dir), [Subject(7, "claude", "s2")], env)
    assert again[0].tally is not None and again[0].tally.totals() == (15, 3, 0, 0)
    # Read from a process with another HOME: the remembered paths still find them.
    other = read_usage(str(db_dir), [Subject(7, "claude", "s2")], {"HOME": "/nonexistent"})
    assert other[0].tally is not None and other[0].tally.totals() == (15, 3, 0, 0)
    # A lost cache is one full re-read, nothing else.
    os.unlink(cache_path(str(db_dir)))
    remember_session(str(db_dir), 7, "claude", records_of("claude").locate(env, "s2"))  # type: ignore[arg-type]
    assert read_usage(str(db_dir), [Subject(7, "claude", "s2")], env)[0].tally.totals() == (
        5,
        2,
        0,
        0,
    )  # type: ignore[union-attr]
    # A garbage cache is ignored; a missing record is `unknown` with its reason, no crash.
    Path(cache_path(str(db_dir))).write_text("{not json", encoding="utf-8")
    path2.unlink()
    lost = read_usage(str(db_dir), [Subject(7, "claude", "s2")], env)[0]
    assert lost.tally is None and "s2" in (lost.reason or "")


def test_prices_match_models_and_user_file_overrides(tmp_path: Path) -> None:
    table = prices.load({"HOME": str(tmp_path)})
    tally = Tally()
    tally.add("claude-sonnet-4-5-20250929", (1_000_000, 1_000_000, 1_000_000, 1_000_000))
    assert prices.cost(tally, table) == pytest.approx(3 + 15 + 0.3 + 3.75)
    tally.add("anthropic/claude-haiku-4-5", (1_000_000, 0, 0, 0))
    assert prices.cost(tally, table) == pytest.approx(3 + 15 + 0.3 + 3.75 + 1)
    tally.add("mystery-model", (1, 0, 0, 0))
    assert prices.cost(tally, table) is None  # unknown model: tokens only
    user = tmp_path / ".config" / "cafleet" / "prices.json"
    user.parent.mkdir(parents=True)
    user.write_text(json.dumps({"mystery-model": {"input": 2000000}}), encoding="utf-8")
    table = prices.load({"HOME": str(tmp_path)})
    assert prices.cost(tally, table) == pytest.approx(3 + 15 + 0.3 + 3.75 + 1 + 2)
    user.write_text(json.dumps({"m": {"input": -1}}), encoding="utf-8")
    with pytest.raises(prices.PriceFileError, match="non-negative"):
        prices.load({"HOME": str(tmp_path)})


def test_prompt_matching() -> None:
    assert prompt_matches("a  b\nc", '"a b c"')
    assert prompt_matches("You are member 7", "You are member 7.")
    assert not prompt_matches("You are member 7", "You are member 71")
    assert not prompt_matches("", "anything")
    assert not prompt_matches("You are member 7", "You are member 8")
