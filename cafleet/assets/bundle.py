"""The files `cafleet setup` installs for each coding agent, rendered for this version.

Package data under `cafleet/data/` (read with importlib.resources, nothing is fetched):

- `skills/<name>/…`: one folder per skill in the Agent Skills format (SKILL.md with `name` and
  `description` front matter, role files beside it). Every agent gets every skill folder under
  `<identity path>/skills/<name>/`.
- `presets/…`: what an agent's package installs besides the skills (`asset_units`: Codex's
  rules file, opencode's agent presets).

`@CAFLEET_VERSION@` in a text file becomes the running cafleet's version, so an upgrade changes
the installed files and `cafleet doctor` can tell a file of another version.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable

from cafleet.agents.registry import load_agent

VERSION_TOKEN = "@CAFLEET_VERSION@"
SKILLS_DIR = "skills"


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


def preset(name: str, version: str) -> bytes:
    """A file of `presets/`, rendered."""
    return _render(_data().joinpath("presets", name).read_bytes(), version)


def member_instructions(version: str) -> bytes:
    """The `cafleet` skill's member instructions (`member.md`), rendered."""
    return _render(_data().joinpath(SKILLS_DIR, "cafleet", "member.md").read_bytes(), version)


def units_for(coding_agent: str, version: str) -> list[Unit]:
    """Everything installed for one agent, in installation order: every skill, then what its
    package adds (`CodingAgent.asset_units`)."""
    units = [Unit(f"{SKILLS_DIR}/{name}", skill_files(name, version)) for name in skill_names()]
    return units + load_agent(coding_agent).asset_units(version)


__all__ = [
    "Unit",
    "member_instructions",
    "preset",
    "skill_files",
    "skill_names",
    "units_for",
]
