"""One `cafleet` invocation's state: its settings, its one validated connection, the
one-identity-per-pane checks and the heal of dead loops when it closes (docs/cli.md §1.5-§1.7,
§1.11). `cafleet.cli.context.invocation()` creates it on a command body's first call."""

from __future__ import annotations

import contextlib
import os

import click

from cafleet import broker, signals, status
from cafleet.cli.failure import to_click_error
from cafleet.cli.guard import open_validated_connection
from cafleet.config import Settings, SettingsError, load_settings
from cafleet.db.runtime import Connection, close_connection
from cafleet.db.timefmt import utcnow
from cafleet.hosts import current_host
from cafleet.procs import pid_alive


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
            try:
                self._settings = load_settings()
            except SettingsError as exc:
                raise click.ClickException(str(exc)) from exc
        return self._settings

    def doctor_settings(self) -> Settings:
        """Settings where a URL/HOME problem is recorded, not raised (a bad integer still is)."""
        if self._settings is None:
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
            try:
                conn = open_validated_connection(path)
            except Exception as exc:
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
        conn = self._conn
        if (
            conn is None
            or signals.stop_requested()
            or conn.info.get("cafleet.refused")
            or conn.in_transaction()
        ):
            return
        with contextlib.suppress(Exception):  # best effort: the command's own result stands
            now = utcnow()
            # The read heal_dead_loops starts with: its module (and `subprocess`) only when a
            # loop looks dead, so a command whose fleets' loops all run stays light.
            if any(
                not broker.is_live(r, now) and (r.pid is None or not pid_alive(int(r.pid)))
                for r in broker.live_fleet_runtimes(conn)
            ):
                from cafleet.monitor.ensure import heal_dead_loops

                heal_dead_loops(conn)
        with contextlib.suppress(Exception):  # this host's delivery loop (docs/runtime.md §10.4)
            # One read by primary key; the loop's module only when a loop ever ran here.
            if broker.get_host_loop(conn, current_host()) is not None:
                from cafleet.monitor.hostloop import heal_host_loop

                heal_host_loop(conn)

    def close(self) -> None:
        """Close the connection now (idempotent); also runs when the root context closes."""
        conn, self._conn = self._conn, None
        if conn is not None:
            # A connection the schema re-check refused is closed the guarded way, so the
            # refused file keeps its bytes (docs/storage.md §5.5).
            close_connection(conn, guarded=bool(conn.info.get("cafleet.refused")))
