"""The policy files `cafleet setup` installs for Gemini CLI (docs/permissions.md §2): one per
permission profile but `full`, under `<gemini dir>/cafleet/`, passed with `--policy`.

Not under `<gemini dir>/policies/`: Gemini loads every file there into every session, the
user's own included. A file given with `--policy` is in Gemini's user tier, above its built-in
rules, so `allow` here beats the default `ask_user` of its shell and write tools; within a tier
the higher priority wins.
"""

from __future__ import annotations

FOLDER = "cafleet"
PROFILES: tuple[str, ...] = ("workspace", "ask", "readonly")
OUR_RULES_PRIORITY = 900  # above every other rule of ours and a user's usual ones (0-999)
# Network commands keep asking under `workspace` (as Claude Code's NETWORK_ASK does).
NETWORK_PREFIXES: tuple[str, ...] = ("curl", "wget", "ssh", "scp", "rsync", "nc", "git push")


def _rule(tool: str | list[str], decision: str, priority: int, prefix: object = None) -> str:
    name = f'"{tool}"' if isinstance(tool, str) else "[" + ", ".join(f'"{t}"' for t in tool) + "]"
    lines = ["[[rule]]", f"toolName = {name}"]
    if isinstance(prefix, str):
        lines.append(f'commandPrefix = "{prefix}"')
    elif isinstance(prefix, tuple):
        lines.append("commandPrefix = [" + ", ".join(f'"{p}"' for p in prefix) + "]")
    lines += [f'decision = "{decision}"', f"priority = {priority}"]
    return "\n".join(lines) + "\n"


# Every profile: `cafleet …` commands run and the installed skills load without asking.
_CAFLEET = (
    _rule("run_shell_command", "allow", OUR_RULES_PRIORITY, "cafleet")
    + "\n"
    + _rule("activate_skill", "allow", OUR_RULES_PRIORITY)
)
_BODIES = {
    # With --approval-mode auto_edit (edits inside the workspace): every command, but the
    # network ones and web tools ask.
    "workspace": _rule("run_shell_command", "allow", 100)
    + "\n"
    + _rule("run_shell_command", "ask_user", 200, NETWORK_PREFIXES)
    + "\n"
    + _rule(["web_fetch", "google_web_search"], "ask_user", 200),
    # With --approval-mode default: Gemini's own asking.
    "ask": "",
    # With --approval-mode default: reads only. Not --approval-mode plan, whose exit_plan_mode
    # asks the human to leave it.
    "readonly": _rule(
        ["run_shell_command", "write_file", "replace", "web_fetch", "google_web_search"],
        "deny",
        100,
    ),
}


def policy_file(profile: str, version: str) -> bytes:
    head = (
        f"# cafleet {version}: the `{profile}` permission profile of cafleet members "
        "(installed by `cafleet setup`, which replaces this file).\n\n"
    )
    body = _BODIES[profile]
    return (head + _CAFLEET + ("\n" + body if body else "")).encode()


def policy_files(version: str) -> dict[str, bytes]:
    """The folder's files: `<profile>.toml`."""
    return {f"{profile}.toml": policy_file(profile, version) for profile in PROFILES}


__all__ = ["FOLDER", "PROFILES", "policy_file", "policy_files"]
