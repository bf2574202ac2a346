"""Shared builders and checks for the storage tests (docs/storage.md §9).

Databases at a revision are built by the real driver (`cafleet.db.migrate.upgrade_to` /
`run_setup`); rows are inserted by plain SQL. "Preserved" means the SHA-256 of P (and of
`<P>-wal` where one exists) and the directory listing (`locks/` ignored) are unchanged, checked
with no connection open.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent

TS = "2025-01-02T03:04:05.000000+00:00"
TS2 = "2025-01-02T03:04:06.000000+00:00"
TS3 = "2025-01-02T03:04:07.000000+00:00"

MONITOR_CARD = json.dumps(
    {
        "name": "monitor",
        "description": "Monitor member for this fleet",
        "skills": [],
        "cafleet": {"kind": "monitor"},
    },
    ensure_ascii=False,
    separators=(",", ":"),
)


def card(name: str, description: str = "d") -> str:
    return json.dumps(
        {"name": name, "description": description, "skills": []},
        ensure_ascii=False,
        separators=(",", ":"),
    )


# --- preservation ------------------------------------------------------------------------------


def sha256(path: Path | str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@dataclass(frozen=True)
class Snapshot:
    main: str | None
    wal: str | None
    listing: tuple[str, ...]


def snapshot(db: Path | str) -> Snapshot:
    """The one "unchanged" check of every test: SHA-256 of P (`<dir>` for a directory, None when
    absent) and of <P>-wal, plus the directory listing (`locks/` ignored; () without a
    directory). Take it with no connection open. A PostgreSQL test database
    (`tests.pg_server.PgDb`) gives its whole state instead (`pg_state`)."""
    from tests.pg_server import PgDb, pg_state

    if isinstance(db, PgDb):
        return pg_state(db)  # type: ignore[return-value]
    db = Path(db)
    main = sha256(db) if db.is_file() else ("<dir>" if db.is_dir() else None)
    wal_path = Path(str(db) + "-wal")
    wal = sha256(wal_path) if wal_path.is_file() else None
    parent = db.parent
    listing = (
        tuple(sorted(p for p in os.listdir(parent) if p != "locks")) if parent.is_dir() else ()
    )
    return Snapshot(main, wal, listing)


def assert_unchanged(before: Snapshot, db: Path | str) -> None:
    after = snapshot(db)
    assert after == before, f"database changed:\nbefore={before}\nafter={after}"


def companions(db: Path | str) -> list[str]:
    return [s for s in ("-wal", "-shm") if os.path.exists(str(db) + s)]


# --- plain SQL ---------------------------------------------------------------------------------


def sql(db: Path | str, *statements: str, fk: bool = False) -> None:
    """Run statements with a plain sqlite3 connection (autocommit per statement batch), or with a
    plain psycopg one on a PostgreSQL test database (`tests.pg_server.PgDb`)."""
    from tests.pg_server import PgDb, PgRaw

    con = PgRaw(db) if isinstance(db, PgDb) else sqlite3.connect(str(db), isolation_level=None)
    try:
        if not isinstance(db, PgDb):
            con.execute(f"PRAGMA foreign_keys = {'ON' if fk else 'OFF'}")
        for statement in statements:
            con.executescript(statement)
    finally:
        con.close()


def query(db: Path | str, statement: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    con = sqlite3.connect(str(db), isolation_level=None)
    try:
        return [tuple(r) for r in con.execute(statement, params).fetchall()]
    finally:
        con.close()


def ledger(db: Path | str) -> list[tuple[Any, ...]]:
    return query(db, "SELECT version_num FROM alembic_version")


APP_TABLES = (
    "fleets",
    "members",
    "member_placements",
    "messages",
    "monitor_runtime",
    "asset_installs",
    "member_spawns",
    "host_loops",
    "tasks",  # revision 0009
    "task_deps",
    "task_events",
    "notify_channels",  # revision 0011
    "notify_outbox",
    "answer_links",
    "member_budgets",
    "fleet_budgets",
)


def dump(db: Path | str) -> dict[str, list[tuple[Any, ...]]]:
    """Every application row, ordered by rowid (asset_installs by key); a table the file's
    revision does not have yet is left out."""
    out: dict[str, list[tuple[Any, ...]]] = {}
    present = {r[0] for r in query(db, "SELECT name FROM sqlite_master WHERE type = 'table'")}
    for table in APP_TABLES:
        if table not in present:
            continue
        order = "coding_agent, path" if table == "asset_installs" else "rowid"
        out[table] = query(db, f"SELECT * FROM {table} ORDER BY {order}")
    out["sqlite_sequence"] = query(db, "SELECT name, seq FROM sqlite_sequence ORDER BY name")
    return out


def rebuild_table(db: Path | str, table: str, old: str, new: str) -> None:
    """Recreate `table` with its DDL text edited (old -> new), keeping rows and indexes."""
    con = sqlite3.connect(str(db), isolation_level=None)
    try:
        con.execute("PRAGMA foreign_keys = OFF")
        ddl = con.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
        ).fetchone()[0]
        assert old in ddl, f"{old!r} not in {ddl!r}"
        new_ddl = ddl.replace(old, new, 1)
        indexes = [
            r[0]
            for r in con.execute(
                "SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = ? "
                "AND sql IS NOT NULL",
                (table,),
            )
        ]
        tmp = f"_rebuild_{table}"
        old_cols = [r[1] for r in con.execute(f"PRAGMA table_xinfo({table})")]
        con.execute("BEGIN")
        con.execute(new_ddl.replace(f"CREATE TABLE {table}", f"CREATE TABLE {tmp}", 1))
        new_cols = [r[1] for r in con.execute(f"PRAGMA table_xinfo({tmp})")]
        common = ", ".join(c for c in old_cols if c in new_cols)
        con.execute(f"INSERT INTO {tmp} ({common}) SELECT {common} FROM {table}")
        con.execute(f"DROP TABLE {table}")
        con.execute(f"ALTER TABLE {tmp} RENAME TO {table}")
        for index_sql in indexes:
            con.execute(index_sql)
        con.execute("COMMIT")
    finally:
        con.close()


# --- builders by the real driver ---------------------------------------------------------------


class Templates:
    """Files built once per session by the real driver, copied per test (cleanly closed, so a
    copy of the single file is the whole database)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._built: dict[str, Path] = {}

    def path(self, revision: str) -> Path:
        if revision not in self._built:
            from cafleet.db.migrate import upgrade_to

            target = self.root / revision / "cafleet.db"
            target.parent.mkdir(parents=True, exist_ok=True)
            upgrade_to(str(target), revision)
            assert companions(target) == []
            self._built[revision] = target
        return self._built[revision]

    def copy(self, revision: str, dest: Path | str) -> Path:
        dest = Path(dest)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.path(revision), dest)
        return dest


@pytest.fixture(scope="session", name="templates")
def templates_fixture(tmp_path_factory: pytest.TempPathFactory) -> Templates:
    return Templates(tmp_path_factory.mktemp("templates"))


def populate_0001(db: Path | str) -> None:
    """Representative rows in every table of a 0001 file (docs/storage.md §9 item 34)."""
    sql(
        db,
        f"""
        INSERT INTO fleets (fleet_id, name, created_at, deleted_at, director_member_id)
            VALUES (1, 'live', '{TS}', NULL, 1), (2, 'gone', '{TS}', '{TS2}', 4);
        INSERT INTO members VALUES
            (1, 1, 'Director', 'Root Director for this fleet', 'active', '{TS}', NULL, '{card("Director")}'),
            (2, 1, 'monitor', 'Monitor member for this fleet', 'active', '{TS}', NULL, '{MONITOR_CARD}'),
            (3, 1, 'worker', 'does work', 'active', '{TS}', NULL, '{card("worker")}'),
            (4, 2, 'Director', 'Root Director for this fleet', 'deregistered', '{TS}', '{TS2}', '{card("Director")}'),
            (5, 1, 'monitor', 'second monitor', 'deregistered', '{TS}', '{TS2}', '{MONITOR_CARD}'),
            (6, 1, 'pending', 'waits for a pane', 'active', '{TS}', NULL, '{card("pending")}');
        INSERT INTO member_placements VALUES
            (1, 'main', '@1', '%1', 'tmux', 'claude', '{TS}'),
            (2, 'main', '@1', '%2', 'tmux', 'claude', '{TS}'),
            (3, 'main', '@1', '%3', 'tmux', 'codex', '{TS}'),
            (6, 'main', '@1', NULL, 'tmux', 'opencode', '{TS}');
        INSERT INTO messages VALUES
            (1, 3, 1, 3, 'unicast', '{TS}', 'input_required', '{TS}', NULL, 'hello
        with CRLF' || char(13) || char(10) || 'tab' || char(9) || '✓', NULL),
            (2, 1, 1, 1, 'unicast', '{TS}', 'input_required', '{TS}', NULL, 'self-send', '{TS}'),
            (3, 1, 1, NULL, 'broadcast_summary', '{TS2}', 'completed', '{TS2}', 3, 'Broadcast sent to 2 recipients', '{TS2}'),
            (4, 2, 1, 2, 'unicast', '{TS2}', 'completed', '{TS3}', 3, 'all hands', '{TS2}'),
            (5, 3, 1, 3, 'unicast', '{TS2}', 'input_required', '{TS2}', 3, 'all hands', NULL),
            (6, 1, 3, 1, 'unicast', '{TS3}', 'completed', '{TS3}', NULL, 'acked reply', NULL);
        INSERT INTO monitor_runtime VALUES (1, 4242, '{TS}', '{TS2}', 5, NULL, NULL, NULL);
        INSERT INTO monitor_runtime (fleet_id, pid, started_at, last_tick_at, wake_interval_seconds)
            VALUES (2, NULL, NULL, NULL, 0);
        INSERT INTO asset_installs VALUES
            ('claude', '/home/u/.claude/skills', '0.1.0', '{TS}'),
            ('codex', '/home/u/.codex', '0.1.0', '{TS2}');
        """,
    )


# --- subprocesses ------------------------------------------------------------------------------


def run_python(code: str, *, timeout: float = 60, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=str(REPO_ROOT),
        **kw,
    )


def start_python(code: str, **kw: Any) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=str(REPO_ROOT),
        **kw,
    )


def wait_line(proc: subprocess.Popen[str], expected: str, timeout: float = 20) -> None:
    """Read the child's stdout until `expected` (the child prints it, then flushes)."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line.strip() == expected:
            return
        if line == "" and proc.poll() is not None:
            break
    err = proc.stderr.read() if proc.stderr else ""
    raise AssertionError(f"child never printed {expected!r}; stderr: {err}")


def hold_lock(lock_path: Path | str, seconds: float) -> subprocess.Popen[str]:
    """A process that takes an exclusive flock on `lock_path`, says `locked`, holds it for
    `seconds` (or until stdin closes early when seconds < 0) and exits."""
    proc = start_python(
        f"""
        import fcntl, os, sys, time
        path = {str(lock_path)!r}
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        print("locked", flush=True)
        seconds = {seconds!r}
        if seconds < 0:
            sys.stdin.read()
        else:
            time.sleep(seconds)
        print("released", flush=True)
        """,
        stdin=subprocess.PIPE,
    )
    wait_line(proc, "locked")
    return proc


def leave_wal_frames(db: Path | str, *statements: str) -> None:
    """In a child process: WAL mode, run `statements`, commit, exit without closing, so the
    committed frames stay in `<db>-wal`."""
    result = run_python(
        f"""
        import os, sqlite3
        con = sqlite3.connect({str(db)!r}, isolation_level=None)
        mode = con.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        assert mode == "wal", mode
        for s in {list(statements)!r}:
            con.execute(s)
        os._exit(0)
        """
    )
    assert result.returncode == 0, result.stderr
    assert os.path.getsize(str(db) + "-wal") > 0


class _RecordingDriver:
    """Stands in for a runtime connection's `sqlite3` connection and reports every statement."""

    def __init__(self, real: Any, sink: Any) -> None:
        self._real = real
        self._sink = sink

    def execute(self, sql: str, parameters: Any = ()) -> Any:
        self._sink(sql, parameters)
        return self._real.execute(sql, parameters)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


@contextlib.contextmanager
def recording_statements(conn: Any, sink: Any) -> Iterator[None]:
    """Call ``sink(sql, parameters)`` for every statement the runtime connection ``conn`` runs
    (BEGIN and COMMIT included) while the block runs."""
    real = conn.driver
    conn.driver = _RecordingDriver(real, sink)
    try:
        yield
    finally:
        conn.driver = real
