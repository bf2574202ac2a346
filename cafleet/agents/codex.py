"""codex (runtime.md §2.3)."""

from __future__ import annotations

import os

from cafleet.agents._base import BaseAgent


def _resolved_db_dir() -> str:
    from cafleet.config import resolve_database_path

    return os.path.dirname(os.path.abspath(resolve_database_path(os.environ)))


class CodexAgent(BaseAgent):
    name = "codex"
    binary = "codex"
    effort_levels = ("minimal", "low", "medium", "high", "xhigh")

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
    ) -> list[str]:
        """`<path> --ask-for-approval never --sandbox workspace-write --add-dir <db dir>
        [--model M] [--config=model_reasoning_effort=E] <prompt>`.

        ``db_dir`` is the directory of the database the spawning process resolved; when None it
        is resolved from this process's environment. The display name and monitor flag change
        nothing.
        """
        directory = os.path.abspath(db_dir) if db_dir is not None else _resolved_db_dir()
        argv = [binary_path, "--ask-for-approval", "never", "--sandbox", "workspace-write"]
        argv += ["--add-dir", directory]
        if model is not None:
            argv += ["--model", model]
        if effort is not None:
            argv.append(f"--config=model_reasoning_effort={effort}")
        argv.append(prompt)
        return argv
