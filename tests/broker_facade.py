"""The `cafleet.broker` facade's generated part: from its one table (`FACADE`), the import block
type checkers read and `__all__`. `python -m tests.broker_facade --write` rewrites it;
tests/test_broker_lazy.py fails when it differs."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

FACADE_FILE = Path(__file__).resolve().parent.parent / "cafleet" / "broker" / "__init__.py"
BEGIN = "# --- generated from FACADE by `python -m tests.broker_facade --write`; do not edit ---\n"
END = "# --- end of generated ---\n"


def _error_names(source: str) -> list[str]:
    """The names the facade imports from `cafleet.broker.errors` (re-exported as they are)."""
    tree = ast.parse(source)
    return [
        alias.name
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and node.module == "cafleet.broker.errors"
        for alias in node.names
    ]


def render(facade: dict[str, tuple[str, ...]], errors: list[str]) -> str:
    lines = ["if TYPE_CHECKING:  # the same names, for type checkers and editors"]
    for module, names in facade.items():
        lines.append(f"    from cafleet.broker.{module} import (")
        lines.extend(f"        {name}," for name in names)
        lines.append("    )")
    lines.append("")
    lines.append("__all__ = [")
    lines.extend(
        f'    "{name}",' for name in sorted([*errors, *(n for ns in facade.values() for n in ns)])
    )
    lines.append("]")
    return "\n".join(lines) + "\n"


def expected(source: str) -> str:
    """The facade's source with its generated part rendered from its table."""
    from cafleet.broker import FACADE

    start = source.index(BEGIN) + len(BEGIN)
    stop = source.index(END)
    return source[:start] + render(FACADE, _error_names(source)) + source[stop:]


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python -m tests.broker_facade --write")
    FACADE_FILE.write_text(expected(FACADE_FILE.read_text(encoding="utf-8")), encoding="utf-8")
