"""The task board in real headless Chromium (Debian's /usr/bin/chromium driven by Playwright)
against the real `cafleet server`, real files and a private tmux server with fake agents: a task
created and assigned from the page, moved by the CLI and seen moving live, then cancelled and
reopened from its page."""

from __future__ import annotations

from typing import Any

from tests.delivery_helpers import rows
from tests.factories import build_world
from tests.harness.fixtures import TmuxHarness
from tests.web_helpers import poll, serve


def column_of(page: Any, task_id: int) -> str | None:
    card = page.locator(f"[data-testid=task-card][data-task-id='{task_id}']")
    if card.count() != 1:
        return None
    return str(card.evaluate("e => e.closest('[data-testid=column]').dataset.state"))


def test_create_assign_live_done_then_cancel_and_reopen(tmux_db: TmuxHarness, page: Any) -> None:
    world = build_world(tmux_db.db_path, members=("alice", "bob"), harness=tmux_db)
    alice = world.members["alice"]
    server = serve(tmux_db)
    try:
        page.goto(server.url)
        poll(lambda: page.locator("[data-testid=member]").count() == 4, message="no roster")
        columns = page.locator("[data-testid=column]")
        poll(lambda: columns.count() == 7, message="no board")
        assert columns.evaluate_all("els => els.map(e => e.dataset.state)") == [
            "waiting", "ready", "in_progress", "blocked", "done", "merged", "cancelled"
        ]  # fmt: skip

        # create it unassigned, from the board's form
        page.locator("[data-testid=task-title]").fill("write <b>the</b> report")
        page.locator("[data-testid=task-body]").fill("all of it")
        page.locator("[data-testid=task-create]").click()
        result = page.locator("[data-testid=task-result]")
        poll(lambda: "Created task" in result.inner_text(), message=lambda: result.inner_text())
        (task_id,) = (r[0] for r in rows(tmux_db.db_path, "SELECT task_id FROM tasks"))
        poll(lambda: column_of(page, task_id) == "ready", message="never on the board")
        card = page.locator(f"[data-testid=task-card][data-task-id='{task_id}']")
        assert card.locator("[data-testid=task-assignee]").inner_text() == "unassigned"
        assert card.locator("[data-testid=task-cost]").inner_text() == "$0.0000"  # not started
        assert "write <b>the</b> report" in card.inner_text()  # text, not markup
        assert card.locator("b").count() == 0

        # assign it from its page: alice is sent it (its thread shows the assignment)
        card.click()
        poll(lambda: page.locator("[data-testid=task-view]").is_visible())
        page.locator("[data-testid=task-assign-to]").select_option(str(alice))
        page.locator("[data-testid=task-assign]").click()
        poll(
            lambda: card.locator("[data-testid=task-assignee]").inner_text() == f"alice ({alice})",
            message=lambda: page.locator("[data-testid=task-action-result]").inner_text(),
        )
        thread = page.locator("[data-testid=thread-message]")
        poll(lambda: thread.count() == 1, message="no assignment in the thread")
        assert "cafleet task claim" in thread.locator("[data-testid=body]").inner_text()

        # the CLI moves it; the open page follows without a reload
        claim = ("task", "claim", str(task_id), "--member-id", str(alice))
        assert tmux_db.cli(*claim).returncode == 0
        poll(lambda: column_of(page, task_id) == "in_progress", message="never in progress")
        done = tmux_db.cli("task", "done", str(task_id), "--member-id", str(alice),
                           "--result", "sent it")  # fmt: skip
        assert done.returncode == 0, done.stderr
        poll(lambda: column_of(page, task_id) == "done", message="never done on the board")
        # the fake agent keeps no session records: its cost is unknown, the reason its title
        cost = card.locator("[data-testid=task-cost]")
        assert (cost.inner_text(), cost.get_attribute("title")) == (
            "cost ?",
            "no session known yet",
        )
        poll(lambda: page.locator("[data-testid=task-field-result]").inner_text() == "sent it")
        assert page.locator("[data-testid=task-cancel]").is_hidden()

        # reopen, then cancel, from its page
        page.locator("[data-testid=task-reopen]").click()
        poll(lambda: column_of(page, task_id) == "ready", message="never reopened")
        page.locator("[data-testid=task-cancel]").click()
        poll(lambda: column_of(page, task_id) == "cancelled", message="never cancelled")
        states = rows(tmux_db.db_path, "SELECT state FROM task_events WHERE task_id = ? "
                      "ORDER BY event_id", task_id)  # fmt: skip
        assert [s[0] for s in states] == ["ready", "in_progress", "done", "ready", "cancelled"]
    finally:
        assert server.stop() == 0
