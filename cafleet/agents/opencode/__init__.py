"""opencode (docs/runtime.md §2.4, §7.4, docs/permissions.md): its argv, agent presets, input
policy, screens (`screens`), session records in its database (`records`) and doctor's check of
its configuration (`rules`).

`<path> --agent cafleet [--model <provider>/<model>] --prompt <prompt>`: members and the monitor
run with the cafleet agent preset that `cafleet setup` installs in opencode's configuration
directory (`agents/cafleet.md`), so `ensure_available` also requires that file. Their panes get
`OPENCODE_DISABLE_CLAUDE_CODE_SKILLS=1`, so the `cafleet` skill they load is opencode's own copy.
"""

from __future__ import annotations

import os

from cafleet.agents import AgentUnavailable, AgentUsageError
from cafleet.agents._base import HOOK_VARIABLE, BaseAgent
from cafleet.agents.opencode.records import READER, holds_line
from cafleet.agents.opencode.rules import check_opencode
from cafleet.agents.opencode.screens import SCREENS
from cafleet.assets.bundle import Unit, member_instructions, preset
from cafleet.assets.permissions import PermissionRow
from cafleet.assets.targets import TargetUnresolved, resolve_target
from cafleet.delivery.policy import InputPolicy
from cafleet.sessions import SessionRecord

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
    try:
        root = resolve_target("opencode").path
    except TargetUnresolved as exc:
        raise AgentUnavailable(str(exc)) from None
    return os.path.join(root, "agents", preset_name(profile) + ".md")


POLICY = InputPolicy(
    "opencode",
    "type",
    "C-u",
    6,
    "Escape",
    "A line submitted while opencode works is listed QUEUED and handled after the turn; "
    "two Escapes would interrupt. Ctrl-U empties the composer. Its first Enter at a "
    "freshly drawn screen is often lost, and an Enter on its empty composer does "
    "nothing, so Enter is pressed again after 1 s rather than 3. Pasted (bracketed) "
    "with Enter 0.1 s later: taken 10/10 while working (docs/agent-screens.md §6.1).",
    enter_again_after=1.0,
    paste=True,
    settle=0.1,
)

# The plugin `setup` installs (`plugins/cafleet.js`): in a member's pane (`HOOK_VARIABLE` set
# to its id) it runs `cafleet hook` on opencode's events (docs/runtime.md §4.12).
PLUGIN = "plugins/cafleet.js"

# The presets beside `agents/cafleet.md` (profile workspace): one per other permission profile
# (docs/permissions.md §2), `agents/cafleet-<profile>.md`.
PROFILE_PRESETS: tuple[str, ...] = ("ask", "readonly", "full")


def preset_file(version: str, profile: str = "workspace") -> bytes:
    """An agent preset: its front matter (`presets/opencode-agent[-<profile>].md`), then the
    member instructions as its body."""
    name = "opencode-agent.md" if profile == "workspace" else f"opencode-agent-{profile}.md"
    return preset(name, version) + b"\n" + member_instructions(version)


def preset_unit(version: str, profile: str = "workspace") -> Unit:
    return Unit(f"agents/{preset_name(profile)}.md", {"": preset_file(version, profile)})


class OpencodeAgent(BaseAgent):
    name = "opencode"
    binary = "opencode"
    npm_package = "opencode-ai"
    effort_levels = ()
    config_variables = (("OPENCODE_CONFIG_DIR", ""), ("XDG_CONFIG_HOME", "opencode"))
    config_default = os.path.join(".config", "opencode")
    record_variables = ("XDG_DATA_HOME",)
    hooks = True
    policy = POLICY
    screens = SCREENS
    records = READER

    def asset_units(self, version: str) -> list[Unit]:
        presets = [preset_unit(version, p) for p in ("workspace", *PROFILE_PRESETS)]
        return [*presets, Unit(PLUGIN, {"": preset("opencode-plugin.js", version)})]

    def hook_env(self, member_id: int) -> dict[str, str]:
        return {HOOK_VARIABLE: str(member_id)}

    def holds_line(self, path: str, session_id: str, frame: str) -> bool:
        return holds_line(path, session_id, frame)

    def locate_remembered(self, session_id: str, remembered: SessionRecord) -> SessionRecord | None:
        # One database holds every session: look the session up in it again.
        data_home = os.path.dirname(os.path.dirname(remembered.path))
        return READER.locate({"XDG_DATA_HOME": data_home}, session_id)

    def check_permissions(self, config_dir: str, cwd: str, version: str) -> PermissionRow:
        # Imported here: `assets.status` loads tempfile, which delivery never needs.
        from cafleet.assets.status import file_state

        state = file_state(config_dir, [preset_unit(version)])[0]
        return check_opencode(config_dir, cwd, state)

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


AGENT = OpencodeAgent()
