"""The member commands that touch panes (cli.md §2.7, §2.10–§2.13):
`member create`, `member delete`, `member capture`, `member prompt`, `member ping`.

libtmux is never imported here; the tmux backend only runs tmux through its timed runner, and
`member delete` of a pending or placementless member never builds a backend at all.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from typing import TYPE_CHECKING, Any

import click

from cafleet.cli.app import member_group
from cafleet.cli.assets_guard import require_assets
from cafleet.cli.context import fail, invocation, lock_busy_message
from cafleet.cli.params import (
    body_argument,
    check_body_choice,
    description_option,
    file_option,
    id_argument,
    id_option,
    json_option,
    name_option,
    read_body,
)
from cafleet.cli.spawn_common import (
    AGENT_CHOICE,
    MSG_KILL_FAILED,
    Cleanup,
    director_pane_key,
    error_text,
    fail_with_cleanup,
    outcome_unknown,
    spawn_env,
    spawn_plan,
    unconfirmed_detail,
    validate_agent_options,
)
from cafleet.output import cell, label_lines, member_dict, out, out_json

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from cafleet.records import Member, Placement

MEMBER_ID_HELP = "Member ID."
PING_LINE = (
    "[cafleet] ping: run cafleet message poll {member_id}, act on and ack what you find, then "
    "resume your work if something was still running."
)
LINES_RANGE = click.IntRange(1, 100000)


# --- shared lookups ------------------------------------------------------------------------------


def _active_member(conn: Connection, member_id: int) -> Member:
    """The member, or `Member <id> not found` for an unknown or deregistered id."""
    from cafleet.broker.errors import MemberNotFound
    from cafleet.broker.members import get_member

    member = get_member(conn, member_id)
    if member.status != "active":
        raise MemberNotFound(member_id)
    return member


def _concrete_placement(member: Member, what: str) -> Placement:
    """The capture/prompt placement checks; `what` ends the pending message."""
    placement = member.placement
    if placement is None:
        fail(
            f"member {member.member_id} has no placement row; it was not spawned via "
            "'cafleet member create'"
        )
    assert placement is not None
    if placement.mux_pane_id is None:
        fail(f"member {member.member_id} has no pane yet (pending placement) \u2014 {what}")
    return placement


def _refuse_director(conn: Connection, member: Member) -> None:
    """cli.md §1.11: never type into the root Director's pane (nor a pane it shares)."""
    refusal = f"cafleet never types into the root Director's pane (member {member.member_id})"
    if member.kind == "director":
        fail(refusal)
    key = member.placement.pane_key if member.placement is not None else None
    if key is not None and key == director_pane_key(conn, member.fleet_id):
        fail(refusal)


def _backend(name: str) -> Any:
    """The placement's backend, available, or `Error: <tmux message>`."""
    from cafleet.mux import MultiplexerError, get_backend

    try:
        backend = get_backend(name)
        backend.ensure_available()
    except MultiplexerError as exc:
        fail(str(exc))
    return backend


def _mux_key(placement: Placement) -> Any:
    from cafleet.mux import PaneKey

    assert placement.mux_pane_id is not None
    return PaneKey(placement.backend, placement.mux_session, placement.mux_pane_id)


def _lock_pane(inv: Any, placement: Placement, member_id: int, purpose: str) -> Any:
    """The placement's pane lock, waited for up to the pane-lock timeout; a timeout is
    `lock_busy_message` (exit 1), an abandoned wait re-checks for a signal and re-raises."""
    from cafleet import signals
    from cafleet.mux.locks import PaneLockAbandoned, PaneLockTimeout, acquire_pane_lock

    signals.check()
    try:
        return acquire_pane_lock(
            inv.db_dir,
            _mux_key(placement),
            timeout=inv.settings.pane_lock_timeout,
            purpose=purpose,
            keep_waiting=signals.keep_waiting,
        )
    except PaneLockAbandoned:
        signals.check()
        raise
    except PaneLockTimeout:
        fail(lock_busy_message(member_id))
        raise AssertionError("unreachable") from None


# --- member create -------------------------------------------------------------------------------


def _spawn_template(prompt: str | None, file: str | None, role: str | None) -> str:
    """PROMPT or `--file`, else the bundled default: the member prompt, or the monitor prompt
    for `--role monitor`."""
    if prompt is not None or file is not None:
        return read_body(prompt, file)
    from cafleet.agents.prompt import load_default_member_prompt, load_default_monitor_prompt

    return load_default_monitor_prompt() if role == "monitor" else load_default_member_prompt()


@member_group.command(
    "create",
    short_help="Register a member and spawn its agent in a new pane.",
    help=(
        "Register a member and spawn its coding agent in a new pane of the root Director's window."
    ),
)
@id_option("--fleet-id", "The fleet to join.")
@name_option("Display name of the member.")
@description_option("One-sentence purpose of the member.")
@click.option(
    "--coding-agent",
    type=AGENT_CHOICE,
    default=None,
    help="Coding agent to run (default: the root Director placement's agent).",
)
@click.option("--model", default=None, help="Model for the agent (agent default).")
@click.option("--effort", default=None, help="Reasoning effort for the agent (agent default).")
@click.option(
    "--role",
    type=click.Choice(["monitor"]),
    default=None,
    help="Register the fleet's monitor member (to replace a dead one).",
)
@body_argument(
    "prompt",
    help="Spawn prompt (placeholders: {fleet_id}, {member_id}, "
    "{director_member_id}, {coding_agent}); default: the bundled member prompt, which gives the "
    "member its ids and has it load the cafleet skill (with --role monitor: the monitor prompt).",
)
@file_option(help="Read the spawn prompt from PATH ('-' reads stdin).")
@json_option
def member_create(
    fleet_id: int,
    name: str,
    description: str,
    coding_agent: str | None,
    model: str | None,
    effort: str | None,
    role: str | None,
    prompt: str | None,
    file: str | None,
    as_json: bool,
) -> None:
    from cafleet import signals

    if prompt is not None and file is not None:
        check_body_choice(prompt, file, "PROMPT")
    # 1. Settings and guard.
    inv = invocation()
    conn = inv.connection()

    from cafleet.broker.errors import (
        FleetDeleted,
        MonitorSlotTaken,
        NoActiveMonitor,
        RootDirectorInactive,
    )
    from cafleet.broker.fleets import get_fleet
    from cafleet.broker.members import get_active_monitor, get_member

    # 2. The fleet and its Director.
    fleet = get_fleet(conn, fleet_id)
    if fleet.deleted_at is not None:
        raise FleetDeleted(fleet_id)
    director = get_member(conn, fleet.director_member_id) if fleet.director_member_id else None
    if director is None or director.status != "active":
        raise RootDirectorInactive(fleet_id, fleet.director_member_id)

    # 3. The monitor slot (re-checked at registration).
    monitor = get_active_monitor(conn, fleet_id=fleet_id)
    if role == "monitor" and monitor is not None:
        raise MonitorSlotTaken(fleet_id, monitor.member_id)
    if role is None and monitor is None:
        raise NoActiveMonitor(fleet_id)

    # 4. The agent.
    director_placement = director.placement
    if coding_agent is None:
        if director_placement is None:
            fail(
                "cannot resolve the member's coding agent: the root Director (member "
                f"{director.member_id}) has no placement; re-run with --coding-agent"
            )
        assert director_placement is not None
        coding_agent = director_placement.coding_agent
    require_assets(conn, agents=[coding_agent])

    # 5. Model, effort, prompt, availability.
    agent = validate_agent_options(
        coding_agent, model=model, effort=effort, model_flag="--model", effort_flag="--effort"
    )
    template = _spawn_template(prompt, file, role)
    plan = spawn_plan(agent, template, model, effort)

    # 6. tmux, and a concrete pane to split from.
    from cafleet.mux import MultiplexerError, tmux_backend

    backend = tmux_backend()
    try:
        backend.ensure_available()
    except MultiplexerError as exc:
        fail(str(exc))
    if director_placement is None or director_placement.mux_pane_id is None:
        fail(f"the root Director of fleet {fleet_id} has no pane to split from")
    assert director_placement is not None

    # Safe point: nothing written yet.
    signals.check()

    # 7. Register with a pending placement.
    from cafleet.broker.members import deregister_member, register_member
    from cafleet.records import PlacementSpec

    try:
        member = register_member(
            conn,
            fleet_id=fleet_id,
            name=name,
            description=description,
            role="monitor" if role == "monitor" else "member",
            placement=PlacementSpec(
                mux_session=director_placement.mux_session,
                mux_window_id=director_placement.mux_window_id,
                coding_agent=coding_agent,
                backend="tmux",
            ),
            require_monitor=True,
        )
    except (MonitorSlotTaken, NoActiveMonitor) as exc:
        fail(str(exc))
    except Exception as exc:
        fail(f"register failed: {error_text(exc)}")
    member_id = member.member_id

    def deregister(cleanup: Cleanup, *, only_if_active: bool = False) -> None:
        def action() -> None:
            if only_if_active:
                current = get_member(conn, member_id)
                if current.status != "active":
                    return
            deregister_member(conn, member_id=member_id)

        cleanup.step(f"member {member_id}", action)

    # Safe point after the commit, before the spawn: deregister.
    if signals.stop_requested():
        cleanup = Cleanup()
        deregister(cleanup)
        fail_with_cleanup(None, cleanup)

    # 8. Render and spawn.
    from cafleet.agents.prompt import render_template

    rendered = render_template(
        plan.template,
        fleet_id=fleet_id,
        member_id=member_id,
        director_member_id=director.member_id,
        coding_agent=coding_agent,
    )
    argv = plan.argv(rendered, display_name=name, monitor=role == "monitor", db_dir=inv.db_dir)
    try:
        pane_id = backend.split_window(
            window_id=director_placement.mux_window_id,
            argv=argv,
            cwd=os.getcwd(),
            env=spawn_env(coding_agent),
        )
    except MultiplexerError as exc:
        cleanup = Cleanup()
        if outcome_unknown(exc):
            cleanup.add(
                f"pane cleanup unconfirmed: {unconfirmed_detail(director_placement.mux_window_id)}"
            )
        deregister(cleanup)
        fail_with_cleanup(str(exc), cleanup)
        raise AssertionError("unreachable") from exc

    def kill_and_deregister(primary: str | None, *, only_if_active: bool = False) -> None:
        cleanup = Cleanup()
        cleanup.step(f"pane {pane_id}", lambda: backend.kill_pane(pane_id, ignore_missing=True))
        deregister(cleanup, only_if_active=only_if_active)
        fail_with_cleanup(primary, cleanup)

    # Safe point after the spawn, before the patch.
    if signals.stop_requested():
        kill_and_deregister(None)

    # 9. Patch the pane id under the new pane's lock.
    from cafleet.broker.errors import PlacementVanished
    from cafleet.broker.members import set_placement_pane
    from cafleet.mux import PaneKey
    from cafleet.mux.locks import PaneLockAbandoned, PaneLockTimeout, acquire_pane_lock

    key = PaneKey("tmux", director_placement.mux_session, pane_id)
    try:
        lock = acquire_pane_lock(
            inv.db_dir,
            key,
            timeout=inv.settings.pane_lock_timeout,
            purpose=f"placement patch member {member_id}",
            keep_waiting=signals.keep_waiting,
        )
    except PaneLockAbandoned:
        kill_and_deregister(None)
        raise AssertionError("unreachable") from None
    except PaneLockTimeout:
        kill_and_deregister(
            f"placement update failed: pane {pane_id} is receiving another keystroke"
        )
        raise AssertionError("unreachable") from None
    try:
        placement = set_placement_pane(conn, member_id=member_id, pane_id=pane_id)
    except PlacementVanished as exc:
        lock.release()
        kill_and_deregister(str(exc), only_if_active=True)
        raise AssertionError("unreachable") from exc
    except Exception as exc:
        lock.release()
        kill_and_deregister(f"placement update failed: {error_text(exc)}")
        raise AssertionError("unreachable") from exc
    lock.release()

    # 10. Print.
    member = dataclasses.replace(member, placement=placement)
    if as_json:
        out_json(member_dict(member))
    else:
        out(f"{member_id} {cell(name)} agent={coding_agent} pane={pane_id}")


# --- member delete -------------------------------------------------------------------------------


def _pane_shared_with(conn: Connection, member: Member) -> int | None:
    """Another active member whose placement names the same pane key, or None."""
    from sqlalchemy import text

    from cafleet.db import tx

    placement = member.placement
    assert placement is not None and placement.mux_pane_id is not None
    with tx.read(conn):
        row = conn.execute(
            text(
                "SELECT p.member_id FROM member_placements AS p "
                "JOIN members AS m ON m.member_id = p.member_id "
                "WHERE p.backend = :backend AND p.mux_session = :session "
                "AND p.mux_pane_id = :pane AND p.member_id <> :member_id "
                "AND m.status = 'active' ORDER BY p.member_id LIMIT 1"
            ),
            {
                "backend": placement.backend,
                "session": placement.mux_session,
                "pane": placement.mux_pane_id,
                "member_id": member.member_id,
            },
        ).first()
    return None if row is None else int(row[0])


@member_group.command(
    "delete",
    short_help="Deregister a member and kill its pane.",
    help="Deregister a member and kill its pane (the root Director cannot be deleted).",
)
@id_argument("member_id", MEMBER_ID_HELP)
@json_option
def member_delete(member_id: int, as_json: bool) -> None:
    from cafleet import signals
    from cafleet.broker.errors import CannotDeregisterRootDirector
    from cafleet.broker.members import deregister_member

    inv = invocation()
    conn = inv.connection()
    member = _active_member(conn, member_id)
    if member.kind == "director":
        raise CannotDeregisterRootDirector(member_id)

    placement = member.placement
    if placement is None or placement.mux_pane_id is None:
        signals.check()
        deregister_member(conn, member_id=member_id)
        status = "no_placement" if placement is None else "pending"
        _print_delete(member_id, None, status, None, as_json)
        return

    pane_id = placement.mux_pane_id
    backend = _backend(placement.backend)
    from cafleet.mux import MultiplexerError

    lock = _lock_pane(inv, placement, member_id, f"member delete {member_id}")
    with lock:
        # Re-read under the lock: the member may have changed while we waited.
        member = _active_member(conn, member_id)
        placement = member.placement
        if placement is None or placement.mux_pane_id != pane_id:
            fail(lock_busy_message(member_id))
        shared = _pane_shared_with(conn, member)
        if shared is not None:
            status, other = "shared", shared
        else:
            try:
                killed = backend.kill_pane(pane_id, ignore_missing=True)
            except MultiplexerError as exc:
                fail(MSG_KILL_FAILED.format(pane_id=pane_id, detail=str(exc)))
                raise AssertionError("unreachable") from exc
            status, other = ("killed" if killed else "already_gone"), None
        deregister_member(conn, member_id=member_id)
    _print_delete(member_id, pane_id, status, other, as_json)


def _print_delete(
    member_id: int, pane_id: str | None, status: str, other: int | None, as_json: bool
) -> None:
    if as_json:
        out_json({"member_id": member_id, "pane_id": pane_id, "pane_status": status})
        return
    shown = {
        "killed": f"{pane_id} (killed)",
        "already_gone": f"{pane_id} (already gone)",
        "shared": f"{pane_id} (shared with member {other}; not killed)",
        "pending": "(pending \u2014 no pane)",
        "no_placement": "(no placement)",
    }[status]
    out("Member deleted.")
    for line in label_lines(
        [("member_id", str(member_id)), ("pane_id", cell(shown))], 11, indent="  "
    ):
        out(line)


# --- member capture ------------------------------------------------------------------------------


@member_group.command("capture", help="Print the last lines of a member's pane.")
@id_argument("member_id", MEMBER_ID_HELP)
@click.option(
    "--lines",
    type=LINES_RANGE,
    default=20,
    show_default=True,
    help="How many lines to capture (1-100000).",
)
@click.option("--ansi", is_flag=True, help="Keep ANSI escape sequences.")
@json_option
def member_capture(member_id: int, lines: int, ansi: bool, as_json: bool) -> None:
    inv = invocation()
    conn = inv.connection()
    member = _active_member(conn, member_id)
    placement = _concrete_placement(member, "nothing to capture")
    pane_id = placement.mux_pane_id
    assert pane_id is not None
    backend = _backend(placement.backend)
    from cafleet.db.timefmt import now_ts
    from cafleet.mux import MultiplexerError

    try:
        content = backend.capture(pane_id, lines, ansi=ansi)
    except MultiplexerError as exc:
        fail(f"capture failed: {exc}")
    if as_json:
        out_json(
            {
                "member_id": member_id,
                "pane_id": pane_id,
                "lines": lines,
                "content": content,
                "captured_at": now_ts(),
                "content_sha256": hashlib.sha256(
                    content.encode("utf-8", "surrogatepass")
                ).hexdigest(),
            }
        )
    else:
        out(content)


# --- member prompt -------------------------------------------------------------------------------


def _prompt_text_callback(ctx: click.Context, _param: click.Parameter, value: Any) -> Any:
    if value is None:
        return value

    def bad(message: str) -> Any:
        raise click.UsageError(message, ctx)

    if "\n" in value or "\r" in value:
        bad("text may not contain newlines")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        bad("text is not valid UTF-8")
    if any(ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F for ch in value):
        bad("text may not contain control characters")
    if value.strip() == "":
        bad("text may not be empty")
    return value.strip()


def _type_checked(backend: Any, pane_id: str, line: str) -> None:
    """Probe, then type; failures read `typing into pane <pane_id> failed: <detail>`."""
    from cafleet.mux import MultiplexerError, probe_for_typing

    problem = probe_for_typing(backend, pane_id)
    if problem is not None:
        fail(f"typing into pane {pane_id} failed: {problem}")
    try:
        backend.type_line(pane_id, line)
    except MultiplexerError as exc:
        fail(f"typing into pane {pane_id} failed: {exc}")


@member_group.command(
    "prompt",
    short_help="Type one line into a member's pane.",
    help="Type one line into a member's pane as a user turn (not a message).",
)
@id_argument("member_id", MEMBER_ID_HELP)
@click.argument(
    "text",
    callback=_prompt_text_callback,
    help="The line to type (one line, no control characters).",
)
@json_option
def member_prompt(member_id: int, text: str, as_json: bool) -> None:
    inv = invocation()
    conn = inv.connection()
    require_assets(conn, member_id=member_id)
    member = _active_member(conn, member_id)
    placement = _concrete_placement(member, "nothing to prompt")
    _refuse_director(conn, member)
    pane_id = placement.mux_pane_id
    assert pane_id is not None
    backend = _backend(placement.backend)
    lock = _lock_pane(inv, placement, member_id, f"prompt member {member_id}")
    with lock:
        _type_checked(backend, pane_id, text)
    if as_json:
        out_json({"member_id": member_id, "pane_id": pane_id, "text": text})
    else:
        out(f"Sent prompt to member {cell(member.name)} ({member_id}, pane {pane_id}).")


# --- member ping ---------------------------------------------------------------------------------


@member_group.command(
    "ping",
    short_help="Make a member check its inbox.",
    help="Make a member check its inbox by typing a fixed line into its pane.",
)
@id_argument("member_id", MEMBER_ID_HELP)
@json_option
def member_ping(member_id: int, as_json: bool) -> None:
    inv = invocation()
    conn = inv.connection()
    require_assets(conn, member_id=member_id)
    member = _active_member(conn, member_id)
    placement = member.placement
    if placement is None:
        fail(
            f"member {member_id} has no placement row; it was not spawned via "
            "'cafleet member create'"
        )
    assert placement is not None
    _refuse_director(conn, member)
    name = cell(member.name)
    if placement.mux_pane_id is None:
        if as_json:
            out_json(
                {
                    "member_id": member_id,
                    "pane_id": None,
                    "skipped": True,
                    "reason": "pending_placement",
                }
            )
        else:
            out(f"Member {name} ({member_id}) has no pane yet (pending placement); ping skipped.")
        return
    pane_id = placement.mux_pane_id
    backend = _backend(placement.backend)
    from cafleet.mux.locks import try_pane_lock

    lock = try_pane_lock(inv.db_dir, _mux_key(placement), purpose=f"ping member {member_id}")
    if lock is None:
        if as_json:
            out_json(
                {"member_id": member_id, "pane_id": pane_id, "skipped": True, "reason": "busy"}
            )
        else:
            out(
                f"Member {name} ({member_id}, pane {pane_id}) is receiving another keystroke; "
                "ping skipped."
            )
        return
    with lock:
        _type_checked(backend, pane_id, PING_LINE.format(member_id=member_id))
    if as_json:
        out_json({"member_id": member_id, "pane_id": pane_id, "skipped": False, "reason": None})
    else:
        out(f"Pinged member {name} ({member_id}, pane {pane_id}).")
