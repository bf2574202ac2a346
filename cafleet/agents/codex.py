"""codex (docs/runtime.md §2.3)."""

from __future__ import annotations

import os

from cafleet.agents._base import BaseAgent


def _resolved_db_dir() -> str:
    from cafleet.config import db_dir_of, resolve_database_path

    return os.path.abspath(db_dir_of(resolve_database_path(os.environ)))


class CodexAgent(BaseAgent):
    name = "codex"
    binary = "codex"
    effort_levels = ("minimal", "low", "medium", "high", "xhigh")

    # `<path> <profile flags> [--model M] [--config=model_reasoning_effort=E] <prompt>`; the
    # monitor runs `--ask-for-approval never --sandbox workspace-write --add-dir <db dir>`.
    # `cafleet …` commands run outside the sandbox, without asking, under every profile: the
    # installed rules file allows them (docs/permissions.md §2).

    def leading_args(
        self, *, display_name: str, monitor: bool, db_dir: str | None, permissions: str
    ) -> list[str]:
        """``db_dir`` is the directory of the database the spawning process resolved; when None
        it is resolved from this process's environment. The display name changes nothing."""
        if not monitor and permissions == "full":
            return ["--dangerously-bypass-approvals-and-sandbox"]
        if not monitor and permissions in ("ask", "readonly"):
            # Codex's own read-only mode; `ask` lets the model ask to leave it (Codex 0.171.0
            # knows only the approval policies on-request and never).
            approval = "on-request" if permissions == "ask" else "never"
            return ["--ask-for-approval", approval, "--sandbox", "read-only"]
        directory = os.path.abspath(db_dir) if db_dir is not None else _resolved_db_dir()
        argv = ["--ask-for-approval", "never" if monitor else "on-request"]
        return argv + ["--sandbox", "workspace-write", "--add-dir", directory]

    def effort_args(self, effort: str) -> list[str]:
        return [f"--config=model_reasoning_effort={effort}"]

    # `codex resume [OPTIONS] <id>`: the subcommand takes the same approval, sandbox, add-dir,
    # model and config options (Codex CLI 0.171).
    def resume_subcommand(self) -> list[str]:
        return ["resume"]

    def resume_args(self, session_id: str) -> list[str]:
        return [session_id]
