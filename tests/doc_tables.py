"""The reference tables of docs/ rendered from the code, so they cannot drift from it.

    python -m tests.doc_tables --write   # rewrite every generated block
    python -m tests.doc_tables --check   # exit 1 when a block is stale (tests/test_docs.py)

A block sits between `<!-- generated: NAME ... -->` and `<!-- end: NAME -->` in a document;
everything between the markers is this module's. The layer map (tests/layer_map.py) and the
command reference (cafleet/cli/reference.py) have generators of their own.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import click

DOCS = Path(__file__).resolve().parent.parent / "docs"


def environment() -> str:
    """docs/operations.md §1.1: every variable `cafleet/config.py` lists."""
    from cafleet.config import VARIABLES

    rows = ["| variable | default | what it does |", "|---|---|---|"]
    rows += [f"| `{name}` | {default} | {what} |" for name, default, what in VARIABLES]
    return "\n".join(rows) + "\n"


def exit_statuses() -> str:
    """docs/cli.md §1.4: the exit statuses of `cafleet/status.py`."""
    from cafleet.status import EXIT_MEANINGS

    rows = ["| exit | meaning |", "|---|---|"]
    rows += [f"| {status} | {meaning} |" for status, meaning in EXIT_MEANINGS]
    return "\n".join(rows) + "\n"


def error_codes() -> str:
    """docs/cli.md §1.4: the `--json` error codes of `cafleet/status.py` and their exits."""
    from cafleet import status

    rows = ["| code | exit | what |", "|---|---|---|"]
    for code, meaning in status.CODE_MEANINGS:
        # A recorded signal, not the code, picks the exit of an interrupted command.
        shown = (
            f"{status.SIGINT}/{status.SIGTERM}"
            if code == status.CODE_INTERRUPTED
            else str(status.exit_status(code))
        )
        rows.append(f"| `{code}` | {shown} | {meaning} |")
    return "\n".join(rows) + "\n"


def _metavar(param: click.Parameter) -> str:
    if param.metavar:
        return param.metavar
    if isinstance(param.type, click.Choice):
        return "{" + "|".join(map(str, param.type.choices)) + "}"
    if isinstance(param.type, (click.types.IntParamType, click.types.FloatParamType)):
        return "N"
    return param.type.name.upper()


def _option(param: click.Parameter, ctx: click.Context) -> str:
    if isinstance(param, click.Argument):
        shown = (param.metavar or (param.name or "").upper()).strip("[]")
        return shown if param.required else f"[{shown}]"
    assert isinstance(param, click.Option)
    names = [o for o in param.opts if o.startswith("--")] or list(param.opts)
    text = "|".join([names[0], *param.secondary_opts])
    if not param.is_flag:
        text += " " + _metavar(param)
    if param.multiple:
        text += "..."
    return text if param.required else f"[{text}]"


def command_tree() -> str:
    """docs/cli.md §1.1: every visible command with its arguments and options."""
    from cafleet.cli.reference import command_paths

    lines = []
    for path, ctx in command_paths():
        command = ctx.command
        if isinstance(command, click.Group) or not path:
            continue
        params = [p for p in command.params if "--help" not in getattr(p, "opts", ())]
        pieces = [_option(p, ctx) for p in params if not isinstance(p, click.Argument)]
        arguments = [_option(p, ctx) for p in params if isinstance(p, click.Argument)]
        lines.append(" ".join(["cafleet", *path, *arguments, *pieces]))
    return "```text\n" + "\n".join(lines) + "\n```\n"


BLOCKS: dict[str, tuple[str, Callable[[], str]]] = {
    "environment": ("docs/operations.md", environment),
    "exit-statuses": ("docs/cli.md", exit_statuses),
    "error-codes": ("docs/cli.md", error_codes),
    "command-tree": ("docs/cli.md", command_tree),
}

_BLOCK = re.compile(r"(<!-- generated: ([\w-]+)[^\n]*-->\n)(.*?)(<!-- end: \2 -->)", re.DOTALL)


def _blocks(text: str) -> Iterator[re.Match[str]]:
    return _BLOCK.finditer(text)


def rendered(text: str) -> str:
    """``text`` with each of its generated blocks rendered afresh."""
    return _BLOCK.sub(lambda m: m.group(1) + BLOCKS[m.group(2)][1]() + m.group(4), text)


def stale(docs: Path = DOCS) -> list[str]:
    """The blocks that differ from what the code renders, and the blocks no document holds."""
    problems = []
    found = set()
    for name, (doc, _render) in sorted(BLOCKS.items()):
        text = (docs / Path(doc).name).read_text(encoding="utf-8")
        names = [m.group(2) for m in _blocks(text)]
        if name in names:
            found.add(name)
        else:
            problems.append(f"{doc}: no generated block {name!r}")
    for doc in sorted({doc for doc, _ in BLOCKS.values()}):
        text = (docs / Path(doc).name).read_text(encoding="utf-8")
        for match in _blocks(text):
            if match.group(3) != BLOCKS[match.group(2)][1]():
                problems.append(f"{doc}: block {match.group(2)!r} is stale")
    return problems


def write(docs: Path = DOCS) -> None:
    for doc in sorted({doc for doc, _ in BLOCKS.values()}):
        path = docs / Path(doc).name
        text = path.read_text(encoding="utf-8")
        path.write_text(rendered(text), encoding="utf-8")


def main(argv: list[str]) -> int:
    if argv == ["--write"]:
        write()
        return 0
    if argv == ["--check"]:
        problems = stale()
        for problem in problems:
            print(f"{problem}; run: python -m tests.doc_tables --write", file=sys.stderr)
        return 1 if problems else 0
    print("usage: python -m tests.doc_tables --write | --check", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
