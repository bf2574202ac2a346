"""A fleet's rows out and back in (docs/cli.md §2.33): `export_fleet` reads everything a fleet
holds in one read transaction; `import_rows` writes such rows, ids kept, into a database that
has no fleet yet, in one write transaction."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from cafleet.broker.errors import FleetNotFound, ImportRefused
from cafleet.db import tx
from cafleet.db.catalog import transfer as q
from cafleet.db.runtime import Connection

# Record kind -> the tables its lines hold, in export (and import) order.
KINDS: tuple[tuple[str, str], ...] = (
    ("fleet", "FLEETS"),
    ("member", "MEMBERS"),
    ("placement", "MEMBER_PLACEMENTS"),
    ("spawn", "MEMBER_SPAWNS"),
    ("task", "TASKS"),
    ("task_dep", "TASK_DEPS"),
    ("task_event", "TASK_EVENTS"),
    ("message", "MESSAGES"),
    ("notify_channel", "NOTIFY_CHANNELS"),
    ("notify_outbox", "NOTIFY_OUTBOX"),
    ("member_budget", "MEMBER_BUDGETS"),
    ("fleet_budget", "FLEET_BUDGETS"),
)
_TABLE_OF = dict(KINDS)
# A column a line cannot hold under its own name (the line's own "kind") -> its name in the line.
RENAMED = {"kind": "channel_kind"}


def export_fleet(conn: Connection, fleet_id: int) -> list[dict[str, Any]]:
    """Every row of the fleet, a deleted one's too, each as ``{"kind": …, <columns>}``."""
    with tx.read(conn):
        found: list[dict[str, Any]] = []
        for kind, table in KINDS:
            rows = conn.execute(getattr(q, f"EXPORT_{table}"), {"fleet_id": fleet_id}).all()
            if kind == "fleet" and not rows:
                raise FleetNotFound(fleet_id)
            found.extend(
                {"kind": kind, **{RENAMED.get(k, k): r[k] for k in r.keys()}}  # noqa: SIM118 - a row iterates its values
                for r in rows
            )
        return found


def import_rows(conn: Connection, records: Iterable[dict[str, Any]]) -> dict[str, int]:
    """Write exported records into a database without fleets; returns the count per kind."""
    grouped: dict[str, list[dict[str, Any]]] = {kind: [] for kind, _ in KINDS}
    for number, record in enumerate(records, 1):
        kind = record.get("kind")
        if kind not in grouped:
            raise ImportRefused(f"line {number}: unknown kind {kind!r}")
        grouped[str(kind)].append(record)
    with tx.write(conn):
        if conn.execute(q.FLEET_COUNT).scalar():
            raise ImportRefused("the database already holds fleets; import needs an empty one")
        for kind, table in KINDS:
            statement = getattr(q, f"IMPORT_{table}")
            for record in grouped[kind]:
                names = conn.compiled(statement)[1]  # the parameters, in placeholder order
                conn.execute(
                    statement, {name: record.get(RENAMED.get(name, name)) for name in names}
                )
        for fleet in grouped["fleet"]:
            if fleet.get("director_member_id") is not None:
                conn.execute(
                    q.SET_DIRECTOR,
                    {
                        "fleet_id": fleet.get("fleet_id"),
                        "director_member_id": fleet.get("director_member_id"),
                    },
                )
        conn.execute(q.SYNC_SEQUENCES)
    return {kind: len(rows) for kind, rows in grouped.items()}


def records_of(lines: Iterator[str]) -> Iterator[dict[str, Any]]:
    """The JSON objects of an export's lines (blank lines skipped)."""
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as e:
            raise ImportRefused(f"line {number}: not JSON ({e})") from e
        if not isinstance(record, dict):
            raise ImportRefused(f"line {number}: not a JSON object")
        yield record


__all__ = ["KINDS", "export_fleet", "import_rows", "records_of"]
