"""`cafleet doctor` (docs/cli.md §2.2): diagnoses tmux and the database without changing anything.

Not guarded. Every section is rendered even after a failure; each failing section is one issue.
Exit 0 iff there is no issue.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import click

from cafleet import __version__, broker
from cafleet.agents.installed import installed_agents
from cafleet.agents.registry import find_agent
from cafleet.cli.app import cli
from cafleet.cli.context import invocation
from cafleet.cli.doctor_agents import (
    coding_agents_section,
    member_permissions_section,
    recorded_installs,
)
from cafleet.cli.params import json_option
from cafleet.db.diagnosis import diagnose_path, guard_text
from cafleet.db.errors import StorageError
from cafleet.db.runtime import close_connection, open_connection
from cafleet.db.shapes import HEAD_VERSION
from cafleet.mux import MultiplexerError, tmux_backend
from cafleet.output import cell, label_lines, out, out_json, plural
from cafleet.workflows.explain import hook_lines
from cafleet.workflows.leftovers import left_behind
from cafleet.workflows.remedies import fleet_problems, left_tree_problems
from cafleet.workflows.supervision import FleetReport, fleet_report

OK_MARK = "\u2713"
FAIL_MARK = "\u2717"
LABEL_WIDTH = 11
PRESENCE_VAR = "TMUX"


@dataclass
class Section:
    name: str
    ok: bool
    lines: list[str]
    data: dict[str, Any]


def multiplexer_section() -> Section:
    """Resolve tmux exactly as `fleet create` does: availability, then the calling pane."""
    try:
        backend = tmux_backend()
        backend.ensure_available()
        pane = backend.discover_context()
    except MultiplexerError as exc:
        error = str(exc)
        data = dict.fromkeys(
            ("backend", "session", "window_id", "pane_id", "presence_var", "presence_value")
        )
        return Section("multiplexer", False, [f"  {error}"], {"ok": False, **data, "error": error})
    presence = os.environ.get(PRESENCE_VAR, "")
    pairs = [
        ("backend", backend.name),
        ("session", pane.session),
        ("window_id", pane.window_id),
        ("pane_id", pane.pane_id),
        ("presence", f"{PRESENCE_VAR}={presence}"),
    ]
    data = {
        "ok": True,
        "backend": backend.name,
        "session": pane.session,
        "window_id": pane.window_id,
        "pane_id": pane.pane_id,
        "presence_var": PRESENCE_VAR,
        "presence_value": presence,
        "error": None,
    }
    return Section("multiplexer", True, label_lines(pairs, LABEL_WIDTH, "  "), data)


def database_section(path: str | None, path_error: str | None) -> Section:
    """Resolve the path and run the read-only diagnosis (docs/storage.md §5.4, §5.5)."""
    data: dict[str, Any] = {
        "ok": False,
        "path": path,
        "state": None,
        "schema_version": None,
        "head_version": HEAD_VERSION,
        "error": None,
    }
    if path is None:
        error = path_error or "database path did not resolve"
        data["error"] = error
        return Section("database", False, [f"  {error}"], data)
    path_line = label_lines([("path", path)], LABEL_WIDTH, "  ")
    try:
        diagnosis = diagnose_path(path, for_doctor=True)
    except StorageError as exc:  # e.g. SQLite too old
        data["error"] = str(exc)
        return Section("database", False, [*path_line, f"  {exc}"], data)
    data["state"] = diagnosis.state
    if diagnosis.state in ("current", "behind", "ahead", "damaged"):
        data["schema_version"] = diagnosis.schema_version
    if diagnosis.ok:
        data["ok"] = True
        return Section(
            "database", True, [*path_line, f"  schema {diagnosis.schema_version} (head)"], data
        )
    error = guard_text(diagnosis) or diagnosis.state
    data["error"] = error
    return Section("database", False, [*path_line, f"  {error}"], data)


def _hooked(report: FleetReport) -> dict[int, str]:
    """The fleet's spawned members whose pane is alive and whose agent installs hooks."""
    out: dict[int, str] = {}
    for entry in report.roster:
        member, pane = entry.member, report.panes.panes.get(entry.member.member_id)
        agent = find_agent(member.placement.coding_agent) if member.placement else None
        alive = pane is not None and pane.state == "alive"
        if member.kind == "member" and alive and agent is not None and agent.hooks:
            out[member.member_id] = member.name
    return out


def fleets_section(path: str | None, database_ok: bool) -> Section:
    """Every live fleet's monitor loop and member panes (docs/cli.md §2.2); an issue when the fleet has
    a problem (`workflows/remedies.fleet_problems`: loop not live, a pane gone, no monitor),
    each printed under the fleet with the command that fixes it; then the worktrees deleted
    fleets' members left behind, each an issue too. Read-only: the file is opened as the diagnosis opens it and closed
    the guarded way; skipped (not an issue of its own) when the database section failed."""
    data: dict[str, Any] = {
        "ok": True,
        "skipped": False,
        "fleets": [],
        "left_worktrees": [],
        "error": None,
    }
    if path is None or not database_ok:
        data["skipped"] = True
        return Section("fleets", True, ["  skipped: the database is not usable"], data)
    conn = open_connection(path, mode="rw", purpose="command")
    try:
        reports = [fleet_report(conn, f.fleet_id) for f in broker.list_fleets(conn)]
        hooks = {
            r.summary.fleet_id: hook_lines(conn, r.summary.fleet_id, _hooked(r)) for r in reports
        }
        gone = [rec for rec in left_behind(conn) if rec.fleet_deleted]
    finally:
        close_connection(conn, guarded=True)
    lines: list[str] = []
    for report in sorted(reports, key=lambda r: r.summary.fleet_id):
        problems = fleet_problems(report)
        healthy = not problems
        data["ok"] = data["ok"] and healthy
        name = f" ({cell(report.summary.name)})" if report.summary.name else ""
        lines.append(
            f"  {OK_MARK if healthy else FAIL_MARK} fleet {report.summary.fleet_id}{name}: "
            f"loop {report.loop.text}; panes {cell(report.panes.summary())}"
        )
        hosts = report.hosts
        if hosts is not None and hosts.spans:  # a fleet across machines: each host's delivery
            lines += [f"    host {cell(h.text)}" for h in hosts.hosts]
        lines += [f"    {cell(p.line)}" for p in problems]
        fleet_hooks = hooks[report.summary.fleet_id]
        lines += [f"    hooks: {cell(h.line)}" for h in fleet_hooks]
        data["fleets"].append(
            {
                "fleet_id": report.summary.fleet_id,
                "name": report.summary.name,
                "ok": healthy,
                "loop": report.loop.as_dict(),
                "panes": [p.as_dict() for p in report.panes.panes.values()],
                **(
                    {"hosts": [h.as_dict() for h in hosts.hosts]}
                    if hosts is not None and hosts.spans
                    else {}
                ),
                "problems": [p.as_dict() for p in problems],
                "hooks": [h.as_dict() for h in fleet_hooks],
            }
        )
    left = left_tree_problems(gone)  # deleted fleets are not listed, their worktrees are
    data["left_worktrees"] = [p.as_dict() for p in left]
    if left:
        data["ok"] = False
        lines.append(f"  {FAIL_MARK} worktrees of deleted fleets:")
        lines += [f"    {cell(p.line)}" for p in left]
    return Section("fleets", data["ok"], lines or ["  no live fleets"], data)


@cli.command(
    "doctor",
    short_help="Diagnose tmux, the database and the agents' set-up without changing anything.",
    help=(
        "Diagnose the multiplexer (tmux), the database, the coding agents' installed skills, "
        "the permissions members need and every live fleet (its monitor loop and its members' "
        "panes), without changing anything. Exits 1 when an issue is found."
    ),
)
@json_option
def doctor(as_json: bool) -> None:
    settings = invocation().doctor_settings()  # a bad integer variable still aborts
    database = database_section(settings.database_path, settings.path_error)
    sections = [multiplexer_section(), database]
    issues = sum(1 for section in sections if not section.ok)
    rows = recorded_installs(settings.database_path, database.data["state"])
    agents, statuses = coding_agents_section(rows, __version__, installed_agents())
    permissions = member_permissions_section(statuses, __version__)
    issues += agents.issues + permissions.issues  # each failing row is one issue
    fleets = fleets_section(settings.database_path, database.ok)
    issues += 0 if fleets.ok else 1
    if as_json:
        payload: dict[str, Any] = {"cafleet_version": __version__}
        for section in sections:
            payload[section.name] = section.data
        payload["coding_agents"] = agents.data
        payload["member_permissions"] = permissions.data
        payload["fleets"] = fleets.data
        payload["issues"] = issues
        out_json(payload)
    else:
        out(f"cafleet {__version__}")
        for name, ok, lines in [
            *((s.name, s.ok, s.lines) for s in sections),
            (agents.name, agents.ok, agents.lines),
            (permissions.name, permissions.ok, permissions.lines),
            (fleets.name, fleets.ok, fleets.lines),
        ]:
            out(f"{OK_MARK if ok else FAIL_MARK} {name}")
            for line in lines:
                out(line)
        out("no issues found" if issues == 0 else f"{plural(issues, 'issue')} found")
    if issues:
        click.get_current_context().exit(1)
