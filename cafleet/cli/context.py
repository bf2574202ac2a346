"""Per-invocation state and error mapping for command bodies (docs/cli.md §1.4, §1.6, §1.7).

A command body does, in order::

    inv = invocation()          # lazy state kept on the root Click context
    conn = inv.connection()     # settings (all four variables), then the schema guard
    ...one repository call...   # cafleet errors become `Error: <str(exc)>`, exit 1
    render with cafleet.output

Settings are loaded once. The connection is opened lazily through the guard, at most once, and
closed when the root context closes. Nothing here imports the storage layer at module load.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, NoReturn

import click

from cafleet.errors import CafleetError, error_text

if TYPE_CHECKING:
    from cafleet.config import Settings
    from cafleet.db.runtime import Connection


class Invocation:
    """Lazy state of one `cafleet` invocation."""

    def __init__(self, root: click.Context) -> None:
        self._root = root
        self._settings: Settings | None = None
        self._conn: Connection | None = None
        # The monitor loop itself (and nothing else) turns this off.
        self.heal_on_close = True

    # --- settings ------------------------------------------------------------------------------

    @property
    def settings(self) -> Settings:
        """All four CAFLEET_* variables validated (docs/cli.md §1.6); SettingsError → exit 1."""
        if self._settings is None:
            from cafleet.config import SettingsError, load_settings

            try:
                self._settings = load_settings()
            except SettingsError as exc:
                raise click.ClickException(str(exc)) from exc
        return self._settings

    def doctor_settings(self) -> Settings:
        """Settings where a URL/HOME problem is recorded, not raised (a bad integer still is)."""
        if self._settings is None:
            from cafleet.config import SettingsError, load_settings

            try:
                self._settings = load_settings(tolerate_path_error=True)
            except SettingsError as exc:
                raise click.ClickException(str(exc)) from exc
        return self._settings

    @property
    def db_path(self) -> str:
        return self.settings.db_path

    @property
    def db_dir(self) -> str:
        return self.settings.db_dir

    @property
    def max_text_len(self) -> int:
        return self.settings.max_text_len

    # --- the one connection --------------------------------------------------------------------

    def connection(self) -> Connection:
        """The validated connection: settings, then the schema guard (docs/cli.md §1.7).

        Opened once per invocation and closed when the root context closes. A refusal prints the
        guard's text (exit 1) and leaves the file untouched.
        """
        if self._conn is None:
            path = self.settings.db_path
            from cafleet.cli.guard import open_validated_connection

            try:
                conn = open_validated_connection(path)
            except Exception as exc:
                from cafleet import status

                if status.error_code(exc) == status.CODE_INTERNAL:
                    raise  # a bug: `run` reports it as one (docs/cli.md §1.4)
                raise to_click_error(exc) from exc
            self._conn = conn
            self._root.call_on_close(self.finish)
        return self._conn

    # --- one identity per pane (docs/cli.md §1.5) -------------------------------------------

    def act_as(self, member_id: int) -> None:
        """From an active member's pane, ``member_id`` (the sender, the inbox read) must be that
        member; nothing to check (no import, no query) outside a tmux pane."""
        if os.environ.get("TMUX_PANE") and os.environ.get("TMUX"):
            from cafleet.workflows.identity import require_acting_as

            require_acting_as(self.connection(), os.environ, member_id)

    def ack_own(self, message_id: int) -> None:
        """From an active member's pane, only a message in that member's inbox is ACKed."""
        if os.environ.get("TMUX_PANE") and os.environ.get("TMUX"):
            from cafleet.workflows.identity import require_own_message

            require_own_message(self.connection(), os.environ, message_id)

    def finish(self) -> None:
        """End of the invocation: heal dead monitor loops (`heal_on_close`), then close."""
        try:
            if self.heal_on_close:
                self._heal()
        finally:
            self.close()

    def _heal(self) -> None:
        """Any command that reached the database restarts, in the background, a dead loop of a
        live fleet on the tmux server the fleet's Director placement records (docs/cli.md
        §1.11); with every loop live it costs one indexed read."""
        from cafleet import signals

        conn = self._conn
        if (
            conn is None
            or signals.stop_requested()
            or conn.info.get("cafleet.refused")
            or conn.in_transaction()
        ):
            return
        import contextlib

        from cafleet.monitor.ensure import heal_dead_loops

        with contextlib.suppress(Exception):  # best effort: the command's own result stands
            heal_dead_loops(conn)
        with contextlib.suppress(Exception):  # this host's delivery loop (docs/runtime.md §10.4)
            from cafleet import broker
            from cafleet.hosts import current_host

            # One read by primary key; the loop's module only when a loop ever ran here.
            if broker.get_host_loop(conn, current_host()) is not None:
                from cafleet.monitor.hostloop import heal_host_loop

                heal_host_loop(conn)

    def close(self) -> None:
        """Close the connection now (idempotent); also runs when the root context closes."""
        conn, self._conn = self._conn, None
        if conn is not None:
            from cafleet.db.runtime import close_connection

            # A connection the schema re-check refused is closed the guarded way, so the
            # refused file keeps its bytes (docs/storage.md §5.5).
            close_connection(conn, guarded=bool(conn.info.get("cafleet.refused")))


def invocation() -> Invocation:
    """The current invocation's state (created on first use)."""
    root = click.get_current_context().find_root()
    inv = root.meta.get("cafleet.invocation")
    if inv is None:
        inv = Invocation(root)
        root.meta["cafleet.invocation"] = inv
    return inv


# --- errors --------------------------------------------------------------------------------------


def is_user_facing(exc: BaseException) -> bool:
    """cafleet's own exceptions carry user-facing text as their str() (docs/storage.md §7.9,
    docs/runtime.md §1.1, docs/cli.md §1.4)."""
    return isinstance(exc, CafleetError)


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
    from cafleet import status

    if isinstance(exc, OSError):
        return CafleetClickError(status.os_error_text(exc), status.CODE_OS)
    return CafleetClickError(error_text(exc), status.error_code(exc))


def fail(message: str, code: str = "error") -> NoReturn:
    """Stop with `Error: <message>` (exit status from ``code``: 1 unless a usage or timeout)."""
    raise CafleetClickError(message, code)


def usage_error(message: str) -> NoReturn:
    """Stop with Click's usage rendering (usage line, Try line, `Error: <message>`), exit 2."""
    raise click.UsageError(message, click.get_current_context(silent=True))


class CafleetCommand(click.Command):
    """Every cafleet command: cafleet exceptions raised by the body become `Error: <text>`.

    Signals (`Interrupted`) and output failures pass through for `main` to map.
    """

    def invoke(self, ctx: click.Context) -> Any:
        from cafleet.output import BrokenStdout, OutputFailed

        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, BrokenStdout, OutputFailed):
            raise
        except Exception as exc:
            from cafleet.signals import Interrupted

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
        from cafleet import status

        code = status.CODE_ERROR if exc.primary is not None else status.CODE_INTERRUPTED
        raise CafleetClickError(exc.primary, code, exc.cleanup) from exc
