"""Notification channels (docs/cli.md §2.35, docs/cli.md §2.35): the outbox, real HTTP
receivers on 127.0.0.1 (a good one and bad ones), the sender thread that never holds the tick,
redaction, and the `notify` commands."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from cafleet import broker
from cafleet.db.timefmt import utcnow
from cafleet.monitor import notify
from tests.cli_helpers import run_cli
from tests.factories import build_world


class Receiver:
    """A real HTTP server on 127.0.0.1 whose answer is ``mode``: `ok`, `500`, `huge` (10 MB
    body), `loop` (redirects to itself), `hold` (waits for ``release`` before answering)."""

    def __init__(self, mode: str = "ok") -> None:
        self.mode = mode
        self.bodies: list[dict[str, Any]] = []
        self.raw: list[tuple[dict[str, str], bytes]] = []
        self.hits = 0
        self.entered = threading.Event()
        self.release = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_args: Any) -> None:
                pass

            def do_POST(self) -> None:
                outer.hits += 1
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                outer.raw.append((dict(self.headers), body))
                if outer.mode == "hold":
                    outer.entered.set()
                    outer.release.wait(30)
                if outer.mode == "500":
                    self.send_response(500)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if outer.mode == "loop":
                    self.send_response(307)
                    self.send_header("Location", "/again")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                with contextlib.suppress(ValueError):
                    outer.bodies.append(json.loads(body))
                self.send_response(200)
                if outer.mode == "huge":
                    self.send_header("Content-Length", str(10 * 1024 * 1024))
                    self.end_headers()
                    with contextlib.suppress(OSError):  # the sender stops reading early
                        for _ in range(1280):
                            self.wfile.write(b"x" * 8192)
                    return
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receivers() -> Iterator[list[Receiver]]:
    made: list[Receiver] = []
    yield made
    for r in made:
        r.close()


def receiver(made: list[Receiver], mode: str = "ok") -> Receiver:
    r = Receiver(mode)
    made.append(r)
    return r


def closed_port_url() -> str:
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}/hook"


def round_trip(conn: Any, sender: notify.Sender, now: Any = None) -> int:
    """One tick's pump, the sends finished, and their results recorded."""
    queued = sender.pump(conn, now=now)
    assert sender.wait_idle(30)
    sender.collect(conn, now=now)
    return queued


# --- redaction ------------------------------------------------------------------------------------


def test_urls_never_print_their_credentials() -> None:
    assert notify.redact("https://user:pw@example.com:8443/x?token=abc&b=2#frag") == (
        "https://***@example.com:8443/x?token=***&b=***"
    )
    assert notify.redact("https://hooks.slack.com/services/T000/B000/XXXXSECRET") == (
        "https://hooks.slack.com/services/***"
    )
    assert notify.redact("https://ntfy.sh/my-topic") == "https://ntfy.sh/my-topic"
    assert notify.redact("http://[bad") == "***"


# --- the outbox -----------------------------------------------------------------------------------


def test_an_event_is_queued_once_per_channel_and_key(conn: Any) -> None:
    world = build_world(conn.info["cafleet.path"])
    f = world.fleet_id
    every = broker.add_channel(conn, fleet_id=f, kind="webhook", target="http://h/1", events=None)
    only = broker.add_channel(
        conn, fleet_id=f, kind="webhook", target="http://h/2", events=("budget",)
    )
    data = notify.payload("lost_pane", f, "gone", 3, "alice")
    assert notify.fire(conn, f, "lost_pane", "3:t", data) == 1  # `only` does not take it
    assert notify.fire(conn, f, "lost_pane", "3:t", data) == 0  # the same key: nothing more
    assert notify.fire(conn, f, "budget", "3:t", data) == 2
    assert [e.event for e in broker.outbox_of(conn, every.channel_id)] == ["lost_pane", "budget"]
    assert [e.event for e in broker.outbox_of(conn, only.channel_id)] == ["budget"]
    assert broker.remove_channel(conn, only.channel_id) is not None
    assert broker.outbox_of(conn, only.channel_id) == []
    assert notify.fire(conn, 999, "budget", "x", data) == 0  # no channel, no error


def test_a_webhook_gets_one_json_post_per_event(conn: Any, receivers: list[Receiver]) -> None:
    world = build_world(conn.info["cafleet.path"])
    good = receiver(receivers)
    channel = broker.add_channel(
        conn, fleet_id=world.fleet_id, kind="webhook", target=good.url, events=None
    )
    data = notify.payload(
        "escalation",
        world.fleet_id,
        "member 3 waits",
        3,
        "alice",
        question="Proceed?",
        prompt_id="0badcafe",
        choices=[{"number": 1, "label": "Yes"}, {"number": 2, "label": "No"}],
        answer_url=None,
    )
    notify.fire(conn, world.fleet_id, "escalation", "3:0badcafe", data)
    sender = notify.Sender()
    assert round_trip(conn, sender) == 1
    assert good.bodies == [data]
    assert good.raw[0][0]["Content-Type"] == "application/json"
    (entry,) = broker.outbox_of(conn, channel.channel_id)
    assert entry.sent_at is not None and entry.next_at is None and entry.attempts == 1
    assert round_trip(conn, sender) == 0  # sent once: never again
    notify.fire(conn, world.fleet_id, "escalation", "3:0badcafe", data)  # a restarted loop
    assert round_trip(conn, sender) == 0 and good.hits == 1
    sender.stop()


def test_slack_and_ntfy_get_their_own_formats(conn: Any, receivers: list[Receiver]) -> None:
    world = build_world(conn.info["cafleet.path"])
    slack, ntfy = receiver(receivers), receiver(receivers)
    for kind, r in (("slack", slack), ("ntfy", ntfy)):
        broker.add_channel(conn, fleet_id=world.fleet_id, kind=kind, target=r.url, events=None)
    data = notify.payload("budget", world.fleet_id, "member 3 is paused", 3, "alice")
    data["answer_url"] = "https://phone.example/answer/tok"
    notify.fire(conn, world.fleet_id, "budget", "3:a", data)
    round_trip(conn, notify.Sender())
    assert slack.bodies == [
        {"text": "member 3 is paused\n<https://phone.example/answer/tok|Answer from here>"}
    ]
    headers, body = ntfy.raw[0]
    assert body == b"member 3 is paused"
    assert headers["Title"] == f"cafleet budget: fleet {world.fleet_id}"
    assert headers["Priority"] == "high" and headers["Click"] == data["answer_url"]


@pytest.mark.parametrize(
    ("mode", "reason"),
    [
        ("closed", "ConnectionRefusedError"),
        ("500", "HTTP 500"),
        ("loop", "more than 3 redirects"),
    ],
)
def test_a_bad_receiver_is_retried_with_backoff_then_given_up_and_reported(
    conn: Any, receivers: list[Receiver], mode: str, reason: str
) -> None:
    world = build_world(conn.info["cafleet.path"])
    f = world.fleet_id
    url = closed_port_url() if mode == "closed" else receiver(receivers, mode).url
    url = url.replace("http://", "http://u:secret@") + "?token=hunter2"
    channel = broker.add_channel(conn, fleet_id=f, kind="webhook", target=url, events=None)
    notify.fire(conn, f, "test", "1", notify.payload("test", f, "hello"))
    sender = notify.Sender()
    now = utcnow()
    for attempt in range(1, notify.MAX_TRIES + 1):
        assert round_trip(conn, sender, now) == 1, attempt
        (entry,) = broker.outbox_of(conn, channel.channel_id)
        assert entry.attempts == attempt and entry.sent_at is None
        assert entry.last_error is not None and reason in entry.last_error
        assert round_trip(conn, sender, now) == 0  # not due again before its backoff
        if entry.next_at is None:
            break
        now = now + timedelta(seconds=notify.BACKOFF[attempt - 1] + 1)
    assert attempt == notify.MAX_TRIES and entry.next_at is None  # given up: no storm
    got = broker.get_channel(conn, channel.channel_id)
    assert got is not None and got.failing_since is not None and got.failures == notify.MAX_TRIES
    sender.stop()
    # Reported where the user looks, with its fix, and never with the URL's secrets.
    db = conn.info["cafleet.path"]
    code, listed, _ = run_cli("notify", "list", "--fleet-id", str(f))
    assert code == 0 and "failing since" in listed and reason in listed
    code, shown, _ = run_cli("fleet", "show", str(f))
    assert f"notification channel {channel.channel_id} (webhook" in shown
    assert f"run 'cafleet notify test --fleet-id {f}'" in shown
    for text in (listed, shown):
        assert "secret" not in text and "hunter2" not in text, text
        assert "token=***" in text
    assert db  # the same database the CLI read (CAFLEET_DATABASE_URL)


def test_a_huge_response_is_read_only_up_to_the_limit(conn: Any, receivers: list[Receiver]) -> None:
    world = build_world(conn.info["cafleet.path"])
    huge = receiver(receivers, "huge")
    channel = broker.add_channel(
        conn, fleet_id=world.fleet_id, kind="webhook", target=huge.url, events=None
    )
    notify.fire(conn, world.fleet_id, "test", "1", notify.payload("test", world.fleet_id, "x"))
    round_trip(conn, notify.Sender())
    (entry,) = broker.outbox_of(conn, channel.channel_id)
    assert entry.sent_at is not None and huge.bodies


def test_a_hanging_receiver_never_holds_the_tick(conn: Any, receivers: list[Receiver]) -> None:
    """The tick hands rows to the sender thread and returns: while the receiver still holds
    the request, the next tick's pump returns at once and queues nothing twice."""
    world = build_world(conn.info["cafleet.path"])
    slow = receiver(receivers, "hold")
    channel = broker.add_channel(
        conn, fleet_id=world.fleet_id, kind="webhook", target=slow.url, events=None
    )
    notify.fire(conn, world.fleet_id, "test", "1", notify.payload("test", world.fleet_id, "x"))
    sender = notify.Sender()
    assert sender.pump(conn) == 1
    assert slow.entered.wait(10)  # the request is in the receiver's hands
    assert not slow.release.is_set()
    assert sender.pump(conn) == 0  # the tick goes on; the row is in flight, not sent twice
    (entry,) = broker.outbox_of(conn, channel.channel_id)
    assert entry.sent_at is None and entry.attempts == 0
    slow.release.set()
    assert sender.wait_idle(30)
    sender.collect(conn)
    (entry,) = broker.outbox_of(conn, channel.channel_id)
    assert entry.sent_at is not None and slow.hits == 1
    sender.stop()


# --- the commands ---------------------------------------------------------------------------------


def test_notify_add_list_test_and_remove(head_db: Path, receivers: list[Receiver]) -> None:
    world = build_world(head_db)
    f = str(world.fleet_id)
    good = receiver(receivers)
    code, out, err = run_cli(
        "notify", "add", "--fleet-id", f, "webhook", good.url + "?key=s3cret", "--events",
        "escalation,test", "--json",
    )  # fmt: skip
    assert code == 0, err
    added = json.loads(out)
    assert added["url"] == good.url + "?key=***"
    assert added["events"] == ["escalation", "test"]
    code, out, _ = run_cli("notify", "list")
    assert out == (
        f"channel {added['channel_id']} (fleet {f}) webhook {good.url}?key=*** "
        "[escalation,test] ok\n"
    )
    code, out, err = run_cli("notify", "test", "--fleet-id", f)
    assert (code, out) == (0, f"channel {added['channel_id']} webhook: sent\n"), err
    assert good.bodies[0]["event"] == "test"
    assert good.raw[0] and "s3cret" not in out
    bad = closed_port_url()
    run_cli("notify", "add", "--fleet-id", f, "ntfy", bad)
    code, out, err = run_cli("notify", "test", "--fleet-id", f)
    assert code == 1 and "ntfy: failed: ConnectionRefusedError" in out
    assert err == "Error: 1 of 2 channels failed the test\n"
    code, out, _ = run_cli("notify", "remove", str(added["channel_id"]))
    assert (code, out) == (0, f"Removed channel {added['channel_id']}.\n")
    code, _, err = run_cli("notify", "remove", str(added["channel_id"]))
    assert code == 1 and "not found" in err


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["webhook"], "Error: a webhook channel needs its URL: cafleet notify add webhook URL\n"),
        (
            ["webhook", "ftp://x/y"],
            "Error: URL must be an http:// or https:// URL (got ftp://x/y)\n",
        ),
        (["webhook", "http://u:pw@h/?t=1&x"], "Error: URL must be"),
        (["desktop", "http://h/"], "Error: a desktop channel takes no URL\n"),
        (["webhook", "http://h/", "--events", "nope"], "Error: unknown event nope in --events"),
    ],
)
def test_bad_channels_are_refused_and_nothing_is_written(
    head_db: Path, args: list[str], error: str
) -> None:
    world = build_world(head_db)
    if "u:pw" in args[-1]:
        args = ["webhook", "http://u:pw@h/ bad?t=secret"]
    code, out, err = run_cli("notify", "add", "--fleet-id", str(world.fleet_id), *args)
    assert code == 2 and out == "", err
    assert error in err and "secret" not in err and ":pw" not in err
    code, out, _ = run_cli("notify", "list")
    assert out == "No channels.\n"


# --- the events fired where the reports are made ------------------------------------------------


def test_task_done_and_blocked_fire_once_per_change(conn: Any, receivers: list[Receiver]) -> None:
    from cafleet.config import load_settings
    from cafleet.workflows import tasks

    world = build_world(conn.info["cafleet.path"])
    f, alice = world.fleet_id, world.members["alice"]
    good = receiver(receivers)
    broker.add_channel(conn, fleet_id=f, kind="webhook", target=good.url, events=None)
    settings = load_settings()
    task = broker.create_task(
        conn, fleet_id=f, title="fix it", body="", creator_id=world.director, assignee_id=alice,
        after=(),
    ).task  # fmt: skip
    tasks.claim(conn, task_id=task.task_id, member_id=alice)
    tasks.block(conn, settings, task_id=task.task_id, member_id=alice, reason="need a key",
                warn=lambda _l: None)  # fmt: skip
    tasks.claim(conn, task_id=task.task_id, member_id=alice)
    tasks.done(conn, settings, task_id=task.task_id, member_id=alice, result="fixed",
               warn=lambda _l: None)  # fmt: skip
    round_trip(conn, notify.Sender())
    got = [(b["event"], b["member_id"], b["member_name"], b["task_id"]) for b in good.bodies]
    assert got == [
        ("task_blocked", alice, "alice", task.task_id),
        ("task_done", alice, "alice", task.task_id),
    ]
    assert good.bodies[0]["text"].endswith("is blocked on task 1 (fix it): need a key")


def test_a_stopping_loop_sends_loop_stopped_itself(conn: Any, receivers: list[Receiver]) -> None:
    from cafleet.monitor.loop import FleetScope

    world = build_world(conn.info["cafleet.path"])
    good = receiver(receivers)
    broker.add_channel(conn, fleet_id=world.fleet_id, kind="webhook", target=good.url, events=None)
    FleetScope(conn, world.fleet_id).on_stop("director pane %1 is gone; stopping")
    (got,) = good.bodies  # sent before the process would end: no loop is left to send it
    assert got["event"] == "loop_stopped" and "director pane %1 is gone" in got["text"]
    FleetScope(conn, world.fleet_id).on_stop(f"fleet {world.fleet_id} is deleted; stopping")
    assert len(good.bodies) == 1  # a deleted fleet has nobody to tell


def test_a_desktop_channel_uses_notify_send(head_db: Path, tmp_path: Path) -> None:
    import os

    world = build_world(head_db)
    f = str(world.fleet_id)
    run_cli("notify", "add", "--fleet-id", f, "desktop")
    bare = {"PATH": "/usr/bin:/bin"} if not os.path.exists("/usr/bin/notify-send") else None
    code, out, _ = run_cli("notify", "test", "--fleet-id", f, env=bare or {"PATH": "/nonexistent"})
    assert code == 1 and "desktop: failed: notify-send is not installed" in out
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    said = tmp_path / "said.txt"
    fake = bin_dir / "notify-send"
    fake.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > "{said}"\n')
    fake.chmod(0o755)
    code, out, _ = run_cli(
        "notify", "test", "--fleet-id", f, env={"PATH": f"{bin_dir}:{os.environ['PATH']}"}
    )
    assert (code, out) == (0, "channel 1 desktop: sent\n")
    assert said.read_text().splitlines() == [
        "--app-name=cafleet", "cafleet test", f"[cafleet] test notification for fleet {f}",
    ]  # fmt: skip
