"""Regenerate docs/webui.png: a demo fleet in a temporary database, the real `cafleet server`,
and Debian's chromium driven by Playwright (never `playwright install`).

    python scripts/webui_screenshot.py [--out docs/webui.png]

The demo panes are in a private tmux server of the script's own (each a `sleep`, so the roster
shows them alive, still starting); the user's tmux server is never touched.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]


@dataclass(frozen=True)
class Pane:
    session: str
    window_id: str
    pane_id: str


def private_tmux(socket: str) -> tuple[str, list[str]]:
    """A tmux server of this script's own on `socket`: one window of five panes (a Director,
    a monitor and three members, each a shell's `sleep`); returns the window id and pane ids."""

    def tmux(*args: str) -> str:
        return subprocess.run(
            ["tmux", "-S", socket, "-f", "/dev/null", *args],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()

    fmt = "#{window_id} #{pane_id}"
    window, first = tmux(
        "new-session", "-d", "-s", "work", "-x", "200", "-y", "60", "-P", "-F", fmt, "sleep 900"
    ).split()
    panes = [first]
    for _ in range(4):
        panes.append(tmux("split-window", "-t", window, "-P", "-F", "#{pane_id}", "sleep 900"))
        tmux("select-layout", "-t", window, "tiled")
    return window, panes


def seed(db_path: Path, socket: str, window: str, panes: list[str]) -> int:
    from cafleet import broker
    from cafleet.db.guard import open_validated_connection
    from cafleet.db.migrate import run_setup
    from cafleet.db.runtime import close_connection
    from cafleet.records import PlacementSpec

    run_setup(str(db_path))
    conn = open_validated_connection(str(db_path))
    try:
        boot = broker.create_fleet(
            conn,
            name="review",
            backend="tmux",
            coding_agent="claude",
            director_pane=Pane("work", window, panes[0]),
            spawn_monitor=lambda _f, _d, _m: Pane("work", window, panes[1]),
            mux_socket=socket,
        )
        director = boot.director.member_id
        ids = {}
        for i, (name, agent, about) in enumerate(
            [
                ("alice", "claude", "reviews the storage layer"),
                ("bob", "codex", "writes the migration"),
                ("carol", "opencode", "runs the benchmarks"),
            ]
        ):
            member = broker.register_member(
                conn,
                fleet_id=boot.fleet.fleet_id,
                name=name,
                description=about,
                role="member",
                placement=PlacementSpec("work", window, agent, mux_socket=socket),
                require_monitor=False,
            )
            broker.set_placement_pane(conn, member_id=member.member_id, pane_id=panes[2 + i])
            ids[name] = member.member_id
        send = broker.send_message
        send(conn, from_member_id=director, to_member_id=ids["alice"], text="Please review PR 12.")
        reply = send(conn, from_member_id=ids["alice"], to_member_id=director, text="On it.")
        broker.ack_message(conn, message_id=reply.message_id)
        cast = broker.broadcast_message(conn, from_member_id=director, text="Standup in 5 minutes.")
        for delivery in cast.deliveries[:2]:
            broker.ack_message(conn, message_id=delivery.message_id)
        send(conn, from_member_id=ids["bob"], to_member_id=director, text="Migration 0003 drafted.")
        send(
            conn,
            from_member_id=ids["carol"],
            to_member_id=ids["bob"],
            text="<b>not bold</b>: shown as text",
        )
        seed_tasks(conn, boot.fleet.fleet_id, director, ids)
        return boot.fleet.fleet_id
    finally:
        close_connection(conn)


def seed_tasks(conn: Any, fleet_id: int, director: int, ids: dict[str, int]) -> None:
    """A board with a task in most columns."""
    from cafleet import broker

    def task(title: str, who: str | None, after: tuple[int, ...] = ()) -> int:
        made = broker.create_task(
            conn,
            fleet_id=fleet_id,
            title=title,
            body="",
            creator_id=director,
            assignee_id=None if who is None else ids[who],
            after=after,
        )
        return made.task.task_id

    review = task("Review the storage layer", "alice")
    migration = task("Write migration 0003", "bob")
    bench = task("Benchmark the send path", "carol")
    task("Release notes", None, after=(review,))
    task("Tidy the changelog", None)
    for task_id, who in ((review, "alice"), (migration, "bob"), (bench, "carol")):
        broker.claim_task(conn, task_id=task_id, member_id=ids[who])
    broker.finish_task(conn, task_id=migration, member_id=ids["bob"], result="drafted")
    broker.block_task(conn, task_id=bench, member_id=ids["carol"], reason="no idle machine")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "webui.png")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="cafleet-shot-") as tmp:
        db_path = Path(tmp) / "cafleet.db"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CAFLEET_", "TMUX"))}
        env["CAFLEET_DATABASE_URL"] = f"sqlite:///{db_path}"
        os.environ["CAFLEET_DATABASE_URL"] = env["CAFLEET_DATABASE_URL"]
        socket = str(Path(tmp) / "tmux.sock")
        seed(db_path, socket, *private_tmux(socket))
        server = subprocess.Popen(
            [sys.executable, "-m", "cafleet", "server", "--port", "8765"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            assert server.stdout is not None
            line = server.stdout.readline()
            if not line.startswith("cafleet server: "):
                raise SystemExit(f"cafleet server did not start: {line}{server.stdout.read()}")
            url = line.split(": ", 1)[1].split()[0]
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
                page = browser.new_page(viewport={"width": 1280, "height": 1000})
                page.goto(url)
                page.wait_for_selector("[data-testid=broadcast]")
                page.wait_for_selector("[data-testid=task-card]")
                page.locator("[data-testid=compose-text]").fill("@bob how far is the migration?")
                page.screenshot(path=str(args.out))
                browser.close()
        finally:
            server.terminate()
            server.wait(timeout=15)
            subprocess.run(["tmux", "-S", socket, "kill-server"], check=False)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
