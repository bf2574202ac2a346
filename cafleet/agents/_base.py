"""Shared pieces of the agent implementations: `BaseAgent`, the defaults of the
`cafleet.agents.CodingAgent` protocol that each agent's package overrides where it differs."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from typing import Any

from cafleet.agents import AgentUnavailable, AgentUsageError
from cafleet.assets.bundle import Unit
from cafleet.assets.permissions import PermissionRow
from cafleet.delivery.policy import InputPolicy
from cafleet.delivery.screens.cues import AgentScreens
from cafleet.sessions import AgentRecords, SessionRecord

# The member id in a member's pane, for hooks installed once for every member (opencode's
# plugin, Gemini CLI's hooks file) (docs/runtime.md §4.12).
HOOK_VARIABLE = "CAFLEET_HOOK_MEMBER"


def hook_command(event: str, member_id: int) -> list[str]:
    """`cafleet hook EVENT --member-id M`: what every installed hook runs (docs/cli.md §2.38)."""
    return ["cafleet", "hook", event, "--member-id", str(member_id)]


def msg_empty(flag: str) -> str:
    return f"{flag} may not be empty"


def msg_effort_choice(flag: str, agent: str, levels: tuple[str, ...], value: str) -> str:
    return f"{flag} for the {agent} coding agent must be one of {', '.join(levels)} (got '{value}')"


class BaseAgent:
    name: str = ""
    binary: str = ""
    npm_package: str = ""
    effort_levels: tuple[str, ...] = ()
    config_variables: tuple[tuple[str, str], ...] = ()
    config_default: str = ""
    record_variables: tuple[str, ...] = ()
    hooks = False  # `with_hooks` installs its hooks (docs/runtime.md §4.12)
    policy: InputPolicy
    screens: AgentScreens
    records: AgentRecords

    def asset_units(self, version: str) -> list[Unit]:
        """What `setup` installs beyond the skills every agent gets (a preset, rules)."""
        return []

    def with_hooks(self, argv: list[str], member_id: int) -> list[str]:
        """``argv`` (from `build_argv` or `build_resume_argv`) with the agent's hooks running
        `cafleet hook EVENT --member-id M` (docs/runtime.md §4.12); unchanged by default."""
        return argv

    def hook_env(self, member_id: int) -> dict[str, str]:
        """What a member's pane (never the monitor's) gets so its installed hooks report;
        nothing by default."""
        return {}

    def session_from_hook(self, payload: Mapping[str, Any]) -> SessionRecord | None:
        """The session a hook's payload names with its record's file (docs/runtime.md §9.4);
        None when the agent's payload does not say where its record is (by default)."""
        return None

    def holds_line(self, path: str, session_id: str, frame: str) -> bool:
        """Whether its record at ``path`` holds a user message with ``frame`` (the second
        witness of a submit, docs/runtime.md §4.9); no record reader: never."""
        return False

    def locate_remembered(self, session_id: str, remembered: SessionRecord) -> SessionRecord | None:
        """``session_id`` where it was recorded (``remembered``, whose file still exists): a
        file per session by default, so the file is the session."""
        return remembered if session_id in os.path.basename(remembered.path) else None

    def check_permissions(self, config_dir: str, cwd: str, version: str) -> PermissionRow:
        """Doctor's member-permissions row: rules in its own settings that would block the
        cafleet commands members run (docs/cli.md §3.3); none read by default."""
        return PermissionRow(self.name)

    def validate_model(self, model: str | None, *, flag: str) -> None:
        if model is None:
            return
        if model == "":
            raise AgentUsageError(msg_empty(flag))

    def validate_effort(self, effort: str | None, *, flag: str) -> None:
        if effort is None:
            return
        if effort not in self.effort_levels:
            raise AgentUsageError(msg_effort_choice(flag, self.name, self.effort_levels, effort))

    def ensure_available(self) -> str:
        """The absolute path of the agent's binary on PATH."""
        found = shutil.which(self.binary)
        if not found:
            raise AgentUnavailable(f"binary {self.binary} not found on PATH")
        return os.path.abspath(found)

    def pane_env(self) -> dict[str, str]:
        """Variables the agent's pane gets beyond cafleet's own (none by default)."""
        return {}

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
        permissions: str = "workspace",
    ) -> list[str]:
        """`<path> <leading args> [--model M] [<effort args>] <prompt args>`; each agent
        supplies the parts that are its own. ``permissions`` is the member's profile
        (docs/permissions.md); the monitor ignores it."""
        argv = [binary_path]
        argv += self.leading_args(
            display_name=display_name, monitor=monitor, db_dir=db_dir, permissions=permissions
        )
        if model is not None:
            argv += ["--model", model]
        if effort is not None:
            argv += self.effort_args(effort)
        argv += self.prompt_args(prompt)
        return argv

    def build_resume_argv(
        self,
        *,
        binary_path: str,
        session_id: str,
        display_name: str,
        model: str | None,
        effort: str | None,
        monitor: bool,
        db_dir: str | None = None,
        permissions: str = "workspace",
    ) -> list[str]:
        """The same command continuing the agent's session ``session_id`` instead of starting
        one with a prompt (docs/runtime.md §9.7): `<path> <resume subcommand> <leading args>
        [--model M] [<effort args>] <resume args>`."""
        argv = [binary_path, *self.resume_subcommand()]
        argv += self.leading_args(
            display_name=display_name, monitor=monitor, db_dir=db_dir, permissions=permissions
        )
        if model is not None:
            argv += ["--model", model]
        if effort is not None:
            argv += self.effort_args(effort)
        argv += self.resume_args(session_id)
        return argv

    def resume_subcommand(self) -> list[str]:
        """Words right after the binary that select resuming (Codex's `resume`)."""
        return []

    def resume_args(self, session_id: str) -> list[str]:
        """How the session to continue is named; each agent has its own flag."""
        raise NotImplementedError

    def leading_args(
        self, *, display_name: str, monitor: bool, db_dir: str | None, permissions: str
    ) -> list[str]:
        """What follows the binary's path, before the model."""
        return []

    def effort_args(self, effort: str) -> list[str]:
        """How the (validated) effort is passed; nothing by default."""
        return []

    def prompt_args(self, prompt: str) -> list[str]:
        """How the prompt is passed; as the last argument by default."""
        return [prompt]
