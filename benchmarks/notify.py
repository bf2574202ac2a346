"""6. Notification cost: whole-process `message send` to a recipient with a live pane.

A private tmux server on its own socket runs `cat` in the Director's and the monitor's panes and
the test harness's fake claude in screen mode in the member's (the delivery gate types only into
a ready composer, and the verified submit waits for the screen to show the line taken); no user
tmux server is touched. Most of the time is the typing settles and the verifying captures.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import (
    REPO,
    FakePane,
    base_env,
    cafleet_argv,
    connect,
    median,
    run_process,
    setup_db,
)


def _tmux(sock: str, *args: str) -> str:
    return subprocess.run(
        ["tmux", "-S", sock, *args], check=True, capture_output=True, text=True, timeout=10
    ).stdout.strip()


def _ready_fake_claude(sock: str, window: str, where: Path) -> str:
    """A pane running the fake claude in screen mode (each turn ends at once), once it is ready."""
    from cafleet.delivery.screens import classify

    fake = where / "bin" / "claude"  # the fake names its agent after its own file
    fake.parent.mkdir(parents=True, exist_ok=True)
    text = (REPO / "tests" / "harness" / "fake_agent.py").read_text(encoding="utf-8")
    if text.startswith("#!"):
        text = text.split("\n", 1)[1]
    fake.write_text(f"#!{sys.executable}\n{text}", encoding="utf-8")
    fake.chmod(0o755)
    pane = _tmux(
        sock,
        "split-window",
        "-d",
        "-P",
        "-F",
        "#{pane_id}",
        "-t",
        window,
        "-e",
        f"CAFLEET_FAKE_DIR={where}",
        "-e",
        "CAFLEET_FAKE_SCREEN=work=0",
        str(fake),
    )
    deadline = time.monotonic() + 30
    while classify("claude", _tmux(sock, "capture-pane", "-p", "-t", pane)) != "ready":
        if time.monotonic() > deadline:
            raise RuntimeError("the fake claude never drew a ready screen")
        time.sleep(0.1)
    return pane


def run(tmp: Path, runs: int) -> dict[str, Any]:
    from cafleet.broker import create_fleet, register_member, set_placement_pane
    from cafleet.db.runtime import close_connection
    from cafleet.records import PlacementSpec

    if shutil.which("tmux") is None:
        return {"skipped": "tmux not installed"}
    sockdir = tempfile.mkdtemp(prefix="cfb", dir="/tmp")
    sock = f"{sockdir}/s"
    db_path = tmp / "notify" / "cafleet.db"
    setup_db(db_path)
    try:
        _tmux(
            sock,
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-s",
            "bench",
            "-x",
            "200",
            "-y",
            "50",
            "cat >/dev/null",
        )
        session = "bench"
        window = _tmux(sock, "display-message", "-p", "-t", "bench", "#{window_id}")
        director = _tmux(sock, "display-message", "-p", "-t", "bench", "#{pane_id}")
        monitor = _tmux(
            sock, "split-window", "-d", "-P", "-F", "#{pane_id}", "-t", window, "cat >/dev/null"
        )
        member_pane = _ready_fake_claude(sock, window, Path(sockdir))
        server_pid = _tmux(sock, "display-message", "-p", "#{pid}")
        conn = connect(db_path)
        try:
            boot = create_fleet(
                conn,
                name="notify",
                backend="tmux",
                coding_agent="claude",
                director_pane=FakePane(session, window, director),
                spawn_monitor=lambda f, d, m: FakePane(session, window, monitor),
            )
            member = register_member(
                conn,
                fleet_id=boot.fleet.fleet_id,
                name="typist",
                description="bench",
                role="member",
                placement=PlacementSpec(
                    mux_session=session, mux_window_id=window, backend="tmux", coding_agent="claude"
                ),
                require_monitor=True,
            )
            set_placement_pane(conn, member_id=member.member_id, pane_id=member_pane)
        finally:
            close_connection(conn)
        env = base_env(db_path)
        env["TMUX"] = f"{sock},{server_pid},0"
        prefix, how = cafleet_argv()
        argv = [
            *prefix,
            "message",
            "send",
            "--from-member-id",
            str(boot.director.member_id),
            "--to-member-id",
            str(member.member_id),
            "notify me",
            "--json",
        ]
        times, notified = [], 0
        for i in range(runs + 1):
            result = run_process(argv, env)
            if result.returncode != 0:
                raise RuntimeError(f"message send exited {result.returncode}")
            if i:
                times.append(result.seconds)
                notified += b'"notification_sent":true' in result.stdout
        return {"runs": runs, "invocation": how, "median_s": median(times), "notified": notified}
    finally:
        subprocess.run(["tmux", "-S", sock, "kill-server"], capture_output=True, timeout=10)
        shutil.rmtree(sockdir, ignore_errors=True)


def render(r: dict[str, Any]) -> list[str]:
    if "skipped" in r:
        return ["## 6. notification cost: skipped (" + r["skipped"] + ")"]
    return [
        f"## 6. message send to a live pane ({r['runs']} runs)",
        f"  median {r['median_s'] * 1000:.0f} ms per send; {r['notified']}/{r['runs']} "
        "reported notification_sent (typed, and verified on the screen)",
    ]
