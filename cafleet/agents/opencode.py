"""opencode (runtime.md §2.4). Wave 1 passes no `--agent` and needs no preset."""

from __future__ import annotations

from cafleet.agents import AgentUsageError
from cafleet.agents._base import BaseAgent


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

    # `<path> [--model <provider>/<model>] --prompt <prompt>`.

    def prompt_args(self, prompt: str) -> list[str]:
        return ["--prompt", prompt]
