"""Doctor's member-permissions row for Claude Code (docs/cli.md §3.3).

Claude Code (run with `--permission-mode dontAsk --allowedTools …`): a matching `deny` rule
wins over the allow-list, and a matching `ask` rule is a refusal in dontAsk mode. A `deny` or
`ask` rule on `Write`, `Edit` or `Bash` that blocks no cafleet command is a note: it still
refuses or asks under the `workspace` and `full` profiles (docs/permissions.md §4). Read from the
user settings (`<claude dir>/settings.json`), the project's `.claude/settings.json` and
`.claude/settings.local.json` (the current directory: members start where `member create`
ran), and the managed settings.
"""

from __future__ import annotations

import json
import os
import re

from cafleet.assets.permissions import NEEDED_COMMANDS, Blocking, PermissionRow, wildcard_matches

CLAUDE_MANAGED_SETTINGS = "/etc/claude-code/managed-settings.json"


def claude_rule_matches(rule: str, command: str) -> bool:
    """Whether a permission rule string covers a Bash command: `Bash`, `Bash(*)`,
    `Bash(prefix:*)` (the legacy prefix form) or `Bash(glob)`."""
    rule = rule.strip()
    if rule == "Bash":
        return True
    match = re.fullmatch(r"Bash\((.*)\)", rule, re.DOTALL)
    if match is None:
        return False
    inner = match.group(1).strip()
    if inner.endswith(":*"):
        prefix = inner[:-2]
        return command == prefix or command.startswith(prefix + " ")
    return wildcard_matches(inner, command)


# What the `workspace` and `full` profiles let a Claude Code member do without asking
# (docs/permissions.md §2): a deny or ask rule on one of these tools still refuses or asks.
PROFILE_TOOLS: dict[str, str] = {
    "Write": "edits",
    "Edit": "edits",
    "MultiEdit": "edits",
    "NotebookEdit": "edits",
    "Bash": "commands",
}


def profile_note(path: str, kind: str, rule: str) -> str | None:
    """A note for a Claude Code ``deny``/``ask`` rule that limits the workspace and full
    profiles (docs/permissions.md §4), or None."""
    tool = rule.split("(", 1)[0].strip()
    what = PROFILE_TOOLS.get(tool)
    if what is None:
        return None
    verb = "refuses" if kind == "deny" else "asks for"
    return f"{path}: {kind} {rule} {verb} {what} under the workspace and full profiles"


def _claude_files(claude_dir: str, cwd: str) -> list[str]:
    return [
        os.path.join(claude_dir, "settings.json"),
        os.path.join(cwd, ".claude", "settings.json"),
        os.path.join(cwd, ".claude", "settings.local.json"),
        CLAUDE_MANAGED_SETTINGS,
    ]


def check_claude(claude_dir: str, cwd: str) -> PermissionRow:
    row = PermissionRow("claude")
    for path in _claude_files(claude_dir, cwd):
        if not os.path.isfile(path):
            continue
        row.checked.append(path)
        try:
            with open(path, encoding="utf-8") as fh:
                settings = json.load(fh)
        except (OSError, ValueError) as exc:
            row.error = f"cannot read {path}: {exc}"
            continue
        permissions = settings.get("permissions") if isinstance(settings, dict) else None
        if not isinstance(permissions, dict):
            continue
        for kind in ("deny", "ask"):
            rules = permissions.get(kind)
            if not isinstance(rules, list):
                continue
            for rule in rules:
                if not isinstance(rule, str):
                    continue
                hit = next((c for c in NEEDED_COMMANDS if claude_rule_matches(rule, c)), None)
                if hit is not None:
                    row.blocking.append(Blocking(path, f"{kind} {rule}", hit))
                elif (note := profile_note(path, kind, rule)) is not None:
                    row.notes.append(note)
    return row
