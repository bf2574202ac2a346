"""SHA-256 without OpenSSL's import: `hashlib` loads libcrypto (2-10 ms on this machine, more
than a short command's own work), while CPython's built-in module computes the same digest."""

from __future__ import annotations

from typing import Any

try:
    from _sha256 import sha256 as _sha256  # type: ignore[import-not-found]  # CPython 3.11
except ImportError:  # pragma: no cover - other Pythons
    try:
        from _sha2 import sha256 as _sha256  # type: ignore[import-not-found]  # CPython 3.12+
    except ImportError:
        from hashlib import sha256 as _sha256


def sha256(data: bytes) -> Any:
    """A `hashlib.sha256` object over ``data``."""
    return _sha256(data)
