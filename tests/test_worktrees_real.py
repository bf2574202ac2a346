"""The real Claude Code and Codex and a member worktree's place (docs/worktrees.md §1.2): a member
worktree under the trusted checkout starts without the trust dialog, a directory beside it does
not; this is why member worktrees live in `<top>/.cafleet/worktrees/`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.real_agent

TRUST_DIALOG = r"Is this a project you created or one you trust"


def test_claude_trusts_a_worktree_under_the_checkout_not_beside_it(real_agent: Any) -> None:
    inside = real_agent("claude", name="inside", start_in=".cafleet/worktrees/3-alice")
    beside = real_agent("claude", name="beside", start_in="../beside")
    # Beside the trusted project: the dialog an unattended member would never answer.
    beside.wait_screen(TRUST_DIALOG, timeout=90)
    # Under it: straight to the ready composer, no dialog.
    screen = inside.wait_state("ready", timeout=90)
    assert "trust" not in screen.lower()
    assert str(inside.start_dir).endswith("project/.cafleet/worktrees/3-alice")


def test_codex_trusts_a_member_worktree_of_the_trusted_checkout(tmux_harness: Any) -> None:
    """Codex keys its trust on the git repository: a member's worktree (a real one, made by
    cafleet) of a trusted checkout starts without the trust prompt."""
    import subprocess

    from cafleet.workflows import worktrees
    from tests.harness.real_agents import RealAgent, require_binary

    require_binary("codex")
    agent = RealAgent(tmux_harness, "codex", name="codex-tree")
    agent.cwd.mkdir(parents=True)
    for args in (["init", "-q", "-b", "main"], ["commit", "-q", "--allow-empty", "-m", "first"]):
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
            cwd=agent.cwd, check=True, capture_output=True,
        )  # fmt: skip
    plan = worktrees.plan(3, "alice", worktrees.Request(), str(agent.cwd))
    worktrees.make(plan)
    agent.start_dir = Path(plan.path)
    # The contrast: another repository beside the trusted one gets the prompt.
    beside = RealAgent(tmux_harness, "codex", name="codex-beside")
    beside.start_dir = agent.cwd.parent / "beside"
    beside.start_dir.mkdir(parents=True)
    subprocess.run(["git", "init", "-q"], cwd=beside.start_dir, check=True)
    try:
        agent.start()
        screen = agent.wait_state("ready", timeout=120)
        assert "trust" not in screen.lower()
        beside.start()
        beside.wait_screen(r"Trust this folder\?", timeout=120)
    finally:
        agent.stop()
        beside.stop()
