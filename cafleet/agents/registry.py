"""The one registry of coding agents: every list of agents (CLI choices, setup targets, doctor
rows, the catalog's per-agent parameters, the generated docs tables) derives from it.

Each agent is one package, `cafleet/agents/<name>/`, whose ``AGENT`` implements
`cafleet.agents.CodingAgent`; adding an agent is adding its package and its line below. A
package is imported on first use of its agent, so naming agents costs nothing at start-up.
Standard library only: any layer may import this module.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cafleet.agents import CodingAgent

# name -> the package that defines its AGENT, in the order every list shows them.
_PACKAGES: dict[str, str] = {
    "claude": "cafleet.agents.claude",
    "codex": "cafleet.agents.codex",
    "opencode": "cafleet.agents.opencode",
    "gemini": "cafleet.agents.gemini",
}
_LOADED: dict[str, CodingAgent] = {}


def agent_names() -> tuple[str, ...]:
    """Every registered agent's name, in order."""
    return tuple(_PACKAGES)


def load_agent(name: str) -> CodingAgent:
    """The registered agent ``name``; KeyError for a name that is not registered."""
    agent = _LOADED.get(name)
    if agent is None:
        agent = importlib.import_module(_PACKAGES[name]).AGENT
        _LOADED[name] = agent
    return agent


def find_agent(name: str | None) -> CodingAgent | None:
    """The registered agent ``name``, or None (no name, or one cafleet does not know)."""
    return load_agent(name) if name in _PACKAGES else None


def register(package: str) -> None:
    """Register the agent a package defines (its ``AGENT``), after the built-in ones: how a
    test adds an agent without editing this module."""
    agent: CodingAgent = importlib.import_module(package).AGENT
    _PACKAGES[agent.name] = package
    _LOADED[agent.name] = agent


def unregister(name: str) -> None:
    """Forget an agent ``register`` added."""
    _PACKAGES.pop(name, None)
    _LOADED.pop(name, None)


__all__ = ["agent_names", "find_agent", "load_agent", "register", "unregister"]
