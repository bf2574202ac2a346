"""The assets half of `cafleet setup` (docs/cli.md §3.2, docs/runtime.md §7.4).

For each requested agent, in the order given: resolve its identity path, install the bundled
units there (`install.install_units`), and — once that agent's files landed — upsert its
`asset_installs` row with this version. The row is written only when something changed or the
row at that path is missing or of another version, so a second run writes nothing at all.

The bookkeeping needs the database the db half prepared: when that half failed, files are still
installed, but the agent is reported as failed (`installed but not recorded`), since the guard
will not see the install.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cafleet.assets.install import Change, InstallFailed, install_units
from cafleet.assets.targets import Target, TargetUnresolved, resolve_target

if TYPE_CHECKING:
    from cafleet.db.runtime import Connection

NOT_RECORDED = "installed but not recorded: the db half failed"


@dataclass
class AgentResult:
    coding_agent: str
    target: Target | None
    cafleet_version: str
    changes: list[Change] = field(default_factory=list)
    recorded: bool = False  # the row was written by this run
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def _record(conn: Connection, target: Target, version: str, changed: bool) -> bool:
    """Upsert the row unless it is already current and nothing changed; True if written."""
    from cafleet import broker

    current = [
        r for r in broker.asset_installs_for(conn, target.coding_agent) if r.path == target.path
    ]
    if not changed and current and current[0].cafleet_version == version:
        return False
    broker.record_asset_install(
        conn, coding_agent=target.coding_agent, path=target.path, cafleet_version=version
    )
    return True


@contextlib.contextmanager
def _bookkeeping(db_path: str | None) -> Iterator[Connection | None]:
    """The validated connection for the upserts, or None when the database is not usable."""
    if db_path is None:
        yield None
        return
    from cafleet.db.guard import GuardRefused, open_validated_connection
    from cafleet.db.runtime import close_connection

    try:
        conn = open_validated_connection(db_path)
    except GuardRefused:
        yield None
        return
    try:
        yield conn
    finally:
        close_connection(conn)


def _setup_lock(db_path: str | None) -> contextlib.AbstractContextManager[None]:
    if db_path is None:
        return contextlib.nullcontext()
    from cafleet.db.migrate import assets_lock

    return assets_lock(db_path)


def run_assets_half(
    agents: Sequence[str],
    *,
    db_path: str | None,
    record: bool,
    version: str,
    env: Mapping[str, str] | None = None,
) -> list[AgentResult]:
    """Install and record each agent's assets. ``db_path`` (None: it did not resolve) also
    places setup's lock; ``record`` is False when the db half failed; ``env`` (default: this
    process's) resolves the identity paths.

    Never raises for an agent's failure (it is in that agent's result); a signal stops the half
    between agents (`signals.Interrupted`).
    """
    from cafleet import signals
    from cafleet.assets.bundle import units_for

    results: list[AgentResult] = []
    with _setup_lock(db_path), _bookkeeping(db_path if record else None) as conn:
        for agent in agents:
            signals.check()
            result = AgentResult(agent, None, version)
            results.append(result)
            try:
                result.target = resolve_target(agent, env)
                result.changes = install_units(result.target.path, units_for(agent, version))
            except (TargetUnresolved, InstallFailed) as exc:
                result.error = str(exc)
                continue
            if conn is None:
                result.error = NOT_RECORDED
                continue
            try:
                result.recorded = _record(conn, result.target, version, bool(result.changes))
            except Exception as exc:
                from cafleet.errors import error_text

                result.error = f"installed but not recorded: {error_text(exc)}"
    return results


__all__ = ["NOT_RECORDED", "AgentResult", "run_assets_half"]
