"""Which coding agents are installed: each binary on PATH and its version (`doctor`,
docs/cli.md §3.3).

An npm install names its version in the package.json beside the binary's real path, read
without running anything; any other install is asked `<binary> --version`, all agents at once,
each for at most ``VERSION_TIMEOUT`` seconds. Standard library only.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Sequence
from typing import NamedTuple

VERSION_TIMEOUT = 10.0
# Each agent's npm package: its package.json gives the version, its name the install remedy.
PACKAGES = {
    "claude": "@anthropic-ai/claude-code",
    "codex": "@openai/codex",
    "opencode": "opencode-ai",
}


class Installed(NamedTuple):
    coding_agent: str
    path: str | None  # the binary's absolute path on PATH; None: not found
    version: str | None  # None: not found, or no version could be read
    version_error: str | None = None  # why the version is unknown

    @property
    def found(self) -> bool:
        return self.path is not None

    def remedy(self) -> str:
        agent = self.coding_agent
        return f"install it (npm install -g {PACKAGES[agent]}) to run {agent} members"


def _package_version(path: str, package: str) -> str | None:
    """The version in the package.json of ``package`` above the binary's real path, if any."""
    here = os.path.dirname(os.path.realpath(path))
    while True:
        candidate = os.path.join(here, "package.json")
        try:
            with open(candidate, encoding="utf-8") as fh:
                data = json.load(fh)
        except (OSError, ValueError):
            data = None
        if isinstance(data, dict) and data.get("name") == package:
            version = data.get("version")
            return version if isinstance(version, str) and version else None
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def _first_line(data: bytes) -> str:
    for line in data.decode("utf-8", "replace").splitlines():
        if line.strip():
            return line.strip()
    return ""


def installed_agents(agents: Sequence[str] = tuple(PACKAGES)) -> list[Installed]:
    """Each agent's binary (``shutil.which``, the lookup spawning uses) and its version."""
    found: dict[str, str | None] = {}
    for agent in agents:
        which = shutil.which(agent)
        found[agent] = os.path.abspath(which) if which else None
    versions = {a: _package_version(p, PACKAGES[a]) for a, p in found.items() if p is not None}
    # The rest are asked, all at once (a slow start-up costs its own time only once).
    asked: dict[str, subprocess.Popen[bytes]] = {}
    errors: dict[str, str] = {}
    for agent, path in found.items():
        if path is None or versions.get(agent):
            continue
        try:
            asked[agent] = subprocess.Popen(
                [path, "--version"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # never the caller's terminal
            )
        except OSError as exc:
            errors[agent] = f"'{path} --version' failed: {exc.strerror or exc}"
    for agent, proc in asked.items():
        try:
            out, _ = proc.communicate(timeout=VERSION_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            errors[agent] = f"'{found[agent]} --version' gave no answer in {VERSION_TIMEOUT:g}s"
            continue
        line = _first_line(out)
        if proc.returncode == 0 and line:
            versions[agent] = line
        else:
            errors[agent] = f"'{found[agent]} --version' exited {proc.returncode}"
    return [
        Installed(agent, found[agent], versions.get(agent), errors.get(agent)) for agent in agents
    ]


__all__ = ["PACKAGES", "VERSION_TIMEOUT", "Installed", "installed_agents"]
