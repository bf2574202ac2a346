"""Running the real coding agents' non-interactive debug commands (and, for Claude Code, its
TUI in a private tmux server) against a test's HOME (`../shared/real-clients.md`).

The agents live in ``$CAFLEET_AGENT_CACHE`` (default: ``~/.cache/cafleet-agents`` of the real
user, independent of the test's HOME), installed there with npm. A test that needs one skips when
it is missing, and fails instead in CI (``CI=true``) or with ``CAFLEET_REQUIRE_REAL_AGENTS=1``.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest


def cache_dir() -> Path:
    value = os.environ.get("CAFLEET_AGENT_CACHE")
    if value:
        return Path(value)
    return Path(pwd.getpwuid(os.getuid()).pw_dir) / ".cache" / "cafleet-agents"


def required() -> bool:
    return os.environ.get("CI") == "true" or os.environ.get("CAFLEET_REQUIRE_REAL_AGENTS") == "1"


def require_binary(agent: str) -> Path:
    path = cache_dir() / "node_modules" / ".bin" / agent
    if not os.access(path, os.X_OK):
        message = f"real {agent} is not installed in {cache_dir()} (set CAFLEET_AGENT_CACHE)"
        if required():
            pytest.fail(message + "; real agents are required in CI")
        pytest.skip(message)
    return path


def agent_env(home: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The agent's environment: this process's, minus cafleet's and tmux's variables, with the
    test's HOME (the agents' own variables are already unset by the autouse fixture)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CAFLEET_", "TMUX"))}
    env["HOME"] = str(home)
    env.update(extra or {})
    return env


def run_agent(
    binary: Path, *args: str, home: Path, cwd: Path, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    cwd.mkdir(parents=True, exist_ok=True)
    return subprocess.run(
        [str(binary), *args],
        env=agent_env(home, env),
        cwd=str(cwd),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=180,
    )


def json_from(output: str) -> Any:
    """The JSON value in a command's output (some agents print a banner line first)."""
    starts = [i for i in (output.find("["), output.find("{")) if i >= 0]
    assert starts, output
    return json.loads(output[min(starts) :])


# --- Claude Code's TUI --------------------------------------------------------------------------

CLAUDE_KEY = "sk-ant-cafleet-test-0000000000000000"


def claude_ready_home(home: Path, project: Path) -> None:
    """`.claude.json` that lets claude start without dialogs (real-clients.md)."""
    project.mkdir(parents=True, exist_ok=True)
    state = {
        "hasCompletedOnboarding": True,
        "customApiKeyResponses": {"approved": [CLAUDE_KEY[-20:]], "rejected": []},
        "projects": {str(project): {"hasTrustDialogAccepted": True}},
    }
    (home / ".claude.json").write_text(json.dumps(state), encoding="utf-8")


@contextlib.contextmanager
def private_tmux(
    argv: list[str], *, env: Mapping[str, str], cwd: Path
) -> Iterator[tuple[str, str]]:
    """A private tmux server (own socket dir) running ``argv`` in its one pane; yields
    (tmux binary, socket path) and kills the server, and so the agent, at the end."""
    tmux = shutil.which("tmux")
    if tmux is None:
        pytest.fail("tmux is needed to drive the Claude Code TUI")
    socket_dir = Path(tempfile.mkdtemp(prefix="cfra", dir="/tmp"))
    socket = str(socket_dir / "s")
    server_env = dict(env)
    server_env["TMUX_TMPDIR"] = str(socket_dir)
    subprocess.run(
        [tmux, "-S", socket, "-f", "/dev/null", "new-session", "-d", "-s", "t", "-x", "200",
         "-y", "50", "-c", str(cwd), *argv],
        env=server_env, check=True, capture_output=True, timeout=30,
    )  # fmt: skip
    pane_pid = subprocess.run(
        [tmux, "-S", socket, "display-message", "-p", "-t", "t:", "#{pane_pid}"],
        capture_output=True, text=True, timeout=10,
    ).stdout.strip()  # fmt: skip
    try:
        yield tmux, socket
    finally:
        subprocess.run([tmux, "-S", socket, "kill-server"], capture_output=True, timeout=10)
        if pane_pid.isdigit():
            deadline = time.monotonic() + 10
            while os.path.exists(f"/proc/{pane_pid}") and time.monotonic() < deadline:
                time.sleep(0.1)
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pane_pid), 9)
        shutil.rmtree(socket_dir, ignore_errors=True)


def capture(tmux: str, socket: str) -> str:
    return subprocess.run(
        [tmux, "-S", socket, "capture-pane", "-p", "-t", "t:"],
        capture_output=True, text=True, timeout=10,
    ).stdout  # fmt: skip


def send_keys(tmux: str, socket: str, *keys: str) -> None:
    subprocess.run([tmux, "-S", socket, "send-keys", "-t", "t:", *keys], check=True, timeout=10)
