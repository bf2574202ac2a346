"""CAFLEET_* settings and the database path (docs/cli.md §1.6, docs/storage.md §4.1).

Every command that loads settings validates every variable, in table order, before anything
else, so a bad value fails fast and the same way everywhere.
"""

import os
from collections.abc import Mapping
from typing import NamedTuple

from cafleet.delivery.policy import DEFAULT_HOLD_TIMEOUT
from cafleet.errors import CafleetError
from cafleet.hosts import HostIdError, check_host_id_env
from cafleet.text import sanitize_single_line, truncate

# SQLite's largest INTEGER: the largest id any command or API accepts. Defined here once; the
# CLI's and the WebUI's id parameters read it.
MAX_ID = 9223372036854775807
# PostgreSQL's largest INTEGER: the bound of every integer setting, so a setting the database
# stores (the wake interval) always fits; refused when the settings are read, not by a loop.
MAX_SETTING = 2147483647

DEFAULT_MAX_TEXT_LEN = 200
DEFAULT_MONITOR_WAKE_INTERVAL = 600
DEFAULT_PANE_LOCK_TIMEOUT = 30
# The smallest member pane worth having (docs/runtime.md §1.11): below it an agent's TUI is
# unusable and a capture shows nothing, so new panes go to another window instead.
DEFAULT_MIN_PANE_COLUMNS = 40
DEFAULT_MIN_PANE_ROWS = 8
# docs/runtime.md §4.9; 0 = never hold. Defined with the other delivery constants.
DEFAULT_DELIVERY_HOLD_TIMEOUT = DEFAULT_HOLD_TIMEOUT
# docs/runtime.md §4.10: panes a drain types into at the same time; 1 = one after another.
DEFAULT_DELIVERY_WORKERS = 8
DEFAULT_ESCALATE_AFTER = 30  # docs/runtime.md §5.12: a prompt this old is reported to the Director


class SettingsError(CafleetError):
    """An invalid CAFLEET_* value or an underivable database path; str() is the message."""


class Settings(NamedTuple):  # not a dataclass: built by every command, ~1 ms cheaper to create
    database_path: str | None  # None only when path_error is set (doctor keeps going)
    path_error: str | None
    max_text_len: int
    monitor_wake_interval: int | None  # None: the variable is unset (600 applies last)
    pane_lock_timeout: int
    min_pane_columns: int = DEFAULT_MIN_PANE_COLUMNS
    min_pane_rows: int = DEFAULT_MIN_PANE_ROWS
    delivery_hold_timeout: int = DEFAULT_DELIVERY_HOLD_TIMEOUT
    delivery_workers: int = DEFAULT_DELIVERY_WORKERS
    escalate_after: int = DEFAULT_ESCALATE_AFTER

    @property
    def db_path(self) -> str:
        if self.database_path is None:
            raise SettingsError(self.path_error or "database path did not resolve")
        return self.database_path

    @property
    def db_dir(self) -> str:
        return db_dir_of(self.db_path)

    @property
    def wake_interval_default(self) -> int:
        if self.monitor_wake_interval is None:
            return DEFAULT_MONITOR_WAKE_INTERVAL
        return self.monitor_wake_interval


def _get(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name)
    return value if value else None  # the empty string counts as unset


POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def is_postgres(path: str) -> bool:
    """Whether `P` names a PostgreSQL database (docs/storage.md §10) rather than a file."""
    return path.startswith(POSTGRES_SCHEMES)


def resolve_database_path(env: Mapping[str, str]) -> str:
    """Return P: the absolute database path, or for PostgreSQL the URL without its password
    (docs/storage.md §10.1), or raise SettingsError."""
    url = _get(env, "CAFLEET_DATABASE_URL")
    if url is not None:
        if is_postgres(url):
            from cafleet.pgurl import display_url

            return display_url(url)
        prefix = "sqlite:///"
        if not url.startswith(prefix):
            raise SettingsError(
                "database URL must use the sqlite scheme (sqlite:///<absolute path>) or "
                f"postgresql (postgresql://<host>/<database>); got '{_shown_url(url)}'"
            )
        path = url[len(prefix) :]
        if not path:
            raise SettingsError("database URL has no file path")
        if not path.startswith("/"):
            raise SettingsError(f"database URL must name an absolute file path; got '{url}'")
        return path
    home = _get(env, "HOME")
    if home is None:
        raise SettingsError("HOME is not set; cannot derive the default database path")
    return os.path.join(home, ".local", "share", "cafleet", "cafleet.db")


def _shown_url(url: str) -> str:
    """A refused URL as the error shows it: a password in it is replaced by `***`."""
    from cafleet.pgurl import hide_password

    return hide_password(url)


def db_dir_of(path: str) -> str:
    """The local directory of database `path`: the file's directory, or for PostgreSQL a
    per-database directory under `$HOME/.local/share/cafleet/` (docs/storage.md §10.1); it holds
    `locks/` and the monitor loops' logs and holds."""
    if not is_postgres(path):
        return os.path.dirname(path)
    from cafleet.pgurl import state_dir

    home = _get(os.environ, "HOME")
    if home is None:
        raise SettingsError("HOME is not set; cannot derive the local state directory")
    return state_dir(home, path)


def local_anchor(path: str) -> str:
    """The local path the monitor loop's log and hold files are named after: the database file
    itself, or `<db_dir_of(P)>/cafleet` for PostgreSQL."""
    if not is_postgres(path):
        return path
    return os.path.join(db_dir_of(path), "cafleet")


def _parse_int(env: Mapping[str, str], name: str) -> int | None:
    raw = _get(env, name)
    if raw is None:
        return None
    if not (raw.isascii() and raw.isdigit()):  # [0-9]+, without compiling a pattern
        raise SettingsError(f"{name} must be a non-negative integer (got '{_shown(raw)}')")
    digits = raw.lstrip("0") or "0"
    if len(digits) > 10 or int(digits) > MAX_SETTING:  # a long string is never parsed whole
        raise SettingsError(
            f"{name} must be an integer from 0 to {MAX_SETTING} (got '{_shown(raw)}')"
        )
    return int(digits)


def _shown(raw: str) -> str:
    """A refused value as the error shows it: control characters made visible, cut short."""
    return truncate(sanitize_single_line(raw), 40)


def load_settings(
    env: Mapping[str, str] | None = None, *, tolerate_path_error: bool = False
) -> Settings:
    """Validate every variable in docs/cli.md §1.6's table order.

    With ``tolerate_path_error`` (doctor), a URL/HOME problem is recorded instead of raised;
    a bad integer still raises.
    """
    env = os.environ if env is None else env
    path: str | None = None
    path_error: str | None = None
    try:
        path = resolve_database_path(env)
    except SettingsError as exc:
        if not tolerate_path_error:
            raise
        path_error = str(exc)
    max_text_len = _parse_int(env, "CAFLEET_MAX_TEXT_LEN")
    wake = _parse_int(env, "CAFLEET_MONITOR_WAKE_INTERVAL")
    lock_timeout = _parse_int(env, "CAFLEET_PANE_LOCK_TIMEOUT")
    min_columns = _parse_int(env, "CAFLEET_MIN_PANE_COLUMNS")
    min_rows = _parse_int(env, "CAFLEET_MIN_PANE_ROWS")
    hold_timeout = _parse_int(env, "CAFLEET_DELIVERY_HOLD_TIMEOUT")
    workers = _parse_int(env, "CAFLEET_DELIVERY_WORKERS")
    if workers == 0:
        raw = _get(env, "CAFLEET_DELIVERY_WORKERS")
        raise SettingsError(f"CAFLEET_DELIVERY_WORKERS must be a positive integer (got '{raw}')")
    escalate_after = _parse_int(env, "CAFLEET_ESCALATE_AFTER")
    try:
        check_host_id_env(env)
    except HostIdError as exc:
        raise SettingsError(str(exc)) from None
    return Settings(
        database_path=path,
        path_error=path_error,
        max_text_len=DEFAULT_MAX_TEXT_LEN if max_text_len is None else max_text_len,
        monitor_wake_interval=wake,
        pane_lock_timeout=DEFAULT_PANE_LOCK_TIMEOUT if lock_timeout is None else lock_timeout,
        min_pane_columns=DEFAULT_MIN_PANE_COLUMNS if min_columns is None else min_columns,
        min_pane_rows=DEFAULT_MIN_PANE_ROWS if min_rows is None else min_rows,
        delivery_hold_timeout=(
            DEFAULT_DELIVERY_HOLD_TIMEOUT if hold_timeout is None else hold_timeout
        ),
        delivery_workers=DEFAULT_DELIVERY_WORKERS if workers is None else workers,
        escalate_after=DEFAULT_ESCALATE_AFTER if escalate_after is None else escalate_after,
    )


def locks_dir(db_dir: str) -> str:
    """`<db dir>/locks`, home of the writer lock, the setup lock and the pane-input locks."""
    return os.path.join(db_dir, "locks")


def monitor_hold_path(db_path: str, fleet_id: int) -> str:
    """`<db path>.monitor-<fleet_id>.stopped`: left by `cafleet monitor stop`, removed by
    `cafleet monitor start`; while it exists nothing restarts the fleet's loop by itself."""
    return f"{local_anchor(db_path)}.monitor-{fleet_id}.stopped"


def monitor_log_path(db_path: str, fleet_id: int) -> str:
    """`<db path>.monitor-<fleet_id>.log`: named after the database file, so databases that
    share a directory never share a loop's log (fleet ids repeat across databases)."""
    return f"{local_anchor(db_path)}.monitor-{fleet_id}.log"


def host_hold_path(db_path: str, host_id: str) -> str:
    """`<db path>.host-<host_id>.stopped`: left by `cafleet monitor host stop`, removed by
    `cafleet monitor host start`; while it exists nothing restarts the host's delivery loop."""
    return f"{local_anchor(db_path)}.host-{host_id}.stopped"


def host_log_path(db_path: str, host_id: str) -> str:
    """`<db path>.host-<host_id>.log`: the host delivery loop's log (docs/runtime.md §10.4)."""
    return f"{local_anchor(db_path)}.host-{host_id}.log"


# Every variable cafleet reads; docs/operations.md §1.1's table is generated from it
# (`python -m tests.doc_tables --write`): (name, default, what it does). Plain tuples: this module
# is imported by every command, so the table must cost nothing to build.
VARIABLES: tuple[tuple[str, str, str], ...] = (
    (
        "CAFLEET_DATABASE_URL",
        "`sqlite:///$HOME/.local/share/cafleet/cafleet.db`",
        "The database: `sqlite:///` + an absolute path, or `postgresql://user[:password]@host"
        "[:port]/database` (`docs/storage.md` §10). Its directory (for PostgreSQL a local one per "
        "database) holds `locks/` and the loops' logs and holds. Forwarded into spawned panes, "
        "only when set.",
    ),
    (
        "CAFLEET_MAX_TEXT_LEN",
        f"`{DEFAULT_MAX_TEXT_LEN}`",
        "Characters of a body that a summary shows (send and ack echoes, the notification line); "
        "stored bodies are never cut (`docs/cli.md` §1.3).",
    ),
    (
        "CAFLEET_MONITOR_WAKE_INTERVAL",
        f"`{DEFAULT_MONITOR_WAKE_INTERVAL}`",
        "Seconds between the loop's scheduled wakes of the monitor, below `--interval` and the "
        "stored interval (`docs/runtime.md` §5.8); `0` turns them off.",
    ),
    (
        "CAFLEET_PANE_LOCK_TIMEOUT",
        f"`{DEFAULT_PANE_LOCK_TIMEOUT}`",
        "The longest pane-lock wait in seconds (`docs/runtime.md` §3.5); `0` is one try.",
    ),
    (
        "CAFLEET_MIN_PANE_COLUMNS",
        f"`{DEFAULT_MIN_PANE_COLUMNS}`",
        "The narrowest member pane a split may leave; below it the member goes to the fleet's "
        "own window (`docs/runtime.md` §1.11).",
    ),
    (
        "CAFLEET_MIN_PANE_ROWS",
        f"`{DEFAULT_MIN_PANE_ROWS}`",
        "The lowest member pane a split may leave.",
    ),
    (
        "CAFLEET_DELIVERY_HOLD_TIMEOUT",
        f"`{DEFAULT_DELIVERY_HOLD_TIMEOUT}`",
        "Seconds the delivery gate holds a line for a starting, busy or prompting pane before "
        "typing it with a note (`docs/runtime.md` §4.9); `0` never holds.",
    ),
    (
        "CAFLEET_DELIVERY_WORKERS",
        f"`{DEFAULT_DELIVERY_WORKERS}`",
        "Panes one drain types into at the same time (`docs/runtime.md` §4.10); `1` is one "
        "after another. Must be positive.",
    ),
    (
        "CAFLEET_ESCALATE_AFTER",
        f"`{DEFAULT_ESCALATE_AFTER}`",
        "Seconds a member may show a prompt before the loop reports it to the Director "
        "(`docs/runtime.md` §5.12); `0` at the first tick.",
    ),
    (
        "CAFLEET_HOST_ID",
        "the hostname",
        "This machine's id in a fleet across machines; commands and loops type only into their "
        "own host's panes (`docs/runtime.md` §10).",
    ),
    (
        "CAFLEET_WORKTREE_COPY",
        "`.env*`",
        "Untracked files `member create --worktree` copies (globs; `-` for none; "
        "`docs/worktrees.md` §1.4). Not validated.",
    ),
    (
        "CAFLEET_DEBUG",
        "unset",
        "Set (not `0`): a bug (exit 70) prints its traceback (`docs/cli.md` §1.4). Not validated.",
    ),
    (
        "CAFLEET_BROKER_HOST",
        "`127.0.0.1`",
        "The address `cafleet server` listens on, below `--host` (`docs/webui.md`).",
    ),
    ("CAFLEET_BROKER_PORT", "`8000`", "The port `cafleet server` listens on, below `--port`."),
    (
        "CAFLEET_SERVER_TOKEN",
        "generated",
        "The token `cafleet server` requires, below `--token`; unset, one is generated.",
    ),
    (
        "CAFLEET_PLACEMENT",
        "set by cafleet",
        "`<member id> <placement time>` in each spawned pane, so an interrupted create's pane is "
        "found again (`docs/cli.md` §2.7); never set it yourself.",
    ),
    (
        "CAFLEET_HOOK_MEMBER",
        "set by cafleet",
        "The member id in an opencode member's pane: cafleet's opencode plugin reports that "
        "member's events (`docs/runtime.md` §4.12); never set it yourself.",
    ),
    (
        "CAFLEET_MEMBER",
        "set by cafleet",
        "`<member id>@<P>` in the environment of every agent cafleet spawns, so `member respawn` "
        "and `fleet restore` find (in `/proc`) and end an agent a killed command spawned but "
        "never recorded (`docs/runtime.md` §5.11); never set it yourself.",
    ),
)
