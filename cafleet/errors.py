"""The root of cafleet's exceptions.

Standard library only and imported by every layer, so it sits below all of them.
"""

from __future__ import annotations


class CafleetError(Exception):
    """Base of every exception cafleet defines; ``str()`` is the user-facing text (the CLI
    prints it as ``Error: <text>``)."""


__all__ = ["CafleetError"]
