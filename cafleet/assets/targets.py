"""Each coding agent's identity path: the configuration directory it reads skills from. Each
agent's package names its variables and default (`config_variables`, `config_default`; the
table is in docs/maintaining.md §2).

As everywhere in cafleet (docs/cli.md §1.6), a variable set to the empty string counts as unset.
**Decision:** the resolved path is `os.path.abspath` of the value (a relative value is taken
from the current directory, `..` and trailing slashes are folded, symlinks are *not* resolved),
and that exact string is what `asset_installs.path` stores and the guard compares. Standard
library only: the stale-assets guard resolves these on every guarded command.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import NamedTuple

from cafleet.agents.registry import agent_names, load_agent
from cafleet.errors import CafleetError


class TargetUnresolved(CafleetError):
    """No path can be derived (HOME unset and no agent variable); str() is the message."""


class Target(NamedTuple):
    coding_agent: str
    path: str  # absolute, as resolved
    source: str  # the variable it came from, or "default"
    default: str  # the default shown to people: "~/.claude" and the like

    @property
    def source_text(self) -> str:
        """`CODEX_HOME`, or `default ~/.codex`."""
        return self.source if self.source != "default" else f"default {self.default}"


def _rule(coding_agent: str) -> tuple[tuple[tuple[str, str], ...], str]:
    """(variables in precedence order with the suffix appended to each, default under HOME)."""
    agent = load_agent(coding_agent)
    return agent.config_variables, agent.config_default


def _get(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name)
    return value if value else None


def resolve_target(coding_agent: str, env: Mapping[str, str] | None = None) -> Target:
    """The agent's identity path; raises `TargetUnresolved` when HOME is needed and unset."""
    env = os.environ if env is None else env
    variables, default = _rule(coding_agent)
    for name, suffix in variables:
        value = _get(env, name)
        if value is not None:
            path = os.path.join(value, suffix) if suffix else value
            return Target(coding_agent, os.path.abspath(path), name, "~/" + default)
    home = _get(env, "HOME")
    shown = "~/" + default.replace(os.sep, "/")
    if home is None:
        names = " or ".join(name for name, _ in variables)
        raise TargetUnresolved(
            f"cannot resolve {coding_agent}'s configuration directory: HOME is not set "
            f"(set {names})"
        )
    return Target(coding_agent, os.path.abspath(os.path.join(home, default)), "default", shown)


def identity_variables(coding_agent: str) -> tuple[str, ...]:
    """The variables that move the agent's identity path, in precedence order."""
    return tuple(name for name, _suffix in _rule(coding_agent)[0])


def resolved_paths(env: Mapping[str, str] | None = None) -> dict[str, str | None]:
    """Every agent's resolved path, None where it cannot be resolved (the guard's input)."""
    paths: dict[str, str | None] = {}
    for agent in agent_names():
        try:
            paths[agent] = resolve_target(agent, env).path
        except TargetUnresolved:
            paths[agent] = None
    return paths


__all__ = [
    "Target",
    "TargetUnresolved",
    "identity_variables",
    "resolve_target",
    "resolved_paths",
]
