"""`cafleet export` and `cafleet import` (docs/cli.md §2.33)."""

from __future__ import annotations

import sys

import click

from cafleet import broker
from cafleet.cli.app import cli
from cafleet.cli.context import invocation
from cafleet.cli.params import id_option, json_option
from cafleet.files import write_private
from cafleet.output import dumps_json, out, out_json


@cli.command(
    "export",
    help="Write everything a fleet holds (a deleted one's too) as JSON lines.",
)
@id_option("--fleet-id", "Fleet ID.")
@click.option("--output", "output", metavar="FILE", default=None, help="Write to FILE (0600).")
def export_cmd(fleet_id: int, output: str | None) -> None:
    inv = invocation()
    conn = inv.connection()

    lines = [dumps_json(record) for record in broker.export_fleet(conn, fleet_id)]
    if output is None:
        for line in lines:
            out(line)
        return

    write_private(output, "".join(line + "\n" for line in lines))


@cli.command("import", help="Load an export into a database that holds no fleet yet.")
@click.option(
    "--input", "source", metavar="FILE", default="-", help="Read FILE ('-': stdin, the default)."
)
@json_option
def import_cmd(source: str, as_json: bool) -> None:
    inv = invocation()
    conn = inv.connection()

    if source == "-":
        text = sys.stdin.read()
    else:
        with open(source, encoding="utf-8") as f:
            text = f.read()
    counts = broker.import_rows(conn, list(broker.records_of(iter(text.splitlines()))))
    if as_json:
        out_json({"imported": counts})
    else:
        out("Imported " + ", ".join(f"{n} {kind}" for kind, n in counts.items() if n) + ".")
