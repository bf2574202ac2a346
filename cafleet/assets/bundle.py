"""The files `cafleet setup` installs for each coding agent, rendered for this version.

Package data under `cafleet/data/` (read with importlib.resources, nothing is fetched):

- `skills/<name>/…`: one folder per skill in the Agent Skills format (SKILL.md with `name` and
  `description` front matter, role files beside it). Every agent gets every skill folder under
  `<identity path>/skills/<name>/`.
- `presets/codex-cafleet.rules` → codex's `rules/cafleet.rules` (allows `cafleet …` commands).
- `presets/opencode-agent.md` + the skill's `member.md` → opencode's `agents/cafleet.md`, the
  agent preset members run with (`--agent cafleet`, permission profile workspace): its front
  matter, then the member instructions as the body; `presets/opencode-agent-<profile>.md` →
  `agents/cafleet-<profile>.md` for the profiles ask, readonly and full (docs/permissions.md).

`@CAFLEET_VERSION@` in a text file becomes the running cafleet's version, so an upgrade changes
the installed files and `cafleet doctor` can tell a file of another version.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable

VERSION_TOKEN = "@CAFLEET_VERSION@"
SKILLS_DIR = "skills"
CODEX_RULES = "rules/cafleet.rules"
OPENCODE_AGENT = "agents/cafleet.md"
OPENCODE_AGENT_NAME = "cafleet"


@dataclass(frozen=True, slots=True)
class Unit:
    """One thing installed under an identity path: a whole folder cafleet owns (``files`` maps
    paths inside it to bytes) or a single file (``files`` is ``{"": content}``)."""

    rel: str  # path below the identity path, "/"-separated
    files: dict[str, bytes]

    @property
    def is_folder(self) -> bool:
        return "" not in self.files


def _data() -> Traversable:
    return resources.files("cafleet").joinpath("data")


def _render(raw: bytes, version: str) -> bytes:
    return raw.replace(VERSION_TOKEN.encode(), version.encode())


def _walk(node: Traversable, prefix: str = "") -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    for child in sorted(node.iterdir(), key=lambda c: c.name):
        if child.name.startswith(".") or child.name == "__pycache__":
            continue
        rel = f"{prefix}{child.name}"
        if child.is_dir():
            files.update(_walk(child, rel + "/"))
        else:
            files[rel] = child.read_bytes()
    return files


def skill_names() -> list[str]:
    """The bundled skills, by folder name."""
    root = _data().joinpath(SKILLS_DIR)
    return sorted(c.name for c in root.iterdir() if c.is_dir() and not c.name.startswith("."))


def skill_files(name: str, version: str) -> dict[str, bytes]:
    """A skill folder's files (relative path → rendered bytes)."""
    raw = _walk(_data().joinpath(SKILLS_DIR, name))
    return {rel: _render(data, version) for rel, data in raw.items()}


def codex_rules(version: str) -> bytes:
    return _render(_data().joinpath("presets", "codex-cafleet.rules").read_bytes(), version)


# The opencode agent presets beside `agents/cafleet.md` (profile workspace): one per other
# permission profile (docs/permissions.md §2), `agents/cafleet-<profile>.md`.
OPENCODE_PROFILE_AGENTS: tuple[str, ...] = ("ask", "readonly", "full")


def opencode_agent(version: str, profile: str = "workspace") -> bytes:
    name = "opencode-agent.md" if profile == "workspace" else f"opencode-agent-{profile}.md"
    header = _render(_data().joinpath("presets", name).read_bytes(), version)
    body = _data().joinpath(SKILLS_DIR, "cafleet", "member.md").read_bytes()
    return header + b"\n" + _render(body, version)


def units_for(coding_agent: str, version: str) -> list[Unit]:
    """Everything installed for one agent, in installation order."""
    units = [Unit(f"{SKILLS_DIR}/{name}", skill_files(name, version)) for name in skill_names()]
    if coding_agent == "codex":
        units.append(Unit(CODEX_RULES, {"": codex_rules(version)}))
    elif coding_agent == "opencode":
        units.append(Unit(OPENCODE_AGENT, {"": opencode_agent(version)}))
        for profile in OPENCODE_PROFILE_AGENTS:
            units.append(
                Unit(f"agents/cafleet-{profile}.md", {"": opencode_agent(version, profile)})
            )
    return units


__all__ = [
    "CODEX_RULES",
    "OPENCODE_AGENT",
    "OPENCODE_AGENT_NAME",
    "OPENCODE_PROFILE_AGENTS",
    "Unit",
    "codex_rules",
    "opencode_agent",
    "skill_files",
    "skill_names",
    "units_for",
]
