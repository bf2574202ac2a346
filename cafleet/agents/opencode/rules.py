"""Doctor's member-permissions row for opencode (docs/cli.md §3.3).

opencode (run with `--agent cafleet`): the agent's own permission rules come last and the
last matching rule wins, so the installed preset's `"cafleet *": allow` overrides anything in
`opencode.json`. The row fails when the preset is missing or differs from cafleet's; rules in
the config files that would block without it are listed as notes.
"""

from __future__ import annotations

import json
import os
import re

from cafleet.assets.permissions import NEEDED_COMMANDS, Blocking, PermissionRow, wildcard_matches


def strip_jsonc(text: str) -> str:
    """JSON with comments and trailing commas (opencode.jsonc) as plain JSON."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = j + 1
        elif text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
        else:
            out.append(ch)
            i += 1
    return re.sub(r",(\s*[}\]])", r"\1", "".join(out))


def _opencode_files(config_dir: str, cwd: str) -> list[str]:
    names = ("opencode.json", "opencode.jsonc")
    files = [os.path.join(config_dir, n) for n in names]
    files += [os.path.join(cwd, n) for n in names]
    files += [os.path.join(cwd, ".opencode", n) for n in names]
    return files


def _bash_rules(permission: object) -> list[tuple[str, str]]:
    """A `permission` block's bash rules as (pattern, action) pairs, in order."""
    if isinstance(permission, str):
        return [("*", permission)]
    if not isinstance(permission, dict):
        return []
    bash = permission.get("bash")
    if isinstance(bash, str):
        return [("*", bash)]
    if isinstance(bash, dict):
        return [(str(k), str(v)) for k, v in bash.items()]
    return []


def check_opencode(config_dir: str, cwd: str, preset_state: str) -> PermissionRow:
    """``preset_state`` is the preset's state as doctor's coding-agents row saw it:
    "ok", "missing" or "stale"."""
    row = PermissionRow("opencode")
    top: list[tuple[str, str, str]] = []
    agent: list[tuple[str, str, str]] = []
    for path in _opencode_files(config_dir, cwd):
        if not os.path.isfile(path):
            continue
        row.checked.append(path)
        try:
            with open(path, encoding="utf-8") as fh:
                config = json.loads(strip_jsonc(fh.read()))
        except (OSError, ValueError) as exc:
            row.error = f"cannot read {path}: {exc}"
            continue
        if not isinstance(config, dict):
            continue
        top += [(path, p, a) for p, a in _bash_rules(config.get("permission"))]
        agents = config.get("agent")
        cafleet_agent = agents.get("cafleet") if isinstance(agents, dict) else None
        if isinstance(cafleet_agent, dict):
            agent += [(path, p, a) for p, a in _bash_rules(cafleet_agent.get("permission"))]
    ordered = top + agent
    for command in NEEDED_COMMANDS:
        last = None
        for path, pattern, action in ordered:
            if wildcard_matches(pattern, command):
                last = (path, pattern, action)
        if last is not None and last[2] in ("deny", "ask"):
            text = f'bash "{last[1]}": {last[2]}'
            if preset_state == "ok":
                row.notes.append(
                    f"{last[0]}: {text} is overridden by the cafleet agent preset's "
                    '"cafleet *": allow'
                )
            else:
                row.blocking.append(Blocking(last[0], text, command))
            break
    if preset_state != "ok":
        row.error = (
            "the cafleet agent preset is "
            + ("missing" if preset_state == "missing" else "not cafleet's current one")
            + "; run 'cafleet setup --coding-agent opencode'"
        )
    return row
