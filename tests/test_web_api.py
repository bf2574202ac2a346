"""The WebUI API in process (docs/runtime.md §7.3, seed 002): routes, X-Fleet-Id, errors as
`{"detail": …}`, the roster and timeline rules, send, monitor controls and bad input. Real files,
the real guard, no tmux (placements name panes that exist nowhere)."""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import pytest

from tests.broker_helpers import raw_connect
from tests.cli_helpers import snapshot
from tests.delivery_helpers import rows, sql_write
from tests.factories import World, build_world, connect
from tests.web_helpers import client, fleet_headers, insert_messages, make_app, unchanged

TS = "2026-01-01T00:00:%02d.000000+00:00"


@pytest.fixture
def world(head_db: Path) -> World:
    return build_world(head_db, members=("alice", "bob", "carol"))


@pytest.fixture
def api(head_db: Path, world: World) -> Any:
    with client(make_app(head_db)) as c:
        yield c


def get(api: Any, world: World, path: str, **kw: Any) -> Any:
    return api.get(path, headers=fleet_headers(world.fleet_id), **kw)


def post(api: Any, world: World, path: str, body: Any, **kw: Any) -> Any:
    return api.post(path, headers=fleet_headers(world.fleet_id), json=body, **kw)


def detail(response: Any) -> str:
    assert response.headers["content-type"].startswith("application/json"), response.text
    body = response.json()
    assert list(body) == ["detail"] and isinstance(body["detail"], str), body
    return body["detail"]


# --- fleets and X-Fleet-Id ------------------------------------------------------------------------


def test_fleets_lists_live_fleets_with_member_count(head_db: Path, world: World, api: Any) -> None:
    other = build_world(head_db, members=("x",), fleet_name="gone")
    sql_write(
        head_db, "UPDATE fleets SET deleted_at = ? WHERE fleet_id = ?", TS % 9, other.fleet_id
    )
    body = api.get("/api/fleets").json()
    assert [(f["fleet_id"], f["name"], f["member_count"]) for f in body] == [
        (world.fleet_id, "demo", 5)
    ]
    assert body[0]["director_member_id"] == world.director
    assert body[0]["monitor_member_id"] == world.monitor


@pytest.mark.parametrize(
    ("value", "status", "text"),
    [
        (None, 400, "X-Fleet-Id header required"),
        ("abc", 400, "X-Fleet-Id must be an integer"),
        ("1.5", 400, "X-Fleet-Id must be an integer"),
        ("-1", 400, "X-Fleet-Id must be an integer"),
        ("999", 404, "Fleet not found"),
        ("0", 404, "Fleet not found"),
        ("99999999999999999999", 404, "Fleet not found"),
    ],
)
@pytest.mark.parametrize(
    "method_path",
    [
        ("GET", "/api/members"),
        ("GET", "/api/members/activity"),
        ("GET", "/api/members/panes"),
        ("GET", "/api/members/worktrees"),
        ("GET", "/api/members/1/inbox"),
        ("GET", "/api/members/1/sent"),
        ("GET", "/api/members/1/capture"),
        ("GET", "/api/timeline"),
        ("GET", "/api/monitor"),
        ("PATCH", "/api/monitor"),
        ("POST", "/api/monitor/wake"),
        ("POST", "/api/messages/send"),
    ],
)
def test_every_fleet_route_checks_x_fleet_id(
    api: Any, world: World, method_path: tuple[str, str], value: str | None, status: int, text: str
) -> None:
    method, path = method_path
    headers = {} if value is None else {"X-Fleet-Id": value}
    body = (
        {"to_member_id": 3, "text": "hi"} if path.endswith("send") else {"wake_interval_seconds": 5}
    )
    response = api.request(method, path, headers=headers, json=body if method != "GET" else None)
    assert (response.status_code, detail(response)) == (status, text)


def test_deleted_fleet_is_not_found(head_db: Path, world: World, api: Any) -> None:
    sql_write(
        head_db, "UPDATE fleets SET deleted_at = ? WHERE fleet_id = ?", TS % 9, world.fleet_id
    )
    response = get(api, world, "/api/members")
    assert (response.status_code, detail(response)) == (404, "Fleet not found")


def test_unmatched_api_paths_get_json_errors(api: Any, world: World) -> None:
    response = api.get("/api/nothing/here")
    assert (response.status_code, detail(response)) == (404, "Not Found")
    response = api.delete("/api/timeline", headers=fleet_headers(world.fleet_id))
    assert (response.status_code, detail(response)) == (405, "Method Not Allowed")


# --- roster -------------------------------------------------------------------------------------


def test_roster_is_active_members_plus_deregistered_message_owners(
    head_db: Path, world: World, api: Any
) -> None:
    from cafleet import broker

    alice, bob, carol = (world.members[n] for n in ("alice", "bob", "carol"))
    with connect(head_db) as conn:
        broker.send_message(conn, from_member_id=world.director, to_member_id=bob, text="for bob")
        broker.send_message(conn, from_member_id=carol, to_member_id=alice, text="carol sent")
        broker.deregister_member(conn, member_id=bob)  # owns a message: listed
        broker.deregister_member(conn, member_id=carol)  # only sent one: not listed
    body = get(api, world, "/api/members").json()
    assert [m["member_id"] for m in body] == [world.director, world.monitor, alice, bob]
    by_id = {m["member_id"]: m for m in body}
    assert by_id[bob]["status"] == "deregistered" and by_id[bob]["placement"] is None
    assert by_id[world.director]["kind"] == "director"
    assert by_id[world.monitor]["kind"] == "monitor"
    assert by_id[alice]["kind"] == "member"
    assert by_id[alice]["placement"]["mux_pane_id"] == world.panes[alice]
    # no activity columns in the lean roster (seed 002)
    assert set(by_id[alice]) == {
        "member_id", "name", "description", "kind", "status", "registered_at",
        "deregistered_at", "placement", "permissions",
    }  # fmt: skip
    assert by_id[alice]["permissions"] == "readonly"  # registered without a spawn record
    assert by_id[world.director]["permissions"] is None


def test_activity_gives_idle_and_unacked(head_db: Path, world: World, api: Any) -> None:
    from cafleet import broker

    alice = world.members["alice"]
    with connect(head_db) as conn:
        for i in range(3):
            broker.send_message(
                conn, from_member_id=world.director, to_member_id=alice, text=f"m{i}"
            )
        first = broker.poll_inbox(conn, alice)[-1]
        broker.ack_message(conn, message_id=first.message_id)
    body = {a["member_id"]: a for a in get(api, world, "/api/members/activity").json()}
    assert body[alice]["unacked"] == 2
    assert body[world.members["bob"]] == {
        "member_id": world.members["bob"],
        "idle": None,
        "unacked": 0,
        "last_received_at": None,
    }
    assert isinstance(body[alice]["idle"], int) and body[alice]["idle"] >= 0


def test_receipts_show_in_activity_and_message_lists(head_db: Path, world: World, api: Any) -> None:
    """A hook's receipt (docs/cli.md §2.38): the roster's `last_received_at` and each listed
    message's `received_at`."""
    from cafleet import broker

    alice = world.members["alice"]
    with connect(head_db) as conn:
        seen = broker.send_message(
            conn, from_member_id=world.director, to_member_id=alice, text="a"
        )
        unseen = broker.send_message(
            conn, from_member_id=world.director, to_member_id=alice, text="b"
        )
        done = broker.record_hook(
            conn, alice, state="working", event="prompt", text="", message_ids=[seen.message_id]
        )
    assert done.received == (seen.message_id,)
    body = {a["member_id"]: a for a in get(api, world, "/api/members/activity").json()}
    assert body[alice]["last_received_at"] == done.at
    assert body[world.members["bob"]]["last_received_at"] is None
    inbox = {m["message_id"]: m for m in get(api, world, f"/api/members/{alice}/inbox").json()}
    assert inbox[seen.message_id]["received_at"] == done.at
    assert inbox[unseen.message_id]["received_at"] is None
    sent = get(api, world, f"/api/members/{world.director}/sent").json()
    assert {m["message_id"]: m["received_at"] for m in sent}[seen.message_id] == done.at


def test_pane_states_without_tmux_are_unknown_with_the_reason(api: Any, world: World) -> None:
    body = get(api, world, "/api/members/panes").json()
    assert body["error"] == "not inside a tmux session (TMUX is not set)"
    assert {p["state"] for p in body["panes"]} == {"unknown"}


def test_pane_states_none_and_pending_need_no_tmux(head_db: Path) -> None:
    world = build_world(head_db, members=("p", "u"), pending=("p",), unplaced=("u",))
    with client(make_app(head_db)) as api:
        body = get(api, world, "/api/members/panes").json()
    states = {p["member_id"]: p["state"] for p in body["panes"]}
    assert states[world.members["p"]] == "pending"
    assert states[world.members["u"]] == "none"


def test_usage_reads_each_members_agent_records(head_db: Path, world: World, api: Any) -> None:
    """docs/runtime.md §9.5: tokens from the agent's own record, a cost from the price table;
    `unknown` (null counts, with the reason) without a known session or with its record gone.
    Read-only: the WebUI never learns an id."""
    import json

    alice, bob = world.members["alice"], world.members["bob"]
    sql_write(
        head_db,
        "INSERT INTO member_spawns (member_id, prompt, agent_session_id) VALUES (?, 'p', ?), "
        "(?, 'p', 'gone-session')",
        alice, "aaaa-web", bob,
    )  # fmt: skip
    folder = Path(os.environ["HOME"], ".claude", "projects", "-w")
    folder.mkdir(parents=True)
    reply = {"id": "m1", "model": "claude-haiku-4-5", "usage": {
        "input_tokens": 100, "output_tokens": 50, "cache_read_input_tokens": 1000,
        "cache_creation_input_tokens": 10}}  # fmt: skip
    (folder / "aaaa-web.jsonl").write_text(
        json.dumps({"type": "user", "cwd": "/w", "message": {"content": "p"}})
        + "\n"
        + json.dumps({"type": "assistant", "message": reply})
        + "\n",
        encoding="utf-8",
    )
    body = {u["member_id"]: u for u in get(api, world, "/api/members/usage").json()}
    assert body[alice] == {
        "member_id": alice, "input": 100, "output": 50, "cache_read": 1000, "cache_write": 10,
        "cost_usd": pytest.approx((100 * 1 + 50 * 5 + 1000 * 0.1 + 10 * 1.25) / 1e6),
        "unknown_reason": None,
    }  # fmt: skip
    assert body[bob]["input"] is None and body[bob]["cost_usd"] is None
    assert body[bob]["unknown_reason"] == "session gone-session has no record"
    carol = body[world.members["carol"]]
    assert carol["input"] is None and carol["unknown_reason"] == "no session known yet"


def test_worktrees_of_the_members_that_have_one(
    head_db: Path, world: World, api: Any, tmp_path: Path
) -> None:
    """docs/worktrees.md §2: the branch, and whether the worktree has changes or commits not on
    its base, read from a real git repository."""
    import subprocess

    repo = tmp_path / "repo"
    repo.mkdir()

    def git(*args: str, cwd: Path = repo) -> None:
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
            cwd=cwd, check=True, capture_output=True,
        )  # fmt: skip

    git("init", "-q", "-b", "main")
    (repo / "a.txt").write_text("a\n")
    git("add", "a.txt")
    git("commit", "-qm", "first")
    path = repo / ".cafleet" / "worktrees" / "alice"
    git("worktree", "add", "-q", "-b", "cafleet/alice", str(path), "main")
    (path / "a.txt").write_text("changed\n")
    git("commit", "-qam", "work", cwd=path)
    (path / "new.txt").write_text("untracked\n")
    alice, bob = world.members["alice"], world.members["bob"]
    spec = f'{{"path": "{path}", "branch": "cafleet/alice", "base": "main"}}'
    sql_write(
        head_db, "INSERT INTO member_spawns (member_id, worktree_json) VALUES (?, ?)", alice, spec
    )
    sql_write(head_db, "INSERT INTO member_spawns (member_id) VALUES (?)", bob)
    body = get(api, world, "/api/members/worktrees").json()
    assert body == [
        {
            "member_id": alice, "path": str(path), "branch": "cafleet/alice", "base": "main",
            "exists": True, "head_branch": "cafleet/alice", "dirty": True, "ahead": 1,
            "error": None,
        }
    ]  # fmt: skip


# --- timeline -------------------------------------------------------------------------------------


def test_timeline_groups_broadcasts_and_orders_entries_by_creation(
    head_db: Path, world: World, api: Any
) -> None:
    from cafleet import broker

    alice, bob = world.members["alice"], world.members["bob"]
    with connect(head_db) as conn:
        first = broker.send_message(conn, from_member_id=alice, to_member_id=bob, text="one")
        cast = broker.broadcast_message(conn, from_member_id=world.director, text="all")
        last = broker.send_message(conn, from_member_id=bob, to_member_id=alice, text="two")
        # ACKing the first unicast last moves it to the top of the SQL order, not of the page's
        broker.ack_message(conn, message_id=cast.deliveries[0].message_id)
        broker.ack_message(conn, message_id=first.message_id)
    body = get(api, world, "/api/timeline").json()
    assert (body["limit"], body["rows"], body["limit_reached"]) == (200, 2 + 4, False)
    kinds = [(e["kind"], e["text"]) for e in body["entries"]]
    assert kinds == [("unicast", "one"), ("broadcast", "all"), ("unicast", "two")]
    group = body["entries"][1]
    assert group["origin_message_id"] == cast.summary.message_id
    assert (group["recipients"], group["acked"]) == (4, 1)
    acked = [d for d in group["deliveries"] if d["ack_at"] is not None]
    assert [d["to_member_id"] for d in acked] == [cast.deliveries[0].owner_member_id]
    stored = rows(head_db, "SELECT status_timestamp FROM messages WHERE message_id = ?",
                  cast.deliveries[0].message_id)[0][0]  # fmt: skip
    assert acked[0]["ack_at"] == stored
    assert [d["to_member_id"] for d in group["deliveries"]] == sorted(
        d.owner_member_id for d in cast.deliveries
    )
    assert body["entries"][2]["deliveries"][0]["message_id"] == last.message_id
    # the summary row takes no place: 6 unicast rows, no broadcast_summary
    assert all(
        d["message_id"] != cast.summary.message_id for e in body["entries"] for d in e["deliveries"]
    )


def test_timeline_cap_is_200_deliveries_and_a_cut_broadcast_counts_returned_rows(
    head_db: Path, world: World, api: Any
) -> None:
    alice, bob, carol = (world.members[n] for n in ("alice", "bob", "carol"))
    # an old broadcast to three members whose newest delivery survives the cap
    old = [
        (alice, world.director, alice, "broadcast_summary", TS % 0, "completed", TS % 0, None, "s"),
        (alice, world.director, alice, "unicast", TS % 1, "completed", TS % 1, None, "cast"),
        (bob, world.director, bob, "unicast", TS % 1, "input_required", TS % 1, None, "cast"),
        (carol, world.director, carol, "unicast", TS % 1, "completed", TS % 59, None, "cast"),
    ]
    insert_messages(head_db, old)
    sql_write(head_db, "UPDATE messages SET origin_message_id = 1 WHERE message_id IN (1,2,3,4)")
    newer = [
        (bob, alice, bob, "unicast", TS % 30, "input_required", TS % 30, None, f"n{i}")
        for i in range(199)
    ]
    insert_messages(head_db, newer)
    body = get(api, world, "/api/timeline").json()
    assert (body["rows"], body["limit_reached"]) == (200, True)
    casts = [e for e in body["entries"] if e["kind"] == "broadcast"]
    assert len(casts) == 1
    assert (casts[0]["recipients"], casts[0]["acked"]) == (1, 1)
    assert casts[0]["deliveries"][0]["to_member_id"] == carol
    assert casts[0]["deliveries"][0]["ack_at"] == TS % 59
    assert casts[0] is body["entries"][0] or casts[0] == body["entries"][0]  # oldest first


def _plain_timeline(db: Path, fleet_id: int) -> list[int]:
    return [
        r[0]
        for r in rows(
            db,
            "SELECT x.message_id FROM messages AS x JOIN members AS m ON m.member_id = "
            "x.owner_member_id WHERE m.fleet_id = ? AND x.type = 'unicast' "
            "ORDER BY x.status_timestamp DESC, x.message_id DESC LIMIT 200",
            fleet_id,
        )
    ]


@pytest.mark.parametrize("members", [3, 300])
def test_timeline_rows_equal_the_plain_join(head_db: Path, members: int) -> None:
    """The per-owner compound query returns exactly the rows of docs/storage.md §8's plain SQL, in
    that order, ties on status_timestamp included; 300 members take two batches."""
    from cafleet.broker.views import timeline
    from cafleet.web.app import TIMELINE_LIMIT

    names = tuple(f"m{i}" for i in range(members))
    world = build_world(head_db, members=names, unplaced=names)
    other = build_world(head_db, members=("z",), fleet_name="other")
    ids = [world.director, world.monitor, *world.members.values()]
    rng = random.Random(members)
    data = []
    for i in range(1500):
        owner = rng.choice([*ids, other.members["z"]])
        ts = TS % rng.randrange(0, 20)
        state = rng.choice(["input_required", "completed"])
        kind = "broadcast_summary" if i % 17 == 0 else "unicast"
        data.append((owner, world.director, owner, kind, ts, state, ts, None, f"t{i}"))
    insert_messages(head_db, data)
    with connect(head_db) as conn:
        got = [m.message_id for m in timeline(conn, fleet_id=world.fleet_id, limit=TIMELINE_LIMIT)]
    assert got == _plain_timeline(head_db, world.fleet_id)
    assert len(got) == 200


def test_timeline_names_every_sender_even_deregistered_non_owners(
    head_db: Path, world: World, api: Any
) -> None:
    from cafleet import broker

    carol, alice = world.members["carol"], world.members["alice"]
    with connect(head_db) as conn:
        broker.send_message(conn, from_member_id=carol, to_member_id=alice, text="bye")
        broker.deregister_member(conn, member_id=carol)
    body = get(api, world, "/api/timeline").json()
    assert {"member_id": carol, "name": "carol"} in body["names"]


# --- inbox and sent ---------------------------------------------------------------------------------


def test_inbox_and_sent_newest_first_with_limits(head_db: Path, world: World, api: Any) -> None:
    from cafleet import broker

    alice, bob = world.members["alice"], world.members["bob"]
    with connect(head_db) as conn:
        sent = [
            broker.send_message(
                conn, from_member_id=alice, to_member_id=bob, text=f"m{i}"
            ).message_id
            for i in range(5)
        ]
        cast = broker.broadcast_message(conn, from_member_id=alice, text="all")
    inbox = get(api, world, f"/api/members/{bob}/inbox", params={"limit": 3}).json()
    assert [m["message_id"] for m in inbox] == [
        next(d.message_id for d in cast.deliveries if d.owner_member_id == bob),
        sent[4],
        sent[3],
    ]
    out = get(api, world, f"/api/members/{alice}/sent").json()
    assert out[0]["type"] == "broadcast_summary" or out[-1]["type"] == "unicast"
    assert len(out) == 5 + 1 + len(cast.deliveries)
    for bad in ("0", "1001", "x"):
        response = get(api, world, f"/api/members/{bob}/inbox", params={"limit": bad})
        assert response.status_code == 422 and "limit" in detail(response)


def test_member_routes_refuse_unknown_and_foreign_members(
    head_db: Path, world: World, api: Any
) -> None:
    other = build_world(head_db, members=("x",), fleet_name="other")
    foreign = other.members["x"]
    for path in ("inbox", "sent", "capture"):
        for member in (foreign, 999):
            response = get(api, world, f"/api/members/{member}/{path}")
            assert (response.status_code, detail(response)) == (404, f"member {member} not found")
        response = get(api, world, f"/api/members/0/{path}")
        assert response.status_code == 422


def test_capture_refusals_use_the_cli_texts(head_db: Path) -> None:
    world = build_world(head_db, members=("p", "u"), pending=("p",), unplaced=("u",))
    with client(make_app(head_db)) as api:
        pending = get(api, world, f"/api/members/{world.members['p']}/capture")
        unplaced = get(api, world, f"/api/members/{world.members['u']}/capture")
        no_tmux = get(api, world, f"/api/members/{world.monitor}/capture")
    p = world.members["p"]  # pending, no `member create` holding its lock: one interrupted
    assert (pending.status_code, detail(pending)) == (
        409,
        f"member {p} (p) has no pane: the 'cafleet member create' that registered it was "
        f"interrupted; run 'cafleet member respawn {p}' (or remove it: 'cafleet member delete "
        f"{p}')",
    )
    assert detail(unplaced) == (
        f"member {world.members['u']} has no placement row; it was not spawned via "
        "'cafleet member create'"
    )
    assert (no_tmux.status_code, detail(no_tmux)) == (
        409,
        "not inside a tmux session (TMUX is not set)",
    )


# --- send -------------------------------------------------------------------------------------------


def test_send_stores_as_the_root_director_and_reports_warnings(
    head_db: Path, world: World, api: Any
) -> None:
    alice = world.members["alice"]
    response = post(api, world, "/api/messages/send", {"to_member_id": alice, "text": "hello"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["kind"] == "unicast" and (body["recipients"], body["notified"]) == (1, 0)
    assert body["message"]["from_member_id"] == world.director
    assert body["message"]["to_member_id"] == alice and body["message"]["text"] == "hello"
    # no tmux here: the drain's warning, worded as `message send` prints it
    assert body["warnings"] == [
        f"Warning: message {body['message']['message_id']} not notified to member {alice}: "
        "not inside a tmux session (TMUX is not set) (it stays in the inbox; delivery will be "
        "retried)"
    ]
    stored = rows(
        head_db, "SELECT from_member_id, owner_member_id, text, notified_at FROM messages"
    )
    assert stored == [(world.director, alice, "hello", None)]


def test_a_second_send_warns_about_its_own_message_and_lists_the_older_one(
    head_db: Path, world: World, api: Any
) -> None:
    """docs/cli.md §1.11 (own outcome): the composer's second send to a pane it cannot reach speaks of its own
    message, and separately of the first one that still waits."""
    alice = world.members["alice"]
    first = post(api, world, "/api/messages/send", {"to_member_id": alice, "text": "one"}).json()
    second = post(api, world, "/api/messages/send", {"to_member_id": alice, "text": "two"}).json()
    one, two = first["message"]["message_id"], second["message"]["message_id"]
    assert second["warnings"] == [
        f"Warning: message {two} not notified to member {alice}: not inside a tmux session "
        "(TMUX is not set) (it stays in the inbox; delivery will be retried)",
        f"Also pending for member {alice}: message {one} (not notified yet)",
    ]


def test_send_to_all_broadcasts(head_db: Path, world: World, api: Any) -> None:
    body = post(api, world, "/api/messages/send", {"to_member_id": "*", "text": "all"}).json()
    assert body["kind"] == "broadcast"
    assert body["message"]["type"] == "broadcast_summary"
    assert body["message"]["text"] == "Broadcast sent to 4 recipients"
    assert (body["recipients"], body["notified"]) == (4, 0)
    assert len(body["warnings"]) == 4
    owners = rows(head_db, "SELECT owner_member_id FROM messages WHERE type = 'unicast' ORDER BY 1")
    assert [r[0] for r in owners] == sorted([world.monitor, *world.members.values()])


def test_send_to_the_director_itself_is_a_self_send(head_db: Path, world: World, api: Any) -> None:
    body = post(
        api, world, "/api/messages/send", {"to_member_id": world.director, "text": "note"}
    ).json()
    assert body["warnings"] == []
    assert rows(head_db, "SELECT notified_at IS NOT NULL FROM messages") == [(1,)]


BIG = "x" * (1_048_576 + 1)


@pytest.mark.parametrize(
    ("payload", "status", "text"),
    [
        ({"to_member_id": 999, "text": "x"}, 404, "member 999 not found"),
        ({"to_member_id": "3", "text": "x"}, 422, None),
        ({"to_member_id": True, "text": "x"}, 422, None),
        ({"to_member_id": 0, "text": "x"}, 422, None),
        ({"to_member_id": "all", "text": "x"}, 422, None),
        ({"to_member_id": 3}, 422, None),
        ({"to_member_id": 3, "text": "x", "extra": 1}, 422, None),
        ({"to_member_id": 3, "text": "   "}, 422, "text may not be empty"),
        ({"to_member_id": 3, "text": "a\x00b"}, 422, "text may not contain NUL characters"),
        (
            {"to_member_id": 3, "text": BIG},
            422,
            "text is too long (1048577 bytes; the limit is 1048576)",
        ),
        ([1, 2], 422, None),
    ],
)
def test_send_refusals_leave_the_database_unchanged(
    head_db: Path, world: World, api: Any, payload: Any, status: int, text: str | None
) -> None:
    api.app.close()
    before = snapshot(head_db)
    response = post(api, world, "/api/messages/send", payload)
    assert response.status_code == status, response.text
    message = detail(response)
    if text is not None:
        assert message == text
    unchanged(api, before, head_db)


def test_send_to_a_member_of_another_fleet_is_not_found(
    head_db: Path, world: World, api: Any
) -> None:
    other = build_world(head_db, members=("x",), fleet_name="other")
    api.app.close()
    before = snapshot(head_db)
    response = post(
        api, world, "/api/messages/send", {"to_member_id": other.members["x"], "text": "x"}
    )
    assert (response.status_code, detail(response)) == (
        404,
        f"member {other.members['x']} not found",
    )
    unchanged(api, before, head_db)


def test_send_to_a_deregistered_member_uses_the_broker_text(
    head_db: Path, world: World, api: Any
) -> None:
    from cafleet import broker

    bob = world.members["bob"]
    with connect(head_db) as conn:
        broker.deregister_member(conn, member_id=bob)
    response = post(api, world, "/api/messages/send", {"to_member_id": bob, "text": "x"})
    assert (response.status_code, detail(response)) == (404, f"member {bob} is deregistered")


def test_invalid_json_and_oversized_requests(head_db: Path, world: World, api: Any) -> None:
    api.app.close()
    before = snapshot(head_db)
    headers = {**fleet_headers(world.fleet_id), "Content-Type": "application/json"}
    response = api.post("/api/messages/send", headers=headers, content=b'{"to_member_id": 3,')
    assert (response.status_code, detail(response)) == (400, "request body is not valid JSON")
    huge = b'{"to_member_id": 3, "text": "' + b"y" * (8 * 1_048_576) + b'"}'
    response = api.post("/api/messages/send", headers=headers, content=huge)
    assert (response.status_code, detail(response)) == (
        413,
        "request body too large (limit 8388608 bytes)",
    )
    unchanged(api, before, head_db)


# --- monitor ------------------------------------------------------------------------------------------


def _runtime(db: Path, fleet_id: int, **values: Any) -> None:
    columns = ", ".join(["fleet_id", *values])
    marks = ", ".join("?" * (len(values) + 1))
    sql_write(
        db, f"INSERT INTO monitor_runtime ({columns}) VALUES ({marks})", fleet_id, *values.values()
    )


def test_monitor_without_a_row(head_db: Path, world: World, api: Any) -> None:
    body = get(api, world, "/api/monitor").json()
    assert body["live"] is False and body["runtime"] is None
    assert [e["member_id"] for e in body["wake_roster"]["members"]] == sorted(
        world.members.values()
    )
    assert body["wake_roster"]["director"]["member_id"] == world.director
    api.app.close()
    before = snapshot(head_db)
    response = api.patch(
        "/api/monitor", headers=fleet_headers(world.fleet_id), json={"wake_interval_seconds": 5}
    )
    assert (response.status_code, detail(response)) == (
        404,
        f"fleet {world.fleet_id} has no monitor runtime row; no monitor loop ever ran",
    )
    response = post(api, world, "/api/monitor/wake", None)
    assert (response.status_code, detail(response)) == (
        404,
        f"monitor loop for fleet {world.fleet_id} is not running",
    )
    unchanged(api, before, head_db)


@pytest.mark.parametrize("interval", [None, 0, 120])
def test_stopped_loop_hides_process_fields_and_keeps_intervals(
    head_db: Path, world: World, api: Any, interval: int | None
) -> None:
    # a stale row: its heartbeat is years old and its pid belongs to nobody alive
    _runtime(head_db, world.fleet_id, pid=2**22 + 7, started_at=TS % 1, last_tick_at=TS % 2,
             tick_seconds=7, last_wake_at=TS % 3, wake_interval_seconds=interval,
             wake_requested_at=TS % 4)  # fmt: skip
    body = get(api, world, "/api/monitor").json()
    assert body["live"] is False
    assert body["runtime"] == {
        "fleet_id": world.fleet_id,
        "pid": None,
        "started_at": None,
        "last_tick_at": None,
        "tick_seconds": 7,
        "last_wake_at": TS % 3,
        "wake_interval_seconds": interval,  # a legacy NULL stays null, never 0
        "wake_requested_at": TS % 4,
    }
    api.app.close()
    before = snapshot(head_db)
    response = post(api, world, "/api/monitor/wake", None)
    assert response.status_code == 404
    unchanged(api, before, head_db)


def test_live_loop_shows_process_fields_takes_interval_and_wake(
    head_db: Path, world: World, api: Any
) -> None:
    from cafleet.db.timefmt import now_ts

    stamp = now_ts()
    _runtime(head_db, world.fleet_id, pid=os.getpid(), started_at=stamp, last_tick_at=stamp,
             wake_interval_seconds=600)  # fmt: skip
    body = get(api, world, "/api/monitor").json()
    assert body["live"] is True
    assert (body["runtime"]["pid"], body["runtime"]["last_tick_at"]) == (os.getpid(), stamp)
    response = api.patch(
        "/api/monitor", headers=fleet_headers(world.fleet_id), json={"wake_interval_seconds": 0}
    )
    assert response.status_code == 200 and response.json()["runtime"]["wake_interval_seconds"] == 0
    assert rows(head_db, "SELECT wake_interval_seconds FROM monitor_runtime") == [(0,)]
    for bad in (-1, "5", 1.5, None):
        response = api.patch(
            "/api/monitor",
            headers=fleet_headers(world.fleet_id),
            json={"wake_interval_seconds": bad},
        )
        assert response.status_code == 422, bad
        detail(response)
    first = post(api, world, "/api/monitor/wake", None).json()["wake_requested_at"]
    again = post(api, world, "/api/monitor/wake", None).json()["wake_requested_at"]
    assert first == again  # a pending request is kept (COALESCE)
    assert rows(head_db, "SELECT wake_requested_at FROM monitor_runtime") == [(first,)]


# --- the guard ----------------------------------------------------------------------------------------


def test_a_schema_change_after_start_up_is_refused_with_the_guard_text(
    head_db: Path, world: World, api: Any
) -> None:
    assert get(api, world, "/api/members").status_code == 200
    conn = raw_connect(head_db)  # either dialect (PostgreSQL: the schema fingerprint changes)
    conn.execute("DROP INDEX idx_messages_from_created")
    conn.close()
    response = get(api, world, "/api/members")
    assert response.status_code == 503
    assert detail(response).startswith(f"{head_db} is ")
    assert api.get("/api/fleets").status_code == 503


@pytest.mark.sqlite_only  # removes the file
def test_a_database_removed_after_start_up_is_refused_as_missing(
    head_db: Path, world: World, api: Any
) -> None:
    for name in os.listdir(head_db.parent):
        if name.startswith(head_db.name):
            os.remove(head_db.parent / name)
    response = api.get("/api/fleets")
    assert (response.status_code, detail(response)) == (
        503,
        "no cafleet database; run 'cafleet setup'",
    )
    assert not head_db.exists()
