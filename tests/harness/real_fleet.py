"""A whole fleet of real agents driven by the scripted model (tests/harness/scripted_model.py):
a real Claude Code Director in its own session of the private tmux server, whose own Bash tool
runs `cafleet fleet create`, `cafleet member create` (one member per planned agent), `message
send` and `message wait`, as the model's Director script tells it.

The Director's PATH starts with one wrapper per agent (as `RealMember` builds them): `member
create` spawns each member through it, so each agent runs with its own private HOME and
configuration and its own client label at the model, in the Director's project directory (the
members' panes start where `member create` ran). The fleet's monitor is a Claude Code too,
spawned by `fleet create` through the same PATH: the ``claude`` wrapper picks the monitor's own
environment (label ``monitor``) or the Claude member's by the ``--name`` cafleet passes
(docs/runtime.md §2.2), so each one's model requests carry its own label. `cafleet setup` runs
once per private environment, as each agent's user would have run it.
"""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.harness.real_agents import RealAgent
from tests.harness.real_member import RealMember
from tests.harness.scripted_model import PLAN_MARK, ScriptedModel

MONITOR_NAME = "monitor"  # the display name cafleet gives the monitor's pane (`--name`)


def plan_text(
    fleet: str,
    members: Sequence[tuple[str, str]],
    tasks: Sequence[tuple[str, str]],
    wait: int = 60,
    work: Sequence[tuple[str, str, str]] = (),
) -> str:
    """The Director's prompt: what to do, then the FLEET PLAN block its script reads.
    ``work``: (member, the member whose task comes first or "", body), one task each."""
    lines = [
        "Create a cafleet fleet, create its members, "
        + (
            "and give them the work below as tasks."
            if work
            else "hand out the tasks below and wait until every member replied."
        ),
        PLAN_MARK,
        f"fleet: {fleet} claude",
    ]
    lines += [f"member: {name} {agent}" for name, agent in members]
    lines += [f"task {name}: {body}" for name, body in tasks]
    lines += [
        f"work {name}{f' after {after}' if after else ''}: {body}" for name, after, body in work
    ]
    lines.append(f"wait: {wait}")
    return "\n".join(lines)


class RealFleet:
    """The Director (``director``: a `RealAgent`) and one `RealMember` per planned member
    (``members``: name -> RealMember, not yet spawned: the Director spawns them)."""

    def __init__(
        self, harness: Any, model: ScriptedModel, members: Sequence[tuple[str, str]]
    ) -> None:
        self.harness = harness
        self.model = model
        self.director = RealAgent(
            harness, "claude", name="director", model_url=model.base_url("director")
        )
        self.project = self.director.cwd
        self.bin_dir = Path(harness.dir) / "fleet-bin"
        self.bin_dir.mkdir(parents=True, exist_ok=True)
        self.members: dict[str, RealMember] = {}
        # The monitor `fleet create` spawns (a Claude Code, `--name monitor`).
        self.monitor = RealMember(
            harness, "claude", MONITOR_NAME, model_url=model.base_url(MONITOR_NAME),
            cwd=self.project,
        )  # fmt: skip
        claude: dict[str, RealMember] = {MONITOR_NAME: self.monitor}
        for name, agent in members:
            if agent in {m.agent for m in self.members.values()}:
                raise ValueError(f"one member per agent (a wrapper per agent): {agent} twice")
            member = RealMember(
                harness, agent, name, model_url=model.base_url(name), cwd=self.project
            )
            self.members[name] = member
            if agent == "claude":
                claude[name] = member
            else:
                shutil.copy2(member.bin_dir / agent, self.bin_dir / agent)
        _dispatch_by_name(self.bin_dir / "claude", claude)

    def start(self, prompt: str) -> RealFleet:
        """Set up every private environment, then start the Director with ``prompt``."""
        h = self.harness
        self.director.prepare()
        spawned = [self.monitor, *self.members.values()]
        for env in [self.director.env, *(m.real.env for m in spawned)]:
            result = h.cli("setup", env=env, cwd=self.project)
            assert result.returncode == 0, (result.stdout, result.stderr)
        path = os.pathsep.join([str(self.bin_dir), h.env["PATH"]])
        self.director.extra_env.update(
            {"PATH": path, "CAFLEET_DATABASE_URL": h.env["CAFLEET_DATABASE_URL"]}
        )
        # The user lets the Director run cafleet's commands (the variadic --allowedTools ends
        # at the next option, so the prompt stays a prompt).
        self.director.args = [
            "--allowedTools", "Bash(cafleet *)", "--permission-mode", "default", prompt,
        ]  # fmt: skip
        self.director.start()
        return self

    def stop(self) -> None:
        """Stop every agent of the fleet (members, monitor and Director) by their markers."""
        problems = []
        for agent in [*(m.real for m in self.members.values()), self.monitor.real, self.director]:
            try:
                agent.stop()
            except AssertionError as exc:
                problems.append(str(exc))
        if problems:
            raise AssertionError("; ".join(problems))


def _dispatch_by_name(path: Path, wrappers: dict[str, RealMember]) -> None:
    """A ``claude`` on PATH that execs the wrapper of the pane cafleet names with ``--name``
    (the monitor's or a member's); any other name fails loudly instead of borrowing one."""
    cases = "".join(
        f'  {shlex.quote(name)}) exec {shlex.quote(str(m.bin_dir / "claude"))} "$@" ;;\n'
        for name, m in wrappers.items()
    )
    path.write_text(
        "#!/bin/sh\n"
        'name=""; prev=""\n'
        'for arg; do [ "$prev" = "--name" ] && name=$arg; prev=$arg; done\n'
        'case "$name" in\n'
        f"{cases}"
        "  *) echo \"no claude environment for --name '$name'\" >&2; exit 1 ;;\n"
        "esac\n",
        encoding="utf-8",
    )
    path.chmod(0o755)


__all__ = ["MONITOR_NAME", "RealFleet", "plan_text"]
