"""Budgets and pauses (docs/storage.md §2.14, docs/cli.md §2.36): a member's or a fleet's
ceiling in tokens and micro-dollars, and a member paused when its usage reached one (its lines
wait, stored, until `member resume`)."""

from __future__ import annotations

from datetime import datetime

from cafleet.broker._common import stamp
from cafleet.broker.errors import FleetDeleted, FleetNotFound, MemberNotFound
from cafleet.db import tx
from cafleet.db.catalog import budgets as q
from cafleet.db.runtime import Connection
from cafleet.records import Row
from cafleet.records.notify import Budget, MemberBudget


def _member_budget(row: Row) -> MemberBudget:
    return MemberBudget(
        member_id=row["member_id"],
        budget=Budget(row["tokens"], row["usd_micros"]),
        paused_at=row["paused_at"],
        paused_reason=row["paused_reason"],
    )


def set_member_budget(conn: Connection, *, member_id: int, budget: Budget) -> MemberBudget:
    """Set a member's ceiling (both None: none); its pause is kept."""
    params = {"member_id": member_id, "tokens": budget.tokens, "usd_micros": budget.usd_micros}
    with tx.write(conn):
        if conn.execute(q.MEMBER, {"member_id": member_id}).first() is None:
            raise MemberNotFound(member_id)
        if conn.execute(q.MEMBER_BUDGET, {"member_id": member_id}).first() is None:
            conn.execute(q.INSERT_MEMBER_BUDGET, params)
        else:
            conn.execute(q.SET_MEMBER_BUDGET, params)
        row = conn.execute(q.MEMBER_BUDGET, {"member_id": member_id}).first()
        assert row is not None
        return _member_budget(row)


def member_budget(conn: Connection, member_id: int) -> MemberBudget | None:
    with tx.read(conn):
        row = conn.execute(q.MEMBER_BUDGET, {"member_id": member_id}).first()
        return None if row is None else _member_budget(row)


def fleet_member_budgets(conn: Connection, fleet_id: int) -> list[MemberBudget]:
    with tx.read(conn):
        rows = conn.execute(q.FLEET_MEMBER_BUDGETS, {"fleet_id": fleet_id}).all()
        return [_member_budget(r) for r in rows]


def set_fleet_budget(conn: Connection, *, fleet_id: int, budget: Budget) -> None:
    """Set a fleet's ceiling over all its members (both None: remove it)."""
    with tx.write(conn):
        fleet = conn.execute(q.FLEET, {"fleet_id": fleet_id}).first()
        if fleet is None:
            raise FleetNotFound(fleet_id)
        if fleet["deleted_at"] is not None:
            raise FleetDeleted(fleet_id)
        conn.execute(q.DELETE_FLEET_BUDGET, {"fleet_id": fleet_id})
        if budget.tokens is not None or budget.usd_micros is not None:
            conn.execute(
                q.INSERT_FLEET_BUDGET,
                {"fleet_id": fleet_id, "tokens": budget.tokens, "usd_micros": budget.usd_micros},
            )


def fleet_budget(conn: Connection, fleet_id: int) -> Budget | None:
    with tx.read(conn):
        row = conn.execute(q.FLEET_BUDGET, {"fleet_id": fleet_id}).first()
        return None if row is None else Budget(row["tokens"], row["usd_micros"])


def pause_member(
    conn: Connection, *, member_id: int, reason: str, now: datetime | None = None
) -> bool:
    """Pause a member (True), or nothing when it already is (False)."""
    with tx.write(conn):
        if conn.execute(q.MEMBER_BUDGET, {"member_id": member_id}).first() is None:
            conn.execute(
                q.INSERT_MEMBER_BUDGET, {"member_id": member_id, "tokens": None, "usd_micros": None}
            )
        done = conn.execute(q.PAUSE, {"member_id": member_id, "now": stamp(now), "reason": reason})
        return done.rowcount > 0


def resume_member(conn: Connection, member_id: int) -> None:
    with tx.write(conn):
        if conn.execute(q.MEMBER, {"member_id": member_id}).first() is None:
            raise MemberNotFound(member_id)
        conn.execute(q.RESUME, {"member_id": member_id})


def paused_members(conn: Connection) -> dict[int, str]:
    """Every paused member's id and the reason shown (`budget`)."""
    with tx.read(conn):
        return {r["member_id"]: r["paused_reason"] for r in conn.execute(q.PAUSED).all()}
