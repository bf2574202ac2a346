"""Shared pieces of the agent implementations."""

from __future__ import annotations

import os
import shutil

from cafleet.agents import AgentUnavailable, AgentUsageError


def msg_empty(flag: str) -> str:
    return f"{flag} may not be empty"


def msg_effort_choice(flag: str, agent: str, levels: tuple[str, ...], value: str) -> str:
    return f"{flag} for the {agent} coding agent must be one of {', '.join(levels)} (got '{value}')"


class BaseAgent:
    name: str = ""
    binary: str = ""
    effort_levels: tuple[str, ...] = ()

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
