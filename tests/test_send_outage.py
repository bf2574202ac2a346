"""A send reports what really happened when PostgreSQL stops under it (docs/cli.md §2.14):
`pg_ctl stop -m immediate` on a private server of this module's own (the shared test server
must stay up), sends in subprocesses, each report checked against the rows stored. Error texts
name the database and never its password.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import install_assets
from tests.harness import util
from tests.pg_server import PASSWORD, PgDb, PgRaw, PgServer, start_server

pytestmark = pytest.mark.tmux


@pytest.fixture(scope="module")
def server() -> Iterator[PgServer]:
    srv = start_server()
    if srv is None:
        pytest.skip("PostgreSQL server binaries not installed")
    try:
        yield srv
    finally:
        srv.stop()


def _stop(server: PgServer) -> None:
    server._run("pg_ctl", "-D", str(server.data), "-m", "immediate", "-w", "stop")


def _start(server: PgServer) -> None:
    """Start the stopped server again, without the tmux harness's mark in its environment
    (the harness's teardown ends every process that carries it)."""
    import os

    saved = os.environ.pop("CAFLEET_FAKE_DIR", None)
    try:
        _start_server(server)
    finally:
        if saved is not None:
            os.environ["CAFLEET_FAKE_DIR"] = saved


def _start_server(server: PgServer) -> None:
    options = f"-k {server.dir} -h 127.0.0.1 -p {server.port} -c max_connections=200"
    options += " -F -c fsync=off -c full_page_writes=off"
    server._run(
        "pg_ctl", "-D", str(server.data), "-o", options, "-l", str(server.dir / "log"),
        "-w", "start",
    )  # fmt: skip


@pytest.fixture
def outage_db(server: PgServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[PgDb]:
    """A fresh database set up by cafleet on the module's server (up again after the test)."""
    from cafleet.db.migrate import run_setup

    db = PgDb(server, server.new_database())
    monkeypatch.setenv("CAFLEET_DATABASE_URL", db.url)
    run_setup(str(db))
    install_assets(db)  # type: ignore[arg-type]
    try:
        yield db
    finally:
        if not _running(server):
            _start(server)


def _running(server: PgServer) -> bool:
    try:
        server._run("pg_ctl", "-D", str(server.data), "status")
    except subprocess.CalledProcessError:
        return False
    return True


def _texts(db: PgDb, like: str) -> list[tuple[int, str]]:
    raw = PgRaw(db)
    try:
        found = raw.execute(
            "SELECT message_id, text FROM messages WHERE text LIKE ? ORDER BY message_id", (like,)
        )
        return [(int(r[0]), str(r[1])) for r in found.fetchall()]  # type: ignore[attr-defined]
    finally:
        raw.close()


def _cli(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "cafleet", *args],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _send(env: dict[str, str], frm: int, to: int, body: str, *extra: str) -> subprocess.Popen[str]:
    return _cli(
        env, "message", "send", "--from-member-id", str(frm), "--to-member-id", str(to), body,
        *extra,
    )  # fmt: skip


def _env() -> dict[str, str]:
    import os

    env = dict(os.environ)
    env.pop("TMUX", None)
    env.pop("TMUX_PANE", None)
    return env


class _WriterLock:
    """The writer lock (the advisory lock every cafleet write takes) held by a session of the
    test's, so that sends queue on it, in their write, until the server stops."""

    def __init__(self, db: PgDb) -> None:
        import psycopg

        from cafleet.db.pg.runtime import WRITER_LOCK_KEY

        self.conn = psycopg.connect(db.url, autocommit=True)
        self.conn.execute(f"SELECT pg_advisory_lock({WRITER_LOCK_KEY})")

    def waiting(self) -> int:
        import psycopg

        from cafleet.db.pg.runtime import WRITER_LOCK_KEY

        with psycopg.connect(self.conn.info.dsn + f" password={PASSWORD}") as c:
            row = c.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
                "AND objid = %s",
                (WRITER_LOCK_KEY,),
            ).fetchone()
        return int(row[0]) if row else 0


def _no_password(*texts: str) -> None:
    for text in texts:
        assert PASSWORD not in text


def test_a_send_stored_before_the_stop_reports_sent(outage_db: PgDb, monkeypatch) -> None:
    """The message is stored; the server stops while the send waits for the recipient's pane
    lock (held here), so its drain meets a dead connection: exit 0, `Message sent.`, a warning
    naming the database, and the row stored once."""
    from cafleet.config import db_dir_of
    from tests.factories import build_world
    from tests.harness.fixtures import private_tmux

    with private_tmux(monkeypatch) as h:
        world = build_world(outage_db, harness=h, members=("alice", "bob"))
        a, b = world.members["alice"], world.members["bob"]
        with util.hold_pane_lock(db_dir_of(str(outage_db)), world.key(b)):
            proc = h.popen_cli(
                "message", "send", "--from-member-id", str(a), "--to-member-id", str(b),
                "stored first", "--json",
            )  # fmt: skip
            util.retry_until(lambda: _texts(outage_db, "stored first"), timeout=20)
            _stop(outage_db.server)
            out, err = proc.communicate(timeout=60)
        _start(outage_db.server)
        assert util.line_records(world.pane(b)) == []
    stored = _texts(outage_db, "stored first")
    assert len(stored) == 1
    assert proc.returncode == 0, err
    assert json.loads(out)["message"]["message_id"] == stored[0][0]
    assert f"Warning: message {stored[0][0]} stored, but not notified: " in err
    assert str(outage_db) in err
    _no_password(out, err)


def test_a_send_cut_off_before_its_commit_reports_not_sent(outage_db: PgDb) -> None:
    """Sends queued on the writer lock when the server stops: nothing stored, and each says
    so, naming the database; the server back, running them again stores each once."""
    from tests.factories import build_world

    world = build_world(outage_db, members=("alice", "bob"))
    a, b = world.members["alice"], world.members["bob"]
    env = _env()
    lock = _WriterLock(outage_db)
    procs = [_send(env, a, b, f"cut {i}", "--json") for i in range(3)]
    util.retry_until(lambda: lock.waiting() >= 3, timeout=30)
    stopper = threading.Timer(1.0, _start, (outage_db.server,))
    _stop(outage_db.server)
    stopper.start()
    results = [(p.wait(timeout=60), *p.communicate()) for p in procs]
    stopper.join()
    assert _texts(outage_db, "cut %") == []
    for rc, out, err in results:
        assert rc == 1 and out == "", err
        message = json.loads(err)["error"]["message"]
        assert message.startswith(f"not sent: lost the connection to {outage_db}: "), message
        assert message.endswith(
            "; nothing was stored (checked by the send's token), so sending it again is safe"
        )
        _no_password(out, err)
    for i in range(3):
        again = _send(env, a, b, f"cut {i}")
        assert again.wait(timeout=60) == 0
        again.communicate()
    assert [t for _, t in _texts(outage_db, "cut %")] == ["cut 0", "cut 1", "cut 2"]


def test_a_send_that_cannot_tell_exits_75_and_its_key_settles_it(outage_db: PgDb) -> None:
    """The server stays away: `unknown: …` naming the database and the send's token, exit 75;
    the server back, the same command with that `--key` stores the message once."""
    from tests.factories import build_world

    world = build_world(outage_db, members=("alice", "bob"))
    a, b = world.members["alice"], world.members["bob"]
    env = _env()
    lock = _WriterLock(outage_db)
    proc = _send(env, a, b, "in doubt")
    util.retry_until(lambda: lock.waiting() >= 1, timeout=30)
    _stop(outage_db.server)
    rc, (out, err) = proc.wait(timeout=60), proc.communicate()
    assert rc == 75 and out == "", err
    text = err.strip()
    assert text.startswith(f"Error: unknown: lost the connection to {outage_db}: "), text
    assert "and it did not answer again within 5 s, so whether the message was stored" in text
    key = re.search(r"again with --key ([0-9a-f]{20}) \(it stores the message only if it was", text)
    assert key is not None, text
    _no_password(out, err)
    _start(outage_db.server)
    for _ in range(2):
        again = _send(env, a, b, "in doubt", "--key", key.group(1))
        assert again.wait(timeout=60) == 0
        again.communicate()
    assert [t for _, t in _texts(outage_db, "in doubt")] == ["in doubt"]


def test_sends_during_an_immediate_stop_report_what_was_stored(outage_db: PgDb) -> None:
    """Twelve sends at once, the server stopped with `-m immediate` while they run and started
    again: each exit 0 has its one row, each failure none (and says `not sent`, or the guard's
    `cannot read database`, naming the database), an `unknown` is settled by its key; no body
    is ever stored twice."""
    from tests.factories import build_world

    world = build_world(outage_db, members=("alice", "bob"))
    a, b = world.members["alice"], world.members["bob"]
    env = _env()
    procs = {f"race {i}": _send(env, a, b, f"race {i}", "--json") for i in range(12)}
    util.retry_until(lambda: len(_texts(outage_db, "race %")) >= 3, timeout=30)
    _stop(outage_db.server)
    restart = threading.Timer(0.5, _start, (outage_db.server,))
    restart.start()
    reports: dict[str, Any] = {}
    for body, p in procs.items():
        rc = p.wait(timeout=60)
        reports[body] = (rc, *p.communicate())
    restart.join()
    stored = [t for _, t in _texts(outage_db, "race %")]
    assert len(stored) == len(set(stored))
    for body, (rc, out, err) in reports.items():
        _no_password(out, err)
        if rc == 0:
            assert body in stored, (body, err)
        elif rc == 75:
            assert "unknown: " in err
        else:
            assert rc == 1 and body not in stored, (body, rc, err)
            message = json.loads(err)["error"]["message"]
            assert str(outage_db) in message, message
            assert message.startswith(("not sent: ", f"cannot read database {outage_db}")), message
