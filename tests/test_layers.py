"""Structural rules of the package, checked on its source so they cannot regress quietly."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Container, Iterable
from pathlib import Path
from typing import Any

import cafleet
from cafleet.errors import CafleetError
from tests.layer_map import DOC, LAYERS, LEAVES, Layer, documented_table, render_table

PACKAGE_DIR = Path(cafleet.__file__).parent


def _module_names() -> list[str]:
    return sorted(
        info.name for info in pkgutil.walk_packages([str(PACKAGE_DIR)], prefix="cafleet.")
    )


def test_every_cafleet_exception_descends_from_cafleet_error() -> None:
    """`is_user_facing` is an isinstance check on the one root, so a new exception class that
    forgot it would silently change how the CLI reports it."""
    found: list[str] = []
    for name in _module_names():
        module = importlib.import_module(name)
        for obj in vars(module).values():
            if (
                inspect.isclass(obj)
                and issubclass(obj, BaseException)
                and obj.__module__ == module.__name__
            ):
                found.append(obj.__qualname__)
                assert issubclass(obj, CafleetError), f"{name}.{obj.__qualname__}"
    # sanity: the walk saw the package's exception classes, private ones included
    assert {"BrokerError", "MultiplexerError", "StorageError", "_Rollback"} <= set(found)
    assert len(found) >= 40


def test_one_pane_key_for_placements_repository_and_locks() -> None:
    from cafleet import mux, records
    from cafleet.mux.locks import lock_file_name

    assert mux.PaneKey is records.PaneKey
    placement = records.Placement(
        member_id=1,
        backend="tmux",
        mux_session="s",
        mux_window_id="@1",
        mux_pane_id="%1",
        coding_agent="claude",
        created_at="2025-01-01T00:00:00.000Z",
    )
    key = placement.pane_key
    assert isinstance(key, records.PaneKey)
    assert key == ("tmux", "s", "%1") and hash(key) == hash(("tmux", "s", "%1"))
    assert (key.backend, key.session, key.pane_id) == ("tmux", "s", "%1")
    assert lock_file_name(key) == lock_file_name(mux.PaneKey("tmux", "s", "%1"))


# --- imports: the CLI sits on top --------------------------------------------------------------

CLI = "cafleet.cli"
# The entry point (`python -m cafleet`) is the only module outside cafleet/cli that may use it.
CLI_USERS = {PACKAGE_DIR / "__main__.py"}


def _module_of(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, root: Path = PACKAGE_DIR.parent) -> list[tuple[int, str, bool]]:
    """Every module `path` imports as ``(line, module, eager)``, wherever the import sits, with
    relative imports resolved; `importlib.import_module("...")` with a literal name counts too.
    ``eager``: the import runs when the module is imported (module level, not under
    ``TYPE_CHECKING``); False inside a function or lambda, or under ``TYPE_CHECKING``."""
    import ast

    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    module_name = _module_of(path, root)
    package = module_name if path.name == "__init__.py" else module_name.rpartition(".")[0]
    found: list[tuple[int, str, bool]] = []

    def visit(node: ast.AST, eager: bool) -> None:
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name, eager) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            found.append((node.lineno, module, eager))
            # `from cafleet import cli` imports the submodule
            found.extend((node.lineno, f"{module}.{alias.name}", eager) for alias in node.names)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id)
            in ("import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.append((node.lineno, node.args[0].value, eager))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            eager = False
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                visit(child, False)
            for child in node.orelse:
                visit(child, eager)
            return
        for child in ast.iter_child_nodes(node):
            visit(child, eager)

    visit(tree, True)
    return found


def imported_modules(path: Path, root: Path = PACKAGE_DIR.parent) -> list[tuple[int, str]]:
    """Every module `path` imports, wherever the import sits (module level, inside functions,
    under TYPE_CHECKING)."""
    return [(line, module) for line, module, _ in imports_of(path, root)]


def _is_cli(module: str) -> bool:
    return module == CLI or module.startswith(CLI + ".")


def test_no_lower_layer_imports_the_cli() -> None:
    """db, records, broker, mux, agents, delivery, monitor and the shared modules never import
    `cafleet.cli`, not even lazily: the CLI is one client of them (the WebUI will be another)."""
    cli_dir = PACKAGE_DIR / "cli"
    checked = 0
    offenders: list[str] = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        if path.is_relative_to(cli_dir) or path in CLI_USERS:
            continue
        checked += 1
        for lineno, module in imported_modules(path):
            if _is_cli(module):
                offenders.append(f"{path.relative_to(PACKAGE_DIR.parent)}:{lineno} {module}")
    assert offenders == []
    assert checked >= 40  # sanity: the walk found the lower layers


def test_the_import_scan_sees_every_form_of_import(tmp_path: Path) -> None:
    """The scan above must catch lazy, relative and aliased imports, or it proves nothing."""
    pkg = tmp_path / "cafleet" / "db"
    pkg.mkdir(parents=True)
    source = pkg / "sample.py"
    source.write_text(
        "import cafleet.cli.guard as g\n"
        "from cafleet import cli\n"
        "def f():\n"
        "    from ..cli.context import fail\n"
        "    from .. import cli as c\n"
        "    import importlib\n"
        "    importlib.import_module('cafleet.cli.app')\n"
        "from cafleet.db import engine\n",
        encoding="utf-8",
    )
    hits = [(n, m) for n, m in imported_modules(source, tmp_path) if _is_cli(m)]
    assert [n for n, _ in hits] == [1, 2, 4, 4, 5, 7]
    assert ("4", "cafleet.cli.context") in {(str(n), m) for n, m in hits}  # relative, resolved


# --- imports: the layer map (tests/layer_map.py, docs/architecture.md §1) ------------------------


def _modules() -> dict[str, Path]:
    return {_module_of(p, PACKAGE_DIR.parent): p for p in sorted(PACKAGE_DIR.rglob("*.py"))}


def _resolve(name: str, modules: Container[str]) -> str | None:
    """The cafleet module an import names (`from cafleet.mux import PaneKey` -> `cafleet.mux`)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _covers(prefixes: Iterable[str], module: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def _layer_of(module: str) -> Layer | None:
    matches = [
        (len(prefix), layer)
        for layer in LAYERS
        for prefix in layer.modules
        if module == prefix or module.startswith(prefix + ".")
    ]
    return max(matches, key=lambda m: m[0])[1] if matches else None


def layer_violations(
    modules: dict[str, Path], root: Path = PACKAGE_DIR.parent, leaves: Container[str] = LEAVES
) -> list[str]:
    """Every import the map does not allow, as `path:line module (why)`; ``root`` holds the
    `cafleet` directory that ``modules`` come from."""
    problems: list[str] = []
    for name, path in modules.items():
        leaf = name in leaves
        layer = None if leaf else _layer_of(name)
        if not leaf and layer is None:
            problems.append(f"{name}: in no layer of tests/layer_map.py")
            continue
        for line, imported, eager in imports_of(path, root):
            target = _resolve(imported, modules) if imported.startswith("cafleet") else None
            if target is None or target == name or target in leaves:
                continue
            where = f"{path.relative_to(root)}:{line} {imported}"
            if leaf:
                problems.append(f"{where} (a leaf imports only leaves)")
                continue
            assert layer is not None
            if _layer_of(target) is layer or _covers(layer.eager, target):
                continue
            if _covers(layer.lazy, target):
                if eager:
                    problems.append(f"{where} (layer {layer.name}: only inside a function)")
                continue
            problems.append(f"{where} (layer {layer.name} may not import it)")
    return problems


def test_every_import_follows_the_layer_map() -> None:
    modules = _modules()
    assert layer_violations(modules) == []
    # sanity: every module was placed, and the map names only modules that exist
    assert len(modules) >= 140
    for layer in LAYERS:
        for prefix in (*layer.modules, *layer.eager, *layer.lazy):
            assert prefix in modules, prefix
    assert set(LEAVES) <= set(modules)


def test_the_layer_check_fails_on_a_wrong_import(tmp_path: Path) -> None:
    """A lower layer importing a higher one, an eager import of a lazy-only target, and a leaf
    importing a layer are each reported; a lazy import of an allowed target is not."""
    import shutil

    root = tmp_path / "cafleet"
    shutil.copytree(PACKAGE_DIR, root, ignore=shutil.ignore_patterns("__pycache__"))
    (root / "db" / "bad.py").write_text("from cafleet.workflows import members\n", encoding="utf-8")
    (root / "monitor" / "bad.py").write_text(
        "from cafleet import broker\ndef f():\n    from cafleet.mux import get_backend\n",
        encoding="utf-8",
    )
    (root / "text_bad.py").write_text("import cafleet.db.runtime\n", encoding="utf-8")
    modules = {_module_of(p, tmp_path): p for p in sorted(root.rglob("*.py"))}
    leaves = {*LEAVES, "cafleet.text_bad"}
    found = [
        p.split(" ", 1)[1]
        for p in layer_violations(modules, tmp_path, leaves)
        if p.startswith(("cafleet/db/bad.py", "cafleet/monitor/bad.py", "cafleet/text_bad.py"))
    ]
    assert found == [
        "cafleet.workflows (layer db may not import it)",
        "cafleet.workflows.members (layer db may not import it)",
        "cafleet.broker (layer monitor: only inside a function)",
        "cafleet.db.runtime (a leaf imports only leaves)",
    ]


def test_no_import_cycle_between_modules() -> None:
    """No two modules import each other, directly or through others, at any level, except a
    package's `__init__` and its own submodules (a facade or a registry of its backends)."""
    modules = _modules()
    edges: dict[str, set[str]] = {}
    for name, path in modules.items():
        for _, imported, _ in imports_of(path):
            target = _resolve(imported, modules) if imported.startswith("cafleet") else None
            if target is None or target == name:
                continue
            if name.startswith(target + ".") or target.startswith(name + "."):
                continue  # a package and its own submodules
            edges.setdefault(name, set()).add(target)
    cycles = _cycles(edges)
    assert cycles == []


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            connect(v)
    return found


def test_the_cycle_check_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_the_architecture_table_is_the_layer_map() -> None:
    """docs/architecture.md §1's table is rendered from tests/layer_map.py; after changing the
    map run `python -m tests.layer_map --write`."""
    text = DOC.read_text(encoding="utf-8")
    assert documented_table(text) == render_table()


# --- thin commands (docs/architecture.md §1: parse, one call, render) -------------------------

COMMAND_BODY_LIMIT = 40


def _every_command() -> Iterable[tuple[str, Any]]:
    """Every Click command and group of the tree, hidden ones included, with its path."""
    import click

    from cafleet.cli.app import cli

    todo: list[tuple[str, click.Command]] = [("cafleet", cli)]
    while todo:
        path, command = todo.pop()
        yield path, command
        if isinstance(command, click.Group):
            ctx = click.Context(command, info_name=path)
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                assert sub is not None, f"{path} {name}"
                todo.append((f"{path} {name}", sub))


def command_body_lengths() -> dict[str, int]:
    """Each command's callback: lines from its first statement to its last."""
    import ast
    import textwrap

    lengths: dict[str, int] = {}
    for path, command in _every_command():
        if command.callback is None:
            continue
        function = inspect.unwrap(command.callback)
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
        node = tree.body[0]
        assert isinstance(node, ast.FunctionDef), path
        assert node.end_lineno is not None
        lengths[path] = node.end_lineno - node.body[0].lineno + 1
    return lengths


def test_no_command_body_is_over_40_lines() -> None:
    """A Click command parses, makes one workflow call and renders; anything longer moves into
    a workflow or a rendering helper."""
    lengths = command_body_lengths()
    assert "cafleet member list" in lengths and "cafleet fleet restore" in lengths
    assert lengths["cafleet"] <= 2  # the root group: print help when bare
    long = {path: n for path, n in lengths.items() if n > COMMAND_BODY_LIMIT}
    assert long == {}
