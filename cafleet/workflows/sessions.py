"""Each member's own agent session (docs/runtime.md §9): learning its id for a command
(`cafleet.monitor.learning` does the learning, the loop's too), finding it again for `member
respawn --resume`, and the usage its records show.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from cafleet.agents.registry import agent_names, load_agent
from cafleet.broker import session_id
from cafleet.errors import CafleetError
from cafleet.workflows.errors import WorkflowError

if TYPE_CHECKING:
    from cafleet.config import Settings
    from cafleet.db.runtime import Connection
    from cafleet.records import Member
    from cafleet.sessions import SessionRecord
    from cafleet.sessions.usage import MemberUsage


def usable_backend() -> Any:
    """The tmux backend of this process, or None when tmux cannot be reached."""
    from cafleet.mux import MultiplexerError, tmux_backend

    try:
        backend = tmux_backend()
        backend.ensure_available()
    except MultiplexerError:
        return None
    return backend


def learn_quietly(conn: Connection, settings: Settings, member: Member) -> str | None:
    """`learn` for a read-only command: a member that is not active or not placed is only
    looked up, and nothing a record or tmux does makes the command fail."""

    known = session_id(conn, member.member_id)
    if known is not None or not member.is_active or member.placement is None:
        return known
    from cafleet.monitor.learning import learn

    try:
        return learn(conn, settings.db_dir, member, backend=usable_backend())
    except (CafleetError, OSError, ValueError):
        return None


def usage(
    conn: Connection, db_dir: str, members: list[Member], *, learn_missing: bool = True
) -> list[MemberUsage]:
    """Each member's usage (members without a spawn record, the root Director among them, and
    members whose session is not known are `unknown`)."""
    from cafleet.sessions.usage import Subject, read_usage

    backend = usable_backend() if learn_missing else None
    subjects = []
    for member in members:
        # No placement (the root Director): no session either, so any agent's name will do.
        agent = member.placement.coding_agent if member.placement else agent_names()[0]
        sid = session_id(conn, member.member_id)
        if sid is None and learn_missing and backend is not None:
            from cafleet.monitor.learning import learn

            sid = learn(conn, db_dir, member, backend=backend)
        subjects.append(Subject(member.member_id, agent, sid))
    return read_usage(db_dir, subjects)


def resume_record(conn: Connection, settings: Settings, member: Member) -> SessionRecord:
    """The record of the session `member respawn --resume` continues; refuses (nothing spawned)
    when the member has none or its agent no longer has it."""
    from cafleet.sessions import records_of
    from cafleet.sessions.usage import known_record

    sid = session_id(conn, member.member_id)
    agent = member.placement.coding_agent if member.placement else None
    if sid is None or agent is None:
        raise WorkflowError(
            f"member {member.member_id} has no known agent session to resume (none was learned "
            f"from its agent's records); run 'cafleet member respawn {member.member_id}' to "
            "start it afresh"
        )
    record = records_of(agent).locate(os.environ, sid)
    if record is None:
        remembered = known_record(settings.db_dir, member.member_id, sid)
        if remembered is not None:
            # The record was found from the pane's own home: look there again.
            record = _locate_remembered(agent, sid, remembered)
    if record is None:
        raise WorkflowError(
            f"member {member.member_id}'s {agent} session {sid} is no longer in the agent's "
            f"records; run 'cafleet member respawn {member.member_id}' to start it afresh"
        )
    if record.cwd is None or not os.path.isdir(record.cwd):
        raise WorkflowError(
            f"member {member.member_id}'s {agent} session {sid} ran in "
            f"{record.cwd or 'an unknown directory'}, which no longer exists"
        )
    return record


def _locate_remembered(agent: str, sid: str, remembered: SessionRecord) -> SessionRecord | None:
    """Locate ``sid`` where it was recorded: its record file must still exist and hold it."""
    if not os.path.exists(remembered.path):
        return None
    return load_agent(agent).locate_remembered(sid, remembered)
