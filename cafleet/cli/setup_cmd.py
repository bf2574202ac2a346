"""`cafleet setup` (cli.md §2.1): the database half. Not guarded; one line on success."""

from __future__ import annotations

from cafleet.cli.app import cli
from cafleet.cli.context import invocation
from cafleet.output import err, out

WAITING = "Waiting for another 'cafleet setup' to finish (it holds {lock})..."


@cli.command("setup", help="Create or upgrade the cafleet database.")
def setup() -> None:
    path = invocation().db_path
    from cafleet.db.migrate import run_setup

    out(run_setup(path, on_wait=lambda lock: err(WAITING.format(lock=lock))))
