"""claude (docs/runtime.md §2.2, docs/permissions.md)."""

from __future__ import annotations

import json

from cafleet.agents._base import BaseAgent

MEMBER_RULES: tuple[str, ...] = ("Bash(cafleet message *)", "Bash(cafleet task *)")
MONITOR_RULES: tuple[str, ...] = (
    "Bash(cafleet message *)",
    "Bash(cafleet monitor scan *)",
    "Bash(cafleet member ping *)",
)
MONITOR_DISPLAY_NAME = "monitor"
# `workspace`: Claude Code cannot confine a Bash command to a directory without its sandbox
# (bubblewrap and socat on Linux), so every command is allowed but the ones that reach the
# network, which keep asking (docs/permissions.md §2).
NETWORK_ASK: tuple[str, ...] = (
    "Bash(curl *)",
    "Bash(wget *)",
    "Bash(ssh *)",
    "Bash(scp *)",
    "Bash(rsync *)",
    "Bash(nc *)",
    "Bash(git push *)",
    "WebFetch",
    "WebSearch",
)
WORKSPACE_SETTINGS = json.dumps({"permissions": {"ask": list(NETWORK_ASK)}}, separators=(",", ":"))


def profile_args(profile: str) -> list[str]:
    """A member's permission flags for ``profile`` (docs/permissions.md §2)."""
    if profile == "full":
        return ["--permission-mode", "bypassPermissions"]
    if profile == "workspace":
        return [
            "--permission-mode", "acceptEdits", "--settings", WORKSPACE_SETTINGS,
            "--allowedTools", "Bash",
        ]  # fmt: skip
    mode = "default" if profile == "ask" else "dontAsk"
    return ["--permission-mode", mode, "--allowedTools", *MEMBER_RULES]


class ClaudeAgent(BaseAgent):
    name = "claude"
    binary = "claude"
    effort_levels = ("low", "medium", "high", "xhigh", "max")

    # `<path> <profile flags> --name <name> [--model M] [--effort E] <prompt>`; the monitor
    # runs `--permission-mode dontAsk --allowedTools <its rules>` and is named `monitor`.
    # --allowedTools is variadic: --name always follows it, so it never takes the prompt.

    def leading_args(
        self, *, display_name: str, monitor: bool, db_dir: str | None, permissions: str
    ) -> list[str]:
        if monitor:
            argv = ["--permission-mode", "dontAsk", "--allowedTools", *MONITOR_RULES]
        else:
            argv = profile_args(permissions)
        argv += ["--name", MONITOR_DISPLAY_NAME if monitor else display_name]
        return argv

    def effort_args(self, effort: str) -> list[str]:
        return ["--effort", effort]

    def resume_args(self, session_id: str) -> list[str]:
        # Claude Code 2.1: `--resume <id>` continues the same session file, from its directory.
        return ["--resume", session_id]
