"""Claude Code (docs/runtime.md §2.2, docs/permissions.md): its argv and permission profiles,
input policy, screens (`screens`), session records (`records`) and doctor's check of its
settings (`rules`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from cafleet.agents._base import BaseAgent, hook_command
from cafleet.agents.claude.records import READER, holds_line, session_of_payload
from cafleet.agents.claude.rules import check_claude
from cafleet.agents.claude.screens import SCREENS
from cafleet.assets.permissions import PermissionRow
from cafleet.delivery.policy import InputPolicy
from cafleet.sessions import SessionRecord

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


# Claude Code's hook events -> `cafleet hook` events (docs/runtime.md §4.12). A
# `UserPromptSubmit` hook's stdout joins the model's context: `cafleet hook` prints nothing.
HOOK_EVENTS: tuple[tuple[str, str | None, str], ...] = (
    ("UserPromptSubmit", None, "prompt"),
    ("PreToolUse", "*", "tool"),
    ("Stop", None, "stop"),
    ("Notification", "permission_prompt", "permission"),
    ("Notification", "idle_prompt", "idle"),
)
HOOK_TIMEOUT = 10  # seconds Claude Code gives a hook command


def hook_settings(member_id: int) -> dict[str, list[dict[str, object]]]:
    """The `hooks` object of the member's `--settings` (merged with the permission settings;
    Claude Code runs these beside the user's own hooks from every other settings file)."""
    hooks: dict[str, list[dict[str, object]]] = {}
    for name, matcher, event in HOOK_EVENTS:
        command = " ".join(hook_command(event, member_id))  # plain words: nothing to quote
        entry: dict[str, object] = {
            "hooks": [{"type": "command", "command": command, "timeout": HOOK_TIMEOUT}]
        }
        if matcher is not None:
            entry = {"matcher": matcher, **entry}
        hooks.setdefault(name, []).append(entry)
    return hooks


def with_hook_settings(argv: list[str], member_id: int) -> list[str]:
    """``argv`` whose one `--settings` JSON also holds the member's hooks (added before
    `--name` when it has none)."""
    out = list(argv)
    if "--settings" in out[1:]:
        index = out.index("--settings", 1) + 1
        settings = json.loads(out[index])
        settings["hooks"] = hook_settings(member_id)
        out[index] = json.dumps(settings, separators=(",", ":"))
        return out
    settings_json = json.dumps({"hooks": hook_settings(member_id)}, separators=(",", ":"))
    at = out.index("--name", 1) if "--name" in out[1:] else 1
    return [*out[:at], "--settings", settings_json, *out[at:]]


POLICY = InputPolicy(
    "claude",
    "type",
    "C-u",
    12,
    "Escape",
    "A line submitted while Claude Code works is queued (`Press up to edit queued "
    "messages`) and recorded at once; one Escape would interrupt the turn. Ctrl-U "
    "deletes the cursor's visual row, so a wrapped leftover takes one press per row. "
    "Pasted (bracketed) with Enter 0.1 s later: taken 20/20 ready and working, where "
    "typed keys needed 0.3 s (docs/agent-screens.md §6.1).",
    paste=True,
    settle=0.1,
)


class ClaudeAgent(BaseAgent):
    name = "claude"
    binary = "claude"
    npm_package = "@anthropic-ai/claude-code"
    effort_levels = ("low", "medium", "high", "xhigh", "max")
    config_variables = (("CLAUDE_CONFIG_DIR", ""),)
    config_default = ".claude"
    record_variables = ("CLAUDE_CONFIG_DIR",)
    hooks = True
    policy = POLICY
    screens = SCREENS
    records = READER

    def holds_line(self, path: str, session_id: str, frame: str) -> bool:
        return holds_line(path, session_id, frame)

    def with_hooks(self, argv: list[str], member_id: int) -> list[str]:
        return with_hook_settings(argv, member_id)

    def session_from_hook(self, payload: Mapping[str, Any]) -> SessionRecord | None:
        return session_of_payload(payload)

    def check_permissions(self, config_dir: str, cwd: str, version: str) -> PermissionRow:
        return check_claude(config_dir, cwd)

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


AGENT = ClaudeAgent()
