"""Coding agents (docs/runtime.md §2): the CodingAgent protocol, and their errors; the agents
themselves are the packages `registry` lists.

Standard library only. `AgentUsageError` maps to exit 2, `AgentUnavailable` to exit 1; each
error's ``str()`` is docs/cli.md §1.9's exact message.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from cafleet import status
from cafleet.agents.registry import agent_names, find_agent
from cafleet.errors import CafleetError

if TYPE_CHECKING:
    from collections.abc import Mapping

    from cafleet.assets.bundle import Unit
    from cafleet.assets.permissions import PermissionRow
    from cafleet.delivery.policy import InputPolicy
    from cafleet.delivery.screens.cues import AgentScreens
    from cafleet.sessions import AgentRecords, SessionRecord


class AgentError(CafleetError):
    """Base of the agent errors; ``str()`` is the user-facing message."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class AgentUsageError(AgentError):
    """A bad model, effort or spawn-prompt template: a usage error (exit 2)."""

    error_code = status.CODE_USAGE


class AgentUnavailable(AgentError):
    """The agent's binary is not on PATH (exit 1): `binary <name> not found on PATH`."""


@runtime_checkable
class CodingAgent(Protocol):
    """Everything cafleet knows about one coding agent; each is one package under
    `cafleet/agents/` (`_base.BaseAgent` gives the defaults), listed in `registry`."""

    name: str  # its --coding-agent value, stored in placements and asset installs
    binary: str  # looked up on PATH
    npm_package: str  # the install remedy doctor names, and where it reads the version
    # Its configuration directory (skills, presets, settings): variables in precedence order,
    # each with a suffix appended to its value, then the default under HOME.
    config_variables: tuple[tuple[str, str], ...]
    config_default: str
    record_variables: tuple[str, ...]  # variables beyond HOME that move its session records
    hooks: bool  # `with_hooks` installs hooks that run `cafleet hook` (docs/runtime.md §4.12)
    policy: InputPolicy  # how cafleet types into its composer
    screens: AgentScreens  # its screen cues, composer finder and prompt reader
    records: AgentRecords  # its session records: finding, locating, usage

    def validate_model(self, model: str | None, *, flag: str) -> None: ...

    def validate_effort(self, effort: str | None, *, flag: str) -> None: ...

    def ensure_available(self) -> str: ...

    def pane_env(self) -> dict[str, str]: ...

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
    ) -> list[str]: ...

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
    ) -> list[str]: ...

    def with_hooks(self, argv: list[str], member_id: int) -> list[str]: ...

    def hook_env(self, member_id: int) -> dict[str, str]: ...

    def session_from_hook(self, payload: Mapping[str, Any]) -> SessionRecord | None: ...

    def asset_units(self, version: str) -> list[Unit]: ...

    def holds_line(self, path: str, session_id: str, frame: str) -> bool: ...

    def locate_remembered(
        self, session_id: str, remembered: SessionRecord
    ) -> SessionRecord | None: ...

    def check_permissions(self, config_dir: str, cwd: str, version: str) -> PermissionRow: ...


def get_agent(name: str) -> CodingAgent:
    """Resolve an agent by name (the CLI's Click choice already limits the names)."""
    agent = find_agent(name)
    if agent is None:
        raise AgentUsageError(
            f"unknown coding agent '{name}'; choose one of {', '.join(agent_names())}"
        )
    return agent


__all__ = [
    "AgentError",
    "AgentUnavailable",
    "AgentUsageError",
    "CodingAgent",
    "agent_names",
    "get_agent",
]
