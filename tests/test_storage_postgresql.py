"""PostgreSQL as the store (docs/storage.md §10), against a real server (tests/pg_server.py).

`setup` through the one Alembic chain, the identity and shape diagnosis (a database that is not
cafleet's, newer or damaged is refused with the same texts and left untouched), `alembic
history/current` for a DBA, the bad-input errors (unreachable server, wrong password: one
`Error:` line naming the host, never the password, exit 1), and the write guarantees under
several processes: the monitor slot stays unique and a broadcast killed mid-way leaves all of
its rows or none.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from cafleet import broker
from cafleet.db.diagnosis import diagnose_path
from cafleet.db.errors import SetupFailed
from cafleet.db.migrate import run_setup, upgrade_to
from cafleet.db.runtime import Connection
from cafleet.db.shapes import HEAD_REVISION, HEAD_VERSION
from tests.broker_helpers import raw_connect, table_counts
from tests.cli_helpers import REPO_ROOT, run_cli
from tests.factories import add_member, make_fleet
from tests.pg_server import PASSWORD, PgDb, PgServer
from tests.pg_server import pg_state as state
from tests.storage_helpers import MONITOR_CARD, TS, card

pytestmark = pytest.mark.usefixtures("pg_server")


@pytest.fixture
def empty_db(pg_server: PgServer, monkeypatch: pytest.MonkeyPatch) -> PgDb:
    """A new, empty PostgreSQL database, selected by CAFLEET_DATABASE_URL."""
    db = PgDb(pg_server, pg_server.new_database())
    monkeypatch.setenv("CAFLEET_DATABASE_URL", db.url)
    return db


def pg(db: PgDb, *statements: str) -> None:
    with psycopg.connect(db.url, autocommit=True) as c:
        for statement in statements:
            c.execute(statement)  # type: ignore[arg-type]


def guard_error(*argv: str) -> tuple[int, str, str]:
    return run_cli(*argv)


# --- setup ------------------------------------------------------------------------------------


def test_setup_creates_then_is_a_no_op(empty_db: PgDb) -> None:
    assert diagnose_path(str(empty_db)).state == "missing"
    code, out, err = run_cli("setup", "--coding-agent", "claude")
    assert (code, err) == (0, ""), err
    assert out.splitlines()[0] == (
        f"Created {empty_db} and applied migrations to head ({HEAD_VERSION})."
    )
    assert PASSWORD not in out
    d = diagnose_path(str(empty_db))
    assert (d.state, d.schema_version) == ("current", HEAD_VERSION)
    before = state(empty_db)
    assert run_setup(str(empty_db)) == f"Already at head ({HEAD_VERSION}); nothing to do."
    assert state(empty_db) == before
    # the identity and cafleet's two JSON functions came with revision 0001's identity step
    assert before["comment"] == ("cafleet application_id 1128351288",)


def _populate_0001(db: PgDb) -> None:
    pg(
        db,
        f"""INSERT INTO fleets (fleet_id, name, created_at, deleted_at, director_member_id)
            VALUES (1, 'live', '{TS}', NULL, NULL)""",
        f"""INSERT INTO members VALUES
            (1, 1, 'Director', 'Root Director for this fleet', 'active', '{TS}', NULL,
             '{card("Director")}'),
            (2, 1, 'monitor', 'Monitor member for this fleet', 'active', '{TS}', NULL,
             '{MONITOR_CARD}'),
            (3, 1, 'worker', 'does work', 'active', '{TS}', NULL, '{card("worker")}')""",
        "UPDATE fleets SET director_member_id = 1",
        f"""INSERT INTO member_placements VALUES
            (1, 'main', '@1', '%1', 'tmux', 'claude', '{TS}'),
            (3, 'main', '@1', '%3', 'tmux', 'codex', '{TS}')""",
        f"""INSERT INTO messages VALUES
            (1, 3, 1, 3, 'unicast', '{TS}', 'input_required', '{TS}', NULL, 'hello', NULL)""",
        "SELECT setval(pg_get_serial_sequence('fleets', 'fleet_id'), 1)",
        "SELECT setval(pg_get_serial_sequence('members', 'member_id'), 3)",
        "SELECT setval(pg_get_serial_sequence('messages', 'message_id'), 1)",
    )


def test_upgrade_from_0001_keeps_every_row(empty_db: PgDb) -> None:
    upgrade_to(str(empty_db), "0001")
    d = diagnose_path(str(empty_db))
    assert (d.state, d.schema_version) == ("behind", 1)
    assert not _fast_check_passes(empty_db)
    _populate_0001(empty_db)
    code, out, err = run_cli("fleet", "list")
    assert (code, out) == (1, "")
    assert err == (
        f"Error: database schema is outdated (schema 1, head {HEAD_VERSION}); run 'cafleet setup'\n"
    )
    before = state(empty_db)["rows"]
    assert run_setup(str(empty_db)) == f"Upgraded from 1 to {HEAD_VERSION}."
    after = state(empty_db)["rows"]
    assert [r[:7] for r in after["member_placements"]] == before["member_placements"]
    # the columns added since 0001 (lost_at, mux_socket, ...) are NULL in every kept row
    assert {r[7:] for r in after["member_placements"]} == {
        (None,) * (len(after["member_placements"][0]) - 7)
    }
    for table in ("fleets", "members", "messages"):  # rows kept; later columns NULL
        width = len(before[table][0])
        assert [r[:width] for r in after[table]] == before[table]
        assert {r[width:] for r in after[table]} == {(None,) * (len(after[table][0]) - width)}
    assert after["member_spawns"] == []
    assert diagnose_path(str(empty_db)).state == "current"


def test_upgrade_from_0009_indexes_the_existing_rows_for_search(empty_db: PgDb) -> None:
    """Revision 0010 on PostgreSQL (docs/storage.md §3.13): GIN indexes over the rows already
    there; every row kept; the search finds them, through connections without JIT."""
    upgrade_to(str(empty_db), "0001")
    _populate_0001(empty_db)
    upgrade_to(str(empty_db), "0009")
    before = state(empty_db)["rows"]
    assert run_setup(str(empty_db)) == f"Upgraded from 9 to {HEAD_VERSION}."
    after = state(empty_db)["rows"]
    assert after.pop("alembic_version") == [(HEAD_REVISION,)]
    before.pop("alembic_version")
    # Every row kept (later revisions append columns and add tables, empty here).
    for table, rows in before.items():
        width = len(rows[0]) if rows else 0
        assert [r[:width] for r in after[table]] == rows, table
    assert {t: after[t] for t in after.keys() - before.keys() if after[t]} == {}
    code, out, err = run_cli("search", "HELLO", "--json")
    assert (code, err) == (0, ""), err
    assert json.loads(out) == [
        {"kind": "message", "id": 1, "fleet_id": 1, "title": None, "snippet": "[hello]"}
    ]
    from cafleet.cli.guard import open_validated_connection
    from cafleet.db import tx
    from cafleet.db.runtime import close_connection

    conn = open_validated_connection(str(empty_db))
    try:
        with tx.read(conn):
            assert conn.exec_driver_sql("SHOW jit").scalar() == "off"
    finally:
        close_connection(conn)


def test_duplicate_monitors_refuse_the_upgrade_and_change_nothing(empty_db: PgDb) -> None:
    upgrade_to(str(empty_db), "0001")
    _populate_0001(empty_db)
    pg(
        empty_db,
        f"""INSERT INTO members VALUES (8, 1, 'monitor', 'second', 'active', '{TS}', NULL,
            '{MONITOR_CARD}')""",
    )
    before = state(empty_db)
    with pytest.raises(SetupFailed) as refused:
        run_setup(str(empty_db))
    assert str(refused.value) == (
        "active monitor duplicates prevent migration: fleet 1: members 2, 8; deregister all "
        "but one active monitor per fleet, then run 'cafleet setup' again"
    )
    assert state(empty_db) == before


# --- refusals: not cafleet's, newer, damaged ----------------------------------------------------


def _fast_check_passes(db: PgDb) -> bool:
    """The guard's fast check alone (`cafleet.db.pg.current`, docs/storage.md §10.2)."""
    from cafleet.db.pg.current import current_schema_version
    from cafleet.db.pg.runtime import close_connection, open_connection

    conn = open_connection(str(db))
    try:
        return current_schema_version(conn) is not None
    finally:
        close_connection(conn)


def _refusals(db: PgDb, text: str) -> None:
    """The guard's fast check does not pass `db`; the guard, `setup` and `doctor` all refuse
    with `text` and leave `db` as it was."""
    before = state(db)
    assert not _fast_check_passes(db)
    for argv in (("fleet", "list"), ("member", "list", "1")):
        assert run_cli(*argv) == (1, "", f"Error: {text}\n")
    with pytest.raises(SetupFailed) as refused:
        run_setup(str(db))
    assert str(refused.value) == text
    code, out, _err = run_cli("doctor", "--json")
    assert json.loads(out)["database"]["error"] == text
    assert state(db) == before


def test_a_database_with_tables_but_no_identity_is_foreign(empty_db: PgDb) -> None:
    pg(empty_db, "CREATE TABLE orders (id integer PRIMARY KEY)", "INSERT INTO orders VALUES (1)")
    _refusals(
        empty_db,
        f"{empty_db} is not a cafleet database (it has tables but no cafleet identity); "
        "cafleet will not use or modify it",
    )


def test_another_identity_is_foreign_even_with_cafleets_schema(empty_db: PgDb) -> None:
    run_setup(str(empty_db))
    pg(empty_db, "COMMENT ON SCHEMA public IS 'cafleet application_id 42'")
    _refusals(
        empty_db,
        f"{empty_db} is not a cafleet database (application_id is 42, not 1128351288); "
        "cafleet will not use or modify it",
    )


def test_a_newer_schema_is_refused(empty_db: PgDb) -> None:
    run_setup(str(empty_db))
    newer = HEAD_VERSION + 1
    pg(
        empty_db,
        f"UPDATE alembic_version SET version_num = '{newer:04d}'",
        "DROP TABLE member_spawns",
    )
    _refusals(
        empty_db,
        f"database schema {newer} is newer than this cafleet (head {HEAD_VERSION}); "
        "upgrade cafleet",
    )


def test_a_damaged_schema_names_its_differences(empty_db: PgDb) -> None:
    run_setup(str(empty_db))
    pg(
        empty_db,
        "DROP INDEX idx_members_one_active_monitor_per_fleet",
        "ALTER TABLE messages ADD COLUMN extra text",
        "ALTER TABLE members ALTER COLUMN status DROP NOT NULL",
        "DROP FUNCTION json_valid(text)",
    )
    _refusals(
        empty_db,
        f"{empty_db} is damaged (schema {HEAD_VERSION}): members.status: nullable (expected "
        "NOT NULL); unexpected column messages.extra; missing index "
        "idx_members_one_active_monitor_per_fleet; …; cafleet will not use or modify it",
    )


def test_an_auxiliary_index_keeps_the_database_current(empty_db: PgDb) -> None:
    run_setup(str(empty_db))
    assert _fast_check_passes(empty_db)
    pg(empty_db, "CREATE INDEX my_own ON messages (text)")
    assert not _fast_check_passes(empty_db)  # the long way: the full diagnosis
    assert diagnose_path(str(empty_db)).state == "current"
    assert run_cli("fleet", "list") == (0, "0 fleets.\n", "")


# --- bad input: unreachable server, wrong password -----------------------------------------------


def test_an_unreachable_server_is_one_error_line_naming_the_host(
    pg_server: PgServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    import socket

    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"postgresql://cafleet:{PASSWORD}@127.0.0.1:{port}/nowhere"
    monkeypatch.setenv("CAFLEET_DATABASE_URL", url)
    shown = f"postgresql://cafleet@127.0.0.1:{port}/nowhere"
    cause = (
        f"cannot read database {shown}: connection failed: connection to server at "
        f'"127.0.0.1", port {port} failed: Connection refused'
    )
    code, out, err = run_cli("fleet", "list")
    assert (code, out, err) == (1, "", f"Error: {cause}\n")
    code, out, err = run_cli("setup", "--coding-agent", "claude")
    assert code == 1
    assert err.splitlines()[0] == f"db half failed: {cause}"  # setup's own report
    assert err.splitlines()[-1] == "Error: db and assets half failed"
    assert PASSWORD not in out + err


def test_a_wrong_password_is_one_error_line_and_writes_nothing(
    empty_db: PgDb, monkeypatch: pytest.MonkeyPatch
) -> None:
    wrong = empty_db.url.replace(PASSWORD, "not-the-password")
    monkeypatch.setenv("CAFLEET_DATABASE_URL", wrong)
    before = state(empty_db)
    for argv in (("fleet", "list"), ("setup", "--coding-agent", "claude"), ("doctor",)):
        code, out, err = run_cli(*argv)
        assert code == 1
        assert "not-the-password" not in out + err and PASSWORD not in out + err
        text = out + err
        assert (
            f"cannot read database {empty_db}: connection failed: connection to server at "
            '"127.0.0.1", port '
            f'{empty_db.server.port} failed: password authentication failed for user "cafleet"'
        ) in text, text
    assert state(empty_db) == before


# --- short commands, alembic for a DBA ------------------------------------------------------------


def test_short_commands_import_neither_sqlalchemy_nor_alembic(empty_db: PgDb) -> None:
    run_setup(str(empty_db))
    code = (
        "import sys\n"
        "from cafleet.cli import main\n"
        "try:\n"
        "    main(['fleet', 'list'])\n"
        "except SystemExit as e:\n"
        "    code = e.code\n"
        "print(code, sorted(m for m in ('sqlalchemy', 'alembic', 'psycopg') if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, timeout=60
    )
    assert done.stdout.splitlines()[-1] == "0 ['psycopg']", done.stderr


def test_alembic_history_and_current_work_and_upgrade_changes_nothing(empty_db: PgDb) -> None:
    upgrade_to(str(empty_db), "0001")

    def alembic(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "alembic", *argv],
            capture_output=True,
            text=True,
            cwd=REPO_ROOT,
            timeout=120,
        )

    history = alembic("history")
    assert history.returncode == 0, history.stderr
    assert f"-> {HEAD_REVISION} (head)" in history.stdout
    current = alembic("current")
    assert current.returncode == 0, current.stderr
    assert current.stdout.strip() == "0001"
    before = state(empty_db)
    refused = alembic("upgrade", "head")
    assert refused.returncode != 0
    assert "read-only transaction" in refused.stderr
    assert state(empty_db) == before
    run_setup(str(empty_db))
    assert alembic("current").stdout.strip() == f"{HEAD_REVISION} (head)"


# --- several processes --------------------------------------------------------------------------

_REGISTER = """
import sys
from cafleet import broker
from cafleet.cli.guard import open_validated_connection
from cafleet.records import PlacementSpec
conn = open_validated_connection(sys.argv[1])
print("ready", flush=True)
sys.stdin.readline()
try:
    m = broker.register_member(conn, fleet_id=int(sys.argv[2]), name="monitor",
        description="d", role="monitor", placement=PlacementSpec("s", "@1", "claude"),
        require_monitor=False)
    print("won", m.member_id, flush=True)
except broker.MonitorSlotTaken as e:
    print("lost", e.member_id, flush=True)
"""


@pytest.mark.slow
def test_processes_racing_for_the_monitor_slot_leave_one_monitor(
    conn: Connection, head_db: Path
) -> None:
    """docs/storage.md §10.4: eight processes register a monitor in one fleet at once; one
    wins, every other one gets `MonitorSlotTaken` naming the winner, and nothing else is added."""
    boot = make_fleet(conn)
    fid = boot.fleet.fleet_id
    broker.deregister_member(conn, member_id=boot.monitor.member_id)
    before = table_counts(head_db)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _REGISTER, str(head_db), str(fid)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO_ROOT,
        )
        for _ in range(8)
    ]
    try:
        for p in procs:
            assert p.stdout is not None and p.stdout.readline() == "ready\n"
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        outcomes = [p.communicate(timeout=120)[0].split() for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    winners = [o for o in outcomes if o[0] == "won"]
    assert len(winners) == 1, outcomes
    winner = int(winners[0][1])
    assert sorted(o for o in outcomes if o[0] == "lost") == [["lost", str(winner)]] * 7
    monitor = broker.get_active_monitor(conn, fid)
    assert monitor is not None and monitor.member_id == winner
    assert table_counts(head_db)["members"] == before["members"] + 1
    assert table_counts(head_db)["member_placements"] == before["member_placements"] + 1


_BROADCASTS = """
import sys
from cafleet import broker
from cafleet.cli.guard import open_validated_connection
conn = open_validated_connection(sys.argv[1])
n = 0
while True:
    broker.broadcast_message(conn, from_member_id=int(sys.argv[2]), text=f"b{n}")
    n += 1
    if n == 3:
        print("running", flush=True)
"""


@pytest.mark.slow
def test_a_broadcast_killed_mid_way_leaves_all_its_rows_or_none(
    conn: Connection, head_db: Path
) -> None:
    """kill -9 while a process broadcasts in a loop to 60 recipients: every summary that
    exists has all its deliveries, and no delivery exists without its summary."""
    boot = make_fleet(conn)
    fid = boot.fleet.fleet_id
    for i in range(58):
        add_member(conn, fid, name=f"w{i}", placed=False)
    proc = subprocess.Popen(
        [sys.executable, "-c", _BROADCASTS, str(head_db), str(boot.director.member_id)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO_ROOT,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "running\n"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    recipients = len(broker.member_roster(conn, fleet_id=fid)) - 1
    db = raw_connect(head_db)
    try:
        summaries = db.execute(
            "SELECT message_id FROM messages WHERE type = 'broadcast_summary'"
        ).fetchall()
        counts = dict(
            db.execute(
                "SELECT origin_message_id, COUNT(*) FROM messages WHERE type = 'unicast' "
                "AND origin_message_id IS NOT NULL GROUP BY origin_message_id"
            ).fetchall()
        )
    finally:
        db.close()
    assert len(summaries) >= 3
    assert {s[0]: counts.get(s[0], 0) for s in summaries} == {s[0]: recipients for s in summaries}
    assert set(counts) <= {s[0] for s in summaries}
    # the killed writer left no lock behind: the next write goes through at once
    broker.send_message(
        conn, from_member_id=boot.director.member_id, to_member_id=boot.monitor.member_id, text="x"
    )


# --- the PostgreSQL catalog -----------------------------------------------------------------------


def test_every_postgresql_catalog_statement_prepares_against_a_head_database(
    empty_db: PgDb,
) -> None:
    """docs/storage.md §10.3: as SQLite's catalog is prepared (`EXPLAIN`) in tests/test_catalog.py,
    every PostgreSQL statement is prepared by the server against a database at head, so a wrong
    table, column, function or type fails here; and every statement name resolves on it."""
    import importlib

    from cafleet.db.catalog.build import MODULES
    from cafleet.db.connection import Statement
    from cafleet.db.pg.runtime import PgConnection

    run_setup(str(empty_db))
    count = 0
    pg = PgConnection.__new__(PgConnection)  # resolves names only: no server connection
    with psycopg.connect(empty_db.url, autocommit=True) as c:
        for module in MODULES:
            names_module = importlib.import_module(f"cafleet.db.catalog.{module}")
            for name in (n for n, v in vars(names_module).items() if isinstance(v, Statement)):
                sql, names = pg.compiled(getattr(names_module, name))
                pieces = sql.split("%s")  # positional placeholders become $1, $2, ...
                text = pieces[0] + "".join(f"${i}{p}" for i, p in enumerate(pieces[1:], 1))
                text = text.replace("%%", "%")
                assert len(pieces) - 1 == len(names), name
                c.execute(f"PREPARE cafleet_probe AS {text}")  # type: ignore[arg-type]
                c.execute("DEALLOCATE cafleet_probe")
                count += 1
    assert count > 60


# --- message wait wakes on another process's commit ----------------------------------------------


def test_message_wait_wakes_when_another_process_sends(conn: Connection, head_db: Path) -> None:
    """`message wait` notices a commit of another connection (SQLite's `data_version`,
    PostgreSQL's LISTEN/NOTIFY, docs/storage.md §10.4) and prints the new message."""
    boot = make_fleet(conn)
    worker = add_member(conn, boot.fleet.fleet_id, placed=False)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cafleet",
            "message",
            "wait",
            str(worker.member_id),
            "--timeout",
            "60",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO_ROOT,
    )
    try:
        # the waiter is connected and validated once its connection shows on the server or the
        # file is open; sending before that is fine too: the first cycle reads the inbox
        sent = broker.send_message(
            conn,
            from_member_id=boot.director.member_id,
            to_member_id=worker.member_id,
            text="wake up",
        )
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert f"id:{sent.message_id}" in out.replace(" ", "") or str(sent.message_id) in out
    assert "wake up" in out


def test_data_version_changes_on_another_connections_commit_only(
    conn: Connection, head_db: Path
) -> None:
    """What `message wait` and `stream` watch (docs/storage.md §10.4): another connection's
    committed write changes it (on PostgreSQL through LISTEN/NOTIFY, no query); a rolled-back
    write and reads do not."""
    from cafleet.cli.guard import open_validated_connection
    from cafleet.db import tx
    from cafleet.db.catalog import monitor as monitor_q
    from cafleet.db.runtime import close_connection, data_version
    from tests.harness.util import retry_until

    boot = make_fleet(conn)
    watcher = open_validated_connection(str(head_db))
    try:
        first = data_version(watcher)
        broker.poll_inbox(conn, boot.director.member_id)  # a read
        with pytest.raises(RuntimeError), tx.write(conn):  # a write rolled back
            conn.execute(monitor_q.CLEAR, {"fleet_id": boot.fleet.fleet_id, "pid": 1})
            raise RuntimeError("roll back")
        assert data_version(watcher) == first
        broker.send_message(
            conn,
            from_member_id=boot.director.member_id,
            to_member_id=boot.monitor.member_id,
            text="x",
        )
        retry_until(lambda: data_version(watcher) != first, message="no change seen")
    finally:
        close_connection(watcher)


def test_session_settings_travel_in_the_startup_packet_beside_the_users_own(
    empty_db: PgDb, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """docs/storage.md §10.4: `lock_timeout` and UTC reach the server in the startup packet
    (libpq's `options`, no round trip), after the user's own options (the URL's, else
    PGOPTIONS), so both apply and cafleet's win where both set one. A connection service may
    carry options an explicit `options` would override, so there cafleet SETs its two."""
    from cafleet.db.pg.runtime import connect_driver

    def settings(url: str) -> dict[str, tuple[str, str]]:
        monkeypatch.setenv("CAFLEET_DATABASE_URL", url)
        driver = connect_driver(str(PgDb.from_url(url)))
        try:
            rows = driver.execute(
                "SELECT name, setting, source FROM pg_settings WHERE name IN "
                "('lock_timeout', 'TimeZone', 'statement_timeout', 'idle_session_timeout')"
            ).fetchall()
        finally:
            driver.close()
        return {r[0]: (r[1], r[2]) for r in rows}

    got = settings(empty_db.url)
    assert got["lock_timeout"] == ("5000", "client") and got["TimeZone"] == ("UTC", "client")
    own = "options=-c%20statement_timeout%3D7s%20-c%20lock_timeout%3D1s%20-c%20TimeZone%3DEST"
    got = settings(f"{empty_db.url}?{own}")
    assert got["statement_timeout"] == ("7000", "client")
    assert (got["lock_timeout"], got["TimeZone"]) == (("5000", "client"), ("UTC", "client"))
    monkeypatch.setenv("PGOPTIONS", "-c idle_session_timeout=9s")
    assert settings(empty_db.url)["idle_session_timeout"] == ("9000", "client")
    monkeypatch.delenv("PGOPTIONS")

    service = tmp_path / "pg_service.conf"
    service.write_text("[cafleet_test]\noptions=-c statement_timeout=8s\n")
    monkeypatch.setenv("PGSERVICEFILE", str(service))
    monkeypatch.setenv("PGSERVICE", "cafleet_test")
    got = settings(empty_db.url)
    assert got["statement_timeout"] == ("8000", "client")  # the service's options apply
    assert (got["lock_timeout"], got["TimeZone"]) == (("5000", "session"), ("UTC", "session"))


def test_a_held_writer_lock_makes_a_write_fail_busy_and_reads_go_on(empty_db: PgDb) -> None:
    """docs/storage.md §10.4: while another session holds the writer lock (the advisory lock
    every `tx.write` takes first), `message ack` waits at most `lock_timeout` and fails with
    `database is locked`, changing nothing; `message poll` answers meanwhile."""
    from cafleet.cli.guard import open_validated_connection
    from cafleet.db.pg.runtime import WRITER_LOCK_KEY
    from cafleet.db.runtime import close_connection
    from tests.conftest import install_assets

    run_setup(str(empty_db))
    install_assets(empty_db)  # type: ignore[arg-type]
    conn = open_validated_connection(str(empty_db))
    try:
        boot = make_fleet(conn)
        w = add_member(conn, boot.fleet.fleet_id, placed=False)
        sent = broker.send_message(
            conn, from_member_id=boot.director.member_id, to_member_id=w.member_id, text="x"
        )
    finally:
        close_connection(conn)
    holder = psycopg.connect(empty_db.url)  # a transaction holding the writer lock
    try:
        holder.execute("SELECT pg_advisory_xact_lock(%s)", (WRITER_LOCK_KEY,))
        before = state(empty_db)
        ack = subprocess.Popen(
            [sys.executable, "-m", "cafleet", "message", "ack", str(sent.message_id)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO_ROOT,
        )
        code, out, _err = run_cli("message", "poll", str(w.member_id))
        assert (
            code == 0
            and f'"message_id": {sent.message_id}' in out.replace("'", '"')
            or (code == 0 and str(sent.message_id) in out)
        )
        ack_out, ack_err = ack.communicate(timeout=60)
        assert (ack.returncode, ack_out, ack_err) == (1, "", "Error: database is locked\n")
        assert state(empty_db) == before
    finally:
        holder.rollback()
        holder.close()
    assert run_cli("message", "ack", str(sent.message_id))[0] == 0  # the lock is gone


def test_a_schema_change_after_validation_fails_the_next_write(empty_db: PgDb) -> None:
    """docs/storage.md §4.4 on PostgreSQL: a write transaction re-reads the ledger right after
    the writer lock (one round trip, §10.4). Another revision, or a ledger that cannot be read
    at all, fails the write with `SchemaChanged`, writes nothing, leaves no transaction open
    and releases the writer lock; the connection stays usable."""
    from cafleet.cli.guard import open_validated_connection
    from cafleet.db import tx
    from cafleet.db.errors import SchemaChanged
    from cafleet.db.pg.runtime import WRITER_LOCK_KEY
    from cafleet.db.runtime import close_connection

    insert = "INSERT INTO asset_installs VALUES ('claude', %s, '0.1.0', %s)"
    run_setup(str(empty_db))
    conn = open_validated_connection(str(empty_db))

    def lock_is_free() -> bool:
        with psycopg.connect(empty_db.url, autocommit=True) as probe:
            row = probe.execute("SELECT pg_try_advisory_lock(%s)", (WRITER_LOCK_KEY,)).fetchone()
            return bool(row and row[0])

    try:
        with tx.write(conn):
            conn.exec_driver_sql(insert, ("/first", TS))
        pg(empty_db, f"UPDATE alembic_version SET version_num = '{HEAD_VERSION + 1:04d}'")
        before = state(empty_db)
        with pytest.raises(SchemaChanged) as e, tx.write(conn):
            conn.exec_driver_sql(insert, ("/never", TS))  # pragma: no cover
        assert str(e.value) == (
            "the database schema changed while this command was running "
            f"(validated schema {HEAD_VERSION}, now schema {HEAD_VERSION + 1}); re-run the command"
        )
        assert not conn.in_transaction()
        assert state(empty_db) == before
        assert lock_is_free()

        pg(empty_db, "ALTER TABLE alembic_version RENAME TO alembic_version_gone")
        before = state(empty_db)
        with pytest.raises(SchemaChanged) as e, tx.write(conn):
            conn.exec_driver_sql(insert, ("/never", TS))  # pragma: no cover
        assert str(e.value) == (
            "the database schema changed while this command was running "
            f"(validated schema {HEAD_VERSION}, now unreadable); re-run the command"
        )
        assert not conn.in_transaction()
        assert state(empty_db) == before
        assert lock_is_free()

        # the ledger restored: the same connection writes again
        pg(
            empty_db,
            "ALTER TABLE alembic_version_gone RENAME TO alembic_version",
            f"UPDATE alembic_version SET version_num = '{HEAD_REVISION}'",
        )
        with tx.write(conn):
            conn.exec_driver_sql(insert, ("/second", TS))
        with tx.read(conn):
            paths = conn.exec_driver_sql("SELECT path FROM asset_installs ORDER BY 1").all()
        assert [p[0] for p in paths] == ["/first", "/second"]
    finally:
        close_connection(conn)


class _CountingDriver:
    """The psycopg connection with its `execute` calls counted: each is one round trip."""

    def __init__(self, driver: psycopg.Connection[object]) -> None:
        self.driver = driver
        self.calls = 0

    def execute(self, *args: object, **kwargs: object) -> object:
        self.calls += 1
        return self.driver.execute(*args, **kwargs)  # type: ignore[arg-type]

    def __getattr__(self, name: str) -> object:
        return getattr(self.driver, name)


def test_a_one_statement_write_is_one_round_trip_under_the_writer_rules(
    empty_db: PgDb,
) -> None:
    """docs/storage.md §10.4, `tx.write_one`: BEGIN, the writer lock, the ledger check, the
    stamp, the statement, NOTIFY and COMMIT in one round trip. Its stamp is read after the lock
    (a write that waited for it is stamped after the holder let go); a ledger changed after
    validation fails it with `SchemaChanged`; a failing statement writes nothing; each leaves
    no transaction open and the writer lock free."""
    import threading
    from datetime import UTC, datetime

    from cafleet.cli.guard import open_validated_connection
    from cafleet.db import tx
    from cafleet.db.catalog import assets as q
    from cafleet.db.catalog import messages as mq
    from cafleet.db.errors import SchemaChanged
    from cafleet.db.pg.runtime import WRITER_LOCK_KEY
    from cafleet.db.runtime import close_connection
    from cafleet.db.timefmt import format_ts, parse_ts
    from tests.harness.util import retry_until

    run_setup(str(empty_db))
    conn = open_validated_connection(str(empty_db))
    listener = psycopg.connect(empty_db.url, autocommit=True)
    listener.execute("LISTEN cafleet_changes")

    def lock_is_free() -> bool:
        with psycopg.connect(empty_db.url, autocommit=True) as probe:
            row = probe.execute("SELECT pg_try_advisory_lock(%s)", (WRITER_LOCK_KEY,)).fetchone()
            return bool(row and row[0])

    def upsert(path: str) -> str:
        params = {"agent": "claude", "path": path, "version": "0.1.0"}
        return tx.write_one(conn, q.UPSERT, params)[1]

    try:
        counting = _CountingDriver(conn.driver)  # type: ignore[arg-type]
        conn.driver = counting  # type: ignore[assignment]
        upsert("/first")
        assert counting.calls == 1
        assert not conn.in_transaction() and lock_is_free()
        assert len(list(listener.notifies(timeout=5, stop_after=1))) == 1  # NOTIFY at commit
        conn.driver = counting.driver  # type: ignore[assignment]

        # the stamp follows the lock: a write waiting for it is stamped after the holder's end
        holder = psycopg.connect(empty_db.url, autocommit=True)
        holder.execute("SELECT pg_advisory_lock(%s)", (WRITER_LOCK_KEY,))
        stamped: list[str] = []
        waiter = threading.Thread(target=lambda: stamped.append(upsert("/waited")))
        waiter.start()
        retry_until(
            lambda: (
                holder.execute(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
                ).fetchone()
                == (1,)
            ),
            message="the write never waited for the writer lock",
        )
        released = datetime.now(UTC)
        holder.execute("SELECT pg_advisory_unlock(%s)", (WRITER_LOCK_KEY,))
        holder.close()
        waiter.join(timeout=30)
        assert stamped and parse_ts(stamped[0]) >= released  # type: ignore[operator]
        assert stamped[0] == format_ts(parse_ts(stamped[0]))  # type: ignore[arg-type]

        # a failing statement (a NUL in the text) writes nothing and frees the lock
        before = state(empty_db)
        with pytest.raises(Exception, match="NUL"):
            tx.write_one(conn, mq.SEND, {"text": "a\x00b", "from_id": 1, "to_id": 1, "token": None})
        assert not conn.in_transaction() and lock_is_free() and state(empty_db) == before

        # a ledger changed after validation
        pg(empty_db, f"UPDATE alembic_version SET version_num = '{HEAD_VERSION + 1:04d}'")
        before = state(empty_db)
        with pytest.raises(SchemaChanged):
            upsert("/never")
        assert not conn.in_transaction() and lock_is_free() and state(empty_db) == before
        pg(empty_db, f"UPDATE alembic_version SET version_num = '{HEAD_REVISION}'")
        upsert("/second")
        with tx.read(conn):
            paths = conn.exec_driver_sql("SELECT path FROM asset_installs ORDER BY 1").all()
        assert [p[0] for p in paths] == ["/first", "/second", "/waited"]
    finally:
        listener.close()
        close_connection(conn)


def test_setups_assets_half_takes_this_hosts_setup_lock(empty_db: PgDb) -> None:
    """docs/storage.md §10.1: setup's assets half (this host's files) runs under
    `locks/setup.lock` of the database's local directory, as on a file, so two setups on one
    host install one after the other: while another process holds it, setup waits on it."""
    from cafleet.db.migrate import setup_lock_path
    from tests.cli_helpers import hold_flock
    from tests.delivery_helpers import holds_open
    from tests.harness.util import retry_until

    run_setup(str(empty_db))  # the database half is done; the assets half remains
    lock = setup_lock_path(str(empty_db))
    holder = hold_flock(Path(lock), 600)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cafleet", "setup", "--coding-agent", "claude"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO_ROOT,
        )
        retry_until(
            lambda: holds_open(proc.pid, lock) or proc.poll() is not None,
            timeout=60,
            interval=0.02,
            message="setup never opened this host's setup lock",
        )
        assert proc.poll() is None, proc.communicate()  # waiting for the holder
    finally:
        holder.kill()
        holder.wait()
    out, err = proc.communicate(timeout=120)
    assert (proc.returncode, err) == (0, ""), err
    assert out.splitlines()[0] == f"Already at head ({HEAD_VERSION}); nothing to do."
