"""Structural rules of the package, checked on its source so they cannot regress quietly."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path

import cafleet
from cafleet.errors import CafleetError

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


def imported_modules(path: Path, root: Path = PACKAGE_DIR.parent) -> list[tuple[int, str]]:
    """Every module `path` imports, wherever the import sits (module level, inside functions,
    under TYPE_CHECKING), with relative imports resolved; `importlib.import_module("...")` with
    a literal name counts too."""
    import ast

    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    module_name = _module_of(path, root)
    package = module_name if path.name == "__init__.py" else module_name.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            found.append((node.lineno, module))
            # `from cafleet import cli` imports the submodule
            found.extend((node.lineno, f"{module}.{alias.name}") for alias in node.names)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id)
            in ("import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.append((node.lineno, node.args[0].value))
    return found


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
