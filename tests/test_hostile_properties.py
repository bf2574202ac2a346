"""Property tests over the hostile alphabet (docs/tmux-arguments.md §7), end to end on one private tmux server:
whatever the member names, descriptions, models, prompts, working directories, database paths,
message bodies, sender names and wake-line names hold, the fake agent receives exactly the
expected argv or bytes, and no tmux command runs besides the pane that was asked for."""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.factories import FakePane, build_world, connect
from tests.harness import util
from tests.harness.fixtures import TmuxHarness
from tests.hostile import (
    at_chunk_boundary,
    hostile_text,
    label_text,
    no_pwned,
    server_state,
    shared_server,
)

pytestmark = pytest.mark.tmux


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TmuxHarness]:
    with shared_server(tmp_path_factory.mktemp("hostile")) as harness:
        yield harness


@pytest.fixture
def no_settles(monkeypatch: pytest.MonkeyPatch) -> None:
    """type_line's settles matter to real TUIs, not to the fake agent: skip them here."""
    from cafleet.mux import tmux

    monkeypatch.setattr(tmux, "ESCAPE_SETTLE", 0.0)
    monkeypatch.setattr(tmux, "SUBMIT_SETTLE", 0.0)


def _component(text: str) -> str:
    name = text.replace("/", "\u2215")
    while len(name.encode("utf-8")) > 120:
        name = name[:-1]
    return "d" + name if name in ("", ".", "..") else name


def _template(text: str, placeholder: bool) -> str:
    """A spawn prompt cafleet accepts: no stray braces, no leading `-`, not blank."""
    body = text.replace("{", "(").replace("}", ")")
    if body.lstrip().startswith("-") or body.strip() == "":
        body = "x" + body
    return body + (" {member_id}" if placeholder else "")


# --------------------------------------------------------------------------- member create


@settings(max_examples=8)
@given(
    agent=st.sampled_from(["claude", "codex", "opencode"]),
    name=label_text(),
    description=label_text(2000),
    model=hostile_text(slash=False),
    model_id=hostile_text(),
    prompt=hostile_text(max_pieces=12),
    placeholder=st.booleans(),
    cwd_name=hostile_text(slash=False),
    db_name=hostile_text(slash=False),
)
def test_member_create_spawns_exactly_what_was_asked(
    server: TmuxHarness,
    tmp_path_factory: pytest.TempPathFactory,
    agent: str,
    name: str,
    description: str,
    model: str,
    model_id: str,
    prompt: str,
    placeholder: bool,
    cwd_name: str,
    db_name: str,
) -> None:
    from cafleet import broker
    from cafleet.agents import get_agent
    from cafleet.agents.prompt import render_template
    from cafleet.db.migrate import run_setup

    base = tmp_path_factory.mktemp("create")
    db_path = base / "db" / _component(db_name) / "cafleet.db"
    run_setup(str(db_path))
    cwd = base / "cwd" / _component(cwd_name)
    cwd.mkdir(parents=True)
    h = server
    _install_assets_for(h, db_path)
    with connect(db_path) as conn:
        boot = broker.create_fleet(
            conn, name="hostile", backend="tmux", coding_agent="claude",
            director_pane=FakePane(h.session_name, h.window_id, h.director_pane),
            spawn_monitor=lambda _f, _d, _m: FakePane(h.session_name, h.window_id, "%99999"),
        )  # fmt: skip
    model_arg = f"{model}/{model_id}" if agent == "opencode" else model
    template = _template(prompt, placeholder)
    url = f"sqlite:///{db_path}"
    before = server_state(h)
    result = h.cli(
        "member", "create", "--fleet-id", str(boot.fleet.fleet_id), f"--name={name}",
        f"--description={description}", f"--coding-agent={agent}", f"--model={model_arg}",
        "--json", "--", template, env={"CAFLEET_DATABASE_URL": url}, cwd=cwd,
    )  # fmt: skip
    assert result.returncode == 0, (result.stdout, result.stderr)
    data = json.loads(result.stdout)
    pane = data["placement"]["mux_pane_id"]
    try:
        record = util.start_record(pane, timeout=30)
        rendered = render_template(
            template, fleet_id=boot.fleet.fleet_id, member_id=data["member_id"],
            director_member_id=boot.director.member_id, coding_agent=agent,
        )  # fmt: skip
        spec = get_agent(agent)
        bare = spec.build_argv(
            binary_path=str(h.bin_dir / agent), prompt=rendered, display_name=name,
            model=model_arg, effort=None, monitor=False, db_dir=str(db_path.parent),
        )  # fmt: skip
        expected = spec.with_hooks(bare, data["member_id"])  # as spawning adds them
        assert record["argv"] == expected
        assert record["cwd"] == str(cwd)
        assert record["db_url"] == url
        assert (data["name"], data["description"]) == (name, description)
    finally:
        h.tmux("kill-pane", "-t", pane)
    assert server_state(h) == before
    assert no_pwned(server)


# --------------------------------------------------------------------------- notifications


def _install_assets_for(h: TmuxHarness, db_path: Any) -> None:
    """The stale-assets guard needs the agents' assets under the HOME the CLI runs with."""
    from tests.conftest import install_assets

    saved = os.environ.get("HOME")
    os.environ["HOME"] = h.env.get("HOME", saved or "")
    try:
        install_assets(db_path)
    finally:
        if saved is None:
            os.environ.pop("HOME", None)
        else:
            os.environ["HOME"] = saved


@pytest.fixture(scope="module")
def mailbox(server: TmuxHarness, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A fleet on the shared server whose member `bob` (and the monitor) run fake agents."""
    from cafleet.db.migrate import run_setup

    db_path = tmp_path_factory.mktemp("mailbox") / "db" / "cafleet.db"
    run_setup(str(db_path))
    return build_world(db_path, harness=server, members=("bob",))


_body = st.lists(
    hostile_text() | at_chunk_boundary() | st.sampled_from(["\n", "\r\n", "\t", "\x1b[1m", "\x07"]),
    min_size=1,
    max_size=4,
).map("".join)


@settings(max_examples=25)
@given(sender=label_text(), body=_body)
def test_notification_reaches_the_agent_exactly(
    server: TmuxHarness, mailbox: Any, no_settles: None, sender: str, body: str
) -> None:
    from cafleet import broker
    from cafleet.delivery.drains import drain_recipients, notification_line

    bob = mailbox.members["bob"]
    pane = mailbox.pane(bob)
    seen = len(util.line_records(pane))
    with connect(mailbox.db_path) as conn:
        frm = broker.register_member(
            conn, fleet_id=mailbox.fleet_id, name=sender, description="x", role="member",
            placement=None, require_monitor=False,
        )  # fmt: skip
        message = broker.send_message(
            conn, from_member_id=frm.member_id, to_member_id=bob, text=body
        )
        before = server_state(server)
        report = drain_recipients(
            conn, [bob], attempted=set(), lock_timeout=5, max_text_len=5000, env=server.env
        )
        assert report.failures == []
        assert report.notified == [(message.message_id, bob)]
        broker.deregister_member(conn, member_id=frm.member_id)
    line = notification_line(
        message_id=message.message_id, sender_name=sender, from_member_id=frm.member_id,
        body=body, max_text_len=5000,
    )  # fmt: skip
    records = util.wait_records(pane, seen + 1, timeout=20)
    assert len(records) == seen + 1
    assert util.record_bytes(records[-1]) == line.replace("\t", " ").encode("utf-8")
    assert server_state(server) == before
    db = sqlite3.connect(f"file:{mailbox.db_path}?mode=ro", uri=True)
    try:
        stored = db.execute(
            "SELECT text FROM messages WHERE message_id = ?", (message.message_id,)
        ).fetchone()
    finally:
        db.close()
    assert stored == (body,)


@settings(max_examples=12)
@given(names=st.lists(label_text(), min_size=1, max_size=6))
def test_wake_line_reaches_the_monitor_exactly(
    server: TmuxHarness, mailbox: Any, no_settles: None, names: list[str]
) -> None:
    from cafleet import broker
    from cafleet.monitor.tick import build_line
    from cafleet.monitor.wakeline import WakeEntry, render_entry
    from cafleet.records import PlacementSpec

    pane = mailbox.monitor_pane
    seen = len(util.line_records(pane))
    with connect(mailbox.db_path) as conn:
        added = [
            broker.register_member(
                conn, fleet_id=mailbox.fleet_id, name=name, description="x", role="member",
                placement=PlacementSpec(mailbox.session, server.window_id, "claude"),
                require_monitor=False,
            ).member_id
            for name in names
        ]  # fmt: skip
        line, count = build_line(conn, mailbox.fleet_id)
        before = server_state(server)
        server.backend().type_line(pane, line)
        for member_id in added:
            broker.deregister_member(conn, member_id=member_id)
    assert count == 1 + len(names)  # bob and the new ones
    for member_id, name in zip(added, names, strict=True):
        entry = render_entry(WakeEntry(member_id, name, "claude", 0))
        assert entry in line
    records = util.wait_records(pane, seen + 1, timeout=20)
    assert util.record_bytes(records[-1]) == line.encode("utf-8")
    assert server_state(server) == before
