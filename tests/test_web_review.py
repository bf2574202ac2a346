"""Review in real headless Chromium (Debian's /usr/bin/chromium driven by Playwright) against
the real `cafleet server`, a real git repository and fake-agent members in their own worktrees
(docs/cli.md §2.37): a done task's diff (files and coloured hunks, text only), the merge queue,
reject (the member is sent the reviewer's text), then merge."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.fleet_helpers import create_fleet, ok, stop_loop
from tests.git_helpers import git
from tests.harness.fixtures import TmuxHarness
from tests.test_review import ack_all, done, inbox, new_task
from tests.test_web_board import column_of
from tests.test_worktrees import create, make_repo, sh
from tests.web_helpers import poll, serve

pytestmark = pytest.mark.tmux


def test_diff_queue_reject_then_merge(tmux_db: TmuxHarness, page: Any) -> None:
    h = tmux_db
    repo: Path = make_repo(h.project_dir)
    ids = create_fleet(h)
    f = ids.fleet_id
    stop_loop(h, f)
    a, a_pane, _, _, _ = create(h, f, "alice", "--worktree")
    t = new_task(h, f, a, "greet")
    sh(a_pane, "printf 'hello <b>x</b>\\n' > a.txt && echo alice >> shared.txt && "
               "git add -A && git commit -qm alice")  # fmt: skip
    done(h, t, a)
    ack_all(h, a)
    server = serve(h)
    try:
        page.goto(server.url)
        poll(lambda: column_of(page, t) == "done", message="no done task on the board")
        queue = page.locator("[data-testid=queue-entry]")
        poll(lambda: queue.count() == 1, message="no merge queue")
        assert f"#{t} greet · cafleet/{f}-alice" in queue.inner_text()

        page.locator(f"[data-testid=task-card][data-task-id='{t}']").click()
        files = page.locator("[data-testid=diff-file]")
        poll(lambda: files.count() == 2, message="no diff files")
        assert files.all_inner_texts() == ["a.txt +1 -0", "shared.txt +1 -0"]
        diff = page.locator("[data-testid=task-diff]")
        assert diff.locator(".add", has_text="+hello <b>x</b>").count() == 1  # text, not markup
        assert diff.locator("b").count() == 0
        assert diff.locator(".hunk").count() == 2

        # Reject: the member is sent the reviewer's text; the task is back in progress.
        page.locator("[data-testid=task-reject-text]").fill("Say goodbye too.")
        page.locator("[data-testid=task-reject]").click()
        poll(lambda: column_of(page, t) == "in_progress", message="never sent back")
        (told,) = inbox(h, a)
        assert "was sent back by the reviewer:\nSay goodbye too." in told
        poll(lambda: queue.count() == 0, message="still queued")

        sh(a_pane, "echo goodbye >> a.txt && git commit -qam goodbye")
        done(h, t, a)
        poll(lambda: column_of(page, t) == "done", message="never done again")
        old_main = git(repo, "rev-parse", "main").strip()
        page.locator(f"[data-testid=task-card][data-task-id='{t}']").click()
        merge = page.locator("[data-testid=task-merge]")
        poll(lambda: merge.is_visible(), message="no merge button")
        merge.click()
        poll(lambda: column_of(page, t) == "merged", message="never merged")
        result = page.locator("[data-testid=task-action-result]").inner_text()
        assert result.startswith(f"Task {t} is merged. merged into main as ")
        assert git(repo, "rev-parse", "main~1").strip() == old_main
        assert (repo / "a.txt").read_text() == "hello <b>x</b>\ngoodbye\n"
        assert merge.is_hidden()
        ok(h.cli("task", "show", str(t)))
    finally:
        assert server.stop() == 0
