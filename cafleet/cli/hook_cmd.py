"""`cafleet hook` and `cafleet member explain` (docs/cli.md §2.38, §2.39).

The console script runs `cafleet hook …` before Click is imported (`cafleet.cli.main`); this
command is the same call reached through Click (its help, an in-process run).
"""

from __future__ import annotations

import click

from cafleet.cli.app import cli, member_group
from cafleet.cli.context import invocation
from cafleet.cli.params import id_argument, json_option
from cafleet.hook import run_hook
from cafleet.output import cell, label_lines, out_json, out_lines
from cafleet.workflows.explain import explain_member

HOOK_HELP = "Record what an agent's hook reports (run by the hooks cafleet installs)."


@cli.command(
    "hook",
    help=HOOK_HELP,
    context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
)
@click.argument("event", metavar="EVENT", help="prompt, tool, stop, turn, idle, permission.")
@click.option(
    "--member-id", "member_id", type=int, required=True, help="The member it reports for."
)
@click.argument("payload", nargs=-1, metavar="[PAYLOAD]", help="The event's JSON (default: stdin).")
def hook(event: str, member_id: int, payload: tuple[str, ...]) -> None:
    run_hook([event, "--member-id", str(member_id), *payload[-1:]])


@member_group.command(
    "explain",
    help="Show a member's state, its source (hook or screen) and each signal.",
)
@id_argument("member_id", "Member ID.")
@json_option
def member_explain(member_id: int, as_json: bool) -> None:
    inv = invocation()
    found = explain_member(inv.connection(), member_id)
    if as_json:
        out_json(found.as_dict())
        return
    pairs = [
        ("state", cell(found.state or "unknown")),
        ("source", found.source or "-"),
    ]
    for s in found.signals:
        pairs.append((s.source, cell(f"{s.state} at {s.at or '-'}: {s.detail}")))
    if found.disagreement:
        pairs.append(("note", "the screen contradicts an older hook report: the screen decides"))
    out_lines(label_lines(pairs, 9))
