"""Compile `cafleet.db.statements` into the per-dialect catalog modules.

Each construct is compiled for the dialect with positional placeholders; the generated module
holds the SQL text and the parameter names in placeholder order. A statement whose compiled
form carries a value of its own (an anonymous bound literal) is refused: the catalog carries no
values, so such a value would be lost.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import BigInteger, Insert, Integer, SmallInteger
from sqlalchemy.dialects.postgresql.psycopg import PGCompiler_psycopg, PGDialect_psycopg
from sqlalchemy.dialects.sqlite.base import SQLiteCompiler
from sqlalchemy.dialects.sqlite.pysqlite import SQLiteDialect_pysqlite
from sqlalchemy.engine.interfaces import Dialect

from cafleet.db.catalog import MODULES
from cafleet.db.statements import CrossJoin

# Repository modules with statements, in `cafleet.db.statements` and the catalog alike.

_HERE = Path(__file__).resolve().parent


class _SQLiteCompiler(SQLiteCompiler):
    """SQLite's compiler plus the two SQLite constructs the repository uses: `INDEXED BY` (a
    `with_hint(..., dialect_name="sqlite")`) and CROSS JOIN (`statements.CrossJoin`); LIMIT
    without SQLite's implicit `OFFSET 0`."""

    def get_from_hint_text(self, table: Any, text: str | None) -> str | None:
        return text

    def limit_clause(self, select: Any, **kw: Any) -> str:
        # SQLite's own compiler adds `OFFSET ?` bound to 0 to every LIMIT: a value the catalog
        # cannot carry, and no statement here has an offset.
        if select._offset_clause is not None:
            raise ValueError("OFFSET is not supported by the catalog")
        if select._limit_clause is None:
            return ""
        return " LIMIT " + str(self.process(select._limit_clause, **kw))

    def visit_join(
        self, join: Any, asfrom: bool = False, from_linter: Any = None, **kw: Any
    ) -> str:
        if not isinstance(join, CrossJoin):
            return str(super().visit_join(join, asfrom=asfrom, from_linter=from_linter, **kw))  # type: ignore[no-untyped-call]
        if from_linter:
            from_linter.edges.update(
                (a, b) for a in join.left._from_objects for b in join.right._from_objects
            )
        assert join.onclause is not None
        return (
            join.left._compiler_dispatch(self, asfrom=True, from_linter=from_linter, **kw)
            + " CROSS JOIN "
            + join.right._compiler_dispatch(self, asfrom=True, from_linter=from_linter, **kw)
            + " ON "
            + join.onclause._compiler_dispatch(self, from_linter=from_linter, **kw)
        )


class _SQLiteDialect(SQLiteDialect_pysqlite):
    statement_compiler = _SQLiteCompiler
    paramstyle = "qmark"


class _PGCompiler(PGCompiler_psycopg):
    """An integer parameter is cast to BIGINT, not to its column's INTEGER: an id the column
    cannot hold (above 2147483647, which SQLite's columns hold) then compares as no row, as on
    SQLite, instead of failing the statement with `integer out of range`. Comparing an INTEGER
    column with a BIGINT still uses the column's index (one btree operator family)."""

    def render_bind_cast(self, type_: Any, dbapi_type: Any, sqltext: str) -> str:
        if isinstance(dbapi_type, Integer) and not isinstance(
            dbapi_type, BigInteger | SmallInteger
        ):
            return f"{sqltext}::BIGINT"
        return str(super().render_bind_cast(type_, dbapi_type, sqltext))  # type: ignore[no-untyped-call]


class _PGDialect(PGDialect_psycopg):
    """PostgreSQL through psycopg 3 (docs/storage.md §10.3): positional `%s` placeholders, which
    the runtime binds client-side (`psycopg.ClientCursor`)."""

    statement_compiler = _PGCompiler

    def __init__(self, **kw: Any) -> None:
        super().__init__(paramstyle="format", **kw)  # type: ignore[no-untyped-call]


DIALECTS: dict[str, Callable[[], Dialect]] = {"sqlite": _SQLiteDialect, "postgresql": _PGDialect}


def for_dialect(module: str, name: str, statement: Any, dialect_name: str) -> Any:
    """The construct a dialect compiles for `name`: the module's `DIALECT_STATEMENTS`
    replacement when it has one; on PostgreSQL an INSERT into a table with a generated key also
    returns that key, which the runtime reads as `lastrowid` (PostgreSQL has none)."""
    replacements = getattr(
        importlib.import_module(f"cafleet.db.statements.{module}"), "DIALECT_STATEMENTS", {}
    )
    statement = replacements.get(dialect_name, {}).get(name, statement)
    if dialect_name == "postgresql" and isinstance(statement, Insert) and not statement._returning:
        table: Any = statement.table
        key = [c for c in table.primary_key.columns if c.autoincrement is True]
        if not key and len(table.primary_key.columns) == 1:
            column = next(iter(table.primary_key.columns))
            key = [column] if column.autoincrement == "auto" and not column.foreign_keys else []
        if key:
            statement = statement.returning(key[0])
    return statement


def compile_statement(statement: Any, dialect: Dialect) -> tuple[str, tuple[str, ...]]:
    compiled = statement.compile(dialect=dialect)
    for name, bind in compiled.binds.items():
        if not bind.required and bind.value is not None:
            raise ValueError(f"bound value {name}={bind.value!r}: use const() or param()")
    names = tuple(compiled.positiontup or ())
    sql = " ".join(line.strip() for line in compiled.string.splitlines())
    return sql, names


def _literal(value: str) -> str:
    """A double-quoted Python string literal (JSON's escapes are Python's too)."""
    return json.dumps(value)


def render(module: str, dialect_name: str) -> str:
    """The generated module's text (stable, and already as `ruff format` writes it)."""
    statements = importlib.import_module(f"cafleet.db.statements.{module}").STATEMENTS
    dialect = DIALECTS[dialect_name]()
    lines = [
        f'"""Generated by `python -m cafleet.db.catalog --write` from cafleet/db/statements/'
        f"{module}.py",
        f'for the {dialect_name} dialect. Do not edit: tests/test_catalog.py fails when stale."""',
        "",
        "from __future__ import annotations",
        "",
        "from typing import TYPE_CHECKING",
        "",
        "if TYPE_CHECKING:",
        "    from cafleet.db.runtime import Compiled",
        "",
    ]
    for name, statement in statements.items():
        sql, names = compile_statement(for_dialect(module, name, statement, dialect_name), dialect)
        lines.append("")
        lines.append(f"{name}: Compiled = (")
        lines.append(f"    {_literal(sql)},")
        params = ", ".join(_literal(n) for n in names)
        one_line = f"    ({params}{',' if len(names) == 1 else ''}),"
        if len(one_line) <= 100:
            lines.append(one_line)
        else:
            lines.append("    (")
            lines.extend(f"        {_literal(n)}," for n in names)
            lines.append("    ),")
        lines.append(")")
    return "\n".join(lines) + "\n"


def head_catalogues() -> list[str]:
    """The `sqlite_master` text (`cafleet.db.current.catalogue_text`) of a file brought to head
    by each path the migration chain offers: created at head, and upgraded from every older
    revision."""
    import sqlite3
    import tempfile

    from cafleet.db.current import CATALOGUE_SQL, catalogue_text
    from cafleet.db.migrate import run_setup, upgrade_to
    from cafleet.db.shapes import REVISIONS

    found: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        for start in (None, *REVISIONS[:-1]):
            path = str(Path(tmp) / f"from-{start or 'nothing'}" / "cafleet.db")
            Path(path).parent.mkdir()
            if start is not None:
                upgrade_to(path, start)
            run_setup(path)
            db = sqlite3.connect(path)
            try:
                text = catalogue_text(db.execute(CATALOGUE_SQL).fetchall())
            finally:
                db.close()
            if text not in found:
                found.append(text)
    return found


def render_heads() -> str:
    from cafleet.db.shapes import HEAD_REVISION

    lines = [
        '"""Generated by `python -m cafleet.db.catalog --write` from the migration chain: the',
        "catalogue of a file at head as each path to head writes it (`cafleet.db.current`).",
        'Do not edit: tests/test_catalog.py fails when stale."""',
        "",
        f"HEAD_REVISION = {_literal(HEAD_REVISION)}",
        "SCHEMAS = frozenset(",
        "    (",
    ]
    for text in head_catalogues():
        lines.append("        (")
        lines.extend(f"            {_literal(line + chr(10))}" for line in text.split("\n")[:-1])
        lines.append(f"            {_literal(text.split(chr(10))[-1])}")
        lines.append("        ),")
    lines.extend(["    )", ")"])
    return "\n".join(lines) + "\n"


def targets() -> list[tuple[Path, str]]:
    found = [
        (_HERE / dialect / f"{module}.py", render(module, dialect))
        for dialect in DIALECTS
        for module in MODULES
    ]
    found.append((_HERE / "sqlite" / "heads.py", render_heads()))
    return found


def write() -> list[Path]:
    written = []
    for path, content in targets():
        if not path.exists() or path.read_text() != content:
            path.write_text(content)
            written.append(path)
    return written


def check() -> list[Path]:
    return [path for path, content in targets() if not path.exists() or path.read_text() != content]
