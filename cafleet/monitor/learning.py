"""Learning each member's own agent session id (docs/runtime.md §9.4).

Learning is lazy: the monitor loop tries each tick (`learn_fleet`) for the fleet's members whose
id is not known yet, and `member show` / `member usage` try for the member they show. The id is
the newest session of the member's agent that was created after the member's pane was placed,
in the pane's home and working directory (its process's environment and directory), whose first
user message is the member's rendered spawn prompt and that no other member holds.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from cafleet.broker import fleet_sessions, session_id, session_owner, set_session_id
from cafleet.db.timefmt import parse_ts, utcnow

if TYPE_CHECKING:
    from cafleet.db.runtime import Connection
    from cafleet.records import Member

# The monitor loop looks for unlearned sessions at most this often (seconds), and only for
# panes placed within the last LEARN_WINDOW seconds: an agent records its session as soon as it
# takes its spawn prompt, so a pane that shows none after that never will by itself (`member
# show` and `member usage` still look), and a fleet of such panes costs the loop nothing.
LEARN_EVERY = 10.0
LEARN_WINDOW = 900.0

# Seconds a session may appear to start before its placement row was written (the two clocks
# are the same machine's, but the record's time may be rounded).
SLACK = 2.0


def rendered_prompt(conn: Connection, member: Member) -> str | None:
    """The spawn prompt the member's agent got, as typed; None without a spawn record."""
    from cafleet import broker
    from cafleet.agents.prompt import render_template

    spec = broker.get_spawn(conn, member.member_id)
    if spec is None or member.placement is None:
        return None
    template = spec.prompt
    if template is None:
        from cafleet.agents.prompt import load_default_member_prompt, load_default_monitor_prompt

        monitor = member.kind == "monitor"
        template = load_default_monitor_prompt() if monitor else load_default_member_prompt()
    fleet = broker.get_fleet(conn, member.fleet_id)
    if fleet.director_member_id is None:
        return None
    return render_template(
        template,
        fleet_id=fleet.fleet_id,
        member_id=member.member_id,
        director_member_id=fleet.director_member_id,
        coding_agent=member.placement.coding_agent,
    )


def _pane_pid(backend: Any, member: Member, pids: Mapping[str, int] | None) -> int | None:
    from cafleet.mux import MultiplexerError, same_server

    placement = member.placement
    if placement is None or placement.mux_pane_id is None or backend is None:
        return None
    if not same_server(getattr(backend, "socket_path", None), placement.mux_socket):
        return None
    from cafleet.hosts import current_host

    if placement.host_id is not None and placement.host_id != current_host():
        return None  # another host's pane: the same socket path names another server there
    if pids is None:
        try:
            pids = backend.pane_pids()
        except MultiplexerError:
            return None
    pid = pids.get(placement.mux_pane_id)
    if placement.mux_pane_pid is not None and pid != placement.mux_pane_pid:
        return None  # another process has the pane id now (docs/runtime.md §1.8)
    return pid


def learn(
    conn: Connection,
    db_dir: str,
    member: Member,
    *,
    backend: Any = None,
    pids: Mapping[str, int] | None = None,
) -> str | None:
    """The member's session id: the stored one, or one learned now (None: not found yet)."""
    from cafleet.sessions import records_of
    from cafleet.sessions.proc import pane_home
    from cafleet.sessions.usage import remember_session

    known = session_id(conn, member.member_id)
    placement = member.placement
    if known is not None or placement is None or placement.mux_pane_id is None:
        return known
    if placement.lost_at is not None or not member.is_active:
        return None
    prompt = rendered_prompt(conn, member)
    placed = parse_ts(placement.created_at)
    if prompt is None or placed is None:
        return None
    pid = _pane_pid(backend, member, pids)
    if pid is None and backend is not None:
        return None  # the pane is not running here: nothing it created can be told apart
    env, cwd = pane_home(pid, os.environ)
    reader = records_of(placement.coding_agent)
    candidates = reader.find(env, since=placed.timestamp() - SLACK, cwd=cwd, prompt=prompt)
    for record in sorted(candidates, key=lambda r: r.created, reverse=True):
        owner = session_owner(conn, record.session_id)
        if owner is not None and owner != member.member_id:
            continue  # another member's session: never crossed
        if set_session_id(conn, member.member_id, record.session_id):
            remember_session(db_dir, member.member_id, placement.coding_agent, record)
            return record.session_id
        return session_id(conn, member.member_id)
    return None


def learn_fleet(conn: Connection, db_dir: str, fleet_id: int, backend: Any) -> list[str]:
    """One monitor tick's learning: for each active placed member of the fleet without a
    session id. Returns `member <id>: session <sid>` for each id learned."""
    from cafleet import broker

    sessions = fleet_sessions(conn, fleet_id)
    wanted = {m for m, sid in sessions.items() if sid is None}
    if not wanted:
        return []
    now = utcnow().timestamp()
    candidates = []
    for member in broker.placed_members(conn, fleet_id):
        if member.member_id not in wanted or member.kind == "director":
            continue
        placed = parse_ts(member.placement.created_at if member.placement else None)
        if placed is not None and now - placed.timestamp() <= LEARN_WINDOW:
            candidates.append(member)
    if not candidates:
        return []
    pids = backend.pane_pids()
    learned = []
    for member in candidates:
        placement = member.placement
        if placement is None or placement.mux_pane_id not in pids:
            continue
        sid = learn(conn, db_dir, member, backend=backend, pids=pids)
        if sid is not None:
            learned.append(f"member {member.member_id}: session {sid}")
    return learned
