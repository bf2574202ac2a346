"""Nothing of a deleted real member keeps running (docs/runtime.md §1.10, §8 item 74): the real
Codex starts an app-server daemon (`codex app-server … --managed-daemon`) and a
`pid-update-loop` outside its pane's process tree; `member delete` ends them with the agent.

Codex runs in the default test command (its daemon is the reported case); Claude Code and
opencode are opt-in (`--agent-matrix`): each costs a real agent's start-up.
"""

from __future__ import annotations

import pytest

from tests.fleet_helpers import create_fleet, ok
from tests.harness.fixtures import TmuxHarness
from tests.harness.real_agents import agent_cases, pids_of, require_binary
from tests.harness.real_member import RealMember

pytestmark = [pytest.mark.real_agent, pytest.mark.tmux]


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ")
    except OSError:
        return b""


@pytest.mark.parametrize("agent", agent_cases("codex"))
def test_member_delete_leaves_nothing_of_a_real_agent(tmux_db: TmuxHarness, agent: str) -> None:
    require_binary(agent)
    h = tmux_db
    fleet = create_fleet(h)  # the monitor is a fake: only the member is real
    member = RealMember(h, agent, f"real-{agent}")
    try:
        member.create(fleet.fleet_id, "Wait for messages.")
        root = member.real.root
        if agent == "codex":
            # A Codex member runs with `-c notify=…` (its hook, docs/runtime.md §4.12), and
            # Codex 0.171 given any `-c` keeps its app-server in process: no daemon then. This
            # test has no model, so Codex never becomes ready: wait until its TUI is up.
            member.real.wait_screen(r"OpenAI Codex", timeout=120)
        else:
            member.real.wait_state("ready", timeout=240)
        started = {p: _cmdline(p) for p in pids_of(root)}

        ok(h.cli("member", "delete", str(member.member_id)))

        # The moment the command returned: no process started for the agent runs.
        left = {p: started.get(p) or _cmdline(p) for p in pids_of(root)}
        assert left == {}, f"still running after member delete: {left} (started: {started})"
    finally:
        member.stop()
