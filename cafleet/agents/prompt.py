"""Spawn-prompt templates (docs/runtime.md §2.6, §2.7; docs/cli.md §1.9).

A template may use exactly `{fleet_id}`, `{member_id}`, `{director_member_id}` and
`{coding_agent}`; `{{` and `}}` are literal braces. Validation runs before any side effect, so
rendering afterwards cannot fail.
"""

from __future__ import annotations

import string
from importlib import resources

from cafleet.agents import AgentUsageError

PLACEHOLDERS: tuple[str, ...] = ("fleet_id", "member_id", "director_member_id", "coding_agent")
DEFAULT_MONITOR_PROMPT_RESOURCE = "data/monitor_prompt.md"
DEFAULT_MEMBER_PROMPT_RESOURCE = "data/member_prompt.md"

_LITERAL_HINT = "write {{ and }} for literal braces"
MSG_LEADING_DASH = (
    "spawn prompt may not start with '-' (the coding agent would read it as an option)"
)
DETAIL_SPEC = "format specs and conversions are not supported"
DETAIL_OPEN = "unmatched '{'"
DETAIL_CLOSE = "unmatched '}'"


class PromptTemplateError(AgentUsageError):
    """A spawn-prompt template problem (usage error, exit 2)."""


def msg_unknown_placeholder(field: str) -> str:
    supported = ", ".join("{" + name + "}" for name in PLACEHOLDERS)
    return (
        f"unknown placeholder '{field}' in the spawn prompt; supported placeholders are "
        f"{supported}; {_LITERAL_HINT}"
    )


def msg_malformed(detail: str) -> str:
    return f"malformed spawn prompt: {detail}; {_LITERAL_HINT}"


def _field_text(name: str, spec: str | None, conversion: str | None) -> str:
    text = name
    if conversion is not None:
        text += "!" + conversion
    if spec:
        text += ":" + spec
    return text


def validate_template(template: str) -> None:
    """Raise PromptTemplateError with docs/cli.md §1.9's exact message, first problem wins."""
    if template.startswith("-"):
        raise PromptTemplateError(MSG_LEADING_DASH)
    parsed = iter(string.Formatter().parse(template))
    while True:
        try:
            _literal, name, spec, conversion = next(parsed)
        except StopIteration:
            return
        except ValueError as exc:
            detail = DETAIL_CLOSE if "Single '}'" in str(exc) else DETAIL_OPEN
            raise PromptTemplateError(msg_malformed(detail)) from None
        if name is None:
            continue
        if name not in PLACEHOLDERS:
            raise PromptTemplateError(msg_unknown_placeholder(_field_text(name, spec, conversion)))
        if conversion is not None or spec:
            raise PromptTemplateError(msg_malformed(DETAIL_SPEC))


def render_template(
    template: str,
    *,
    fleet_id: int,
    member_id: int,
    director_member_id: int,
    coding_agent: str,
) -> str:
    """Substitute the ids (decimal) and the agent name into a validated template."""
    return template.format(
        fleet_id=int(fleet_id),
        member_id=int(member_id),
        director_member_id=int(director_member_id),
        coding_agent=coding_agent,
    )


def load_default_monitor_prompt() -> str:
    """The bundled default monitor prompt (docs/runtime.md §2.7), read with importlib.resources."""
    return (
        resources.files("cafleet")
        .joinpath(DEFAULT_MONITOR_PROMPT_RESOURCE)
        .read_text(encoding="utf-8")
    )


def load_default_member_prompt() -> str:
    """The bundled default member prompt (`member create` without PROMPT): the member's ids and
    the instruction to load the `cafleet` skill."""
    return (
        resources.files("cafleet")
        .joinpath(DEFAULT_MEMBER_PROMPT_RESOURCE)
        .read_text(encoding="utf-8")
    )


__all__ = [
    "MSG_LEADING_DASH",
    "PLACEHOLDERS",
    "PromptTemplateError",
    "load_default_member_prompt",
    "load_default_monitor_prompt",
    "msg_malformed",
    "msg_unknown_placeholder",
    "render_template",
    "validate_template",
]
