"""Doctor's member-permissions row for Gemini CLI (docs/cli.md §3.3).

Members run with a cafleet policy file (`--policy`, Gemini's user tier) that allows `cafleet`
commands at priority 900. The user's own policies (`<gemini dir>/policies/*.toml`, the same
tier) win with a higher priority, and a tool the settings exclude (`tools.exclude`) is gone
whatever the policy says: the row lists those that would block a `cafleet` command. It fails
too when the cafleet policy files are missing or not this version's.
"""

from __future__ import annotations

import glob
import json
import os
import re
import tomllib
from typing import Any

from cafleet.agents.gemini.policies import OUR_RULES_PRIORITY
from cafleet.assets.permissions import NEEDED_COMMANDS, Blocking, PermissionRow

SHELL_TOOL = "run_shell_command"
_BLOCKING = ("deny", "ask_user")


def _names(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value] if isinstance(value, list) else []


def _matches(rule: dict[str, Any], command: str) -> bool:
    """Whether a policy rule applies to ``command`` run by the shell tool."""
    if not any(n in (SHELL_TOOL, "*") for n in _names(rule.get("toolName"))):
        return False
    prefixes = _names(rule.get("commandPrefix"))
    if prefixes and not any(command == p or command.startswith(p + " ") for p in prefixes):
        return False
    regex = rule.get("commandRegex")
    return not (isinstance(regex, str) and re.search(regex, command) is None)


def _policy_rules(path: str) -> list[dict[str, Any]]:
    with open(path, "rb") as fh:
        data = tomllib.load(fh)
    rules = data.get("rule")
    return [r for r in rules if isinstance(r, dict)] if isinstance(rules, list) else []


def _excluded(settings_path: str) -> bool:
    """Whether the settings file's `tools.exclude` removes the shell tool."""
    with open(settings_path, encoding="utf-8") as fh:
        settings = json.load(fh)
    tools = settings.get("tools") if isinstance(settings, dict) else None
    excluded = tools.get("exclude") if isinstance(tools, dict) else None
    return any(str(e).split("(")[0] == SHELL_TOOL for e in _names(excluded))


def check_gemini(config_dir: str, policy_state: str) -> PermissionRow:
    """``policy_state`` is the cafleet policy files' state: "ok", "missing" or "stale"."""
    row = PermissionRow("gemini")
    settings = os.path.join(config_dir, "settings.json")
    if os.path.isfile(settings):
        row.checked.append(settings)
        try:
            if _excluded(settings):
                row.blocking.append(
                    Blocking(settings, f'tools.exclude: "{SHELL_TOOL}"', NEEDED_COMMANDS[0])
                )
        except (OSError, ValueError) as exc:
            row.error = f"cannot read {settings}: {exc}"
    pattern = os.path.join(glob.escape(config_dir), "policies", "*.toml")
    for path in sorted(glob.glob(pattern)):
        row.checked.append(path)
        try:
            rules = _policy_rules(path)
        except (OSError, ValueError) as exc:
            row.error = f"cannot read {path}: {exc}"
            continue
        for rule in rules:
            priority = rule.get("priority", 0)
            if rule.get("decision") not in _BLOCKING or not isinstance(priority, int | float):
                continue
            if priority < OUR_RULES_PRIORITY:
                continue  # the cafleet policy's allow wins
            command = next((c for c in NEEDED_COMMANDS if _matches(rule, c)), None)
            if command is not None:
                text = f"{SHELL_TOOL} {rule.get('commandPrefix', '*')}: {rule['decision']}"
                row.blocking.append(Blocking(path, f"{text} (priority {priority})", command))
    if policy_state != "ok":
        row.error = (
            "the cafleet policy files are "
            + ("missing" if policy_state == "missing" else "not cafleet's current ones")
            + "; run 'cafleet setup --coding-agent gemini'"
        )
    return row
