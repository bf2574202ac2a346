"""Compile `cafleet.db.statements` into the catalog: per module, the statements' names and flags
(`cafleet.db.catalog.<module>`, what the repository names) and each dialect's compiled entries
(`cafleet.db.catalog.<dialect>.<module>`, what that dialect's connection runs).

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
from cafleet.db.statements import SAVEPOINT_OPTION, CrossJoin

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


def statement_flags(statement: Any) -> dict[str, bool]:
    """The `cafleet.db.connection.Statement` flags a construct declares or implies."""
    flags = {
        "needs_savepoint": bool(statement.get_execution_options().get(SAVEPOINT_OPTION)),
        "inserts": isinstance(statement, Insert),
    }
    return {name: value for name, value in flags.items() if value}


def render_names(module: str) -> str:
    """The module of `module`'s statement names, the same on every dialect."""
    statements = importlib.import_module(f"cafleet.db.statements.{module}").STATEMENTS
    lines = [
        f'"""Generated by `python -m cafleet.db.catalog --write` from cafleet/db/statements/'
        f"{module}.py:",
        "the names the repository runs; each connection resolves them to its dialect's entries in",
        f"`cafleet.db.catalog.<dialect>.{module}`. Do not edit: tests/test_catalog.py fails when "
        'stale."""',
        "",
        "from __future__ import annotations",
        "",
        "from cafleet.db.connection import Statement",
        "",
    ]
    for name, statement in statements.items():
        flags = "".join(f", {flag}=True" for flag in statement_flags(statement))
        lines.append(f'{name} = Statement("{module}", "{name}"{flags})')
    return "\n".join(lines) + "\n"


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
        "    from cafleet.db.connection import Compiled",
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


# --- the recorded shapes (`cafleet.db.shapes`) --------------------------------------------------

_SHAPES = _HERE.parent / "shapes.py"
_WIDTH = 100


def revision_ids() -> list[str]:
    """The migration chain's revisions, from its file names (`NNNN_<slug>.py`, in order)."""
    from cafleet.db.migrate import script_location

    versions = script_location() / "versions"
    return sorted(p.name[:4] for p in versions.glob("[0-9][0-9][0-9][0-9]_*.py"))


def recorded_shapes() -> dict[str, Any]:
    """The shape (`reflect_shape`) of a file brought to each revision by the Alembic chain
    itself (no diagnosis: the recorded shapes are what it compares with). Tables and indexes
    keep the previous revision's order, new ones after it in creation order, so diagnosis lists
    differences in the same order at every revision."""
    import dataclasses
    import sqlite3
    import tempfile

    from cafleet.db import engine
    from cafleet.db.migrate import _alembic_upgrade
    from cafleet.db.shape_types import reflect_shape

    found: dict[str, Any] = {}
    before: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        for revision in revision_ids():
            path = str(Path(tmp) / f"{revision}.db")
            sqlite3.connect(path).close()
            conn = engine.open_connection(path, purpose="migration")
            try:
                with engine.tx.write(conn):
                    _alembic_upgrade(conn, revision)
                with engine.tx.read(conn):
                    shape = reflect_shape(conn, revision)
                    created = [
                        r[0]
                        for r in conn.exec_driver_sql(
                            "SELECT name FROM sqlite_master ORDER BY rowid"
                        ).all()
                    ]
                order = before + [n for n in created if n not in before]
                found[revision] = dataclasses.replace(
                    shape,
                    tables=tuple(sorted(shape.tables, key=lambda t: order.index(t.name))),
                    indexes=tuple(sorted(shape.indexes, key=lambda i: order.index(i.name))),
                )
                before = order
            finally:
                engine.close_connection(conn)
    return found


def _python(value: Any) -> str:
    if isinstance(value, str):
        return _literal(value)
    return repr(value)


def _call(name: str, args: list[str], indent: int, extra: int = 0) -> str:
    """`name(args)` as `ruff format` writes it at `indent` with `extra` other characters on its
    line: on one line when it fits, else the arguments on one line of their own, else one
    argument a line."""
    flat = all("\n" not in a for a in args)
    one = f"{name}({', '.join(args)})"
    if flat and indent + extra + len(one) <= _WIDTH:
        return one
    inner = " " * (indent + 4)
    joined = ", ".join(args)
    if flat and len(inner) + len(joined) <= _WIDTH:
        return f"{name}(\n{inner}{joined}\n{' ' * indent})"
    return "\n".join([f"{name}(", *(f"{inner}{a}," for a in args), " " * indent + ")"])


def _tuple(items: list[str], indent: int, extra: int = 0) -> str:
    """A tuple literal as `ruff format` writes it (items rendered for `indent + 4`)."""
    if len(items) == 1 and "\n" not in items[0]:
        one = f"({items[0]},)"
        if indent + extra + len(one) <= _WIDTH:
            return one
    flat = all("\n" not in i for i in items)
    one = "(" + ", ".join(items) + ")"
    if len(items) > 1 and flat and indent + extra + len(one) <= _WIDTH:
        return one
    inner = " " * (indent + 4)
    return "(\n" + "".join(f"{inner}{i},\n" for i in items) + " " * indent + ")"


def _render_table(table: Any, indent: int, extra: int) -> str:
    at = indent + 4  # each TableShape argument, when expanded
    columns = [
        _call(
            "ColumnShape",
            [_python(c.name), _python(c.type), repr(c.notnull), _python(c.default), repr(c.pk)],
            at + 4,
            1,
        )
        for c in table.columns
    ]
    keys = [
        [_python(k.column), _python(k.target_table), _python(k.target_column)]
        + [_python(k.on_delete), _python(k.on_update)]
        for k in sorted(table.foreign_keys, key=lambda k: (k.column, k.target_table))
    ]
    if not keys:
        key_text = "frozenset()"
    else:
        one = "frozenset({" + ", ".join(_call("ForeignKeyShape", k, 0) for k in keys) + "})"
        if len(keys) == 1 and at + len(one) + 1 <= _WIDTH and "\n" not in one:
            key_text = one
        else:
            pad = " " * at
            rendered = [_call("ForeignKeyShape", k, at + 8, 1) for k in keys]
            key_text = (
                f"frozenset(\n{pad}    {{\n"
                + "".join(f"{pad}        {k},\n" for k in rendered)
                + f"{pad}    }}\n{pad})"
            )
    column_text = "(\n" + "".join(f"{' ' * (at + 4)}{c},\n" for c in columns) + " " * at + ")"
    args = [_python(table.name), column_text, repr(table.autoincrement), key_text]
    return "\n".join(["TableShape(", *(f"{' ' * at}{a}," for a in args), " " * indent + ")"])


def _render_index(index: Any, indent: int, extra: int) -> str:
    columns = _tuple([_python(c) for c in index.columns], indent + 4, 1)
    args = [_python(index.name), _python(index.table), columns, repr(index.unique)]
    return _call("IndexShape", [*args, _python(index.where)], indent, extra)


def render_shapes(shapes: dict[str, Any] | None = None) -> str:
    """`cafleet/db/shapes.py`: each distinct table and index shape once, named after the
    revision that introduced it, and every revision's shape built from them."""
    if shapes is None:
        shapes = recorded_shapes()
    revisions = list(shapes)
    lines = [
        '"""Generated by `python -m cafleet.db.catalog --write` from the migration chain',
        "(alembic/versions/): the shape of a file at each revision, as `reflect_shape` reads a file",
        "the chain brought there. Do not edit: tests/test_catalog.py fails when stale. A landed",
        "revision file never changes (tests/revision_manifest.txt), so neither does its shape.",
        "",
        "Shapes live in the package so that the schema guard, which runs before every command,",
        'never imports Alembic; the types and helpers are `cafleet.db.shape_types`\'."""',
        "",
        "from __future__ import annotations",
        "",
        "from cafleet.db.shape_types import (",
        *(f"    {n}," for n in _SHAPE_EXPORTS),
        ")",
        "",
        # One per line with a trailing comma: the layout `ruff format` keeps at any length.
        "REVISIONS: tuple[str, ...] = (",
        *(f"    {_literal(r)}," for r in revisions),
        ")",
        "HEAD_REVISION: str = REVISIONS[-1]",
        "HEAD_VERSION: int = int(HEAD_REVISION)",
    ]
    names: dict[Any, str] = {}
    entries: list[str] = []

    def name_of(shape: Any, kind: str, revision: str) -> str:
        if shape not in names:
            label = shape.name.upper() if kind == "TABLE" else shape.name
            names[shape] = f"_{kind}_{label}_{revision}"
            extra = len(names[shape]) + 3
            if kind == "TABLE":
                text = _render_table(shape, 0, extra)
            else:
                text = _render_index(shape, 0, extra)
            entries.append(f"{names[shape]} = {text}")
        return names[shape]

    revision_lines = []
    for revision, shape in shapes.items():
        tables = [name_of(t, "TABLE", revision) for t in shape.tables]
        indexes = [name_of(i, "INDEX", revision) for i in shape.indexes]
        revision_lines.append(
            f"    {_literal(revision)}: SchemaShape(\n"
            f"        {_literal(revision)},\n"
            "        (\n" + "".join(f"            {t},\n" for t in tables) + "        ),\n"
            "        (\n" + "".join(f"            {i},\n" for i in indexes) + "        ),\n"
            "    ),"
        )
    lines.append("")
    for entry in entries:
        lines.extend(["", entry])
    lines.extend(["", "SHAPES: dict[str, SchemaShape] = {", *revision_lines, "}"])
    exported = ("HEAD_REVISION", "HEAD_VERSION", "REVISIONS", "SHAPES", *_SHAPE_EXPORTS)
    lines.extend(["", "__all__ = [", *(f"    {_literal(n)}," for n in sorted(exported)), "]"])
    return "\n".join(lines) + "\n"


# What `cafleet.db.shapes` re-exports, so its readers import one module.
_SHAPE_EXPORTS = (
    "IGNORED_TABLE_PREFIXES",
    "IGNORED_TABLES",
    "ColumnShape",
    "ForeignKeyShape",
    "IndexShape",
    "SchemaShape",
    "TableShape",
    "canonical",
    "foreign_key_diffs",
    "has_autoincrement",
    "index_predicate",
    "metadata_shape",
    "normalise_default",
    "normalise_type",
    "reflect_shape",
)


def targets() -> list[tuple[Path, str]]:
    """Every generated file and its content. The heads catalogue is built by `cafleet setup`,
    which reads the recorded shapes this process imported: while those are stale (a new
    revision), it is left out here and `write` builds it in a fresh process after them."""
    found = [(_HERE / f"{module}.py", render_names(module)) for module in MODULES]
    found += [
        (_HERE / dialect / f"{module}.py", render(module, dialect))
        for dialect in DIALECTS
        for module in MODULES
    ]
    shapes = render_shapes()
    found.append((_SHAPES, shapes))
    if _SHAPES.exists() and _SHAPES.read_text() == shapes:
        found.append((_heads_path(), render_heads()))
    return found


def _heads_path() -> Path:  # under `_HERE`, which tests point elsewhere
    return _HERE / "sqlite" / "heads.py"


def write() -> list[Path]:
    written = []
    for path, content in targets():
        if not path.exists() or path.read_text() != content:
            path.write_text(content)
            written.append(path)
    if _SHAPES in written:  # the heads catalogue, from the new shapes
        import subprocess
        import sys

        subprocess.run([sys.executable, "-m", "cafleet.db.catalog", "--write"], check=True)
        written.append(_heads_path())
    return written


def check() -> list[Path]:
    found = targets()
    stale = [path for path, content in found if not path.exists() or path.read_text() != content]
    if _SHAPES in stale:
        stale.append(_heads_path())  # built from the shapes: stale with them
    return stale
