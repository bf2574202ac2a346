"""The statement catalog (docs/storage.md §7.11): the checked-in modules match what
`python -m cafleet.db.catalog --write` generates from `cafleet.db.statements`, every statement
prepares against a head database, and the build refuses what the catalog cannot carry."""

from __future__ import annotations

import importlib
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from cafleet.db.catalog.build import DIALECTS, MODULES, compile_statement, render

ROOT = Path(__file__).resolve().parent.parent


def test_check_command_fails_on_a_stale_module(tmp_path: Path, monkeypatch) -> None:
    import functools

    import cafleet.db.catalog.build as build

    # Each check walks the migration chain twice (shapes, heads); the chain does not change
    # here, so one walk of each serves the nine checks and writes below.
    monkeypatch.setattr(build, "recorded_shapes", functools.cache(build.recorded_shapes))
    monkeypatch.setattr(build, "head_catalogues", functools.cache(build.head_catalogues))
    for module in MODULES:  # the names, then one generated package per dialect
        (tmp_path / f"{module}.py").write_text(build.render_names(module))
    for dialect in build.DIALECTS:
        (tmp_path / dialect).mkdir()
        for module in MODULES:
            (tmp_path / dialect / f"{module}.py").write_text(render(module, dialect))
    target = tmp_path / "sqlite"
    heads_path = target / "heads.py"
    heads_path.write_text(build.render_heads())
    (tmp_path / "shapes.py").write_text(build.render_shapes())
    monkeypatch.setattr(build, "_HERE", tmp_path)
    monkeypatch.setattr(build, "_SHAPES", tmp_path / "shapes.py")
    assert build.check() == []
    edited = target / "messages.py"
    edited.write_text(edited.read_text().replace("RETURNING message_id", "RETURNING *", 1))
    assert build.check() == [edited]
    assert build.write() == [edited]
    assert build.check() == []
    names = tmp_path / "members.py"  # a statement's flags are part of its name module
    names.write_text(names.read_text().replace(", needs_savepoint=True", "", 1))
    assert build.check() == [names]
    assert build.write() == [names]
    shapes = tmp_path / "shapes.py"  # the recorded shapes, and the heads built from them
    recorded = shapes.read_text()
    shapes.write_text(recorded.replace('"0007"', '"0099"', 1))
    assert build.check() == [shapes, heads_path]
    shapes.write_text(recorded)
    heads = target / "heads.py"
    heads.write_text(heads.read_text().replace("idx_members_fleet_status", "idx_renamed", 1))
    assert build.check() == [heads]  # the migration chain's catalogue is checked too


NEW_REVISION = '''"""probe_column"""

import sqlalchemy as sa

from alembic import op

revision = "{revision}"
down_revision = "{down_revision}"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("member_placements") as batch:
        batch.add_column(sa.Column("probe", sa.Text, nullable=True))
    op.create_index("idx_placements_probe", "member_placements", ["probe"])


def downgrade() -> None:
    raise NotImplementedError
'''


def test_recorded_shapes_follow_a_new_revision(tmp_path: Path, monkeypatch) -> None:
    """The shapes are generated from the migration chain: a new revision file is all it takes
    (the next `--write` records its shape; the landed ones stay as they were)."""
    import shutil

    import cafleet.db.catalog.build as build
    import cafleet.db.migrate as migrate
    from cafleet.db.shapes import REVISIONS, SHAPES, ColumnShape, IndexShape

    chain = tmp_path / "alembic"
    shutil.copytree(migrate.script_location(), chain)
    new = f"{int(REVISIONS[-1]) + 1:04d}"
    text = NEW_REVISION.replace("{revision}", new).replace("{down_revision}", REVISIONS[-1])
    (chain / "versions" / f"{new}_probe_column.py").write_text(text)
    monkeypatch.setattr(migrate, "script_location", lambda: chain)
    shapes = build.recorded_shapes()
    assert list(shapes) == [*REVISIONS, new]
    assert all(shapes[r] == SHAPES[r] for r in REVISIONS)  # order included
    placements = shapes[new].table("member_placements")
    assert placements is not None and placements.columns[-1] == ColumnShape(
        "probe", "TEXT", False, None, 0
    )
    assert shapes[new].indexes[-1] == IndexShape(
        "idx_placements_probe", "member_placements", ("probe",), False, None
    )
    generated: dict[str, object] = {}
    exec(build.render_shapes(shapes), generated)  # the module it writes holds the same shapes
    assert generated["SHAPES"] == shapes and generated["HEAD_REVISION"] == new


def test_generated_modules_are_current() -> None:
    """`--check` passes: the checked-in modules are what `--write` generates (its stderr names
    each stale one and the command to run)."""
    done = subprocess.run(
        [sys.executable, "-m", "cafleet.db.catalog", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stderr) == (0, "")


@pytest.mark.parametrize("module", MODULES)
def test_every_statement_prepares_against_the_head_schema(bare_head_db: Path, module: str) -> None:
    """EXPLAIN prepares each statement: a wrong column, table or index name fails here."""
    catalog = importlib.import_module(f"cafleet.db.catalog.sqlite.{module}")
    authored = importlib.import_module(f"cafleet.db.statements.{module}").STATEMENTS
    db = sqlite3.connect(bare_head_db)
    try:
        for name in authored:
            sql, names = getattr(catalog, name)
            assert sql.count("?") == len(names), name
            db.execute("EXPLAIN " + sql, [None] * len(names)).fetchall()
    finally:
        db.close()


def test_the_build_refuses_an_anonymous_bound_value() -> None:
    from sqlalchemy import select

    from cafleet.db.schema import members

    with pytest.raises(ValueError, match="use const"):
        compile_statement(
            select(members.c.member_id).where(members.c.status == "active"), DIALECTS["sqlite"]()
        )


def test_sqlite_constructs_render() -> None:
    """INDEXED BY and CROSS JOIN are SQLite's; the catalog's compiler renders them."""
    from sqlalchemy import select

    from cafleet.db.schema import members, messages
    from cafleet.db.statements import const, cross_join, indexed_by, param

    m, x = members.alias("m"), messages.alias("x")
    statement = indexed_by(
        select(x.c.message_id)
        .select_from(cross_join(m, x, x.c.owner_member_id == m.c.member_id))
        .where(m.c.fleet_id == param("fleet_id"), x.c.type == const("unicast")),
        x,
        "idx_messages_pending_notification",
    )
    sql, names = compile_statement(statement, DIALECTS["sqlite"]())
    assert sql == (
        "SELECT x.message_id FROM members AS m CROSS JOIN messages AS x INDEXED BY "
        "idx_messages_pending_notification ON x.owner_member_id = m.member_id "
        "WHERE m.fleet_id = ? AND x.type = 'unicast'"
    )
    assert names == ("fleet_id",)


def test_catalog_modules_import_only_the_standard_library() -> None:
    code = (
        "import sys\n"
        + "".join(f"import cafleet.db.catalog.sqlite.{m}\n" for m in MODULES)
        + "".join(f"import cafleet.db.catalog.{m}\n" for m in MODULES)
        + "import cafleet.db.runtime\n"
        + "print(sorted(m for m in sys.modules if m.split('.')[0] in ('sqlalchemy', 'alembic')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, "[]", "")


RUNTIME_PACKAGES = ("cafleet.broker", "cafleet.monitor", "cafleet.workflows")
RUNTIME_MODULES = (
    "cafleet.delivery.drains",
    "cafleet.workflows.supervision",
    "cafleet.db.guard",
    "cafleet.db.current",
    "cafleet.records",
    "cafleet.web.pool",
)


def test_the_runtime_never_imports_sqlalchemy() -> None:
    """Every repository module, the monitor loop, the workflows (wait and stream included), the
    guard and the WebUI's pool: one execution path, on the standard library's sqlite3."""
    import cafleet

    package_root = Path(cafleet.__file__).parent
    names = list(RUNTIME_MODULES)
    for package in RUNTIME_PACKAGES:
        folder = package_root / package.split(".", 1)[1]
        names += [
            f"{package}.{p.stem}" for p in sorted(folder.glob("*.py")) if p.stem != "__init__"
        ]
    records = [f"cafleet.records.{p.stem}" for p in sorted((package_root / "records").glob("*.py"))]
    code = (
        "import importlib, sys\n"
        f"for name in {names + [r for r in records if not r.endswith('__init__')]!r}:\n"
        "    importlib.import_module(name)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('sqlalchemy', 'alembic')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, "[]", "")
    assert len(names) > 30  # the scan found the modules


# Written with a SQLite-only construct: a PostgreSQL catalog authors them with its own.
SQLITE_ONLY = {("assets", "UPSERT")}


@pytest.mark.parametrize("module", MODULES)
def test_the_statements_compile_for_postgresql(module: str) -> None:
    """The catalog is per dialect: the authored constructs are not SQLite strings, so a second
    dialect's compiler takes them as they are (INDEXED BY and CROSS JOIN are SQLite's alone)."""
    from sqlalchemy.dialects import postgresql

    dialect = postgresql.dialect(paramstyle="named")
    authored = importlib.import_module(f"cafleet.db.statements.{module}").STATEMENTS
    for name, statement in authored.items():
        if (module, name) in SQLITE_ONLY:
            continue
        sql = str(statement.compile(dialect=dialect))
        assert "INDEXED BY" not in sql and "CROSS JOIN" not in sql, (name, sql)
