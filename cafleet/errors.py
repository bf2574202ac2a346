"""The root of cafleet's exceptions, and how any exception reads to the user.

Standard library only and imported by every layer, so it sits below all of them.
"""

from __future__ import annotations


class CafleetError(Exception):
    """Base of every exception cafleet defines; ``str()`` is the user-facing text (the CLI
    prints it as ``Error: <text>``)."""


def error_text(exc: BaseException) -> str:
    """An exception's user-facing text: an SQLite error wrapped by SQLAlchemy is quoted as
    ``str(exc.orig)``, anything else as ``str(exc)``; the type name when that is empty."""
    orig = getattr(exc, "orig", None)
    text = str(orig) if isinstance(orig, BaseException) else str(exc)
    return text or type(exc).__name__


__all__ = ["CafleetError", "error_text"]
