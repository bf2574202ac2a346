"""opencode (docs/runtime.md §2.4, §7.4).

`<path> --agent cafleet [--model <provider>/<model>] --prompt <prompt>`: members and the monitor
run with the cafleet agent preset that `cafleet setup` installs in opencode's configuration
directory (`agents/cafleet.md`), so `ensure_available` also requires that file. Their panes get
`OPENCODE_DISABLE_CLAUDE_CODE_SKILLS=1`, so the `cafleet` skill they load is opencode's own copy.
"""

from __future__ import annotations

import os

from cafleet.agents import AgentUnavailable, AgentUsageError
from cafleet.agents._base import BaseAgent

AGENT_PRESET = "cafleet"
# opencode also loads Claude Code's skills (~/.claude/skills), and when both hold a `cafleet`
# skill it picks one of them at random (seen with 1.18.33): without this, a member could read
# Claude Code's copy, which the stale-assets guard did not check for opencode.
PANE_ENV = {"OPENCODE_DISABLE_CLAUDE_CODE_SKILLS": "1"}


def preset_name(profile: str) -> str:
    """The opencode agent preset of a permission profile."""
    return AGENT_PRESET if profile == "workspace" else f"{AGENT_PRESET}-{profile}"


def preset_path(profile: str = "workspace") -> str:
    """Where opencode looks for a cafleet agent preset; raises when it cannot resolve."""
    from cafleet.assets.targets import TargetUnresolved, resolve_target

    try:
        root = resolve_target("opencode").path
    except TargetUnresolved as exc:
        raise AgentUnavailable(str(exc)) from None
    return os.path.join(root, "agents", preset_name(profile) + ".md")


class OpencodeAgent(BaseAgent):
    name = "opencode"
    binary = "opencode"
    effort_levels = ()

    def validate_model(self, model: str | None, *, flag: str) -> None:
        super().validate_model(model, flag=flag)
        if model is None:
            return
        provider, sep, model_id = model.partition("/")
        if not sep or not provider or not model_id:
            raise AgentUsageError(
                f"{flag} for the opencode coding agent must be "
                f"'<provider-id>/<model-id>' (got '{model}')"
            )

    def validate_effort(self, effort: str | None, *, flag: str) -> None:
        if effort is not None:
            raise AgentUsageError(f"the opencode coding agent does not support {flag}")

    def ensure_available(self) -> str:
        """The binary, then the installed preset (a missing one is refused with the remedy)."""
        binary = super().ensure_available()
        path = preset_path()
        if not os.path.isfile(path):
            raise AgentUnavailable(
                f"the cafleet agent preset for opencode is not installed ({path} is missing); "
                "run 'cafleet setup --coding-agent opencode'"
            )
        return binary

    def leading_args(
        self, *, display_name: str, monitor: bool, db_dir: str | None, permissions: str
    ) -> list[str]:
        """One installed preset per profile (docs/permissions.md §2): `cafleet` is
        `workspace` (and the monitor's), the others are `cafleet-<profile>`."""
        return ["--agent", preset_name("workspace" if monitor else permissions)]

    def pane_env(self) -> dict[str, str]:
        return dict(PANE_ENV)

    def prompt_args(self, prompt: str) -> list[str]:
        return ["--prompt", prompt]

    def resume_args(self, session_id: str) -> list[str]:
        return ["--session", session_id]
