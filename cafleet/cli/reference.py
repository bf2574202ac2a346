"""Generate `docs/cli-reference.md` from each command's `--help`.

    python -m cafleet.cli.reference --write   # rewrite docs/cli-reference.md
    python -m cafleet.cli.reference --check   # exit 1 when the checked-in file is stale
    python -m cafleet.cli.reference           # print the reference on stdout

The walk goes through the groups' own `list_commands` / `get_command`, so every module a
group's `command_modules` maps is imported on the way (the lazy loading of `cafleet.cli.app`),
and a command missing from those maps is missing here too. Hidden commands are skipped: the
monitor loop form is documented by `cafleet monitor --help`. A group's own help only lists its
commands, which follow, so only the root's is rendered. Help is rendered at the width Click picks
in any terminal of 80 columns or more, so the file never depends on the caller's terminal.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import click

from cafleet.cli.app import cli

# Click formats help at min(terminal columns, 80) - 2 columns.
HELP_WIDTH = 78

DEFAULT_OUTPUT = Path(__file__).resolve().parents[2] / "docs/cli-reference.md"

HEADER = """\
# cafleet command reference

Generated from each command's `--help` by `python -m cafleet.cli.reference --write`; do not edit
it by hand (`tests/test_docs.py` fails when it is stale). What the commands do, print and exit
with is in `docs/cli.md`.
"""


def command_paths() -> Iterator[tuple[tuple[str, ...], click.Context]]:
    """Every visible command and group, depth first in help order, with its Click context."""
    root = click.Context(
        cli, info_name="cafleet", terminal_width=HELP_WIDTH, **cli.context_settings
    )
    yield from _walk(root, ())


def _walk(
    ctx: click.Context, path: tuple[str, ...]
) -> Iterator[tuple[tuple[str, ...], click.Context]]:
    yield path, ctx
    command = ctx.command
    if not isinstance(command, click.Group):
        return
    for name in command.list_commands(ctx):
        sub = command.get_command(ctx, name)
        if sub is None or sub.hidden:
            continue
        yield from _walk(click.Context(sub, info_name=name, parent=ctx), (*path, name))


def render() -> str:
    """The whole reference document."""
    sections = [HEADER]
    for path, ctx in command_paths():
        if path and isinstance(ctx.command, click.Group):
            continue
        title = " ".join(("cafleet", *path))
        sections.append(f"## {title}\n\n```text\n{ctx.command.get_help(ctx)}\n```\n")
    return "\n".join(sections)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cafleet.cli.reference", description=__doc__)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="rewrite the reference file")
    mode.add_argument("--check", action="store_true", help="exit 1 when the file is stale")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="the reference file")
    args = parser.parse_args(argv)
    text = render()
    if args.write:
        args.output.write_text(text, encoding="utf-8")
        return 0
    if args.check:
        current = args.output.read_text(encoding="utf-8") if args.output.exists() else None
        if current != text:
            print(
                f"{args.output} is stale; run: python -m cafleet.cli.reference --write",
                file=sys.stderr,
            )
            return 1
        return 0
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
