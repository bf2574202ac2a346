"""How the suite itself is run (README.md "Run the tests"): without xdist, distributed by group
under `-n N`, and with the other agents' cases of a real-agent matrix only when asked for."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MATRIX_FILE = "tests/test_real_agents.py"  # a real-agent matrix: one default case, two opt-in


def collect(*args: str, env: dict[str, str] | None = None) -> list[str]:
    """The test ids `pytest --collect-only` lists for ``args``, run from the checkout."""
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return [line for line in proc.stdout.splitlines() if "::" in line]


@pytest.mark.parametrize(
    ("args", "env"),
    [(("--agent-matrix",), {"CAFLEET_AGENT_MATRIX": ""}), ((), {"CAFLEET_AGENT_MATRIX": "1"})],
    ids=["option", "env"],
)
def test_the_agent_matrix_runs_when_asked_for(args: tuple[str, ...], env: dict[str, str]) -> None:
    ids = collect(*args, MATRIX_FILE, env=env)
    assert sorted(i.rsplit("[", 1)[1] for i in ids) == ["claude]", "codex]", "gemini]", "opencode]"]


def test_xdist_distributes_by_group(pytestconfig: pytest.Config) -> None:
    # The real-agent tests share one worker only under `--dist loadgroup` (tests/conftest.py);
    # the default run (`-n 3`) runs this in a worker.
    if hasattr(pytestconfig, "workerinput"):  # an xdist worker: `loadgroup` is what it was told
        assert getattr(pytestconfig.option, "loadgroup", False) is True
    else:
        assert getattr(pytestconfig.option, "dist", "no") == "no"


# The real-agent cases of the default run, reviewed: they run one after another on one worker,
# the longest path of `-n 3`, so one case per behaviour (README.md "Run the tests"). A new one
# belongs here only when no listed case (or a fake-agent test) proves its behaviour already;
# otherwise mark it `agent_matrix`.
DEFAULT_REAL_AGENT_CASES = {
    "test_benchmarks_smoke.py::test_fleet_roundtrip_smoke",
    "test_fleet_real.py::test_a_real_director_runs_a_fleet_of_the_four_real_agents",
    "test_permission_profiles_real.py::test_docs_table_is_the_tested_table",
    "test_permission_profiles_real.py::test_each_profile_does_what_its_table_says[codex]",
    "test_real_agent_assets.py::test_opencode_lists_our_skill_and_resolves_our_preset[default]",
    "test_real_agent_assets.py::test_opencode_lists_our_skill_and_resolves_our_preset[OPENCODE_CONFIG_DIR]",
    "test_real_agent_assets.py::test_codex_shows_our_skill_in_its_prompt[default]",
    "test_real_agent_assets.py::test_codex_shows_our_skill_in_its_prompt[CODEX_HOME]",
    "test_real_agent_assets.py::test_codex_policy_allows_cafleet_under_our_rules",
    "test_real_agent_assets.py::test_claude_code_lists_our_skill",
    "test_hooks_real.py::test_real_agent_hooks_report_receipts_and_state[claude]",
    "test_hooks_real.py::test_without_hooks_the_screen_decides_and_nothing_is_lost[claude]",
    "test_notify_real.py::test_a_real_member_s_prompt_reaches_the_webhook_and_its_budget_pauses_it",
    "test_review_real.py::test_two_real_members_conflict_and_the_second_fixes_its_branch",
    "test_real_agents.py::test_typed_line_arrives_once_intact_and_queues_while_working[codex]",
    "test_real_delivery.py::test_messages_to_a_fresh_real_member_arrive_once_intact_uninterrupted[claude]",
    "test_real_escalation.py::test_a_real_member_blocked_at_its_permission_prompt_is_reported_and_answered[opencode]",
    "test_real_reaping.py::test_member_delete_leaves_nothing_of_a_real_agent[codex]",
    "test_real_restore.py::test_restore_resumes_each_real_agent_and_usage_matches_the_model[claude]",
    "test_real_verify.py::test_a_line_sent_while_a_real_opencode_works_is_stamped_without_a_warning",
    "test_real_wakes.py::test_each_wake_reaches_a_real_claude_monitor_once_in_any_pane_size",
    "test_real_whole_task.py::test_a_real_member_runs_exactly_the_last_line_of_a_long_task",
    "test_tasks_real.py::test_real_agents_carry_dependent_tasks_through_a_restore",
    "test_worktrees_real.py::test_claude_trusts_a_worktree_under_the_checkout_not_beside_it",
    "test_worktrees_real.py::test_codex_trusts_a_member_worktree_of_the_trusted_checkout",
}


def test_the_suite_collects_without_xdist_and_leaves_the_matrix_out() -> None:
    # Only the files that name the marker or fixture can hold a real-agent test: collecting
    # those is seconds, the whole suite half a minute.
    files = sorted(
        str(p.relative_to(ROOT))
        for p in (ROOT / "tests").glob("test_*.py")
        if "real_agent" in p.read_text(encoding="utf-8")
    )
    ids = collect("-p", "no:xdist", "-m", "real_agent", *files, env={"CAFLEET_AGENT_MATRIX": ""})
    assert {i.removeprefix("tests/") for i in ids} == DEFAULT_REAL_AGENT_CASES
