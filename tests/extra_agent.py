"""A test-only coding agent, `testbot`: one module that `cafleet.agents.registry.register`
adds, touching no other module (tests/test_agent_registry.py). It spawns `testbot`, keeps its
configuration in `$TESTBOT_HOME` (else `~/.testbot`), has no screen cues (its screens are
`unknown`, typed into like a shell's) and no session records."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cafleet.agents._base import BaseAgent
from cafleet.assets.bundle import Unit
from cafleet.delivery.policy import InputPolicy
from cafleet.delivery.screens.cues import AgentScreens
from cafleet.sessions import SessionRecord

NAME = "testbot"
RULES = "testbot-rules.txt"


class NoRecords:
    def find(
        self, env: Mapping[str, str], *, since: float, cwd: str | None, prompt: str
    ) -> list[SessionRecord]:
        return []

    def locate(self, env: Mapping[str, str], session_id: str) -> SessionRecord | None:
        return None

    def read_usage(self, record: SessionRecord, state: dict[str, Any]) -> dict[str, Any]:
        return state


class TestbotAgent(BaseAgent):
    name = NAME
    binary = NAME
    npm_package = "testbot-cli"
    config_variables = (("TESTBOT_HOME", ""),)
    config_default = ".testbot"
    policy = InputPolicy(NAME, "type", "C-u", 6, "Escape", "a test agent")
    screens = AgentScreens(agent=NAME, cues=())
    records = NoRecords()

    def asset_units(self, version: str) -> list[Unit]:
        return [Unit(RULES, {"": f"testbot rules of cafleet {version}\n".encode()})]

    def resume_args(self, session_id: str) -> list[str]:
        return ["--resume", session_id]


AGENT = TestbotAgent()
