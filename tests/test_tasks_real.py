"""Tasks carried by real agents through a restart (docs/cli.md §2.32, §2.27).

A real Claude Code Director, driven by the scripted model (tests/harness/scripted_model.py),
creates a fleet of an opencode, a Codex and a Claude Code member and three tasks, each after
the previous one (the first assigned once all exist), then ends its turn and is never asked
again. Each member gets its task's assignment when it becomes ready, claims it, writes a file,
runs a command, reports with `message send --task`, ACKs and marks it done with a result. Half way (the first task done, the
second released) the tmux server dies with every agent in it, the Director's included, and
`fleet restore` brings the members back, each continuing its own session, in a new server whose
Director pane holds no agent at all: the second and third tasks still go out and are done, and
the board ends all done.

So that the kill falls between the release and the delivery (never into a member's work, which
a restore does not resume), the test holds the second member's pane-input lock from before the
first task is done until the server is gone, as a keystroke into that pane would: the released
line waits in the database, and the restore must carry it. Judged by each agent's own record,
what the model server was asked and answered, the database's times and the board.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest

from cafleet.config import db_dir_of
from cafleet.mux.locks import PaneLock, try_pane_lock
from cafleet.records import PaneKey
from tests.fleet_helpers import log_lines, log_path, new_server, ok
from tests.harness.fixtures import TmuxHarness
from tests.harness.real_agents import require_binary
from tests.harness.real_fleet import RealFleet, plan_text
from tests.harness.real_member import arrivals
from tests.harness.scripted_model import ScriptedModel, scripted_model
from tests.harness.util import retry_until

pytestmark = [pytest.mark.real_agent, pytest.mark.tmux]
# In the order of their tasks, each after the previous one's. opencode, the slowest to start
# and to resume, goes first: its start overlaps the others' and its resume ends no wait.
MEMBERS = (("gamma", "opencode"), ("beta", "codex"), ("alpha", "claude"))
FIRST, SECOND, THIRD = (name for name, _ in MEMBERS)
WORK = tuple(
    (name, after, f"write {name}.txt: written by {name} ; run: echo {name}-ran > {name}-ran.txt")
    for (name, _), after in zip(MEMBERS, ("", FIRST, SECOND), strict=True)
)
CREATED = "Created 3 tasks."


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    with scripted_model() as m:
        yield m


def _epoch(ts: str) -> float:
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


def _tasks(h: TmuxHarness) -> list[tuple[Any, ...]]:
    return h.sqlite("SELECT task_id, state, assignee_member_id FROM tasks ORDER BY task_id")


def _states(h: TmuxHarness) -> list[str]:
    return [r[1] for r in _tasks(h)]


def _lines(h: TmuxHarness, task_id: int) -> list[tuple[Any, ...]]:
    """The messages filed under a task: id, from, to, text, created, notified, status."""
    return h.sqlite(
        "SELECT message_id, from_member_id, to_member_id, text, created_at, notified_at, "
        "status_state FROM messages WHERE task_id = ? ORDER BY message_id",
        task_id,
    )


def _hold_pane(h: TmuxHarness, member_id: int) -> PaneLock:
    """The member's pane-input lock, taken as any typing path takes it (retried while a
    delivery or the create's patch holds it)."""
    backend, session, pane = h.sqlite(
        "SELECT backend, mux_session, mux_pane_id FROM member_placements WHERE member_id = ?",
        member_id,
    )[0]
    db_dir = db_dir_of(str(h.db_path))
    key = PaneKey(backend, session, pane)
    lock: PaneLock = retry_until(
        lambda: try_pane_lock(db_dir, key, purpose="test: hold"),
        timeout=30,
        message=f"pane {pane}'s lock never free",
    )
    return lock


def test_real_agents_carry_dependent_tasks_through_a_restore(
    tmux_db: TmuxHarness, model: ScriptedModel
) -> None:
    for agent in ("claude", "codex", "opencode"):
        require_binary(agent)
    h = tmux_db
    fleet = RealFleet(h, model, MEMBERS)
    held: PaneLock | None = None
    try:
        fleet.start(plan_text("tasks", MEMBERS, [], work=WORK))
        # The Director creates the three tasks and ends its turn.
        retry_until(lambda: len(_tasks(h)) == 3, timeout=300, interval=1.0,
                    message=lambda: _diagnosis(h, model))  # fmt: skip
        fleet_id, director_id = h.sqlite("SELECT fleet_id, director_member_id FROM fleets")[0]
        ids = dict(h.sqlite("SELECT name, member_id FROM members WHERE fleet_id = ?", fleet_id))
        t1, t2, t3 = (r[0] for r in _tasks(h))
        held = _hold_pane(h, ids[SECOND])
        assert _states(h)[0] != "done", "the first task was done before the second's pane was held"
        retry_until(lambda: _states(h)[0] == "done", timeout=300, interval=0.5,
                    message=lambda: _diagnosis(h, model))  # fmt: skip

        # Half way: the first task done released the second (its line stored, not yet typed:
        # its member's pane is held); the third still waits.
        assert _states(h) == ["done", "ready", "waiting"]
        released = _lines(h, t2)
        assert len(released) == 1 and released[0][2] == ids[SECOND], released
        assert released[0][5] is None  # notified_at: not typed
        assert _lines(h, t3) == []
        # Every member's own session is known (each has run its first turn), so the restore
        # continues each one; the line and the waiting task stay as they are meanwhile.
        sessions = retry_until(
            lambda: _sessions(h, ids), timeout=300, interval=2.0,
            message=lambda: _diagnosis(h, model),
        )  # fmt: skip
        assert _states(h) == ["done", "ready", "waiting"]
        assert [r[5] for r in _lines(h, t2)] == [None] and _lines(h, t3) == []
        h.tmux("kill-server", check=False)
        held.release()
        held = None
        killed_at = datetime.now().timestamp()

        # Restore from a pane of a new server in the fleet's project, as a user would after a
        # reboot: no agent in it (the Director is gone for good).
        pane, here = new_server(h, fleet.project)
        restored = ok(
            h.cli("fleet", "restore", str(fleet_id), timeout=300, cwd=fleet.project,
                  env={**here, "PATH": os.pathsep.join([str(fleet.bin_dir), h.env["PATH"]])})
        )  # fmt: skip
        lines = restored.stdout.splitlines()
        print("fleet restore:", *lines, sep="\n  ")
        assert lines[0].startswith(f"Director: pane {pane} (adopted"), lines
        for name, _ in MEMBERS:
            mine = [line for line in lines if line.startswith(f"member {ids[name]} (")]
            resumed = f"resumed session {sessions[name]} in pane %"
            assert len(mine) == 1 and resumed in mine[0], lines
            shown = json.loads(ok(h.cli("member", "show", str(ids[name]), "--json")).stdout)
            fleet.members[name].pane = fleet.members[name].real.pane = shown["placement"][
                "mux_pane_id"
            ]
        retry_until(lambda: _states(h) == ["done"] * 3, timeout=400, interval=1.0,
                    message=lambda: _diagnosis(h, model))  # fmt: skip

        # The board, as a fresh reader sees it: every task done, in order, with its result.
        board = json.loads(ok(h.cli("task", "list", "--fleet-id", str(fleet_id), "--json")).stdout)
        assert [t["task_id"] for t in board] == [t1, t2, t3]
        assert [t["state"] for t in board] == ["done"] * 3
        assert [t["assignee_member_id"] for t in board] == [ids[n] for n, _ in MEMBERS]
        assert [t["after"] for t in board] == [[], [t1], [t2]]
        # The work, in the project all three share.
        project = fleet.project
        for name, _ in MEMBERS:
            assert (project / f"{name}.txt").read_text() == f"written by {name}"
            assert (project / f"{name}-ran.txt").read_text() == f"{name}-ran\n"

        times = {t["task_id"]: (_epoch(t["started_at"]), _epoch(t["finished_at"])) for t in board}
        for (name, _), task, before in zip(MEMBERS, (t1, t2, t3), (None, t1, t2), strict=True):
            member = ids[name]
            # Each task's thread, as `task show` gives it to a reader with no context.
            shown = json.loads(ok(h.cli("task", "show", str(task), "--json")).stdout)
            assignment, *rest = thread = shown["thread"]
            # One assignment, from the Director to the member, stored when the task became
            # ready: never before the task it comes after was done; then ACKed.
            assert (assignment["from_member_id"], assignment["to_member_id"]) == (
                director_id,
                member,
            ), thread
            assert assignment["text"].startswith(f"[cafleet] task {task} is ready for you: ")
            assert assignment["status"] == "completed", thread
            if before is not None:
                assert _epoch(assignment["created_at"]) >= times[before][1], (thread, times)
                assert times[task][0] > times[before][1], times
            # The member's report under the task, and cafleet's notice to the Director.
            report = (
                f"done {assignment['message_id']}: wrote {name}.txt; "
                f"ran echo {name}-ran > {name}-ran.txt"
            )
            replies = [
                (m["to_member_id"], m["text"]) for m in rest if m["from_member_id"] == member
            ]
            assert replies == [(director_id, report)], thread
            notices = [
                m["text"]
                for m in rest
                if m["to_member_id"] == director_id and m["from_member_id"] != member
            ]
            assert notices == [
                f"[cafleet] task {task} (work for {name}) is done by member {member}: {report}"
            ], thread
            assert shown["task"]["result"] == report

            # The member's own record: the assignment's line arrived once, and, for a task
            # after another, only after that one was done.
            real = fleet.members[name]
            frame = f"[cafleet msg {assignment['message_id']} from Director ({director_id})]"
            records = arrivals(real)
            got = [(t, w, q) for t, w, q in records if t.startswith(frame)]
            # Claude Code records a line typed while it works twice (queued, then as the
            # turn's message): counted apart, as arrived_count does.
            assert max(sum(q for *_, q in got), sum(not q for *_, q in got)) == 1, (name, records)
            first = min(w for _, w, _ in got if w is not None)
            if before is not None:
                assert first >= times[before][1], (name, first, times)
            # What the model was asked: the member claimed its task after the one before was
            # done (the `task done` of the previous member was answered first).
            claim = _answered_at(model, name, f"cafleet task claim {task} ")
            if before is not None:
                prev = MEMBERS[(t1, t2, t3).index(before)][0]
                assert claim > _answered_at(model, prev, f"cafleet task done {before} ")

        # The second task's line went out after the restore: the kill fell between release
        # and delivery.
        second = _lines(h, t2)[0]
        assert _epoch(second[5]) > killed_at, second
        # The Director's part ended with laying the tasks out: it ran nothing but the fleet's
        # and the tasks' creation (no wait, no message), then ended its turn.
        director = [r for r in model.client_requests("director") if r.body.get("tools")]
        assert director[-1].action is not None and director[-1].action.text == CREATED
        ran = [" ".join(c.split()[:3]) for c in model.commands("director")]
        assert ran == ["cafleet fleet create", *["cafleet member create"] * 3,
                       *["cafleet task create"] * 3, "cafleet task assign"], ran  # fmt: skip
        assert any("FLEET PLAN" in t for t in fleet.director.received())
    finally:
        if held is not None:
            held.release()
        keep = os.environ.get("CAFLEET_KEEP_MODEL_LOG")  # a path: keep the request log there
        if keep:
            model.dump(keep)
        fleet.stop()


def _sessions(h: TmuxHarness, ids: dict[str, int]) -> dict[str, str] | None:
    """Each member's agent session id (`member show` learns it), or None while one is not
    known."""
    found = {}
    for name, _ in MEMBERS:
        shown = json.loads(ok(h.cli("member", "show", str(ids[name]), "--json")).stdout)
        if not shown.get("agent_session_id"):
            return None
        found[name] = str(shown["agent_session_id"])
    return found


def _answered_at(model: ScriptedModel, client: str, command: str) -> float:
    """When the model answered ``client`` with the shell command starting ``command``."""
    times = [
        r.at
        for r in model.client_requests(client)
        if r.action is not None
        and r.action.kind == "shell"
        and r.action.command.startswith(command)
    ]
    assert times, (client, command, model.commands(client))
    return min(times)


def _diagnosis(h: TmuxHarness, model: ScriptedModel) -> str:
    parts = [f"tasks: {_tasks(h)}"]
    parts.append(
        "messages: "
        + repr(h.sqlite("SELECT message_id, from_member_id, to_member_id, task_id, "
                        "notified_at, status_state, substr(text, 1, 80) FROM messages"))
    )  # fmt: skip
    for label in ("director", *(name for name, _ in MEMBERS)):
        parts.append(f"{label} commands: " + " | ".join(model.commands(label)[-8:]))
    for (fleet_id,) in h.sqlite("SELECT fleet_id FROM fleets"):
        parts.append("loop log:\n" + "\n".join(log_lines(log_path(h, fleet_id))[-20:]))
    try:
        for pane in h.tmux("list-panes", "-a", "-F", "#{pane_id}").split():
            parts.append(f"--- {pane}:\n" + h.tmux("capture-pane", "-p", "-t", pane)[-1500:])
    except AssertionError as exc:
        parts.append(str(exc))
    return "\n".join(parts)
