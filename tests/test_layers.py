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
