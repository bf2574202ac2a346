"""Coding agents (docs/runtime.md §2): the CodingAgent protocol, the registry, and their errors.

Standard library only. `AgentUsageError` maps to exit 2, `AgentUnavailable` to exit 1; each
error's ``str()`` is docs/cli.md §1.9's exact message.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

from cafleet import status
from cafleet.errors import CafleetError


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
    name: str  # "claude" | "codex" | "opencode"
    binary: str  # looked up on PATH

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


def _claude() -> CodingAgent:
    from cafleet.agents.claude import ClaudeAgent

    return ClaudeAgent()


def _codex() -> CodingAgent:
    from cafleet.agents.codex import CodexAgent

    return CodexAgent()


def _opencode() -> CodingAgent:
    from cafleet.agents.opencode import OpencodeAgent

    return OpencodeAgent()


_REGISTRY: dict[str, Callable[[], CodingAgent]] = {
    "claude": _claude,
    "codex": _codex,
    "opencode": _opencode,
}
AGENT_NAMES: tuple[str, ...] = tuple(_REGISTRY)  # the CLI's --coding-agent choices, in order


def get_agent(name: str) -> CodingAgent:
    """Resolve an agent by name (the CLI's Click choice already limits the names)."""
    try:
        factory = _REGISTRY[name]
    except KeyError:
        raise AgentUsageError(
            f"unknown coding agent '{name}'; choose one of {', '.join(AGENT_NAMES)}"
        ) from None
    return factory()


__all__ = [
    "AGENT_NAMES",
    "AgentError",
    "AgentUnavailable",
    "AgentUsageError",
    "CodingAgent",
    "get_agent",
]
