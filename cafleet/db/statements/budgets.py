"""Statements of `cafleet.broker.budgets` (docs/storage.md §2.14): members' and fleets'
ceilings and a member's pause."""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, insert, null, select, update

from cafleet.db.schema import fleet_budgets, fleets, member_budgets, members
from cafleet.db.statements import param

_MB = member_budgets.c
_FB = fleet_budgets.c

MEMBER = select(members.c.member_id, members.c.fleet_id, members.c.status).where(
    members.c.member_id == param("member_id")
)
FLEET = select(fleets.c.fleet_id, fleets.c.deleted_at).where(fleets.c.fleet_id == param("fleet_id"))
MEMBER_BUDGET = select(*member_budgets.c).where(_MB.member_id == param("member_id"))
INSERT_MEMBER_BUDGET = insert(member_budgets).values(
    member_id=param("member_id"), tokens=param("tokens"), usd_micros=param("usd_micros")
)
SET_MEMBER_BUDGET = (
    update(member_budgets)
    .where(_MB.member_id == param("member_id"))
    .values(tokens=param("tokens"), usd_micros=param("usd_micros"))
)
PAUSE = (
    update(member_budgets)
    .where(_MB.member_id == param("member_id"), _MB.paused_at.is_(None))
    .values(paused_at=param("now"), paused_reason=param("reason"))
)
RESUME = (
    update(member_budgets)
    .where(_MB.member_id == param("member_id"))
    .values(paused_at=null(), paused_reason=null())
)
FLEET_BUDGET = select(*fleet_budgets.c).where(_FB.fleet_id == param("fleet_id"))
INSERT_FLEET_BUDGET = insert(fleet_budgets).values(
    fleet_id=param("fleet_id"), tokens=param("tokens"), usd_micros=param("usd_micros")
)
DELETE_FLEET_BUDGET = delete(fleet_budgets).where(_FB.fleet_id == param("fleet_id"))
# Every budget row of a fleet's members, and the paused ones anywhere.
FLEET_MEMBER_BUDGETS = (
    select(*member_budgets.c)
    .select_from(member_budgets.join(members, members.c.member_id == _MB.member_id))
    .where(members.c.fleet_id == param("fleet_id"))
    .order_by(_MB.member_id)
)
PAUSED = select(_MB.member_id, _MB.paused_reason).where(_MB.paused_at.is_not(None))

STATEMENTS: dict[str, Any] = {
    "MEMBER": MEMBER,
    "FLEET": FLEET,
    "MEMBER_BUDGET": MEMBER_BUDGET,
    "INSERT_MEMBER_BUDGET": INSERT_MEMBER_BUDGET,
    "SET_MEMBER_BUDGET": SET_MEMBER_BUDGET,
    "PAUSE": PAUSE,
    "RESUME": RESUME,
    "FLEET_BUDGET": FLEET_BUDGET,
    "INSERT_FLEET_BUDGET": INSERT_FLEET_BUDGET,
    "DELETE_FLEET_BUDGET": DELETE_FLEET_BUDGET,
    "FLEET_MEMBER_BUDGETS": FLEET_MEMBER_BUDGETS,
    "PAUSED": PAUSED,
}
