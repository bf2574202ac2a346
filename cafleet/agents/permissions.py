"""Permission profiles (docs/permissions.md): what a member may do without asking.

Standard library only. Each agent maps a profile to its own flags (`cafleet.agents.claude`,
`.codex`, `.opencode`); the monitor always runs with its own fixed, read-only rules.
"""

from __future__ import annotations

from cafleet.agents import AgentUsageError

PROFILES: tuple[str, ...] = ("workspace", "ask", "readonly", "full")
DEFAULT_PROFILE = "workspace"
# A member recorded before permission profiles existed (NULL in member_spawns.permissions) ran
# with what is now `readonly`; a respawn keeps that.
LEGACY_PROFILE = "readonly"
FULL_WARNING = (
    "Warning: permission profile 'full' lets the member run any command and edit any file "
    "without asking (docs/permissions.md)"
)


def shown_profile(kind: str, recorded: str | None) -> str | None:
    """The profile a member runs with, as `member show` / `member list --json` print it: None
    for the Director (cafleet did not start it) and the monitor (its own fixed rules)."""
    if kind != "member":
        return None
    return recorded or LEGACY_PROFILE


def validate_profile(profile: str | None, *, flag: str = "--permissions") -> None:
    """A usage error (exit 2) for a name that is not a profile."""
    if profile is not None and profile not in PROFILES:
        raise AgentUsageError(f"{flag} must be one of {', '.join(PROFILES)} (got '{profile}')")


__all__ = [
    "DEFAULT_PROFILE",
    "FULL_WARNING",
    "LEGACY_PROFILE",
    "PROFILES",
    "shown_profile",
    "validate_profile",
]
