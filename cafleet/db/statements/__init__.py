"""The repository's statements, authored as SQLAlchemy Core constructs over the Table objects of
`cafleet.db.schema` (docs/storage.md §7.11): one module per repository module, each exposing
`STATEMENTS`, a name → construct mapping.

Nothing at run time imports these modules. `python -m cafleet.db.catalog --write` compiles each
construct for every catalog dialect into `cafleet.db.catalog.<dialect>.<module>` (SQL text and
parameter order), and the repository runs the compiled text on the standard library's `sqlite3`
(`cafleet.db.runtime`). tests/test_catalog.py fails when a generated module is stale.

Conventions: every value a caller supplies is a named `param()`; a constant is `const()`, rendered
literally (a partial index is usable only when a query repeats its predicate's terms literally,
and the build refuses an anonymous bound value, whose value the catalog could not carry).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    FromClause,
    Join,
    Select,
    bindparam,
    case,
    func,
    insert,
    literal_column,
    null,
    select,
    text,
)
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.elements import TextClause
from sqlalchemy.sql.functions import FunctionElement

from cafleet.db import schema as _schema  # not `members`: a submodule of this package has that name
from cafleet.db.predicates import ACTIVE_MONITOR_PREDICATE

SQLITE = "sqlite"
# The execution option behind `Statement.needs_savepoint` (`cafleet.db.connection`).
SAVEPOINT_OPTION = "cafleet_needs_savepoint"


def param(name: str) -> BindParameter[Any]:
    """A named parameter the caller supplies."""
    return bindparam(name)


def const(value: str | int) -> ColumnElement[Any]:
    """A constant rendered into the statement text."""
    if isinstance(value, int):
        return literal_column(str(value))
    return literal_column("'" + value.replace("'", "''") + "'")


def needs_savepoint(statement: Any) -> Any:
    """`statement`, marked as one whose failure its caller reads on after: a dialect whose
    failed statement aborts the transaction runs it under a savepoint."""
    return statement.execution_options(**{SAVEPOINT_OPTION: True})


def predicate(sql: str) -> TextClause:
    """A predicate shared with a partial index (`cafleet.db.predicates`): its text verbatim."""
    return text(sql)


def indexed_by(statement: Select[Any], table: FromClause, index: str) -> Select[Any]:
    """SQLite's `INDEXED BY`: a drift of the index fails loudly at prepare time."""
    return statement.with_hint(table, f"INDEXED BY {index}", dialect_name=SQLITE)


class CrossJoin(Join):
    """`left CROSS JOIN right ON ...`: SQLite keeps the written nesting order for it (the
    catalog's compiler renders it; other dialects read a plain inner join)."""

    inherit_cache = True


def cross_join(left: FromClause, right: FromClause, onclause: ColumnElement[bool]) -> CrossJoin:
    return CrossJoin(left, right, onclause)


class JsonEach(FunctionElement[Any]):
    """`json_each(:ids)`: SQLite's table-valued JSON reader; PostgreSQL reads the array with
    `json_array_elements_text` into a derived table of the same name (docs/storage.md §10.3)."""

    name = "json_each"
    inherit_cache = True


@compiles(JsonEach)
def _json_each(element: JsonEach, compiler: Any, **kw: Any) -> str:
    return f"json_each({compiler.process(element.clauses, **kw)})"


@compiles(JsonEach, "postgresql")
def _json_each_pg(element: JsonEach, compiler: Any, **kw: Any) -> str:
    # A derived table whose `value` column is an integer, as SQLite's is for an id array.
    ids = compiler.process(element.clauses, **kw)
    return (
        "(SELECT CAST(e.value AS BIGINT) AS value "
        f"FROM json_array_elements_text(CAST({ids} AS JSON)) AS e) AS json_each"
    )


def json_ids(name: str) -> Select[Any]:
    """`SELECT value FROM json_each(:name)`: a JSON array of ids as one parameter, so the text
    never changes with their number."""
    return select(literal_column("value")).select_from(JsonEach(param(name)))


MESSAGE_FIELDS = (
    "message_id",
    "owner_member_id",
    "from_member_id",
    "to_member_id",
    "type",
    "created_at",
    "status_state",
    "status_timestamp",
    "origin_message_id",
    "text",
)
PLACEMENT_FIELDS = (
    "member_id",
    "backend",
    "mux_session",
    "mux_window_id",
    "mux_pane_id",
    "coding_agent",
    "created_at",
    "lost_at",
    "mux_socket",
    "host_id",
    "mux_server_pid",
    "mux_server_start",
    "mux_pane_pid",
)


def message_columns(table: FromClause, prefix: str = "") -> list[ColumnElement[Any]]:
    """The public message columns (decoded by `records.message_from_row`)."""
    return [table.c[name].label(prefix + name) for name in MESSAGE_FIELDS]


def placement_columns(table: FromClause, prefix: str = "") -> list[ColumnElement[Any]]:
    return [table.c[name].label(prefix + name) for name in PLACEMENT_FIELDS]


def kind_case(m: FromClause, f: FromClause) -> ColumnElement[Any]:
    """docs/storage.md §2.6's kind CASE."""
    return case(
        (m.c.member_id == f.c.director_member_id, const("director")),
        (~func.json_valid(m.c.member_card_json), const("member")),
        (
            func.json_extract(m.c.member_card_json, const("$.cafleet.kind")) == const("monitor"),
            const("monitor"),
        ),
        else_=const("member"),
    )


def member_columns(m: FromClause, f: FromClause, p: FromClause) -> list[ColumnElement[Any]]:
    """Columns decoded by `records.member_from_row` (placement columns prefixed `p_`)."""
    return [
        m.c.member_id.label("member_id"),
        m.c.fleet_id.label("fleet_id"),
        m.c.name.label("name"),
        m.c.description.label("description"),
        m.c.status.label("status"),
        m.c.registered_at.label("registered_at"),
        m.c.deregistered_at.label("deregistered_at"),
        m.c.member_card_json.label("member_card_json"),
        kind_case(m, f).label("kind"),
        *placement_columns(p, "p_"),
    ]


def member_from(m: FromClause, f: FromClause, p: FromClause) -> Join:
    return m.join(f, f.c.fleet_id == m.c.fleet_id).outerjoin(p, p.c.member_id == m.c.member_id)


def member_aliases() -> tuple[FromClause, FromClause, FromClause]:
    """`members AS m`, `fleets AS f`, `member_placements AS p`, as `member_from` joins them."""
    return (
        _schema.members.alias("m"),
        _schema.fleets.alias("f"),
        _schema.member_placements.alias("p"),
    )


def insert_member() -> Any:
    """An active member (fleets' bootstrap and members' registration, which reads the current
    monitor after a monitor-slot violation, docs/storage.md §7.4)."""
    return needs_savepoint(insert(_schema.members)).values(
        fleet_id=param("fleet_id"),
        name=param("name"),
        description=param("description"),
        status=const("active"),
        registered_at=param("now"),
        deregistered_at=null(),
        member_card_json=param("card"),
    )


def active_monitor_id(fleet_id: ColumnElement[Any]) -> Any:
    """The fleet's active monitor member id, by the partial unique index's predicate."""
    return (
        select(_schema.members.c.member_id)
        .where(_schema.members.c.fleet_id == fleet_id, predicate(ACTIVE_MONITOR_PREDICATE))
        .scalar_subquery()
    )
