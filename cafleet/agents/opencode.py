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
        """`<path> [--model <provider>/<model>] --prompt <prompt>`."""
        argv = [binary_path]
        if model is not None:
            argv += ["--model", model]
        argv += ["--prompt", prompt]
        return argv
