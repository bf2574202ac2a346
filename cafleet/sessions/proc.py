"""Where a pane's agent keeps its records: the environment and working directory of the process
the pane runs (docs/runtime.md §9.4), read from ``/proc`` (Linux). Elsewhere, or when the process
is gone, the caller's own environment is used and the directory is not known.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from cafleet.agents.registry import agent_names, load_agent


def record_variables() -> tuple[str, ...]:
    """The variables that move an agent's records (HOME and each agent's own); nothing else is
    kept from the pane's environment."""
    names = ["HOME"]
    for agent in agent_names():
        names += [v for v in load_agent(agent).record_variables if v not in names]
    return tuple(names)


def process_env(pid: int) -> dict[str, str] | None:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    env: dict[str, str] = {}
    wanted = record_variables()
    for item in raw.split(b"\0"):
        name, sep, value = item.partition(b"=")
        key = name.decode(errors="replace")
        if sep and key in wanted:
            env[key] = value.decode(errors="replace")
    return env


def process_cwd(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return None


def pane_home(pid: int | None, fallback: Mapping[str, str]) -> tuple[dict[str, str], str | None]:
    """(record variables, working directory) of the pane's process ``pid``."""
    if pid is not None:
        env = process_env(pid)
        if env is not None:
            return env, process_cwd(pid)
    wanted = record_variables()
    return {k: v for k, v in fallback.items() if k in wanted}, None
