"""Gemini CLI (docs/runtime.md §2.5, docs/permissions.md): its argv and permission profiles,
policy files (`policies`, installed by `setup`), input policy, screens (`screens`), session
records (`records`) and doctor's check of its policies (`rules`).

`<path> --approval-mode <mode> [--policy <file>] [--model M] --prompt-interactive <prompt>`;
resuming replaces the prompt with `--resume <session id>`. Its configuration directory is
`$GEMINI_CLI_HOME/.gemini`, else `~/.gemini`: skills in `skills/<name>/SKILL.md`, cafleet's
policy files in `cafleet/<profile>.toml`, so `ensure_available` also requires those.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from cafleet.agents import AgentUnavailable, AgentUsageError
from cafleet.agents._base import HOOK_VARIABLE, BaseAgent
from cafleet.agents.gemini.policies import FOLDER, policy_files
from cafleet.agents.gemini.records import (
    READER,
    holds_line,
    locate_remembered,
    session_of_payload,
)
from cafleet.agents.gemini.screens import SCREENS
from cafleet.assets.bundle import Unit
from cafleet.assets.permissions import PermissionRow
from cafleet.assets.targets import TargetUnresolved, resolve_target
from cafleet.delivery.policy import InputPolicy
from cafleet.sessions import SessionRecord

# profile -> its approval mode; every profile but `full` adds its policy file. The monitor runs
# as `readonly`: reads and `cafleet` commands, nothing that could ask.
APPROVAL_MODES = {"workspace": "auto_edit", "ask": "default", "readonly": "default", "full": "yolo"}

POLICY = InputPolicy(
    "gemini",
    "hold",
    "C-u",
    6,
    "Escape",
    "Held while Gemini CLI works: a line it queued ('Queued (press ↑ to edit)') during its "
    "first turn stayed in its composer, never sent (a full run, 2026-12-04), so a line waits "
    "for the ready screen; one Escape cancels the turn and sends a queued line at once. "
    "Ctrl-U empties the composer. Pasted (bracketed) with Enter 0.3 s later: taken 3/3 "
    "ready, where 0.1 s lost 1 in 3. An Enter in its first seconds after start-up can be "
    "lost; its composer empties at once on a taken line and ignores an empty Enter, so "
    "Enter is pressed again after 1.5 s (docs/agent-screens.md §6.1).",
    enter_again_after=1.5,
    paste=True,
    settle=0.3,
)


# Gemini CLI's hook events -> `cafleet hook` events (docs/runtime.md §4.12), in an extension
# `setup` installs (`extensions/cafleet/`: Gemini adds its hooks to the user's; a settings file
# pointed at by GEMINI_CLI_SYSTEM_DEFAULTS_PATH is skipped below a world-writable directory).
# Gemini runs a hook through the shell and waits for it: `cafleet hook` prints nothing and
# returns at once; outside a member's pane (no `CAFLEET_HOOK_MEMBER`) nothing runs.
HOOK_EVENTS: tuple[tuple[str, str], ...] = (
    ("BeforeAgent", "prompt"),  # its payload's `prompt` holds the submitted text
    ("BeforeTool", "tool"),
    ("AfterAgent", "stop"),
    ("Notification", "permission"),  # its only kind: `ToolPermission`
)
EXTENSION = "extensions/cafleet"
HOOK_TIMEOUT_MS = 10_000


def extension_files(version: str) -> dict[str, bytes]:
    """The extension: its manifest and `hooks/hooks.json`."""
    manifest = {"name": "cafleet", "version": version}
    return {
        "gemini-extension.json": (json.dumps(manifest, indent=2) + "\n").encode(),
        "hooks/hooks.json": hooks_file(),
    }


def hooks_file() -> bytes:
    """The extension's hooks: each names the member through the pane's `CAFLEET_HOOK_MEMBER`
    (so one file serves every member, and holds no path)."""
    hooks = {
        name: [
            {
                "hooks": [
                    {
                        "type": "command",
                        "name": f"cafleet-{event}",
                        "command": f'[ -z "${HOOK_VARIABLE}" ] || '
                        f'cafleet hook {event} --member-id "${HOOK_VARIABLE}"',
                        "timeout": HOOK_TIMEOUT_MS,
                    }
                ]
            }
        ]
        for name, event in HOOK_EVENTS
    }
    return (json.dumps({"hooks": hooks}, indent=2) + "\n").encode()


def policy_path(profile: str) -> str:
    """Where the profile's policy file is installed; raises when the directory cannot be
    resolved."""
    try:
        root = resolve_target("gemini").path
    except TargetUnresolved as exc:
        raise AgentUnavailable(str(exc)) from None
    return os.path.join(root, FOLDER, f"{profile}.toml")


class GeminiAgent(BaseAgent):
    name = "gemini"
    binary = "gemini"
    npm_package = "@google/gemini-cli"
    effort_levels = ()
    config_variables = (("GEMINI_CLI_HOME", ".gemini"),)
    config_default = ".gemini"
    record_variables = ("GEMINI_CLI_HOME",)
    hooks = True
    policy = POLICY
    screens = SCREENS
    records = READER

    def asset_units(self, version: str) -> list[Unit]:
        return [Unit(FOLDER, policy_files(version)), Unit(EXTENSION, extension_files(version))]

    def hook_env(self, member_id: int) -> dict[str, str]:
        return {HOOK_VARIABLE: str(member_id)}

    def holds_line(self, path: str, session_id: str, frame: str) -> bool:
        return holds_line(path, session_id, frame)

    def session_from_hook(self, payload: Mapping[str, Any]) -> SessionRecord | None:
        return session_of_payload(payload)

    def locate_remembered(self, session_id: str, remembered: SessionRecord) -> SessionRecord | None:
        return locate_remembered(session_id, remembered)

    def check_permissions(self, config_dir: str, cwd: str, version: str) -> PermissionRow:
        # Imported here: `assets.status` loads tempfile and `rules` tomllib, which delivery
        # never needs.
        from cafleet.agents.gemini.rules import check_gemini
        from cafleet.assets.status import file_state

        state = file_state(config_dir, self.asset_units(version))[0]
        return check_gemini(config_dir, state)

    def validate_effort(self, effort: str | None, *, flag: str) -> None:
        if effort is not None:
            raise AgentUsageError(f"the gemini coding agent does not support {flag}")

    def ensure_available(self) -> str:
        """The binary, then the installed policy files (missing ones are refused with the
        remedy)."""
        binary = super().ensure_available()
        path = policy_path("workspace")
        if not os.path.isfile(path):
            raise AgentUnavailable(
                f"the cafleet policy files for gemini are not installed ({path} is missing); "
                "run 'cafleet setup --coding-agent gemini'"
            )
        return binary

    def leading_args(
        self, *, display_name: str, monitor: bool, db_dir: str | None, permissions: str
    ) -> list[str]:
        """`--approval-mode <mode>`, then `--policy <file>` but under `full` (docs/permissions.md
        §2). The display name changes nothing."""
        profile = "readonly" if monitor else permissions
        argv = ["--approval-mode", APPROVAL_MODES[profile]]
        if profile != "full":
            argv += ["--policy", policy_path(profile)]
        return argv

    def prompt_args(self, prompt: str) -> list[str]:
        return ["--prompt-interactive", prompt]

    def resume_args(self, session_id: str) -> list[str]:
        return ["--resume", session_id]


AGENT = GeminiAgent()
