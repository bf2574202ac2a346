"""The agents' own hooks with the real agents (docs/runtime.md §4.12, docs/cli.md §2.38, §2.39),
driven by the scripted model: a message's `received_at` is set within 2 s of the agent's own
record of its line; after a turn `member explain` reads `ready` from the hook; a Claude Code
member (opencode, Gemini CLI) blocked on a permission prompt reads `awaiting_user` from the hook.

Claude Code in the default run; Codex (its `notify`), opencode (the plugin) and Gemini CLI (the
extension) with `--agent-matrix`.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from cafleet.agents import get_agent
from cafleet.db.timefmt import parse_ts
from tests.fleet_helpers import create_fleet, ok, start_loop, stop_loop
from tests.harness.fixtures import TmuxHarness
from tests.harness.real_agents import agent_cases, require_binary
from tests.harness.real_member import RealMember, arrivals, first_arrival
from tests.harness.scripted_model import Action, Conversation, ScriptedModel, shell
from tests.harness.util import retry_until

pytestmark = [pytest.mark.real_agent, pytest.mark.tmux]
PROMPT = "You are member {member_id} of a cafleet fleet. Wait for messages from the Director."
ASK = "please fetch the page"
ASK_OUTSIDE = "please write outside"
# What makes each agent with a permission hook ask under the workspace profile
# (docs/permissions.md §3): a network command, or (opencode, whose commands all run) an edit
# outside the working directory. Codex's `notify` reports no permission prompt.
ASKS = {"claude": ASK, "opencode": ASK_OUTSIDE, "gemini": ASK}
RECEIPT_LAG = 2.0  # s: the bound between the agent's record and `received_at`


def _script(conv: Conversation, cwd: str) -> Action | None:
    """A line asking to fetch runs `curl`, which the workspace profile makes Claude Code ask
    about (docs/permissions.md §2); anything else gets the scripted model's own answer."""
    if ASK in conv.last and not conv.calls:
        return shell("curl -s http://127.0.0.1:9/")
    if ASK_OUTSIDE in conv.last and not conv.calls:
        return Action("write", path="/var/tmp/cafleet-hooks-outside.txt", content="x\n")
    return None


def _explain(h: TmuxHarness, member_id: int) -> dict[str, Any]:
    return dict(json.loads(ok(h.cli("member", "explain", str(member_id), "--json")).stdout))


def _send(h: TmuxHarness, director: int, member_id: int, body: str) -> int:
    r = ok(h.cli("message", "send", "--from-member-id", str(director), "--to-member-id",
                 str(member_id), body, "--json"))  # fmt: skip
    return int(json.loads(r.stdout)["message"]["message_id"])


def _message(h: TmuxHarness, message_id: int) -> tuple[str | None, str | None]:
    rows = h.sqlite(
        "SELECT received_at, notified_at FROM messages WHERE message_id = ?", message_id
    )
    return rows[0][0], rows[0][1]


@pytest.mark.parametrize("agent", agent_cases("claude"))
def test_real_agent_hooks_report_receipts_and_state(tmux_db: TmuxHarness, agent: str) -> None:
    require_binary(agent)
    if not get_agent(agent).hooks:
        pytest.skip(f"{agent} installs no hooks")
    h = tmux_db
    ids = create_fleet(h)  # the monitor is a fake: only the member is real
    stop_loop(h, ids.fleet_id)
    start_loop(h, ids.fleet_id, "--tick", "1", "--interval", "0")
    model = ScriptedModel(_script).start()
    member = RealMember(h, agent, f"hooked-{agent}", model_url=model.base_url(agent))
    try:
        member.create(ids.fleet_id, PROMPT)
        m = member.member_id
        # The spawn prompt's turn ends: the hook says ready.
        retry_until(
            lambda: _explain(h, m)["state"] == "ready" and _explain(h, m)["source"] == "hook",
            timeout=240, interval=0.5, message=lambda: f"{_explain(h, m)}\n{member.real.capture()}",
        )  # fmt: skip

        # A message: its receipt comes from the agent's hook, close to the agent's own record.
        message_id = _send(h, ids.director_id, m, "hello from the Director")
        retry_until(lambda: _message(h, message_id)[0], timeout=120, interval=0.2,
                    message=lambda: f"no receipt\n{member.real.capture()}")  # fmt: skip
        received = parse_ts(_message(h, message_id)[0])
        frame = f"[cafleet msg {message_id} from"
        records: dict[str, Any] = {}

        def recorded() -> bool:
            got = arrivals(member)
            texts = [t for t, _, _ in got if frame in t]
            records["text"] = texts[0] if texts else None
            records["all"] = got
            return bool(texts)

        retry_until(recorded, timeout=60, interval=0.5, message=lambda: str(records.get("all")))
        own = first_arrival(records["all"], records["text"])
        assert received is not None and own is not None
        assert abs(received.timestamp() - own) <= RECEIPT_LAG, (received, own)

        # After that turn, ready again from the hook, stamped after the receipt.
        def ready_after() -> bool:
            found = _explain(h, m)
            hook = [s for s in found["signals"] if s["source"] == "hook"]
            # Codex's one `turn` report carries both: the receipt and ready, at once.
            later = bool(hook) and hook[0]["at"] >= _message(h, message_id)[0]
            return found["state"] == "ready" and found["source"] == "hook" and later

        retry_until(ready_after, timeout=120, interval=0.2,
                    message=lambda: f"{_explain(h, m)}\n{member.real.capture()}")  # fmt: skip

        if agent in ASKS:
            # A permission prompt: awaiting_user from the agent's permission hook.
            _send(h, ids.director_id, m, ASKS[agent])
            retry_until(
                lambda: _explain(h, m)["state"] == "awaiting_user"
                and _explain(h, m)["signals"][0]["source"] == "hook",
                timeout=120, interval=0.2,
                message=lambda: f"{_explain(h, m)}\n{member.real.capture()}",
            )  # fmt: skip
    finally:
        member.stop()
        model.stop()


@pytest.mark.parametrize("agent", agent_cases("claude"))
def test_without_hooks_the_screen_decides_and_nothing_is_lost(
    tmux_db: TmuxHarness, agent: str
) -> None:
    """The member's `cafleet hook` is removed (a `cafleet` first on its PATH that ignores
    `hook`): messages are still delivered and verified on the screen, no receipt is recorded,
    and `member explain` reads the screen."""
    import shutil

    require_binary(agent)
    if not get_agent(agent).hooks:
        pytest.skip(f"{agent} installs no hooks")
    h = tmux_db
    ids = create_fleet(h)
    stop_loop(h, ids.fleet_id)
    start_loop(h, ids.fleet_id, "--tick", "1", "--interval", "0")
    model = ScriptedModel(_script).start()
    member = RealMember(h, agent, f"unhooked-{agent}", model_url=model.base_url(agent))
    real = shutil.which("cafleet", path=h.env["PATH"])
    assert real is not None
    shim = member.bin_dir / "cafleet"
    shim.write_text(f'#!/bin/sh\n[ "$1" = hook ] && exit 0\nexec "{real}" "$@"\n', encoding="utf-8")
    shim.chmod(0o755)
    try:
        member.create(ids.fleet_id, PROMPT)
        m = member.member_id
        member.real.wait_state("ready", timeout=240)
        message_id = _send(h, ids.director_id, m, "hello without hooks")
        retry_until(lambda: _message(h, message_id)[1], timeout=120, interval=0.5,
                    message=lambda: member.real.capture())  # fmt: skip
        member.real.wait_state("ready", timeout=120)
        found = _explain(h, m)
        assert _message(h, message_id)[0] is None  # the screen never sets a receipt
        assert found["source"] == "screen" and found["state"] == "ready", found
        assert [s["source"] for s in found["signals"]] == ["screen"]
        assert h.sqlite("SELECT hook_at FROM members WHERE member_id = ?", m) == [(None,)]
    finally:
        member.stop()
        model.stop()
