"""A real, private PostgreSQL server for the tests (docs/storage.md §10.6).

Debian's server binaries (`/usr/lib/postgresql/<major>/bin`, CAFLEET_PG_BIN to override) run
`initdb` and `pg_ctl` in a fresh directory under /tmp: loopback TCP on a free port, its unix
socket in that directory, password authentication (scram) for the role `cafleet`. PostgreSQL
refuses to run as root, so as root the server runs as the unprivileged `postgres` OS user
(`runuser`), which owns the directory. Each test gets its own database (`new_database`), a copy
of an empty one or of one cafleet already set up (`TEMPLATE_HEAD`), so tests never share state.
`stop()` stops the server (`pg_ctl -m immediate`) and removes the directory (the suite's
session server: in the background).
"""

from __future__ import annotations

import contextlib
import glob
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Any

PASSWORD = "cafleet-test-secret"
USER = "cafleet"
TEMPLATE_HEAD = "cafleet_head"


def pg_bin() -> str | None:
    override = os.environ.get("CAFLEET_PG_BIN")
    if override:
        return override if os.path.isfile(os.path.join(override, "initdb")) else None
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return os.path.dirname(found[-1]) if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PgServer:
    def __init__(self, bin_dir: str, *, durable: bool = False) -> None:
        self.bin_dir = bin_dir
        # The tests' server skips fsync (nothing there needs to survive a crash); a benchmark's
        # is `durable`: fsync and full-page writes on, as a production server runs.
        self.durable = durable
        self.dir = Path(tempfile.mkdtemp(prefix="cafleet-pg-", dir="/tmp"))
        self.data = self.dir / "data"
        self.port = _free_port()
        self.as_user: str | None = None
        if os.geteuid() == 0:
            self.as_user = "postgres"
            entry = pwd.getpwnam(self.as_user)
            os.chown(self.dir, entry.pw_uid, entry.pw_gid)
        self._names = itertools.count(1)
        # The environment at creation: a server restarted inside a test must not carry that
        # test's tmux harness marker (its teardown kills every process that does).
        self._env = dict(os.environ)

    def _run(self, *argv: str) -> subprocess.CompletedProcess[str]:
        cmd = [os.path.join(self.bin_dir, argv[0]), *argv[1:]]
        if self.as_user is not None:
            cmd = ["runuser", "-u", self.as_user, "--", *cmd]
        return subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
            cwd=self.dir,
            env=self._env,
        )

    def start(self) -> None:
        pwfile = self.dir / "pw"
        pwfile.write_text(PASSWORD + "\n")
        if self.as_user is not None:
            entry = pwd.getpwnam(self.as_user)
            os.chown(pwfile, entry.pw_uid, entry.pw_gid)
        self._run(
            "initdb",
            "-D",
            str(self.data),
            "-U",
            USER,
            f"--pwfile={pwfile}",
            "--auth=scram-sha-256",
            "-E",
            "UTF8",
            "--no-locale",
            "--no-sync",
        )
        pwfile.unlink()
        self.start_again()

    def _options(self) -> str:
        options = f"-k {self.dir} -h 127.0.0.1 -p {self.port} -c max_connections=200"
        if not self.durable:
            options += " -F -c fsync=off -c full_page_writes=off"
        return options

    def start_again(self) -> None:
        """Start the initialised server (after `crash`): same port, options and log."""
        log = str(self.dir / "log")
        self._run("pg_ctl", "-D", str(self.data), "-o", self._options(), "-l", log, "-w", "start")

    def restart(self) -> None:
        """`pg_ctl restart` (fast shutdown: every client's connection is closed), then up again.
        The log is named again, or the new server would write to (and hold open) our pipe."""
        log = str(self.dir / "log")
        self._run("pg_ctl", "-D", str(self.data), "-l", log, "-m", "fast", "-w", "restart")

    def crash(self) -> None:
        """`pg_ctl stop -m immediate`: the server quits at once, as on a crash."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")

    def stop(self, *, wait: bool = True) -> None:
        """Stop the server and remove its directory; ``wait=False`` leaves the removal to a
        process of its own (a test run's hundreds of databases are gigabytes, tens of seconds
        to remove, which the run need not wait for)."""
        with contextlib.suppress(Exception):
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        if wait:
            shutil.rmtree(self.dir, ignore_errors=True)
        else:
            subprocess.Popen(
                ["rm", "-rf", "--", str(self.dir)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )

    def url(self, database: str, *, password: str | None = PASSWORD) -> str:
        auth = f"{USER}:{password}" if password is not None else USER
        return f"postgresql://{auth}@127.0.0.1:{self.port}/{database}"

    def admin(self, sql: str) -> None:
        import psycopg

        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute(sql)

    def new_database(self, template: str = "template0") -> str:
        name = f"t{os.getpid()}_{next(self._names)}"
        self.admin(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
        return name


def connected_to(pid: int, port: int) -> bool:
    """True when process `pid` holds an established loopback TCP connection to `port` (a
    PostgreSQL client's counterpart of having the database file open; Linux /proc)."""
    sockets = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.startswith("socket:["):
                    sockets.add(link[len("socket:[") : -1])
    except OSError:
        return False
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as fh:
            for line in fh.readlines()[1:]:
                fields = line.split()
                # remote address `HEX:PORT`, state 01 = ESTABLISHED, the socket's inode
                remote_port = int(fields[2].rsplit(":", 1)[1], 16)
                if remote_port == port and fields[3] == "01" and fields[9] in sockets:
                    return True
    return False


def start_server(*, durable: bool = False) -> PgServer | None:
    """A started server, or None when the binaries are not installed."""
    bin_dir = pg_bin()
    if bin_dir is None:
        return None
    server = PgServer(bin_dir, durable=durable)
    try:
        server.start()
    except BaseException:
        server.stop()
        raise
    return server


class PgDb(str):
    """A test's PostgreSQL database: the string is `P` (the URL without its password, what
    cafleet prints and `open_validated_connection` takes); `url` carries the password."""

    url: str
    name: str
    server: PgServer

    def __new__(cls, server: PgServer, name: str) -> PgDb:
        from cafleet.pgurl import display_url

        url = server.url(name)
        db = super().__new__(cls, display_url(url))
        db.url = url
        db.name = name
        db.server = server
        return db

    @property
    def port(self) -> int:
        from urllib.parse import urlsplit

        return int(urlsplit(self.url).port or 5432)

    @classmethod
    def from_url(cls, url: str) -> PgDb:
        """The `PgDb` of a test database URL (a server this process did not start)."""
        from cafleet.pgurl import display_url

        db = str.__new__(cls, display_url(url))
        db.url = url
        db.name = url.rsplit("/", 1)[-1]
        return db


class PgRaw:
    """Direct SQL on a test database, shaped like the `sqlite3` connection the broker tests use
    (`?` placeholders, `execute(...).fetchone()`, `BEGIN IMMEDIATE` as PostgreSQL's BEGIN)."""

    def __init__(self, db: PgDb) -> None:
        import psycopg

        self.conn = psycopg.connect(db.url, autocommit=True, cursor_factory=psycopg.ClientCursor)

    def execute(self, sql: str, params: tuple[object, ...] | list[object] = ()) -> object:
        if sql.strip().upper() == "BEGIN IMMEDIATE":
            sql = "BEGIN"
        if sql.lstrip().upper().startswith("PRAGMA"):
            raise NotImplementedError(f"no PostgreSQL form for {sql!r}")
        if params:
            sql = sql.replace("%", "%%").replace("?", "%s")
        import psycopg

        from cafleet.db.pg.runtime import as_sqlite_error

        insert = sql.lstrip().upper().startswith("INSERT") and "RETURNING" not in sql.upper()
        try:
            cursor = self.conn.execute(
                sql + (" RETURNING *" if insert else ""), tuple(params) or None
            )
        except psycopg.Error as e:  # the runtime's translation: sqlite3's classes and words
            raise as_sqlite_error(e) from e
        return _Cursor(cursor, insert)

    def executemany(self, sql: str, seq: list[tuple[object, ...]]) -> None:
        for params in seq:
            self.execute(sql, params)

    def executescript(self, script: str) -> None:
        """Several statements, no parameters (PostgreSQL's simple query protocol)."""
        import psycopg

        from cafleet.db.pg.runtime import as_sqlite_error

        try:
            self.conn.execute(script)
        except psycopg.Error as e:
            raise as_sqlite_error(e) from e

    def close(self) -> None:
        self.conn.close()


class _Cursor:
    """A psycopg cursor with sqlite3's `lastrowid` (an INSERT's first returned column)."""

    def __init__(self, cursor: Any, insert: bool) -> None:
        self.cursor = cursor
        self.lastrowid: int | None = None
        self._rows: list[Any] | None = None
        if insert:
            self._rows = cursor.fetchall()
            self.lastrowid = self._rows[-1][0] if self._rows else None

    def fetchone(self) -> Any:
        return self.cursor.fetchone()

    def fetchall(self) -> Any:
        return self.cursor.fetchall()

    @property
    def description(self) -> Any:
        return self.cursor.description

    def __iter__(self) -> Any:
        return iter(self.cursor)

    @property
    def rowcount(self) -> int:
        return int(self.cursor.rowcount)


def pg_state(db: PgDb) -> dict[str, Any]:
    """Everything a refusal must leave as it was (storage_helpers.snapshot's PostgreSQL form):
    the schema comment, every relation of the schema (kind, index definition) and every row of
    every table, in a stable order."""
    import psycopg

    with psycopg.connect(db.url, autocommit=True) as c:
        comment = c.execute(
            "SELECT obj_description(current_schema()::regnamespace, 'pg_namespace')"
        ).fetchone()
        relations = c.execute(
            "SELECT c.relname, c.relkind, coalesce(pg_get_indexdef(c.oid), '') FROM pg_class c "
            "WHERE c.relnamespace = current_schema()::regnamespace ORDER BY 1"
        ).fetchall()
        tables = [r[0] for r in relations if r[1] == "r"]
        rows = {t: c.execute(f'SELECT * FROM "{t}" ORDER BY 1').fetchall() for t in tables}
    return {"comment": comment, "relations": relations, "rows": rows}
