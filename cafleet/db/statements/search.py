"""Statements of `cafleet.broker.search` (docs/storage.md §2.13): full-text search, one
statement per kind of record.

Each ranks only the 500 newest matches of its kind (`RECENT`), so a word every message holds
costs the same as a rare one, whatever the history's length. Each returns `id`, `fleet_id`, the
indexed text and a `score` where lower is better on both dialects (bm25 on SQLite, minus
`ts_rank` on PostgreSQL). `:query` is the user's words already made literal by the broker: FTS5
phrases on SQLite (`"parser" "fails"`), plain words for `plainto_tsquery` on PostgreSQL.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Select,
    and_,
    cast,
    column,
    func,
    literal_column,
    null,
    or_,
    select,
    table,
)

from cafleet.db.schema import fleets, members, messages, tasks
from cafleet.db.statements import const, cross_join, param

RECENT = 500  # matches of each kind ranked per search, the newest first

# The FTS5 tables of revision 0010 (not in the recorded shape: derived data, §3.13); a task's
# fleet is a column of its index, a message's is its owner's.
search_messages = table("search_messages", column("rowid"), column("body"), column("fleet_id"))
search_tasks = table(
    "search_tasks",
    column("rowid"),
    column("title"),
    column("body"),
    column("result"),
    column("fleet_id"),
)


def _in_scope(fleet_id: ColumnElement[Any]) -> ColumnElement[bool]:
    """The fleet named by `:fleet`, deleted or not; without one, every live fleet."""
    deleted = select(fleets.c.fleet_id).where(fleets.c.deleted_at.is_not(None))
    return or_(
        and_(cast(param("fleet"), BigInteger).is_(None), fleet_id.not_in(deleted)),
        fleet_id == param("fleet"),
    )


def _ranked(recent: Select[Any], newest: ColumnElement[Any] | None = None) -> Select[Any]:
    order = literal_column("id") if newest is None else newest
    sub = recent.order_by(order.desc()).limit(const(RECENT)).subquery("recent")
    return select(*sub.c).order_by(sub.c.score, sub.c.id.desc()).limit(param("limit"))


def _fts(name: str, *weights: str) -> tuple[ColumnElement[Any], ColumnElement[Any]]:
    """SQLite: `<table> MATCH :query` and its bm25 score."""
    ref: ColumnElement[Any] = literal_column(name)
    return ref.op("MATCH")(param("query")), func.bm25(ref, *map(literal_column, weights))


_M_MATCH, _M_SCORE = _fts("search_messages")
# The fleet is the owner's: the index newest first (CROSS JOIN keeps it the outer loop), each
# match's message and member by primary key.
MESSAGES = _ranked(
    select(
        search_messages.c.rowid.label("id"),
        members.c.fleet_id.label("fleet_id"),
        null().label("title"),
        search_messages.c.body.label("body"),
        null().label("result"),
        _M_SCORE.label("score"),
    )
    .select_from(
        cross_join(
            cross_join(search_messages, messages, messages.c.message_id == search_messages.c.rowid),
            members,
            members.c.member_id == messages.c.owner_member_id,
        )
    )
    .where(_M_MATCH, _in_scope(members.c.fleet_id)),
    search_messages.c.rowid,
)
# A title's words count twice a body's or a result's.
_T_MATCH, _T_SCORE = _fts("search_tasks", "2.0", "1.0", "1.0")
TASKS = _ranked(
    select(
        search_tasks.c.rowid.label("id"),
        search_tasks.c.fleet_id.label("fleet_id"),
        search_tasks.c.title.label("title"),
        search_tasks.c.body.label("body"),
        search_tasks.c.result.label("result"),
        _T_SCORE.label("score"),
    ).where(_T_MATCH, _in_scope(search_tasks.c.fleet_id))
)


def _tsvector(text: ColumnElement[Any]) -> ColumnElement[Any]:
    """The GIN index's expression, word for word (PostgreSQL uses an expression index only for
    the same expression)."""
    return func.to_tsvector(const("simple"), text)


def _indexed_message() -> ColumnElement[bool]:
    """A unicast send, or a broadcast's first delivery, as revision 0010's triggers index them
    on SQLite: a broadcast's deliveries share sender, stamp and origin."""
    o = messages.alias("o")
    earlier: Select[Any] = (
        select(literal_column("1"))
        .select_from(o)
        .where(
            o.c.from_member_id == messages.c.from_member_id,
            o.c.created_at == messages.c.created_at,
            o.c.origin_message_id == messages.c.origin_message_id,
            o.c.type == const("unicast"),
            o.c.message_id < messages.c.message_id,
        )
    )
    return and_(
        messages.c.type == const("unicast"),
        or_(messages.c.origin_message_id.is_(None), ~earlier.exists()),
    )


_QUERY = func.plainto_tsquery(const("simple"), param("query"))
_M_VECTOR = _tsvector(messages.c.text)
PG_MESSAGES = _ranked(
    select(
        messages.c.message_id.label("id"),
        members.c.fleet_id.label("fleet_id"),
        null().label("title"),
        messages.c.text.label("body"),
        null().label("result"),
        (-func.ts_rank(_M_VECTOR, _QUERY)).label("score"),
    )
    .select_from(messages.join(members, members.c.member_id == messages.c.owner_member_id))
    .where(
        _M_VECTOR.op("@@")(_QUERY),
        _indexed_message(),
        _in_scope(members.c.fleet_id),
    ),
    # `+ 0`: not the primary key's order, which would lead the planner to walk the table
    # newest first, computing each row's tsvector, instead of reading the GIN index.
    messages.c.message_id + literal_column("0"),
)
_T_VECTOR = _tsvector(
    tasks.c.title
    + literal_column("' '")
    + tasks.c.body
    + literal_column("' '")
    + func.coalesce(tasks.c.result, const(""))
)
PG_TASKS = _ranked(
    select(
        tasks.c.task_id.label("id"),
        tasks.c.fleet_id.label("fleet_id"),
        tasks.c.title.label("title"),
        tasks.c.body.label("body"),
        tasks.c.result.label("result"),
        (-func.ts_rank(_T_VECTOR, _QUERY)).label("score"),
    ).where(_T_VECTOR.op("@@")(_QUERY), _in_scope(tasks.c.fleet_id)),
    tasks.c.task_id + literal_column("0"),
)
FLEET = select(fleets.c.fleet_id, fleets.c.deleted_at).where(fleets.c.fleet_id == param("fleet_id"))

STATEMENTS: dict[str, Any] = {"MESSAGES": MESSAGES, "TASKS": TASKS, "FLEET": FLEET}
DIALECT_STATEMENTS: dict[str, dict[str, Any]] = {
    "postgresql": {"MESSAGES": PG_MESSAGES, "TASKS": PG_TASKS}
}
