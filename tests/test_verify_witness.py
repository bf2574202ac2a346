"""The verified submit's second witness (docs/runtime.md §4.9): the agent's own record.

A real opencode resumed by `fleet restore` took a notification and drew it 4.2 s after typing
began; for a while its screen showed the composer empty and the line nowhere
(tests/data/screens/opencode/restored-undrawn-1.txt), which the screen alone cannot tell from a
dropped line: under load such a redraw came after the 15 s verify timeout, the send warned
`not verified` and blocked its caller for the whole timeout. The agent's record holds the line
from the moment it took it, so the record decides where the screen does not. Unit: captured
screens, a scripted multiplexer, records written in each agent's own format.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from cafleet.delivery.keys import Target, _seen
from cafleet.delivery.policy import VERIFY_TIMEOUT, WITNESS_EVERY
from cafleet.delivery.screens import message_frame
from cafleet.delivery.submit import submit_verified, taken
from cafleet.sessions.witness import holds_line
from tests.test_gate import FakeClock, Scripted, screen

LINE = "[cafleet msg 12 from Director (1)] run: sleep 6 — ack with: cafleet message ack 12"
FRAME = message_frame(12)
SESSION = "ses_test"


def opencode_db(path: Path, texts: list[tuple[str, str, dict[str, Any]]]) -> str:
    """An opencode 1.18 database (its `message` and `part` tables) holding one message per
    (role, text, extra part fields)."""
    conn = sqlite3.connect(path)
    conn.executescript(
        "CREATE TABLE message (id text PRIMARY KEY, session_id text NOT NULL, "
        "time_created integer NOT NULL, time_updated integer NOT NULL, data text NOT NULL);"
        "CREATE TABLE part (id text PRIMARY KEY, message_id text NOT NULL, session_id text NOT "
        "NULL, time_created integer NOT NULL, time_updated integer NOT NULL, data text NOT NULL);"
    )
    for n, (role, text, extra) in enumerate(texts):
        conn.execute(
            "INSERT INTO message VALUES (?, ?, ?, ?, ?)",
            (f"msg{n}", SESSION, n, n, json.dumps({"role": role})),
        )
        part = {"type": "text", "text": text, **extra}
        conn.execute(
            "INSERT INTO part VALUES (?, ?, ?, ?, ?, ?)",
            (f"prt{n}", f"msg{n}", SESSION, n, n, json.dumps(part)),
        )
    conn.commit()
    conn.close()
    return str(path)


class Capturing(Scripted):
    """`Scripted` with the history capture the look-back reads."""

    def capture(self, pane_id: str, lines: int) -> str:
        return self.screen(pane_id)


def test_the_screen_alone_cannot_tell_a_late_drawn_line_from_a_dropped_one() -> None:
    """Why the verify (and the look-back after it) missed the line: nothing on screen shows it
    until opencode draws it."""
    blank = screen("opencode/restored-blank-1.txt")
    undrawn = screen("opencode/restored-undrawn-1.txt")
    drawn = screen("opencode/restored-drawn-1.txt")
    assert taken("opencode", blank, undrawn, FRAME) == "missing"
    assert taken("opencode", "", undrawn, FRAME) == "missing"  # the look-back's question
    assert taken("opencode", blank, drawn, FRAME) == "submitted"


def test_a_line_the_record_holds_is_verified_though_the_screen_never_shows_it(
    tmp_path: Path,
) -> None:
    db = opencode_db(tmp_path / "opencode.db", [("user", LINE, {})])
    t = FakeClock()
    mux = Scripted([screen("opencode/restored-undrawn-1.txt")])
    problem = submit_verified(
        mux,
        "%1",
        "opencode",
        LINE,
        FRAME,
        screen("opencode/restored-blank-1.txt"),
        t.clock(),
        witness=lambda: holds_line("opencode", db, SESSION, FRAME),
    )
    assert problem is None
    assert t.t < 2 * WITNESS_EVERY + 0.2  # not the 15 s verify timeout
    assert mux.sent == [("line", LINE), ("key", "Enter")]  # no second Enter, no retype


def test_without_the_line_in_the_record_it_is_still_not_verified(tmp_path: Path) -> None:
    db = opencode_db(tmp_path / "opencode.db", [("user", "something else", {})])
    t = FakeClock()
    mux = Scripted([screen("opencode/restored-undrawn-1.txt")])
    problem = submit_verified(
        mux,
        "%1",
        "opencode",
        LINE,
        FRAME,
        screen("opencode/restored-blank-1.txt"),
        t.clock(),
        witness=lambda: holds_line("opencode", db, SESSION, FRAME),
    )
    assert problem == "the line is not on the screen after Enter (dropped or garbled)"
    assert t.t >= VERIFY_TIMEOUT


def test_the_look_back_finds_a_line_the_record_holds_and_types_nothing(tmp_path: Path) -> None:
    db = opencode_db(tmp_path / "opencode.db", [("user", LINE, {})])
    mux = Capturing([screen("opencode/restored-undrawn-1.txt")])
    target = Target(agent="opencode", frame=FRAME, look_back=200)
    assert _seen(mux, "%1", target) is False  # the screen alone
    with_record = Target(
        agent="opencode",
        frame=FRAME,
        look_back=200,
        witness=lambda: holds_line("opencode", db, SESSION, FRAME),
    )
    assert _seen(mux, "%1", with_record) is True
    assert mux.sent == []


def test_opencode_counts_only_a_user_message_of_the_session(tmp_path: Path) -> None:
    quoted = f"the screen shows: {LINE}"
    db = opencode_db(
        tmp_path / "a.db",
        [("assistant", quoted, {}), ("user", LINE, {"synthetic": True}), ("user", "x", {})],
    )
    assert not holds_line("opencode", db, SESSION, FRAME)
    db = opencode_db(tmp_path / "b.db", [("user", LINE, {})])
    assert holds_line("opencode", db, SESSION, FRAME)
    assert not holds_line("opencode", db, "another session", FRAME)
    assert not holds_line("opencode", db, SESSION, message_frame(1))  # not msg 12's prefix
    assert not holds_line("opencode", str(tmp_path / "missing.db"), SESSION, FRAME)


def _jsonl(path: Path, records: list[dict[str, Any]]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return str(path)


def test_claude_counts_a_queued_line_and_a_user_message_not_a_tool_result(tmp_path: Path) -> None:
    tool = {
        "type": "user",
        "message": {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": LINE}],
        },
    }
    said = {"type": "assistant", "message": {"content": [{"type": "text", "text": LINE}]}}
    assert not holds_line("claude", _jsonl(tmp_path / "a.jsonl", [tool, said]), SESSION, FRAME)
    queued = {"type": "queue-operation", "operation": "enqueue", "content": LINE}
    assert holds_line("claude", _jsonl(tmp_path / "b.jsonl", [tool, queued]), SESSION, FRAME)
    # Lines queued while it worked, joined into one message when its turn came.
    joined = {"type": "user", "message": {"role": "user", "content": f"first\n{LINE}"}}
    assert holds_line("claude", _jsonl(tmp_path / "c.jsonl", [joined]), SESSION, FRAME)
    assert not holds_line("claude", str(tmp_path / "missing.jsonl"), SESSION, FRAME)


def test_codex_counts_the_users_message_item(tmp_path: Path) -> None:
    def item(role: str) -> dict[str, Any]:
        kind = "input_text" if role == "user" else "output_text"
        return {
            "type": "response_item",
            "payload": {"type": "message", "role": role, "content": [{"type": kind, "text": LINE}]},
        }

    output = {"type": "response_item", "payload": {"type": "function_call_output", "output": LINE}}
    path = _jsonl(tmp_path / "a.jsonl", [item("assistant"), output])
    assert not holds_line("codex", path, SESSION, FRAME)
    assert holds_line("codex", _jsonl(tmp_path / "b.jsonl", [item("user")]), SESSION, FRAME)
