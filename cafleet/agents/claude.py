"""claude (docs/runtime.md §2.2)."""

from __future__ import annotations

from cafleet.agents._base import BaseAgent

MEMBER_RULES: tuple[str, ...] = ("Bash(cafleet message *)",)
MONITOR_RULES: tuple[str, ...] = (
    "Bash(cafleet message *)",
    "Bash(cafleet monitor scan *)",
    "Bash(cafleet member ping *)",
)
MONITOR_DISPLAY_NAME = "monitor"


class ClaudeAgent(BaseAgent):
    name = "claude"
    binary = "claude"
    effort_levels = ("low", "medium", "high", "xhigh", "max")

    # `<path> --permission-mode dontAsk --allowedTools <rule>... --name <name>
    # [--model M] [--effort E] <prompt>`; the monitor's name is `monitor`.

    def leading_args(self, *, display_name: str, monitor: bool, db_dir: str | None) -> list[str]:
        rules = MONITOR_RULES if monitor else MEMBER_RULES
        argv = ["--permission-mode", "dontAsk", "--allowedTools", *rules]
        argv += ["--name", MONITOR_DISPLAY_NAME if monitor else display_name]
        return argv

    def effort_args(self, effort: str) -> list[str]:
        return ["--effort", effort]

    def resume_args(self, session_id: str) -> list[str]:
        # Claude Code 2.1: `--resume <id>` continues the same session file, from its directory.
        return ["--resume", session_id]
