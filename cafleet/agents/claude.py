"""claude (runtime.md §2.2)."""

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

    def build_argv(
        self,
        *,
        binary_path: str,
        prompt: str,
        display_name: str,
        model: str | None,
        effort: str | None,
        monitor: bool,
        db_dir: str | None = None,
    ) -> list[str]:
        """`<path> --permission-mode dontAsk --allowedTools <rule>... --name <name>
        [--model M] [--effort E] <prompt>`; the monitor's name is `monitor`."""
        rules = MONITOR_RULES if monitor else MEMBER_RULES
        argv = [binary_path, "--permission-mode", "dontAsk", "--allowedTools", *rules]
        argv += ["--name", MONITOR_DISPLAY_NAME if monitor else display_name]
        if model is not None:
            argv += ["--model", model]
        if effort is not None:
            argv += ["--effort", effort]
        argv.append(prompt)
        return argv
