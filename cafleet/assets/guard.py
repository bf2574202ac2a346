"""The stale-assets guard (docs/cli.md §3.2): a command that spawns or addresses coding agents runs
only when each of those agents has cafleet's skills (and preset) of this very version installed
at its resolved identity path.

Which agents a command needs (the decision docs/cli.md leaves open; docs in README, "Set-up"):

| command | agents checked |
|---|---|
| `fleet create --coding-agent X` | X (the Director and the monitor run it) |
| `member create` | the member's agent (`--coding-agent`, else the Director's) |
| `member prompt` / `member ping` M | M's placement agent (a line is typed into its pane) |
| `message send --to-member-id R` | R's placement agent (R receives the message) |
| `message broadcast --from-member-id S` | the agents of S's fleet's active members |
| `message wait` M | the agents of M's fleet's active members (its drain types into their panes) |
| `monitor FLEET_ID` (the loop) | the agents of the fleet's active members |
| `fleet list/show/delete`, `member list/show/delete/capture`, `message poll/ack/show/stream`, `monitor scan` | none: they read, or only remove |

Reading one's inbox is never blocked by another agent's stale skill. The check is one indexed
read on the invocation's connection (`broker.assets.current_asset_versions`) plus resolving three
paths from the environment; the refusal is `Error: <text>`, exit 1, before any write.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from cafleet.errors import CafleetError

if TYPE_CHECKING:
    from cafleet.db.runtime import Connection


class AssetsNotCurrent(CafleetError):
    """A needed agent's assets are missing or of another version; str() is the refusal."""

    def __init__(self, problems: Mapping[str, str]) -> None:
        self.agents = list(problems)
        super().__init__(f"{'; '.join(problems.values())}; run '{remedy_command(self.agents)}'")


def remedy_command(agents: Iterable[str]) -> str:
    """`cafleet setup --coding-agent A --coding-agent B` for the agents named."""
    return "cafleet setup " + " ".join(f"--coding-agent {agent}" for agent in agents)


def _problem(agent: str, path: str | None, installed: str | None, version: str) -> str | None:
    if path is None:
        from cafleet.assets.targets import TargetUnresolved, resolve_target

        try:
            resolve_target(agent)
        except TargetUnresolved as exc:
            return str(exc)
    if installed is None:
        return f"no cafleet skills are installed for {agent} at {path}"
    if installed != version:
        return (
            f"the cafleet skills installed for {agent} at {path} are from cafleet {installed}, "
            f"not {version}"
        )
    return None


def require_assets(
    conn: Connection,
    *,
    agents: Iterable[str] = (),
    member_id: int | None = None,
    fleet_of_member: int | None = None,
    fleet_id: int | None = None,
) -> None:
    """Refuse (`AssetsNotCurrent`) unless every needed agent's current row has this version.

    Give the agents directly, or the scope whose active members' placement agents are needed:
    ``member_id``, ``fleet_of_member`` (that member's fleet) or ``fleet_id``.
    """
    import cafleet
    from cafleet import broker
    from cafleet.assets.targets import resolved_paths

    paths = resolved_paths()
    if member_id is not None:
        found = broker.current_asset_versions(conn, paths, scope="member", scope_id=member_id)
    elif fleet_of_member is not None:
        found = broker.current_asset_versions(
            conn, paths, scope="fleet_of_member", scope_id=fleet_of_member
        )
    elif fleet_id is not None:
        found = broker.current_asset_versions(conn, paths, scope="fleet", scope_id=fleet_id)
    else:
        found = broker.current_asset_versions(conn, paths, agents=agents)
    problems: dict[str, str] = {}
    for agent, installed in found.items():
        problem = _problem(agent, paths.get(agent), installed, cafleet.__version__)
        if problem is not None:
            problems[agent] = problem
    if problems:
        raise AssetsNotCurrent(problems)


__all__ = ["AssetsNotCurrent", "remedy_command", "require_assets"]
