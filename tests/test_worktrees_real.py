"""The real Claude Code and a member worktree's place (docs/worktrees.md §1.2): a directory under
the trusted checkout starts without the trust dialog, a directory beside it does not; this is
why member worktrees live in `<top>/.cafleet/worktrees/`."""

from __future__ import annotations

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
