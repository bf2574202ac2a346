"""Dialects are classes (docs/maintaining.md §3): outside `cafleet/db/` no module asks which
database it runs on. The repository names catalog statements (`cafleet.db.catalog.<module>`),
and the connection it is given runs them its own way (`Connection.read`, `write`, `write_one`,
`data_version`, `wait_for_change`)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from cafleet.db import tx
from cafleet.db.catalog import members as members_q
from cafleet.db.catalog import messages as messages_q
from cafleet.db.connection import Connection, Statement
from cafleet.db.runtime import SqliteConnection, close_connection, data_version

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "cafleet"
# Reading the setting itself: whether `P` names a file or a server, and where a server's local
# files go. No connection behaviour is decided there.
SETTING_PARSERS = frozenset({"cafleet/config.py", "cafleet/pgurl.py"})
# Modules that belong to one dialect: only `cafleet/db/` imports them.
DIALECT_MODULES = ("cafleet.db.pg", "cafleet.db.catalog.sqlite", "cafleet.db.catalog.postgresql")
# Names whose only use is to ask which dialect a connection or a path is.
DIALECT_NAMES = frozenset(
    {
        "is_postgres",
        "is_postgres_connection",
        "POSTGRES_SCHEMES",
        "SqliteConnection",
        "PgConnection",
        "dialect",
    }
)
DIALECT_WORDS = frozenset({"sqlite", "postgresql", "postgres"})


def dialect_checks(source: str, module: str) -> list[str]:
    """Each place in `source` that tests or selects a dialect: an import of a dialect's own
    module, a dialect-testing name, a comparison with a dialect's name."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Import | ast.ImportFrom):
            targets = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                targets.append(node.module)
                targets += [f"{node.module}.{a.name}" for a in node.names]
                found += [f"{line}: {a.name}" for a in node.names if a.name in DIALECT_NAMES]
            found += [
                f"{line}: import {t}"
                for t in targets
                if any(t == m or t.startswith(m + ".") for m in DIALECT_MODULES)
            ]
        elif isinstance(node, ast.Name) and node.id in DIALECT_NAMES:
            found.append(f"{line}: {node.id}")
        elif isinstance(node, ast.Attribute) and node.attr in DIALECT_NAMES:
            found.append(f"{line}: .{node.attr}")
        elif isinstance(node, ast.Compare):
            for operand in (node.left, *node.comparators):
                if isinstance(operand, ast.Constant) and operand.value in DIALECT_WORDS:
                    found.append(f"{line}: compares with {operand.value!r}")
    return sorted(set(found))


def test_no_dialect_check_outside_the_db_package() -> None:
    offenders = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if relative.startswith("cafleet/db/") or relative in SETTING_PARSERS:
            continue
        checks = dialect_checks(path.read_text(), relative)
        if checks:
            offenders[relative] = checks
    assert offenders == {}, "dialect checks outside cafleet/db/ (ask the connection instead)"


@pytest.mark.parametrize(
    "source",
    [
        "from cafleet.db.runtime import is_postgres_connection\n",
        "from cafleet.db.pg.runtime import wait_for_change\n",
        "from cafleet.db.catalog.sqlite import messages as q\n",
        "import cafleet.db.catalog.postgresql.fleets\n",
        "if conn.dialect == 'x':\n    pass\n",
        "if kind == 'postgresql':\n    pass\n",
    ],
)
def test_the_scan_sees_each_form(source: str) -> None:
    assert dialect_checks(source, "cafleet/example.py") != []


def test_the_repository_names_statements_the_same_on_every_dialect() -> None:
    """A broker module's `q.<NAME>` is one object for every dialect, with its flags."""
    assert isinstance(messages_q.SEND, Statement)
    assert messages_q.SEND.inserts and not messages_q.SEND.needs_savepoint
    assert members_q.INSERT_MEMBER.needs_savepoint  # read on after a monitor-slot violation
    assert not messages_q.POLL.inserts


class _CountingSqlite(SqliteConnection):
    """A test-only dialect: one class, nothing else registered anywhere. It runs SQLite's
    catalog and counts the transactions `tx` hands it."""

    __slots__ = ()
    dialect = "sqlite"
    calls: list[str] = []

    def read(self):  # type: ignore[no-untyped-def]
        self.calls.append("read")
        return super().read()

    def write(self):  # type: ignore[no-untyped-def]
        self.calls.append("write")
        return super().write()

    def data_version(self) -> int:
        self.calls.append("data_version")
        return super().data_version()


def test_a_dialect_is_one_class(head_db: Path) -> None:
    """`tx` and the runtime's functions ask the connection: a subclass of `Connection` is all a
    dialect needs, and the repository's functions run on it unchanged."""
    from cafleet import broker
    from cafleet.cli.guard import open_validated_connection
    from tests.factories import make_fleet

    opened = open_validated_connection(str(head_db))
    conn = _CountingSqlite(opened.driver, opened.info)
    assert isinstance(conn, Connection)
    try:
        boot = make_fleet(conn)
        director = boot.director.member_id
        sent = broker.send_message(conn, from_member_id=director, to_member_id=director, text="hi")
        assert [m.message_id for m in broker.poll_inbox(conn, director)] == [sent.message_id]
        with tx.read(conn):
            pass
        data_version(conn)
        assert {"read", "write", "data_version"} <= set(conn.calls)
    finally:
        close_connection(conn)
