"""Codex CLI (docs/runtime.md §2.3, docs/permissions.md): its argv and permission profiles, input
policy, screens (`screens`), session records (`records`), its rules file (`setup`) and
doctor's check of its rules (`rules`)."""

from __future__ import annotations

import json
import os

from cafleet.agents._base import BaseAgent, hook_command
from cafleet.agents.codex.records import READER, holds_line
from cafleet.agents.codex.screens import SCREENS
from cafleet.assets.bundle import Unit, preset
from cafleet.assets.permissions import PermissionRow
from cafleet.delivery.policy import InputPolicy

RULES_FILE = "rules/cafleet.rules"  # under the identity path; allows `cafleet …` commands


def _resolved_db_dir() -> str:
    from cafleet.config import db_dir_of, resolve_database_path

    return os.path.abspath(db_dir_of(resolve_database_path(os.environ)))


POLICY = InputPolicy(
    "codex",
    "type",
    "C-u",
    6,
    "Escape",
    "A line submitted while Codex works is taken into the running turn (steer) and "
    "recorded; Escape would interrupt it, and two Escapes on an empty composer open the "
    "transcript browser. Ctrl-U empties the composer. Pasted (bracketed) with Enter "
    "0.1 s later: taken 20/20 ready and working, where typed keys needed 0.5 s "
    "(docs/agent-screens.md §6.1).",
    paste=True,
    settle=0.1,
)


def notify_override(member_id: int) -> str:
    """`notify=[...]` for `-c`: Codex runs the program at each turn's end with the turn's JSON
    (its `input-messages`, `thread-id`) as the last argument (docs/runtime.md §4.12). TOML
    basic strings, escaped as JSON escapes them."""
    words = ",".join(json.dumps(word) for word in hook_command("turn", member_id))
    return f"notify=[{words}]"


def rules_file(version: str) -> bytes:
    return preset("codex-cafleet.rules", version)


class CodexAgent(BaseAgent):
    name = "codex"
    binary = "codex"
    npm_package = "@openai/codex"
    effort_levels = ("minimal", "low", "medium", "high", "xhigh")
    config_variables = (("CODEX_HOME", ""),)
    config_default = ".codex"
    record_variables = ("CODEX_HOME",)
    hooks = True
    policy = POLICY
    screens = SCREENS
    records = READER

    def asset_units(self, version: str) -> list[Unit]:
        return [Unit(RULES_FILE, {"": rules_file(version)})]

    def holds_line(self, path: str, session_id: str, frame: str) -> bool:
        return holds_line(path, session_id, frame)

    def with_hooks(self, argv: list[str], member_id: int) -> list[str]:
        # Just before the last argument (the prompt, or the session `resume` continues).
        return [*argv[:-1], "-c", notify_override(member_id), argv[-1]]

    def check_permissions(self, config_dir: str, cwd: str, version: str) -> PermissionRow:
        # Imported here: its Starlark reader needs `ast`, which no other command should load.
        from cafleet.agents.codex.rules import check_codex

        return check_codex(config_dir)

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


AGENT = CodexAgent()
