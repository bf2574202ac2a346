"""Names a package re-exports from its submodules, each submodule imported on first use (PEP 562).

A short command then imports only the submodules whose names it touches (docs/performance.md,
docs/architecture.md §2): `def __getattr__(name): return load(__name__, HOMES, name)` in the package.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping
from typing import Any


def load(package: str, homes: Mapping[str, str], name: str) -> Any:
    """`package`'s attribute `name` from the submodule `homes[name]`; cached on the package, so
    later lookups never come here again."""
    home = homes.get(name)
    if home is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{package}.{home}"), name)
    setattr(sys.modules[package], name, value)
    return value
