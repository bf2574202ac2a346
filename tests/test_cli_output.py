"""docs/cli.md §1.3/§1.10 output rules: JSON encoding and key order, truncation, the display
sanitizer, tables, plurals (§4 items 8, 9, 10)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from cafleet import output
from cafleet.records.messages import Message
from tests.cli_helpers import MEMBER_KEYS, MESSAGE_KEYS, PLACEMENT_KEYS, call_main, run_cli
from tests.factories import Db

ROSTER_KEYS = [
    "member_id",
    "name",
    "kind",
    "placement",
    "last_sent",
    "last_recv",
    "last_ack",
    "idle",
]
FLEET_KEYS = [
    "fleet_id",
    "name",
    "created_at",
    "deleted_at",
    "director_member_id",
    "monitor_member_id",
    "member_count",
]


# --- units ---------------------------------------------------------------------------------------


def test_json_encoding() -> None:
    assert output.dumps_json({"a": "é…", "b": [1, None], "c": "\x1b"}) == (
        '{"a":"é…","b":[1,null],"c":"\\u001b"}'
    )


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        ("abcdefg", 5, "abcde…"),
        ("abcde", 5, "abcde"),
        ("abc", 0, "…"),
        ("", 0, ""),
        ("ééééé", 3, "ééé…"),
        ("日本語テキスト", 2, "日本…"),
    ],
)
def test_truncate(text: str, limit: int, expected: str) -> None:
    assert output.truncate(text, limit) == expected


def test_sanitizers() -> None:
    raw = "a\x1bb\x07c\rd\ne\tf\x7fg\x85h\x00"
    assert output.sanitize_multiline(raw) == "a␛b␇c␍d\ne\tf␡g\ufffdh␀"
    assert output.sanitize_single_line(raw) == "a␛b␇c␍d␊e␉f␡g\ufffdh␀"
    assert len(output.sanitize_single_line(raw)) == len(raw)


def test_plural() -> None:
    assert [output.plural(n, "member") for n in (0, 1, 2)] == [
        "0 members",
        "1 member",
        "2 members",
    ]


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (None, "-"),
        (0, "0s"),
        (59, "59s"),
        (60, "1m"),
        (119, "1m"),
        (3599, "59m"),
        (3600, "1h"),
        (90000, "25h"),
    ],
)
def test_idle_text(seconds: int | None, text: str) -> None:
    from cafleet.text import idle_text

    assert idle_text(seconds) == text


def test_display_width() -> None:
    assert output.display_width("abc") == 3
    assert output.display_width("日本") == 4
    assert output.display_width("ＡＢ") == 4  # fullwidth
    assert output.display_width("e\u0301") == 1  # combining mark
    assert output.display_width("é") == 1


def test_table_layout() -> None:
    lines = output.table(("id", "name", "x"), [("1", "日本", "a"), ("22", "b", "-")])
    assert lines == [
        "  id  name  x",
        "  --  ----  -",
        "  1   日本  a",
        "  22  b     -",
    ]
    assert all(not line.endswith(" ") for line in lines)


def test_counted_table() -> None:
    assert output.counted_table("fleet", ("a",), []) == ["0 fleets."]
    assert output.counted_table("fleet", ("a",), [("1",)])[0] == "1 fleet:"


def test_label_lines() -> None:
    assert output.label_lines([("name", "x"), ("created_at", "y")], 12) == [
        "name:       x",
        "created_at: y",
    ]


def _message(**kw: object) -> SimpleNamespace:
    base: dict[str, object] = {
        "message_id": 42,
        "owner_member_id": 7,
        "from_member_id": 7,
        "to_member_id": 7,
        "type": "unicast",
        "created_at": "t0",
        "status_state": "input_required",
        "status_timestamp": "2026-11-29T15:02:11.123456+00:00",
        "origin_message_id": None,
        "text": "build OK",
    }
    base.update(kw)
    return SimpleNamespace(**base)


def test_envelope_lines() -> None:
    """The header shows the send time (`created_at`), not the last state change, and the
    sender by name when the names are given."""
    acked = _message(status_state="completed", status_timestamp="2026-11-29T16:00:00+00:00")
    assert output.envelope_lines(acked, 200) == ["[42 | from:7 | t0]", "build OK"]
    assert output.envelope_lines(acked, 200, {7: "builder"}) == [
        "[42 | from:builder (7) | t0]",
        "build OK",
    ]
    summary = _message(
        message_id=40,
        from_member_id=1,
        type="broadcast_summary",
        origin_message_id=40,
        created_at="ts",
        text="Broadcast sent to 3 recipients",
    )
    assert output.envelope_lines(summary, 200, {1: "Di\x1brector"}) == [
        "[40 | from:Di\u241brector (1) | ts | kind:broadcast_summary | origin:40]",
        "Broadcast sent to 3 recipients",
    ]
    assert output.envelope_lines(_message(origin_message_id=3), 200)[0].endswith(" | origin:3]")
    assert output.envelope_lines(_message(text="abc"), 0) == [
        "[42 | from:7 | t0]",
        "… (+3 characters: cafleet message show 42)",
    ]
    assert output.envelope_lines(_message(text="x" * 1477), 200)[1] == (
        "x" * 200 + "… (+1,277 characters: cafleet message show 42)"
    )
    assert output.envelope_lines(_message(text="x" * 201), 200)[1].endswith(
        "… (+1 character: cafleet message show 42)"
    )
    assert output.envelope_lines(_message(text="x" * 5000)) == ["[42 | from:7 | t0]", "x" * 5000]


def test_envelopes_separated_by_blank_line() -> None:
    lines = output.envelopes_lines([_message(message_id=2), _message(message_id=1)], 200)
    assert lines[2] == ""
    assert lines[3].startswith("[1 | ")
    assert output.envelopes_lines([], 200) == ["No messages found."]


def test_history_lines_name_the_recipient_and_the_ack() -> None:
    names = {7: "builder", 1: "Director"}
    received = _message(message_id=1, from_member_id=1, created_at="t1")
    sent = _message(
        message_id=2,
        from_member_id=7,
        to_member_id=1,
        owner_member_id=1,
        created_at="t2",
        status_state="completed",
        status_timestamp="t3",
    )
    assert output.history_lines([received, sent], 7, 200, names) == [
        "[1 | from:Director (1) | t1 | not ACKed]",
        "build OK",
        "",
        "[2 | from:builder (7) | t2 | to:Director (1) | ACKed t3]",
        "build OK",
    ]
    assert output.history_lines([], 7, 200, names) == ["No messages found."]


def test_message_dict_has_no_notified_at() -> None:
    """Even a message record that carried `notified_at` would not show it."""

    fields = (*Message._fields, "notified_at")
    notified = SimpleNamespace(
        **vars(_message()), notified_at="2026-11-29T15:02:12Z", _fields=fields
    )
    assert list(output.message_dict(notified)) == MESSAGE_KEYS


# --- through the CLI -----------------------------------------------------------------------------


@pytest.fixture
def mailbox(head_db: Path) -> SimpleNamespace:
    """A fleet whose Director has three messages: a 5,000-character body with é and …, a
    300-character body, and a body with control characters; plus a broadcast summary."""
    with Db(head_db) as db:
        fleet = db.fleet("build")
        director = fleet.director.member_id
        worker = db.member(fleet.fleet.fleet_id, "coder")
        long_body = ("é…" * 2500)[:5000]
        big = db.send(worker.member_id, director, long_body)
        mid = db.send(worker.member_id, director, "x" * 300)
        ctrl = db.send(worker.member_id, director, "a\x1bb\x07c\rd\ne")
        summary = db.broadcast(worker.member_id, "hello all")
    return SimpleNamespace(
        fleet=fleet,
        director=director,
        worker=worker,
        big=big,
        mid=mid,
        ctrl=ctrl,
        summary=summary.summary,
        long_body=long_body,
    )


def _one_line_json(out: str) -> object:
    assert out.endswith("\n") and out.count("\n") == 1
    compact = json.dumps(json.loads(out), ensure_ascii=False, separators=(",", ":")) + "\n"
    assert out == compact
    return json.loads(out)


def test_json_everywhere_is_compact_with_key_order(mailbox: SimpleNamespace) -> None:
    fleet_id = str(mailbox.fleet.fleet.fleet_id)
    director = str(mailbox.director)

    code, out, _ = call_main(["message", "poll", director, "--json"])
    assert code == 0
    polled = _one_line_json(out)
    assert [list(m) for m in polled] == [MESSAGE_KEYS] * 4  # 3 direct + 1 broadcast delivery
    big = next(m for m in polled if m["message_id"] == mailbox.big.message_id)
    assert big["text"] == mailbox.long_body and len(big["text"]) == 5000
    assert "é…" in out  # raw, not \u escapes

    code, out, _ = call_main(["message", "show", str(mailbox.summary.message_id), "--json"])
    shown = _one_line_json(out)
    # `message show` adds the recipient hook's receipt (docs/cli.md §2.38)
    assert list(shown) == ["message"] and list(shown["message"]) == [*MESSAGE_KEYS, "received_at"]
    assert "notified_at" not in out

    code, out, _ = call_main(["fleet", "list", "--json"])
    assert [list(f) for f in _one_line_json(out)] == [FLEET_KEYS]
    code, out, _ = call_main(["fleet", "show", fleet_id, "--json"])
    assert list(_one_line_json(out)) == [*FLEET_KEYS, "loop", "panes", "received", "problems"]

    code, out, _ = call_main(["member", "list", fleet_id, "--json"])
    roster = _one_line_json(out)
    assert [list(r) for r in roster] == [
        [*ROSTER_KEYS, "pane_state", "agent_state", "paused", "permissions", "last_received_at"]
    ] * 3
    assert list(roster[0]["placement"]) == PLACEMENT_KEYS

    code, out, _ = call_main(["member", "show", director, "--json"])
    member = _one_line_json(out)
    assert list(member) == [*MEMBER_KEYS, "permissions", "agent_session_id"]
    assert list(member["placement"]) == PLACEMENT_KEYS and member["permissions"] is None

    code, out, _ = call_main(["message", "ack", str(mailbox.big.message_id), "--json"])
    acked = _one_line_json(out)
    assert list(acked) == ["message"] and list(acked["message"]) == MESSAGE_KEYS
    assert acked["message"]["text"] == mailbox.long_body


def test_what_a_member_reads_with_is_whole_and_echoes_say_how_to_read_the_rest(
    mailbox: SimpleNamespace,
) -> None:
    """poll, wait and show print every character; only an echo (ack, send) is cut, and the cut
    names the command that shows the rest."""
    big, mid, d = mailbox.big.message_id, mailbox.mid.message_id, str(mailbox.director)
    code, out, _ = call_main(["message", "show", str(mid)])
    assert code == 0
    assert out.splitlines()[1] == "x" * 300
    code, out, _ = call_main(["message", "show", str(big)])
    assert out.splitlines()[1:] == [mailbox.long_body]
    code, out, _ = call_main(["message", "poll", d])
    assert mailbox.long_body in out.splitlines() and "x" * 300 in out.splitlines()
    code, out, _ = call_main(["message", "wait", d, "--timeout", "0"])
    assert mailbox.long_body in out.splitlines() and "x" * 300 in out.splitlines()
    code, out, _ = call_main(["message", "ack", str(big)])
    cut = mailbox.long_body[:200]  # multi-byte characters count as one
    assert out.splitlines()[2] == cut + f"… (+4,800 characters: cafleet message show {big})"


@pytest.mark.parametrize(
    ("limit", "text", "expected"),
    [
        ("5", "abcdefg", "abcde… (+2 characters: cafleet message show 1)"),
        ("0", "abcdefg", "… (+7 characters: cafleet message show 1)"),
        ("7", "abcdefg", "abcdefg"),
    ],
)
def test_text_truncation_limit(head_db: Path, limit: str, text: str, expected: str) -> None:
    with Db(head_db) as db:
        fleet = db.fleet()
        message = db.send(fleet.director.member_id, fleet.director.member_id, text)
    assert message.message_id == 1
    code, out, _ = run_cli(
        "message", "ack", str(message.message_id), env={"CAFLEET_MAX_TEXT_LEN": limit}
    )
    assert code == 0
    assert out.splitlines()[2] == expected
    code, out, _ = run_cli(
        "message", "show", str(message.message_id), "--json", env={"CAFLEET_MAX_TEXT_LEN": limit}
    )
    assert json.loads(out)["message"]["text"] == text


def test_control_characters_sanitized_in_text_only(mailbox: SimpleNamespace) -> None:
    code, out, _ = call_main(["message", "show", str(mailbox.ctrl.message_id)])
    assert code == 0
    assert out.split("\n", 1)[1] == "a␛b␇c␍d\ne\n"
    code, out, _ = call_main(["message", "show", str(mailbox.ctrl.message_id), "--json"])
    assert json.loads(out)["message"]["text"] == "a\x1bb\x07c\rd\ne"
    assert "\x1b" not in out  # escaped by the encoder


def test_names_sanitized_as_single_line(head_db: Path) -> None:
    with Db(head_db) as db:
        fleet = db.fleet("a\tb\x1b")
        db.member(fleet.fleet.fleet_id, "x\ny", description="d\x07")
    code, out, _ = call_main(["fleet", "list"])
    assert code == 0
    assert "a␉b␛" in out and "\x1b" not in out
    code, out, _ = call_main(["member", "list", str(fleet.fleet.fleet_id)])
    assert "x␊y" in out
