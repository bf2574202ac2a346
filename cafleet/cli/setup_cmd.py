"""`cafleet setup [--coding-agent AGENT ...] [--json]` (docs/cli.md §2.1, §3.2).

Two halves, both always run: the db half (docs/storage.md §6) creates or upgrades the database; the
assets half installs the bundled skills and presets for each agent and records them. Not
guarded. Each half that fails prints `<half> half failed: <message>` on stderr, and the command
ends with `Error: <halves> half failed` (exit 1).

**Decision:** with `--json` the report is printed even when a half failed (it says which), the
failure lines still go to stderr and the exit code is still 1: the report is the point of the
command.
"""

from __future__ import annotations

from typing import Any

import click

import cafleet
from cafleet.agents.registry import agent_names
from cafleet.assets.setup import run_assets_half
from cafleet.cli.app import cli
from cafleet.cli.context import invocation, is_user_facing
from cafleet.cli.params import json_option
from cafleet.output import err, out, out_json
from cafleet.signals import Interrupted

WAITING = "Waiting for another 'cafleet setup' to finish (it holds {lock})..."


def _agents_callback(
    ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]
) -> tuple[str, ...]:
    """Repeatable, each value one or more names separated by spaces or commas; default all."""
    names: list[str] = []
    for value in values:
        for name in value.replace(",", " ").split():
            if name not in agent_names():
                raise click.UsageError(
                    f"unknown coding agent '{name}'; choose from {', '.join(agent_names())}", ctx
                )
            if name not in names:
                names.append(name)
    if values and not names:
        raise click.UsageError("--coding-agent may not be empty", ctx)
    return tuple(names) if names else agent_names()


def _db_half(path: str) -> tuple[str | None, str | None]:
    """(success line, None) or (None, failure message)."""
    from cafleet.db.migrate import make_private, run_setup

    try:
        line = run_setup(path, on_wait=lambda lock: err(WAITING.format(lock=lock)))
        return "\n".join([line, *make_private(path)]), None
    except Interrupted:
        raise
    except Exception as exc:
        if not is_user_facing(exc):
            raise
        return None, str(exc)


def _agent_lines(result: Any) -> list[str]:
    target = result.target
    where = f"{target.path} ({target.source_text})" if target is not None else "(unresolved)"
    version = result.cafleet_version
    if result.error is not None and not result.changes:
        summary = "failed"
    elif result.changes:
        summary = f"installed cafleet {version}"
        if result.error is not None:
            summary += ", not recorded"
    elif result.recorded:
        summary = f"files up to date; recorded cafleet {version}"
    else:
        summary = f"up to date (cafleet {version})"
    lines = [f"{result.coding_agent}: {where}: {summary}"]
    lines += [f"  {c.change} {c.path}" for c in result.changes]
    return lines


def _agent_dict(result: Any) -> dict[str, Any]:
    target = result.target
    return {
        "coding_agent": result.coding_agent,
        "path": target.path if target is not None else None,
        "source": target.source if target is not None else None,
        "cafleet_version": result.cafleet_version,
        "changes": [{"path": c.path, "change": c.change} for c in result.changes],
        "recorded": result.recorded,
        "ok": result.ok,
        "error": result.error,
    }


@cli.command(
    "setup",
    short_help="Create or upgrade the database and install the agents' skills.",
    help=(
        "Create or upgrade the cafleet database, then install cafleet's skills and agent "
        "presets for each coding agent and record them (both halves always run)."
    ),
)
@click.option(
    "--coding-agent",
    "coding_agents",
    metavar="AGENT",
    multiple=True,
    callback=_agents_callback,
    help="Install for this agent only (repeatable; default: every agent cafleet knows).",
)
@json_option
def setup(coding_agents: tuple[str, ...], as_json: bool) -> None:

    path = invocation().db_path
    db_line, db_error = _db_half(path)
    results = run_assets_half(
        coding_agents, db_path=path, record=db_error is None, version=cafleet.__version__
    )
    failed = [
        half
        for half, bad in (("db", db_error is not None), ("assets", any(not r.ok for r in results)))
        if bad
    ]
    if as_json:
        out_json(
            {
                "database": {
                    "ok": db_error is None,
                    "path": path,
                    "result": db_line,
                    "error": db_error,
                },
                "assets": [_agent_dict(r) for r in results],
                "failed": failed,
            }
        )
    else:
        if db_line is not None:
            out(db_line)
        for result in results:
            for line in _agent_lines(result):
                out(line)
    if db_error is not None:
        err(f"db half failed: {db_error}")
    for result in results:
        if result.error is not None:
            err(f"assets half failed: {result.coding_agent}: {result.error}")
    if failed:
        raise click.ClickException(f"{' and '.join(failed)} half failed")
