"""`cafleet search` (docs/cli.md §2.34)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from cafleet.cli.app import cli
from cafleet.cli.context import invocation
from cafleet.cli.params import id_option, json_option
from cafleet.output import out, out_json, out_lines
from cafleet.text import sanitize_single_line
from cafleet.workflows import search as workflow

if TYPE_CHECKING:
    from cafleet.broker.search import SearchHit


def hit_dict(hit: SearchHit) -> dict[str, Any]:
    return {
        "kind": hit.kind,
        "id": hit.id,
        "fleet_id": hit.fleet_id,
        "title": hit.title,
        "snippet": hit.snippet,
    }


def _line(hit: SearchHit) -> str:
    title = f" {sanitize_single_line(hit.title)!r}" if hit.title is not None else ""
    return f"{hit.kind} {hit.id} (fleet {hit.fleet_id}){title}: {sanitize_single_line(hit.snippet)}"


@cli.command(
    "search",
    help="Find messages and tasks holding every word of QUERY, best first.",
)
@click.argument("query", help="The words to find (quotes and operators are plain text).")
@id_option("--fleet-id", "Only this fleet (a deleted one too).", required=False)
@click.option(
    "--limit",
    type=click.IntRange(1, workflow.LIMIT_MAX),
    default=20,
    show_default=True,
    help="At most this many hits.",
)
@json_option
def search_cmd(query: str, fleet_id: int | None, limit: int, as_json: bool) -> None:
    conn = invocation().connection()
    hits = workflow.search(conn, query=query, fleet_id=fleet_id, limit=limit)
    if as_json:
        out_json([hit_dict(hit) for hit in hits])
    elif hits:
        out_lines([_line(hit) for hit in hits])
    else:
        out("No matches.")
