"""Delivery to real members (docs/runtime.md §4.9, docs/performance.md §13): Claude Code, Codex CLI and opencode spawned with
`cafleet member create`, messages sent at +0, +3 and +10 s after the create and once more while
the agent works; the agent's own record proves each arrived exactly once, intact, as its own
message, not after it was stamped, and that no delivery interrupted the agent.

One member per agent, four messages each (the agents are CPU-heavy; see docs/performance.md for
the 20-trial measurement). Runs in the default test command when the binaries are installed
(.ci/install-agents; required in CI), skipped otherwise.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator

import pytest

from cafleet.db.timefmt import parse_ts
from tests.fleet_helpers import create_fleet, start_loop, stop_loop
from tests.harness.fixtures import TmuxHarness
from tests.harness.real_agents import agent_cases, require_binary
from tests.harness.real_member import (
    RealMember,
    arrivals,
    arrived_count,
    first_arrival,
    hanging_api,
)
from tests.harness.scripted_model import ScriptedModel
from tests.harness.util import retry_until
from tests.test_real_agents import slow_turns

pytestmark = [pytest.mark.real_agent, pytest.mark.tmux]
EM = "\u2014"
OFFSETS = (0.0, 3.0, 10.0)
RECORD_LAG = 5.0  # s: how late an agent's own record of a line may be written after its screen
PROMPT = "You are member {member_id} of a cafleet fleet. Wait for messages from the Director."


def line(message_id: int, director: int, body: str) -> str:
    return (
        f"[cafleet msg {message_id} from Director ({director})] {body} {EM} ack with: cafleet "
        f"message ack {message_id}"
    )


@pytest.fixture
def api() -> Iterator[str]:
    with hanging_api() as url:
        yield url


def _screen(member: RealMember) -> str:
    """The member's screen now, for a failure message (what the gate saw is usually still
    there, or what replaced it)."""
    try:
        return member.real.capture()
    except Exception as exc:  # a diagnostic must not hide the failure it explains
        return f"(capture failed: {exc})"


def _send(h: TmuxHarness, director: int, member: RealMember, body: str) -> int:
    r = h.cli(
        "message", "send", "--from-member-id", str(director), "--to-member-id",
        str(member.member_id), body, "--json",
    )  # fmt: skip
    assert r.returncode == 0, (r.stderr, _screen(member))
    for note in r.stderr.splitlines():
        # Held (the pane is starting) or busy (the loop is typing into it): the loop delivers.
        # An earlier line still held is listed on its own line (docs/cli.md §2.13).
        assert note.startswith(
            ("Held: ", "Also pending for member ", "Pending: ")
        ) or note.endswith(
            "is receiving another keystroke (it stays in the inbox; delivery will be retried)"
        ), f"{note}\n--- the member's screen now:\n{_screen(member)}"
    return int(json.loads(r.stdout)["message"]["message_id"])


def _stamps(h: TmuxHarness, ids: list[int]) -> dict[int, str | None]:
    rows = h.sqlite(
        f"SELECT message_id, notified_at FROM messages WHERE message_id IN "
        f"({','.join('?' * len(ids))})",
        *ids,
    )
    return {int(r[0]): r[1] for r in rows}


@pytest.mark.parametrize("agent", agent_cases("claude"))
def test_messages_to_a_fresh_real_member_arrive_once_intact_uninterrupted(
    tmux_db: TmuxHarness, api: str, agent: str
) -> None:
    require_binary(agent)
    h = tmux_db
    ids = create_fleet(h)  # the monitor is a fake: only the member is real
    stop_loop(h, ids.fleet_id)
    start_loop(h, ids.fleet_id, "--tick", "1", "--interval", "0")
    d = ids.director_id
    model = None
    if agent == "gemini":
        # Its turns must end: Gemini keeps a line queued while it works in memory until its
        # turn (tests/test_real_agents.py, slow_turns).
        model = ScriptedModel(slow_turns).start()
    url = model.base_url("gemini") if model is not None else None
    member = RealMember(h, agent, f"real-{agent}", api_url=api, model_url=url)
    try:
        member.create(ids.fleet_id, PROMPT)
        sent: dict[int, str] = {}
        errors: list[BaseException] = []
        lock = threading.Lock()

        def send_at(offset: float) -> None:
            time.sleep(max(0.0, member.created_at + offset - time.time()))
            body = f"sent {offset:g} s after create"
            try:
                message_id = _send(h, d, member, body)
            except BaseException as exc:  # reported by the test thread below
                errors.append(exc)
                return
            with lock:
                sent[message_id] = line(message_id, d, body)

        threads = [threading.Thread(target=send_at, args=(o,)) for o in OFFSETS]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert errors == [] and len(sent) == len(OFFSETS), errors
        # And once more while it works on its spawn prompt (offline it keeps working).
        member.real.wait_state("working", timeout=240)
        body = "sent while you work"
        message_id = _send(h, d, member, body)
        sent[message_id] = line(message_id, d, body)

        message_ids = sorted(sent)
        retry_until(
            lambda: all(_stamps(h, message_ids).values()),
            timeout=300,
            interval=1.0,
            message=lambda: f"not all stamped: {_stamps(h, message_ids)}\n{_screen(member)}",
        )
        stamps = _stamps(h, message_ids)
        records: dict[str, list[tuple[str, float | None, bool]]] = {}

        def recorded() -> bool:
            records["all"] = arrivals(member)
            return all(arrived_count(records["all"], text) >= 1 for text in sent.values())

        retry_until(recorded, timeout=60, interval=1.0, message=lambda: str(records.get("all")))
        got = records["all"]
        for message_id, text in sent.items():
            assert arrived_count(got, text) == 1, (text, got)  # once, and byte for byte intact
            arrived = first_arrival(got, text)
            stamp = parse_ts(stamps[message_id])
            assert arrived is not None and stamp is not None
            # Stamped only once the agent had it: the stamp follows the agent's screen showing
            # the line taken; the agent writes its record of it asynchronously (opencode's
            # store lagged its own QUEUED line by up to ~3 s under load: docs/performance.md).
            # Gemini records a line queued while it works when its turn starts: after the
            # turns before it (8 s each here).
            lag = RECORD_LAG if agent != "gemini" else 60.0
            assert arrived <= stamp.timestamp() + lag, (text, arrived, stamp)
        # Each delivered line is its own message: never glued onto a resubmitted prompt.
        for text, _, _ in got:
            if "[cafleet msg " in text:
                assert text.startswith("[cafleet msg ") and text.count("[cafleet msg ") == 1, text
        assert member.real.interruptions() == 0
        assert not any(t == "[Request interrupted by user]" for t, _, _ in got)
    finally:
        member.stop()
        if model is not None:
            model.stop()


# Opt-in: the default run proves a real member's lines arrive once, intact (the claude case
# above) and one broadcast typed into many panes at once (fake agents: test_delivery_parallel).
@pytest.mark.agent_matrix
def test_a_broadcast_reaches_one_real_member_of_each_agent_at_once(
    tmux_db: TmuxHarness, api: str
) -> None:
    """One broadcast to a Claude Code, a Codex and an opencode member (docs/runtime.md §4.10):
    the three panes are typed into at the same time; each agent's own record has the line
    exactly once, intact, stamped, and no agent was interrupted."""
    agents = ("claude", "codex", "opencode")
    for agent in agents:
        require_binary(agent)
    h = tmux_db
    ids = create_fleet(h)
    stop_loop(h, ids.fleet_id)
    start_loop(h, ids.fleet_id, "--tick", "1", "--interval", "0")
    d = ids.director_id
    members = [RealMember(h, agent, f"bcast-{agent}", api_url=api) for agent in agents]
    try:
        for member in members:
            member.create(ids.fleet_id, PROMPT)
        for member in members:
            # Past its first turn (offline, the spawn prompt keeps it working): the gate lets
            # the line through at once, so the three attempts overlap.
            member.real.wait_state("working", "ready", timeout=240)
        body = "one broadcast to every agent"
        r = h.cli("message", "broadcast", "--from-member-id", str(d), body)
        assert r.returncode == 0, r.stderr
        for note in r.stderr.splitlines():
            # A held line is the loop's to deliver; earlier held lines are listed on their own.
            # Pending: another delivery (the loop's) is typing into that pane.
            assert note.startswith(("Held: ", "Also pending for member ", "Pending: ")), note
        summary_id = int(r.stdout.split()[1].split("=")[1])
        delivered = {
            int(row[0]): int(row[1])
            for row in h.sqlite(
                "SELECT owner_member_id, message_id FROM messages WHERE origin_message_id = ? "
                "AND type = 'unicast'",
                summary_id,
            )
        }
        message_ids = [delivered[m.member_id] for m in members]
        retry_until(
            lambda: all(_stamps(h, message_ids).values()),
            timeout=300,
            interval=1.0,
            message=lambda: f"not all stamped: {_stamps(h, message_ids)}",
        )
        texts = {m.member_id: line(delivered[m.member_id], d, body) for m in members}
        seen: dict[int, list[tuple[str, float | None, bool]]] = {}

        def recorded() -> bool:
            for m in members:
                seen[m.member_id] = arrivals(m)
            return all(arrived_count(seen[m.member_id], texts[m.member_id]) >= 1 for m in members)

        retry_until(recorded, timeout=60, interval=1.0, message=lambda: str(seen))
        for member in members:
            got = seen[member.member_id]
            assert arrived_count(got, texts[member.member_id]) == 1, (member.agent, got)
            assert member.real.interruptions() == 0, member.agent
    finally:
        for member in members:
            member.stop()
