"""The member commands that touch panes (docs/cli.md §2.7, §2.10–§2.13):
`member create`, `member delete`, `member capture`, `member prompt`, `member ping`.

Each parses, runs one workflow of `cafleet.workflows.members` and renders its result.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

import click

from cafleet.agents.permissions import FULL_WARNING
from cafleet.cli.app import member_group
from cafleet.cli.context import invocation, usage_error
from cafleet.cli.params import (
    PERMISSION_PROFILES,
    agent_choice,
    body_argument,
    budget_tokens,
    budget_usd,
    check_body_choice,
    description_option,
    file_option,
    fleet_id_param,
    id_argument,
    json_option,
    name_option,
    read_body,
    window_option,
)
from cafleet.cli.worktree_params import discard_worktree_option, member_worktree_options
from cafleet.db.timefmt import now_ts
from cafleet.output import cell, err, label_lines, member_dict, out, out_json
from cafleet.workflows import members, placing
from cafleet.workflows import notify as budgets
from cafleet.workflows.answering import answer, choice_problem
from cafleet.workflows.panes import capture_member

if TYPE_CHECKING:
    from cafleet.records import WorktreeSpec
    from cafleet.workflows.members import Created
    from cafleet.workflows.worktrees import Request, Retired

MEMBER_ID_HELP = "Member ID."
LINES_RANGE = click.IntRange(1, 100000)


# --- member create -------------------------------------------------------------------------------


@member_group.command(
    "create",
    short_help="Register a member and spawn its agent in a new pane.",
    help=(
        "Register a member and spawn its coding agent in a new pane: in the root Director's "
        "window while every member pane there stays at least CAFLEET_MIN_PANE_COLUMNS x "
        "CAFLEET_MIN_PANE_ROWS (40x8), else in the fleet's own window of the same session."
    ),
)
@fleet_id_param("The fleet to join", then="prompt")
@name_option("Display name of the member.")
@description_option("One-sentence purpose of the member.")
@click.option(
    "--coding-agent",
    type=agent_choice(),
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
@click.option(
    "--permissions",
    type=click.Choice(PERMISSION_PROFILES),
    default=None,
    help="Permission profile (docs/permissions.md; default: the fleet's, else workspace).",
)
@window_option
@member_worktree_options
@body_argument(
    "prompt",
    help="Spawn prompt (placeholders: {fleet_id}, {member_id}, "
    "{director_member_id}, {coding_agent}); default: the bundled member prompt, which gives the "
    "member its ids and has it load the cafleet skill (with --role monitor: the monitor prompt).",
)
@file_option(help="Read the spawn prompt from PATH ('-' reads stdin).")
@budget_tokens
@budget_usd
@json_option
def member_create(
    fleet_id: int,
    name: str,
    description: str,
    coding_agent: str | None,
    model: str | None,
    effort: str | None,
    role: str | None,
    permissions: str | None,
    window: str | None,
    prompt: str | None,
    file: str | None,
    budget_tokens: int | None,
    budget_usd: float | None,
    as_json: bool,
    worktree: Request | None,
) -> None:
    if prompt is not None and file is not None:
        check_body_choice(prompt, file, "PROMPT")
    budget = None
    if budget_tokens is not None or budget_usd is not None:
        budget = budgets.budget_of(budget_tokens, budget_usd)  # refused before anything spawns
    inv = invocation()
    conn = inv.connection()
    created = members.create(
        conn,
        inv.settings,
        fleet_id=fleet_id,
        name=name,
        description=description,
        coding_agent=coding_agent,
        model=model,
        effort=effort,
        role="monitor" if role == "monitor" else None,
        prompt=None if prompt is None and file is None else lambda: read_body(prompt, file),
        window=placing.window_mode(window),
        worktree=worktree,
        permissions=permissions,
    )
    if budget is not None:
        note = budgets.unpriced_note(model, budget)
        if note is not None:
            err(f"Note: {note}")
        budgets.set_member_budget(conn, created.member.member_id, budget_tokens, budget_usd)
    _print_created(created, as_json)


def _print_created(created: Created, as_json: bool) -> None:
    """`member create`'s warnings on stderr, then its record or its lines (docs/cli.md §2.7)."""
    if created.permissions == "full":
        err(FULL_WARNING)
    if created.host_loop_problem is not None:
        err(f"Warning: {created.host_loop_problem}")
    tree = created.worktree
    if as_json:
        extra: dict[str, object] = {} if tree is None else {"worktree": worktree_dict(tree)}
        if created.finished:
            extra["finished_interrupted_create"] = True
        out_json({**member_dict(created.member), "permissions": created.permissions, **extra})
        return
    out(
        f"{created.member.member_id} {cell(created.member.name)} agent={created.coding_agent} "
        f"pane={created.pane_id}"
    )
    if tree is not None:
        out(f"worktree: {cell(tree.path)} (branch {cell(tree.branch)} from {cell(tree.base)})")
    if created.host_loop_pid is not None:
        # docs/runtime.md §10.4: this host's loop delivers the member's lines.
        out(f"delivery loop for host {cell(created.host_id)}: pid {created.host_loop_pid}")
    if created.finished:
        out("(finished the interrupted 'member create' that registered it)")


def worktree_dict(tree: WorktreeSpec) -> dict[str, str]:
    return {"path": tree.path, "branch": tree.branch, "base": tree.base}


# --- member delete -------------------------------------------------------------------------------


@member_group.command(
    "delete",
    short_help="Deregister a member and kill its pane.",
    help="Deregister a member and kill its pane (the root Director cannot be deleted).",
)
@id_argument("member_id", MEMBER_ID_HELP)
@discard_worktree_option
@json_option
def member_delete(member_id: int, discard_worktree: bool, as_json: bool) -> None:
    inv = invocation()
    conn = inv.connection()
    deleted = members.delete(conn, inv.settings, member_id, discard_worktree=discard_worktree)
    _print_delete(
        member_id,
        deleted.pane_id,
        deleted.pane_status,
        deleted.shared_with,
        as_json,
        deleted.worktree,
    )


def _print_delete(
    member_id: int,
    pane_id: str | None,
    status: str,
    other: int | None,
    as_json: bool,
    tree: Retired | None = None,
) -> None:
    if as_json:
        extra = {} if tree is None else {"worktree": tree.as_dict()}
        out_json({"member_id": member_id, "pane_id": pane_id, "pane_status": status, **extra})
        return
    shown = {
        "killed": f"{pane_id} (killed)",
        "already_gone": f"{pane_id} (already gone)",
        "shared": f"{pane_id} (shared with member {other}; not killed)",
        "pending": "(pending \u2014 no pane)",
        "no_placement": "(no placement)",
        "elsewhere": f"{pane_id} (on another host; not killed)",
        "deregistered": "(already deregistered)",
    }[status]
    out("Member deleted.")
    pairs = [("member_id", str(member_id)), ("pane_id", cell(shown))]
    if tree is not None:
        pairs.append(("worktree", cell(tree.text())))
    for line in label_lines(pairs, 11, indent="  "):
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
    captured = capture_member(conn, member_id, lines=lines, ansi=ansi)
    pane_id, content = captured.pane_id, captured.content
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
    prompted = members.prompt(conn, inv.settings, member_id, text)
    pane_id = prompted.pane_id
    if as_json:
        out_json({"member_id": member_id, "pane_id": pane_id, "text": text})
    else:
        out(f"Sent prompt to member {cell(prompted.member.name)} ({member_id}, pane {pane_id}).")


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
    pinged = members.ping(conn, inv.settings, member_id)
    pane_id = pinged.pane_id
    if as_json:
        out_json(
            {
                "member_id": member_id,
                "pane_id": pane_id,
                "skipped": pinged.skipped,
                "reason": pinged.reason,
                "state": pinged.state,
            }
        )
        return
    name = cell(pinged.member.name)
    if pinged.reason == "pending_placement":
        out(f"Member {name} ({member_id}) has no pane yet (pending placement); ping skipped.")
    elif pinged.reason == "busy":
        out(
            f"Member {name} ({member_id}, pane {pane_id}) is receiving another keystroke; "
            "ping skipped."
        )
    elif pinged.reason == "held":
        out(f"Member {name} ({member_id}, pane {pane_id}) is {pinged.state}; ping skipped.")
    else:
        out(f"Pinged member {name} ({member_id}, pane {pane_id}, {pinged.state}).")


# --- member answer -------------------------------------------------------------------------------


@member_group.command(
    "answer",
    short_help="Answer the permission prompt or question a member's pane shows.",
    help=(
        "Pick one choice of the permission prompt or question a member's pane shows (by its "
        "number or its text), only while that prompt is on screen; waits until the prompt has "
        "gone. Refused, with nothing typed, when the pane shows no prompt, a prompt cafleet "
        "cannot read, another prompt than --prompt names, or no such choice."
    ),
)
@id_argument("member_id", MEMBER_ID_HELP)
@click.argument("choice", help="The choice: its number (1) or its text (Yes).")
@click.option(
    "--prompt",
    "prompt_id",
    default=None,
    metavar="ID",
    help="Answer only this prompt (the id in the monitor loop's report to the Director).",
)
@json_option
def member_answer(member_id: int, choice: str, prompt_id: str | None, as_json: bool) -> None:
    problem = choice_problem(choice)
    if problem is not None:
        usage_error(problem)
    inv = invocation()
    conn = inv.connection()

    done = answer(conn, inv.settings, member_id, choice, prompt_id=prompt_id)
    picked = done.choice
    if as_json:
        out_json(
            {
                "member_id": member_id,
                "pane_id": done.pane_id,
                "prompt": done.prompt.as_dict(),
                "choice": {"number": picked.number, "label": picked.label},
                "next_prompt": None if done.after is None else done.after.as_dict(),
            }
        )
        return
    name = cell(done.member.name)
    out(
        f"Answered prompt {done.prompt.digest} of member {name} ({member_id}, pane "
        f"{done.pane_id}): {picked.number}. {cell(picked.label)}"
    )
    if done.after is not None:
        out(f"It now shows prompt {done.after.digest}: {cell(done.after.question or '(unread)')}")
