"""Pieces shared by the workflows that spawn or touch panes (docs/cli.md §1.9, §1.11, §2.3, §2.7).

Only cafleet's light modules are imported at load time; the agent implementations, the mux layer
and the broker are imported inside the functions.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

from cafleet import signals, status
from cafleet.errors import error_text
from cafleet.workflows.errors import WorkflowError

if TYPE_CHECKING:
    from cafleet.agents import CodingAgent
    from cafleet.config import Settings
    from cafleet.mux import PaneContext
    from cafleet.records import Placement
    from cafleet.workflows.placing import WindowMode


class WorkflowUsageError(WorkflowError):
    """Bad input found only once the workflow ran (an agent option, a spawn template): the CLI
    shows it as a usage error (exit 2)."""

    error_code = status.CODE_USAGE


class CompensatedError(WorkflowError):
    """A failure after something was written or spawned, and undone (docs/cli.md §1.11).

    ``primary`` is the error (None for a signal stop: only the cleanup lines are printed, and the
    exit code becomes the signal's); ``cleanup`` holds one line per cleanup step that failed or
    could not be confirmed, in order. The CLI prints `Error: <primary>`, then each line (exit 1).
    """

    def __init__(self, primary: str | None, cleanup: Sequence[str] = ()) -> None:
        self.primary = primary
        self.cleanup = tuple(cleanup)
        super().__init__(primary or "")


def lock_busy_message(member_id: int) -> str:
    """docs/cli.md §1.11's pane-lock message."""
    return f"member {member_id}'s pane is receiving another keystroke; retry in a few seconds"


MSG_KILL_FAILED = (
    "kill-pane failed for pane {pane_id}: {detail}; the tmux server may be unreachable "
    "\u2014 check with 'cafleet doctor', then re-run the command"
)


def usage(message: str) -> NoReturn:
    raise WorkflowUsageError(message)


@dataclass
class SpawnPlan:
    """Everything validated before the first write: the agent, its binary and the template."""

    agent: CodingAgent
    binary_path: str
    template: str
    model: str | None
    effort: str | None
    permissions: str = "workspace"  # the member's profile (docs/permissions.md)

    def resume_argv(
        self,
        session_id: str,
        *,
        display_name: str,
        monitor: bool,
        db_dir: str,
        member_id: int | None = None,
    ) -> list[str]:
        argv = self.agent.build_resume_argv(
            binary_path=self.binary_path,
            session_id=session_id,
            display_name=display_name,
            model=self.model,
            effort=self.effort,
            monitor=monitor,
            db_dir=db_dir,
            permissions=self.permissions,
        )
        return self._hooked(argv, member_id, monitor)

    def argv(
        self,
        prompt: str,
        *,
        display_name: str,
        monitor: bool,
        db_dir: str,
        member_id: int | None = None,
    ) -> list[str]:
        argv = self.agent.build_argv(
            binary_path=self.binary_path,
            prompt=prompt,
            display_name=display_name,
            model=self.model,
            effort=self.effort,
            monitor=monitor,
            db_dir=db_dir,
            permissions=self.permissions,
        )
        return self._hooked(argv, member_id, monitor)

    def _hooked(self, argv: list[str], member_id: int | None, monitor: bool) -> list[str]:
        """A member's argv with its agent's hooks (docs/runtime.md §4.12); the monitor's and a
        command's without a member id as they are."""
        if member_id is None or monitor:
            return argv
        return self.agent.with_hooks(argv, member_id)


def validate_agent_options(
    agent_name: str, *, model: str | None, effort: str | None, model_flag: str, effort_flag: str
) -> CodingAgent:
    """Resolve the agent, then model, then effort (exit 2 with docs/cli.md §1.9's messages)."""
    from cafleet.agents import AgentUsageError, get_agent

    agent = get_agent(agent_name)
    try:
        agent.validate_model(model, flag=model_flag)
        agent.validate_effort(effort, flag=effort_flag)
    except AgentUsageError as exc:
        usage(str(exc))
    return agent


def validate_template(template: str) -> None:
    from cafleet.agents.prompt import PromptTemplateError, validate_template

    try:
        validate_template(template)
    except PromptTemplateError as exc:
        usage(str(exc))


def ensure_agent_available(agent: CodingAgent) -> str:
    from cafleet.agents import AgentUnavailable

    try:
        return agent.ensure_available()
    except AgentUnavailable as exc:
        raise WorkflowError(str(exc)) from exc


def spawn_plan(
    agent: CodingAgent,
    template: str,
    model: str | None,
    effort: str | None,
    permissions: str = "workspace",
) -> SpawnPlan:
    """Validate the template, then (past a signal check) find the agent's binary: the plan."""
    validate_template(template)
    signals.check()
    binary_path = ensure_agent_available(agent)
    return SpawnPlan(agent, binary_path, template, model, effort, permissions)


# Set in every pane cafleet spawns for a member: which member of which database the agent is,
# so a pane spawned by a command killed before it recorded the pane is found again
# (docs/runtime.md §5.11). Read from /proc, never by the agent.
MEMBER_ENV = "CAFLEET_MEMBER"


def member_marker(settings: Settings, member_id: int) -> str:
    """`CAFLEET_MEMBER=<member id>@<P>`: the environment entry of ``member_id``'s panes."""
    return f"{MEMBER_ENV}={member_id}@{settings.db_path}"


def spawn_env(coding_agent: str | None = None) -> dict[str, str]:
    """CAFLEET_DATABASE_URL, when set, reaches a spawned pane (docs/runtime.md §1.6).

    Decision (assets wave): so does each variable that moves the spawned agent's identity path
    (`CLAUDE_CONFIG_DIR`; `CODEX_HOME`; `OPENCODE_CONFIG_DIR`, `XDG_CONFIG_HOME`), when set, and
    the agent's own pane variables (`CodingAgent.pane_env`): the agent then reads its skills
    exactly where the stale-assets guard found them, whatever the tmux server's own environment
    holds.
    """
    env: dict[str, str] = {}
    url = os.environ.get("CAFLEET_DATABASE_URL")
    if url:
        env["CAFLEET_DATABASE_URL"] = url
    if coding_agent is not None:
        from cafleet.agents import get_agent
        from cafleet.assets.targets import identity_variables

        for name in identity_variables(coding_agent):
            value = os.environ.get(name)
            if value:
                env[name] = value
        env.update(get_agent(coding_agent).pane_env())
    return env


def marked_env(settings: Settings, coding_agent: str, member_id: int | None) -> dict[str, str]:
    """`spawn_env` plus the member's `member_marker` (none without a member id)."""
    env = spawn_env(coding_agent)
    if member_id is not None:
        name, _, value = member_marker(settings, member_id).partition("=")
        env[name] = value
    return env


def outcome_unknown(exc: BaseException) -> bool:
    """A split-window whose outcome is unknown: a timeout, or no pane id in its output."""
    from cafleet.mux import MSG_NO_PANE_ID, MuxCommandFailed, MuxTimeout

    if isinstance(exc, MuxTimeout):
        return True
    return isinstance(exc, MuxCommandFailed) and exc.detail == MSG_NO_PANE_ID


def unconfirmed_detail(window_id: str) -> str:
    """Decision: what `pane cleanup unconfirmed: <detail>` says (docs/cli.md leaves it open)."""
    return (
        f"the split-window outcome is unknown, so no pane id is known; check window {window_id} "
        "for a stray pane"
    )


class Cleanup:
    """Collects cleanup diagnostics; each step runs even if an earlier one failed (docs/cli.md §1.11)."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def step(self, label: str, action: Callable[[], object]) -> bool:
        """Run one step; on failure record `cleanup failed for <label>: <detail>`."""
        try:
            action()
        except Exception as exc:
            self.lines.append(f"cleanup failed for {label}: {error_text(exc)}")
            return False
        return True

    def add(self, line: str) -> None:
        self.lines.append(line)


def fail_with_cleanup(primary: str | None, cleanup: Cleanup) -> NoReturn:
    """Fail with the primary error first, then the cleanup lines (exit 1).

    A pending signal turns the code into 130/143 (main's mapping); ``primary`` None prints
    only the cleanup lines (a signal stop).
    """
    raise CompensatedError(primary, cleanup.lines)


def spawn_member_pane(
    backend: Any,
    settings: Settings,
    *,
    director_placement: Placement,
    overflow: list[str],
    window: WindowMode,
    window_name: str,
    argv: list[str],
    coding_agent: str,
    on_failure: Callable[[Cleanup], None] = lambda cleanup: None,
    cwd: str | None = None,
    member_id: int | None = None,
    extra_env: Mapping[str, str] | None = None,
) -> PaneContext:
    """Choose the new pane's window (docs/runtime.md §1.11) and spawn the agent there, its
    environment marking it ``member_id``'s (`member_marker`). A tmux failure fails the command
    with docs/cli.md §1.11's cleanup lines: an unconfirmed pane is named, then `on_failure`
    adds the caller's own cleanup (`member create` deregisters). The agent starts in ``cwd``
    (the member's worktree), else in this process's directory; ``extra_env`` joins its
    environment."""
    from cafleet.mux import MultiplexerError
    from cafleet.workflows import placing

    target: placing.Target | None = None
    try:
        target = placing.choose(
            backend,
            director_window=director_placement.mux_window_id,
            overflow=overflow,
            smallest=placing.minimum(settings),
            mode=window,
        )
        return placing.spawn_at(
            backend,
            target,
            session=director_placement.mux_session,
            window_name=window_name,
            argv=argv,
            cwd=cwd or os.getcwd(),
            env={**marked_env(settings, coding_agent, member_id), **(extra_env or {})},
        )
    except MultiplexerError as exc:
        cleanup = Cleanup()
        if outcome_unknown(exc):
            where = target.window_id if target is not None else director_placement.mux_window_id
            cleanup.add(f"pane cleanup unconfirmed: {unconfirmed_detail(where)}")
        on_failure(cleanup)
        fail_with_cleanup(str(exc), cleanup)
