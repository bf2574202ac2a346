"""Helpers for the assets tests: the agents' directories under the test HOME, file-tree
snapshots (bytes and modification times) and read-only directories."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import cafleet
from cafleet.agents.registry import agent_names, load_agent

AGENTS = agent_names()
VERSION = cafleet.__version__
DEFAULTS = {a: "~/" + load_agent(a).config_default.replace(os.sep, "/") for a in AGENTS}


def home() -> Path:
    return Path(os.environ["HOME"])


def agent_dir(agent: str, base: Path | None = None) -> Path:
    """The agent's default identity path under ``base`` (default: the test's HOME)."""
    return (base or home()) / load_agent(agent).config_default


def expected_files(agent: str, version: str = VERSION) -> dict[str, bytes]:
    """Relative path → bytes of everything setup installs for ``agent``."""
    from cafleet.assets.bundle import units_for

    files: dict[str, bytes] = {}
    for unit in units_for(agent, version):
        for rel, data in unit.files.items():
            files[f"{unit.rel}/{rel}" if rel else unit.rel] = data
    return files


def tree(root: Path, *, dir_mtimes: bool = True) -> dict[str, tuple[str, int]]:
    """Every file below ``root``: relative path → (sha256, mtime_ns); directories too, as
    ("<dir>", mtime_ns) (mtime 0 without ``dir_mtimes``), so an added or removed entry shows."""
    found: dict[str, tuple[str, int]] = {}
    if not root.exists():
        return found
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames:
            path = Path(dirpath) / name
            mtime = path.stat().st_mtime_ns if dir_mtimes else 0
            found[str(path.relative_to(root))] = ("<dir>", mtime)
        for name in filenames:
            path = Path(dirpath) / name
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            found[str(path.relative_to(root))] = (digest, path.stat().st_mtime_ns)
    return found


def files_below(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[None]:
    """Make the directory ``path`` unwritable for the duration: mode 0555, and for root (which
    mode bits do not stop) the immutable attribute."""
    mode = path.stat().st_mode
    chattr = shutil.which("chattr") if os.geteuid() == 0 else None
    if os.geteuid() == 0:
        assert chattr, "chattr is needed to make a directory read-only for root"
    os.chmod(path, 0o555)
    try:
        if chattr:
            subprocess.run([chattr, "+i", str(path)], check=True)
        try:
            yield
        finally:
            if chattr:
                subprocess.run([chattr, "-i", str(path)], check=True)
    finally:
        os.chmod(path, mode)


def asset_rows(db: Path) -> list[tuple[str, str, str]]:
    from tests.cli_helpers import query

    return [
        (r[0], r[1], r[2])
        for r in query(
            db,
            "SELECT coding_agent, path, cafleet_version FROM asset_installs "
            "ORDER BY coding_agent, path",
        )
    ]


def install_version(version: str, agents: tuple[str, ...] = AGENTS) -> None:
    """Files as cafleet ``version`` would have installed them (no row)."""
    from cafleet.assets.bundle import units_for
    from cafleet.assets.install import install_units

    for agent in agents:
        install_units(str(agent_dir(agent)), units_for(agent, version))


def install_fake_agents(bin_dir: Path, agents: tuple[str, ...] = AGENTS) -> Path:
    """The harness's fake agents (tests/harness/fake_agent.py) as ``bin_dir/<agent>``: what
    `cafleet doctor` finds on PATH (each answers ``--version`` with ``fake-<agent> 0.0.0``)."""
    import sys

    source = Path(__file__).resolve().parent / "harness" / "fake_agent.py"
    bin_dir.mkdir(parents=True, exist_ok=True)
    body = source.read_text(encoding="utf-8")
    if body.startswith("#!"):
        body = body.split("\n", 1)[1]
    for agent in agents:
        target = bin_dir / agent
        target.write_text(f"#!{sys.executable}\n{body}", encoding="utf-8")
        target.chmod(0o755)
    return bin_dir
