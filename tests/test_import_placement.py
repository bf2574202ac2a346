"""Imports sit at the top of their module. Lazy imports are kept where start-up measurably needs
them (a command's own module, a heavy library, a branch few runs take: docs/performance.md), and
the package holds at most `LIMIT` imports of cafleet modules inside functions."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import cafleet

PACKAGE_DIR = Path(cafleet.__file__).parent
LIMIT = 250


def _is_cafleet(node: ast.Import | ast.ImportFrom) -> bool:
    if isinstance(node, ast.ImportFrom):
        return bool(node.level) or (node.module or "").split(".")[0] == "cafleet"
    return any(alias.name.split(".")[0] == "cafleet" for alias in node.names)


def in_function_imports(path: Path) -> int:
    """Import statements of cafleet modules inside a function or lambda body in ``path``."""
    count = 0

    def visit(node: ast.AST, inside: bool) -> None:
        nonlocal count
        if inside and isinstance(node, ast.Import | ast.ImportFrom) and _is_cafleet(node):
            count += 1
        inside = inside or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        for child in ast.iter_child_nodes(node):
            visit(child, inside)

    visit(ast.parse(path.read_text(encoding="utf-8")), False)
    return count


def counts_by_folder(package: Path = PACKAGE_DIR) -> Counter[str]:
    counts: Counter[str] = Counter()
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package).parts
        counts[parts[0] if len(parts) > 1 else "(top level)"] += in_function_imports(path)
    return counts


def test_the_count_sees_every_form(tmp_path: Path) -> None:
    source = tmp_path / "sample.py"
    source.write_text(
        "from cafleet import broker\n"  # module level: not counted
        "import os\n"
        "def f():\n"
        "    from cafleet.db import runtime\n"
        "    from . import text\n"
        "    import cafleet.mux\n"
        "    import json\n"  # not cafleet's
        "    g = lambda: __import__('x')\n"
        "class C:\n"
        "    from cafleet import status\n"  # class body: runs at import
        "    def m(self):\n"
        "        if True:\n"
        "            from cafleet.config import MAX_ID\n",
        encoding="utf-8",
    )
    assert in_function_imports(source) == 4


def test_at_most_250_imports_of_cafleet_modules_inside_functions() -> None:
    counts = counts_by_folder()
    assert sum(counts.values()) <= LIMIT, sorted(counts.items(), key=lambda kv: -kv[1])
