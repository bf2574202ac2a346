"""Shared SQL fragments and helpers of the repository (private)."""

from __future__ import annotations

from datetime import datetime

from cafleet.db.timefmt import format_ts, utcnow
from cafleet.records import BACKENDS, CODING_AGENTS


def stamp(now: datetime | None) -> str:
    """The one timestamp a call writes; read right after BEGIN IMMEDIATE (docs/storage.md §7.1)."""
    return format_ts(now if now is not None else utcnow())


def kind_case(m: str = "m", f: str = "f") -> str:
    """docs/storage.md §2.6's kind CASE, for member alias `m` and fleet alias `f`."""
    return (
        f"CASE WHEN {m}.member_id = {f}.director_member_id THEN 'director' "
        f"WHEN NOT json_valid({m}.member_card_json) THEN 'member' "
        f"WHEN json_extract({m}.member_card_json, '$.cafleet.kind') = 'monitor' THEN 'monitor' "
        f"ELSE 'member' END"
    )


def member_columns(m: str = "m", f: str = "f", p: str = "p") -> str:
    """Columns decoded by `records.member_from_row` (placement columns prefixed `p_`)."""
    return (
        f"{m}.member_id AS member_id, {m}.fleet_id AS fleet_id, {m}.name AS name, "
        f"{m}.description AS description, {m}.status AS status, "
        f"{m}.registered_at AS registered_at, {m}.deregistered_at AS deregistered_at, "
        f"{m}.member_card_json AS member_card_json, {kind_case(m, f)} AS kind, "
        f"{p}.member_id AS p_member_id, {p}.backend AS p_backend, "
        f"{p}.mux_session AS p_mux_session, {p}.mux_window_id AS p_mux_window_id, "
        f"{p}.mux_pane_id AS p_mux_pane_id, {p}.coding_agent AS p_coding_agent, "
        f"{p}.created_at AS p_created_at, {p}.lost_at AS p_lost_at"
    )


def member_from(m: str = "m", f: str = "f", p: str = "p") -> str:
    return (
        f"members AS {m} JOIN fleets AS {f} ON {f}.fleet_id = {m}.fleet_id "
        f"LEFT JOIN member_placements AS {p} ON {p}.member_id = {m}.member_id"
    )


MESSAGE_COLUMNS = (
    "message_id, owner_member_id, from_member_id, to_member_id, type, created_at, "
    "status_state, status_timestamp, origin_message_id, text"
)


def message_columns(alias: str, prefix: str = "") -> str:
    """`alias.col AS <prefix>col` for every public message column."""
    names = [c.strip() for c in MESSAGE_COLUMNS.split(",")]
    return ", ".join(f"{alias}.{c} AS {prefix}{c}" for c in names)


def check_backend(backend: str) -> None:
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r} (expected one of: {', '.join(BACKENDS)})")


def check_coding_agent(coding_agent: str) -> None:
    if coding_agent not in CODING_AGENTS:
        raise ValueError(
            f"unknown coding agent {coding_agent!r} (expected one of: {', '.join(CODING_AGENTS)})"
        )
