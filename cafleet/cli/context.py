"""Per-invocation state and error mapping for command bodies (docs/cli.md §1.4, §1.6, §1.7).

A command body does, in order::

    inv = invocation()          # lazy state kept on the root Click context
    conn = inv.connection()     # settings (all four variables), then the schema guard
    ...one repository call...   # cafleet errors become `Error: <str(exc)>`, exit 1
    render with cafleet.output

Settings are loaded once. The connection is opened lazily through the guard, at most once, and
closed when the root context closes (`cafleet.cli.invocation`, imported by the first command body
that asks for it: nothing here imports the storage layer at module load).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NoReturn

import click

from cafleet import status
from cafleet.cli.failure import CafleetClickError, to_click_error
from cafleet.errors import CafleetError
from cafleet.output import BrokenStdout, OutputFailed
from cafleet.signals import Interrupted

if TYPE_CHECKING:
    from cafleet.cli.invocation import Invocation


def invocation() -> Invocation:
    """The current invocation's state (created on first use)."""
    root = click.get_current_context().find_root()
    inv = root.meta.get("cafleet.invocation")
    if inv is None:
        # Its module imports settings, the guard and the storage layer: only a command body,
        # never `--version`, help or a parse failure, needs them.
        from cafleet.cli.invocation import Invocation

        inv = Invocation(root)
        root.meta["cafleet.invocation"] = inv
    return inv


# --- errors --------------------------------------------------------------------------------------


def is_user_facing(exc: BaseException) -> bool:
    """cafleet's own exceptions carry user-facing text as their str() (docs/storage.md §7.9,
    docs/runtime.md §1.1, docs/cli.md §1.4)."""
    return isinstance(exc, CafleetError)


def fail(message: str, code: str = "error") -> NoReturn:
    """Stop with `Error: <message>` (exit status from ``code``: 1 unless a usage or timeout)."""
    raise CafleetClickError(message, code)


def usage_error(message: str) -> NoReturn:
    """Stop with Click's usage rendering (usage line, Try line, `Error: <message>`), exit 2."""
    raise click.UsageError(message, click.get_current_context(silent=True))


HELP_OPTION_HELP = "Show this message and exit."
# Click's own storage name for it, so a parameter named `help` never collides with it.
HELP_OPTION_NAME = "_click_default_help"


def _show_help(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(ctx.get_help(), color=ctx.color)
        ctx.exit()


class PlainHelpOption:
    """`-h/--help` built from its English text: Click's own asks gettext for a translation,
    which costs every command the `locale` import and a catalog search (cafleet has no
    translations). Cached per command, as Click's is: parameter processing compares by identity."""

    _cafleet_help: click.Option | None = None

    if TYPE_CHECKING:  # click.Command's, which every user of this mixin is
        add_help_option: bool

        def get_help_option_names(self, ctx: click.Context) -> list[str]: ...

    def get_help_option(self, ctx: click.Context) -> click.Option | None:
        names = self.get_help_option_names(ctx)
        if not names or not self.add_help_option:
            return None
        if self._cafleet_help is None:
            self._cafleet_help = click.Option(
                [*names, HELP_OPTION_NAME],
                is_flag=True,
                is_eager=True,
                expose_value=False,
                callback=_show_help,
                help=HELP_OPTION_HELP,
            )
        return self._cafleet_help


class CafleetCommand(PlainHelpOption, click.Command):
    """Every cafleet command: cafleet exceptions raised by the body become `Error: <text>`.

    Signals (`Interrupted`) and output failures pass through for `main` to map.
    """

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, BrokenStdout, OutputFailed):
            raise
        except Exception as exc:
            if isinstance(exc, Interrupted) or not is_user_facing(exc):
                raise
            _workflow_error(exc, ctx)
            raise to_click_error(exc) from exc


def _workflow_error(exc: Exception, ctx: click.Context) -> None:
    """The workflow errors Click cannot say by itself: a usage problem (exit 2) and a
    compensated failure (its primary error, then every cleanup line)."""
    from cafleet.workflows.spawning import CompensatedError, WorkflowUsageError

    if isinstance(exc, WorkflowUsageError):
        raise click.UsageError(str(exc), ctx) from exc
    if isinstance(exc, CompensatedError):
        code = status.CODE_ERROR if exc.primary is not None else status.CODE_INTERRUPTED
        raise CafleetClickError(exc.primary, code, exc.cleanup) from exc
