"""`message send` / `broadcast` without tmux: stored text, outputs, refusals (docs/cli.md §2.14,
§2.15, §1.9; §4 items 53–59, 63, 65). Refusals leave the database unchanged.

Placements here name pane ids that exist nowhere and the test process has no TMUX, so nothing is
ever typed; draining is exercised against the private tmux server in test_delivery_*.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli_helpers import MESSAGE_KEYS, snapshot
from tests.delivery_helpers import call, message_row, rows, warning
from tests.factories import build_world, connect


@pytest.fixture
def world(head_db: Path):
    return build_world(head_db, members=("alice", "bob"))


def send(world, frm: int, to: int, *body: str, stdin: bytes = b"") -> object:
    return call(
        "message",
        "send",
        "--from-member-id",
        str(frm),
        "--to-member-id",
        str(to),
        *body,
        stdin=stdin,
    )


def test_send_stores_exact_text_and_prints_envelope(world, head_db: Path) -> None:
    a, b = world.members["alice"], world.members["bob"]
    body = "line1\r\nline2\x1b[31m\x07 \u2028 é…\t"
    r = send(world, a, b, body, "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert list(data) == [
        "message", "notification_sent", "notification_note", "text_truncated", "already_sent",
    ]  # fmt: skip
    assert list(data["message"]) == MESSAGE_KEYS
    assert data["text_truncated"] is False
    msg = data["message"]
    assert msg["text"] == body
    assert (msg["owner_member_id"], msg["from_member_id"], msg["to_member_id"]) == (b, a, b)
    assert (msg["type"], msg["status_state"], msg["origin_message_id"]) == (
        "unicast",
        "input_required",
        None,
    )
    # b's placement names a pane that exists nowhere, and there is no TMUX: the warning says so
    assert data["notification_sent"] is False
    assert (
        r.stderr
        == warning(msg["message_id"], b, "not inside a tmux session (TMUX is not set)") + "\n"
    )
    row = message_row(head_db, msg["message_id"])
    assert row["text"] == body and row["notified_at"] is None
    # the stored text round-trips byte for byte
    shown = call("message", "show", str(msg["message_id"]), "--json")
    assert json.loads(shown.stdout)["message"]["text"] == body
    assert "notified_at" not in shown.stdout

    # text mode: `Message sent.` and the envelope, body sanitized for the terminal
    r2 = send(world, a, world.director, "hello\x1b")
    assert r2.returncode == 0 and r2.stderr == ""
    lines = r2.stdout.splitlines()
    assert lines[0] == "Message sent."
    mid = int(lines[1].split(" ", 1)[0][1:])
    ts = message_row(head_db, mid)["created_at"]
    assert lines[1:] == [f"[{mid} | from:alice ({a}) | {ts}]", "hello\u241b"]


def test_send_text_mode_truncates_only_the_display(world, head_db: Path) -> None:
    a = world.members["alice"]
    body = "x" * 300
    r = send(world, a, world.director, body)
    assert r.returncode == 0
    shown = r.stdout.splitlines()[2]
    assert shown.startswith("x" * 200 + "… (+100 characters: cafleet message show ")
    r = call(
        "message",
        "send",
        "--from-member-id",
        str(a),
        "--to-member-id",
        str(world.director),
        "abcdefg",
        env={"CAFLEET_MAX_TEXT_LEN": "5"},
    )
    assert r.stdout.splitlines()[2].startswith("abcde… (+2 characters: cafleet message show ")
    stored = rows(head_db, "SELECT text FROM messages ORDER BY message_id")
    assert [t for (t,) in stored] == [body, "abcdefg"]


def test_send_to_director_and_self_send_are_never_pending(world, head_db: Path) -> None:
    a = world.members["alice"]
    r = send(world, a, world.director, "to the director", "--json")
    data = json.loads(r.stdout)
    assert data["notification_sent"] is False and r.stderr == ""
    assert message_row(head_db, data["message"]["message_id"])["notified_at"] is None

    r = send(world, a, a, "note to self", "--json")
    data = json.loads(r.stdout)
    assert data["notification_sent"] is False and r.stderr == ""
    row = message_row(head_db, data["message"]["message_id"])
    assert row["notified_at"] == row["created_at"]
    assert row["status_state"] == "input_required"
    polled = json.loads(call("message", "poll", str(a), "--json").stdout)
    assert [m["message_id"] for m in polled] == [data["message"]["message_id"]]
    acked = call("message", "ack", str(data["message"]["message_id"]))
    assert acked.returncode == 0 and acked.stdout.startswith("Message acknowledged.\n")


def test_broadcast_rows_and_output(world, head_db: Path) -> None:
    a, b = world.members["alice"], world.members["bob"]
    r = call("message", "broadcast", "--from-member-id", str(a), "all hands", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert list(data) == ["message", "recipients", "notified", "already_sent"]
    summary = data["message"]
    sid = summary["message_id"]
    assert summary["type"] == "broadcast_summary"
    assert summary["text"] == "Broadcast sent to 3 recipients"
    assert summary["origin_message_id"] == sid and summary["to_member_id"] is None
    assert summary["status_state"] == "completed"
    assert (data["recipients"], data["notified"]) == (3, 0)
    deliveries = rows(
        head_db,
        "SELECT message_id, owner_member_id, origin_message_id, text, type, notified_at "
        "FROM messages WHERE message_id > ? ORDER BY message_id",
        sid,
    )
    assert [(o, g, t, ty) for _, o, g, t, ty, _ in deliveries] == [
        (world.director, sid, "all hands", "unicast"),
        (world.monitor, sid, "all hands", "unicast"),
        (b, sid, "all hands", "unicast"),
    ]
    assert all(row[0] > sid for row in deliveries)
    assert all(row[5] is None for row in deliveries)
    # the monitor and bob have (made-up) panes: one warning per failed recipient, in id order
    reason = "not inside a tmux session (TMUX is not set)"
    assert r.stderr.splitlines() == [
        warning(deliveries[1][0], world.monitor, reason),
        warning(deliveries[2][0], b, reason),
    ]

    text = call("message", "broadcast", "--from-member-id", str(b), "again")
    assert text.returncode == 0
    new_sid = max(
        i
        for (i,) in rows(
            head_db, "SELECT message_id FROM messages WHERE type = 'broadcast_summary'"
        )
    )
    assert text.stdout == f"broadcast id={new_sid} recipients=3 notified=0\n"


def test_broadcast_with_zero_and_one_recipient(head_db: Path) -> None:
    lonely = build_world(head_db, members=())
    with connect(head_db) as conn:
        from cafleet import broker

        # deregister the monitor, so the Director is alone
        broker.deregister_member(conn, member_id=lonely.monitor)
    r = call("message", "broadcast", "--from-member-id", str(lonely.director), "anyone?", "--json")
    assert r.returncode == 0 and r.stderr == ""
    data = json.loads(r.stdout)
    assert data["message"]["text"] == "Broadcast sent to 0 recipients"
    assert (data["recipients"], data["notified"]) == (0, 0)
    pair = build_world(head_db, members=(), fleet_name="two")
    r = call("message", "broadcast", "--from-member-id", str(pair.director), "hi", "--json")
    assert json.loads(r.stdout)["message"]["text"] == "Broadcast sent to 1 recipient"


# --- refusals: exact errors, nothing written ------------------------------------------------------


def refused(
    world, head_db: Path, argv: list[str], code: int, message: str, stdin: bytes = b""
) -> None:
    before = snapshot(head_db)
    r = call(*argv, stdin=stdin)
    assert r.returncode == code, (r.returncode, r.stdout, r.stderr)
    assert r.stdout == ""
    if code == 1:
        assert r.stderr == f"Error: {message}\n"
    else:
        assert r.stderr.rstrip("\n").endswith(f"Error: {message}"), r.stderr
    assert snapshot(head_db) == before


def test_inline_body_refusals(world, head_db: Path) -> None:
    a, b = str(world.members["alice"]), str(world.members["bob"])
    base = ["message", "send", "--from-member-id", a, "--to-member-id", b]
    for body in ("", "   ", "\t\n"):
        refused(world, head_db, [*base, body], 2, "text may not be empty")
    refused(world, head_db, [*base, "a\x00b"], 2, "text may not contain NUL characters")
    refused(world, head_db, [*base, "bad \udcff byte"], 2, "text is not valid UTF-8")
    refused(world, head_db, [*base, "x", "--file", "f"], 2, "give either TEXT or --file, not both")
    refused(world, head_db, base, 2, "missing TEXT or --file")
    bc = ["message", "broadcast", "--from-member-id", a]
    refused(world, head_db, [*bc, " "], 2, "text may not be empty")
    refused(world, head_db, bc, 2, "missing TEXT or --file")


def test_file_body_refusals(world, head_db: Path, tmp_path: Path) -> None:
    a, b = str(world.members["alice"]), str(world.members["bob"])
    base = ["message", "send", "--from-member-id", a, "--to-member-id", b, "--file"]
    files = {
        "empty.txt": b"",
        "blank.txt": b" \r\n\t ",
        "latin1.txt": "café".encode("latin-1"),
        "nul.txt": b"a\x00b",
        "big.txt": b"x" * 10_000_000,
    }
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    p = lambda name: str(tmp_path / name)  # noqa: E731
    refused(world, head_db, [*base, p("empty.txt")], 1, f"--file {p('empty.txt')}: file is empty")
    refused(world, head_db, [*base, p("blank.txt")], 1, f"--file {p('blank.txt')}: file is empty")
    refused(
        world,
        head_db,
        [*base, p("latin1.txt")],
        1,
        f"--file {p('latin1.txt')}: file is not valid UTF-8",
    )
    refused(
        world,
        head_db,
        [*base, p("nul.txt")],
        1,
        f"--file {p('nul.txt')}: file contains NUL characters",
    )
    refused(
        world,
        head_db,
        [*base, p("big.txt")],
        1,
        f"--file {p('big.txt')}: file is too long (more than 1048576 bytes)",
    )
    refused(
        world,
        head_db,
        [*base, p("missing.txt")],
        1,
        f"--file {p('missing.txt')}: file does not exist or is not a regular file",
    )
    refused(
        world,
        head_db,
        [*base, str(tmp_path)],
        1,
        f"--file {tmp_path}: file does not exist or is not a regular file",
    )
    refused(world, head_db, [*base, "-"], 1, "--file -: stdin is empty")
    refused(
        world, head_db, [*base, "-"], 1, "--file -: stdin is not valid UTF-8", stdin=b"\xff\xfe"
    )
    bc = ["message", "broadcast", "--from-member-id", a, "--file"]
    refused(
        world,
        head_db,
        [*bc, p("nul.txt")],
        1,
        f"--file {p('nul.txt')}: file contains NUL characters",
    )


def test_file_bodies_are_stored_byte_exact(world, head_db: Path, tmp_path: Path) -> None:
    a, d = str(world.members["alice"]), str(world.director)
    crlf = "\ufeffBOM first\r\nsecond line\r\n\x1b[1mbold\x1b[0m\rCR only\n".encode()
    (tmp_path / "crlf.txt").write_bytes(crlf)
    r = call(
        "message",
        "send",
        "--from-member-id",
        a,
        "--to-member-id",
        d,
        "--file",
        str(tmp_path / "crlf.txt"),
        "--json",
    )
    assert r.returncode == 0, r.stderr
    mid = json.loads(r.stdout)["message"]["message_id"]
    shown = json.loads(call("message", "show", str(mid), "--json").stdout)["message"]["text"]
    assert shown.encode("utf-8") == crlf
    assert message_row(head_db, mid)["text"].encode("utf-8") == crlf

    # exactly the limit is accepted and stored whole; the echo stops at the display limit
    limit = ("é" * 524_288).encode()  # 1,048,576 bytes
    assert len(limit) == 1_048_576
    (tmp_path / "limit.txt").write_bytes(limit)
    r = call(
        "message",
        "send",
        "--from-member-id",
        a,
        "--to-member-id",
        d,
        "--file",
        str(tmp_path / "limit.txt"),
        "--json",
    )
    assert r.returncode == 0, r.stderr
    echoed = json.loads(r.stdout)
    assert echoed["message"]["text"] == "é" * 200 + "…"  # CAFLEET_MAX_TEXT_LEN's default
    assert echoed["text_truncated"] is True
    stored = call("message", "show", str(echoed["message"]["message_id"]), "--json")
    assert json.loads(stored.stdout)["message"]["text"].encode() == limit

    # stdin
    r = call(
        "message",
        "send",
        "--from-member-id",
        a,
        "--to-member-id",
        d,
        "--file",
        "-",
        "--json",
        stdin=b"from\r\nstdin",
    )
    assert json.loads(r.stdout)["message"]["text"] == "from\r\nstdin"


def test_member_refusals(world, head_db: Path) -> None:
    from cafleet import broker

    a, b = world.members["alice"], world.members["bob"]
    other = build_world(head_db, members=("carol", "dave"), fleet_name="other")
    carol = other.members["carol"]
    with connect(head_db) as conn:
        gone = broker.register_member(
            conn,
            fleet_id=world.fleet_id,
            name="gone",
            description="deregistered",
            role="member",
            placement=None,
            require_monitor=False,
        ).member_id
        broker.deregister_member(conn, member_id=gone)

    def s(frm: int, to: int) -> list[str]:
        return ["message", "send", "--from-member-id", str(frm), "--to-member-id", str(to), "hi"]

    refused(world, head_db, s(999, b), 1, "member 999 not found")
    refused(world, head_db, s(gone, b), 1, f"member {gone} is deregistered")
    refused(world, head_db, s(a, 999), 1, "member 999 not found")
    refused(world, head_db, s(a, gone), 1, f"member {gone} is deregistered")
    refused(world, head_db, s(a, carol), 1, f"members {a} and {carol} are not in the same fleet.")
    refused(
        world,
        head_db,
        ["message", "broadcast", "--from-member-id", "999", "hi"],
        1,
        "member 999 not found",
    )
    refused(
        world,
        head_db,
        ["message", "broadcast", "--from-member-id", str(gone), "hi"],
        1,
        f"member {gone} is deregistered",
    )
    # members of a deleted fleet are deregistered: both directions refuse
    with connect(head_db) as conn:
        broker.delete_fleet(
            conn, fleet_id=other.fleet_id, locked_panes=set(), try_lock=lambda _k: True
        )
    refused(
        world,
        head_db,
        s(carol, other.members["dave"]),
        1,
        f"member {carol} is deregistered",
    )
    refused(world, head_db, s(a, carol), 1, f"member {carol} is deregistered")
    # an ACK of an ACKed message and of a summary
    sent = json.loads(call(*s(a, world.director)[:-1], "x", "--json").stdout)["message"][
        "message_id"
    ]
    assert call("message", "ack", str(sent)).returncode == 0
    refused(
        world, head_db, ["message", "ack", str(sent)], 1, "Cannot ACK message in state completed"
    )
    summary = json.loads(
        call("message", "broadcast", "--from-member-id", str(a), "b", "--json").stdout
    )["message"]["message_id"]
    refused(
        world, head_db, ["message", "ack", str(summary)], 1, "Cannot ACK message in state completed"
    )
    refused(world, head_db, ["message", "ack", "99999"], 1, "message 99999 not found")


@pytest.mark.parametrize("bad", ["0", "-1", "9223372036854775808", "abc", "1.5"])
def test_ids_out_of_range_exit_2(world, head_db: Path, bad: str) -> None:
    b = str(world.members["bob"])
    before = snapshot(head_db)
    for argv in (
        ["message", "send", "--from-member-id", bad, "--to-member-id", b, "x"],
        ["message", "send", "--from-member-id", b, "--to-member-id", bad, "x"],
        ["message", "broadcast", "--from-member-id", bad, "x"],
        ["message", "wait", bad, "--timeout", "0"],
        ["message", "stream", bad, "--timeout", "0"],
    ):
        r = call(*argv)
        assert r.returncode == 2, (argv, r.stdout, r.stderr)
        assert r.stdout == ""
    assert snapshot(head_db) == before


def test_role_options_only_where_documented(world) -> None:
    a = str(world.members["alice"])
    assert (
        call("message", "broadcast", "--from-member-id", a, "--to-member-id", a, "x").returncode
        == 2
    )
    assert call("message", "wait", a, "--from-member-id", a).returncode == 2
    assert (
        call(
            "message", "send", "--fleet-id", "1", "--from-member-id", a, "--to-member-id", a, "x"
        ).returncode
        == 2
    )


def test_unknown_backend_and_the_directors_pane(world, head_db: Path) -> None:
    from tests.delivery_helpers import sql_write

    a, b = world.members["alice"], world.members["bob"]
    # a placement whose backend this build does not drive: the attempt fails with its message
    sql_write(head_db, "UPDATE member_placements SET backend = 'herdr' WHERE member_id = ?", b)
    r = send(world, a, b, "elsewhere", "--json")
    mid = json.loads(r.stdout)["message"]["message_id"]
    assert r.returncode == 0
    assert (
        r.stderr
        == warning(mid, b, "placement backend 'herdr' is not supported by this cafleet") + "\n"
    )
    assert message_row(head_db, mid)["notified_at"] is None
    call("message", "ack", str(mid))
    # a member whose pane is the root Director's pane is never a notification target
    sql_write(
        head_db,
        "UPDATE member_placements SET backend = 'tmux', mux_pane_id = ? WHERE member_id = ?",
        world.director_pane,
        b,
    )
    r = send(world, a, b, "shared pane", "--json")
    assert r.returncode == 0 and r.stderr == ""
    data = json.loads(r.stdout)
    assert data["notification_sent"] is False
    assert message_row(head_db, data["message"]["message_id"])["notified_at"] is None


# --- --key: an agent's own retries store one message (docs/cli.md §2.14) ------------------------


def _count(head_db: Path) -> int:
    return int(rows(head_db, "SELECT count(*) FROM messages")[0][0])


def test_send_with_the_same_key_stores_one_message(world, head_db: Path) -> None:
    """Same sender, same key: the first message's id, nothing new; the same key from another
    sender is that sender's own; another text or recipient with a used key is refused and
    leaves the database unchanged."""
    a, b, d = world.members["alice"], world.members["bob"], world.director
    first = send(world, a, b, "do the thing", "--key", "task-7 try", "--json")
    assert first.returncode == 0, first.stderr
    data = json.loads(first.stdout)
    mid = data["message"]["message_id"]
    assert data["already_sent"] is False
    count = _count(head_db)
    again = send(world, a, b, "do the thing", "--key", "task-7 try", "--json")
    assert again.returncode == 0, again.stderr
    replay = json.loads(again.stdout)
    assert replay["message"]["message_id"] == mid and replay["already_sent"] is True
    assert replay["message"] == data["message"]
    text = send(world, a, b, "do the thing", "--key", "task-7 try")
    assert text.stdout.startswith("Message already sent with key task-7 try.\n")
    assert f"[{mid} | from:" in text.stdout
    assert _count(head_db) == count
    assert rows(head_db, "SELECT client_token FROM messages WHERE message_id = ?", mid) == [
        ("task-7 try",)
    ]
    # another sender's same key is its own message
    other = json.loads(send(world, d, b, "do the thing", "--key", "task-7 try", "--json").stdout)
    assert other["message"]["message_id"] != mid and other["already_sent"] is False
    # a used key with another text, or another recipient: refused, nothing written
    conflict = (
        f"key 'task-7 try' already stored message {mid}, with another recipient or text; "
        "nothing was stored (use a new key for a new message)"
    )
    base = ["message", "send", "--from-member-id", str(a), "--key", "task-7 try"]
    refused(world, head_db, [*base, "--to-member-id", str(b), "something else"], 1, conflict)
    refused(world, head_db, [*base, "--to-member-id", str(d), "do the thing"], 1, conflict)
    before = snapshot(head_db)
    r = call(*base, "--to-member-id", str(b), "changed", "--json")
    assert r.returncode == 1 and json.loads(r.stderr)["error"]["code"] == "conflict"
    assert snapshot(head_db) == before


def test_every_send_stores_a_token_of_its_own(world, head_db: Path) -> None:
    a, b = world.members["alice"], world.members["bob"]
    ids = [
        json.loads(send(world, a, b, "same", "--json").stdout)["message"]["message_id"]
        for _ in range(2)
    ]
    tokens = rows(
        head_db,
        "SELECT client_token FROM messages WHERE message_id IN (?, ?) ORDER BY message_id",
        *ids,
    )
    assert len({t[0] for t in tokens}) == 2 and all(len(t[0]) == 20 for t in tokens)


def test_broadcast_with_the_same_key_stores_one_broadcast(world, head_db: Path) -> None:
    a = world.members["alice"]
    base = ["message", "broadcast", "--from-member-id", str(a), "--key", "b1"]
    first = json.loads(call(*base, "all hands", "--json").stdout)
    count = _count(head_db)
    again = call(*base, "all hands", "--json")
    assert again.returncode == 0, again.stderr
    replay = json.loads(again.stdout)
    assert replay["message"] == first["message"] and replay["already_sent"] is True
    assert replay["recipients"] == first["recipients"] == 3
    text = call(*base, "all hands")
    sid = first["message"]["message_id"]
    assert text.stdout == (
        f"broadcast id={sid} recipients=3 notified=0 (already sent with key b1)\n"
    )
    conflict = (
        f"key 'b1' already stored message {sid}, with another recipient or text; "
        "nothing was stored (use a new key for a new message)"
    )
    refused(world, head_db, [*base, "other text"], 1, conflict)
    assert _count(head_db) == count


@pytest.mark.parametrize(
    ("key", "problem"),
    [
        ("", "a key must not be empty"),
        ("a\x1bb", "a key must not contain control characters"),
        ("k" * 201, "a key has at most 200 characters"),
    ],
)
def test_bad_keys_exit_2(world, head_db: Path, key: str, problem: str) -> None:
    a, b = str(world.members["alice"]), str(world.members["bob"])
    send_argv = ["message", "send", "--from-member-id", a, "--to-member-id", b, "x"]
    refused(world, head_db, [*send_argv, "--key", key], 2, f"Invalid value for '--key': {problem}")
    bc = ["message", "broadcast", "--from-member-id", a, "x", "--key", key]
    refused(world, head_db, bc, 2, f"Invalid value for '--key': {problem}")
