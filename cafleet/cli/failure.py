"""A runtime failure on its way to `cafleet.cli.run`'s renderer (docs/cli.md §1.4): shared by the
command context and the invocation's connection."""

from __future__ import annotations

import click

from cafleet import status
from cafleet.errors import CafleetError, error_text


class CafleetClickError(click.ClickException, CafleetError):
    """A runtime failure on its way to `cafleet.cli.run`'s renderer: the message, its
    `cafleet.status` code (which decides the exit status) and any cleanup lines."""

    def __init__(
        self, message: str | None, code: str = "error", cleanup: tuple[str, ...] = ()
    ) -> None:
        super().__init__(message or "")
        self.error_code = code  # run() renders it and takes the exit status from the code
        self.cleanup = cleanup


def to_click_error(exc: BaseException) -> click.ClickException:
    """`Error: <message>` with the exception's code. SQLite errors are quoted as
    `str(exc.orig)`; an OSError reads as a sentence naming its path and the remedy."""
    if isinstance(exc, click.ClickException):
        return exc
    if isinstance(exc, OSError):
        return CafleetClickError(status.os_error_text(exc), status.CODE_OS)
    return CafleetClickError(error_text(exc), status.error_code(exc))
