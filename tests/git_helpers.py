"""Real git repositories for the worktree tests."""

from __future__ import annotations

import subprocess
from pathlib import Path


def git(repo: Path | str, *args: str) -> str:
    """``git <args>`` in ``repo``; fails the test on a non-zero exit. Returns stdout."""
    proc = subprocess.run(
        ["git", *args], cwd=str(repo), capture_output=True, text=True, check=False, timeout=30
    )
    assert proc.returncode == 0, (args, proc.stderr)
    return proc.stdout


def branches(repo: Path) -> set[str]:
    return set(git(repo, "branch", "--list", "--format=%(refname:short)").split())


def init_repo(path: Path, files: dict[str, str] | None = None) -> Path:
    """A repository at ``path`` with one commit on `main` of ``files`` (default: shared.txt)."""
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.name", "Tester")
    git(path, "config", "user.email", "tester@example.invalid")
    for name, text in (files or {"shared.txt": "line 0\n"}).items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    git(path, "add", *(files or {"shared.txt": ""}))
    git(path, "commit", "-qm", "first")
    return path
