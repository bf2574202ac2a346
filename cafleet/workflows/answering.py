"""`member answer MEMBER_ID CHOICE [--prompt ID]` (docs/cli.md §2.26, docs/runtime.md §5.12):
pick one choice of the permission prompt or question a member's pane shows.

Under the member's pane-input lock: the pane must be the placement's, show a prompt the reader
can take apart (`cafleet.delivery.screens.prompts`), be the prompt named by ``--prompt`` when given
(the id the Director's report carries: a newer prompt is never answered by an old report) and
offer ``CHOICE`` (its number or its words). Only then are the choice's keys pressed; the answer
counts once the prompt has left the screen. A choice the agent asks to confirm in a second
dialog (opencode's "Allow always") is confirmed in the same call, under the same lock. Every
refusal types nothing. The CLI and the WebUI both run `answer`; the WebUI reads the prompt it
offers as buttons with `showing`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from cafleet.delivery.screens import classify
from cafleet.delivery.screens.prompts import CHOICE_NUMBER, read_prompt
from cafleet.delivery.submit import Clock
from cafleet.mux import (
    MSG_NOT_OURS,
    MultiplexerError,
    OwnedPane,
    owner_of,
    owner_problem,
    probe_for_typing,
)
from cafleet.text import sanitize_single_line, truncate
from cafleet.workflows.errors import PaneUnavailable, WorkflowError
from cafleet.workflows.members import _lock_pane, _refuse_director
from cafleet.workflows.panes import active_member, backend_for, concrete_placement, refuse_elsewhere
from cafleet.workflows.spawning import WorkflowUsageError

if TYPE_CHECKING:
    from cafleet.config import Settings
    from cafleet.db.runtime import Connection
    from cafleet.delivery.screens.prompts import Choice, Prompt
    from cafleet.delivery.submit import Clock
    from cafleet.mux import Multiplexer
    from cafleet.records import Member

VERIFY_SECONDS = 10.0  # how long the prompt may take to leave the screen after the keys
VERIFY_STEP = 0.1
KEY_SETTLE = 0.05  # between two keys of one choice (opencode: Right, Enter)
CONFIRM_SECONDS = 2.0  # how long a choice's confirmation dialog may take to appear


CHOICE_LIMIT = 200  # characters of a choice's words (the longest label is far shorter)
_CHOICE_SHOWN = 40  # characters of a refused choice echoed in the refusal


class AnswerRefused(WorkflowError):
    """A refused answer: nothing was typed."""


def choice_problem(wanted: str) -> str | None:
    """Why ``wanted`` cannot name a choice (None: it can): control characters, nothing but
    spaces, a number not written as `1`, `2`, … in ASCII digits (`01`, `١`, `²` would otherwise
    read as choice 1, or fail in Python's own words), or more than `CHOICE_LIMIT` characters.
    Checked before anything is read or typed; the CLI's exit 2, the WebUI's 400."""
    import unicodedata

    shown = truncate(sanitize_single_line(wanted), _CHOICE_SHOWN)
    text = " ".join(wanted.split())
    if any(unicodedata.category(ch) in ("Cc", "Cs") for ch in wanted):
        return f"choice '{shown}' contains control characters; give a choice's number or its words"
    if not text:
        return "choice is empty; give a choice's number (1, 2, …) or its words"
    numeric = all(unicodedata.category(ch).startswith("N") for ch in text.replace(" ", ""))
    if numeric and not CHOICE_NUMBER.fullmatch(text):
        return (
            f"choice '{shown}' is not a choice number: write it in the digits 0-9 without a "
            "leading zero (1, 2, …)"
        )
    if len(text) > CHOICE_LIMIT:
        return f"choice is longer than {CHOICE_LIMIT} characters"
    return None


@dataclass(frozen=True, slots=True)
class Answered:
    member: Member
    pane_id: str
    prompt: Prompt  # the prompt answered
    choice: Choice
    after: Prompt | None  # the next prompt, when the agent showed another one at once


@dataclass(frozen=True, slots=True)
class Showing:
    """What a member's pane asks now: its state and its prompt (None: no prompt)."""

    member_id: int
    pane_id: str
    state: str
    prompt: Prompt | None


def showing(conn: Connection, member_id: int) -> Showing:
    """The prompt the member's pane shows (no lock: a read). Refusals as `member capture`'s
    (`cafleet.workflows.panes.capture_member`): unknown or deregistered member, no or a pending
    placement, tmux unusable, a pane that is not the placement's, a failed capture."""
    member = active_member(conn, member_id)
    placement = concrete_placement(member, "nothing to read")
    refuse_elsewhere(conn, member)
    pane_id = placement.mux_pane_id
    assert pane_id is not None
    mux = backend_for(placement.backend, placement.mux_socket)  # any shell reaches it
    not_ours = owner_problem(mux, pane_id, owner_of(placement))
    if not_ours is not None:
        raise PaneUnavailable(not_ours)
    try:
        screen = mux.screen(pane_id)
    except MultiplexerError as exc:
        raise PaneUnavailable(f"capture failed: {exc}") from exc
    agent = placement.coding_agent
    spawned = member.kind != "director"
    return Showing(
        member_id,
        pane_id,
        classify(agent, screen, spawned=spawned),
        read_prompt(agent, screen, spawned=spawned),
    )


def _choices_text(prompt: Prompt) -> str:
    return ", ".join(f"{c.number}. {c.label}" for c in prompt.choices)


def _press(mux: Multiplexer, pane_id: str, choice: Choice, clock: Clock) -> None:
    for i, key in enumerate(choice.keys):
        if i:
            clock.sleep(KEY_SETTLE)
        if len(key) == 1:
            mux.type_text(pane_id, key)  # a digit or a shortcut letter, typed literally
        else:
            mux.send_key(pane_id, key)


def _check(
    prompt: Prompt | None,
    member_id: int,
    pane_id: str,
    wanted: str,
    prompt_id: str | None,
    state: str,
) -> tuple[Prompt, Choice]:
    """The prompt and the choice to press, or the refusal (nothing typed) in the CLI's words."""
    nothing = "nothing was typed"
    if prompt is None:
        raise AnswerRefused(
            f"member {member_id}'s pane {pane_id} shows no prompt (it is {state}); {nothing}"
        )
    if prompt_id is not None and prompt.digest != prompt_id:
        raise AnswerRefused(
            f"prompt {prompt_id} is no longer on member {member_id}'s screen (it shows prompt "
            f"{prompt.digest}); {nothing}"
        )
    if not prompt.readable:
        raise AnswerRefused(
            f"cafleet cannot read member {member_id}'s prompt {prompt.digest}, so it picks no "
            f"choice; answer it in pane {pane_id} yourself; {nothing}"
        )
    choice = prompt.pick(wanted)
    if choice is None:
        raise AnswerRefused(
            f"'{sanitize_single_line(wanted)}' is not a choice of member {member_id}'s prompt "
            f"{prompt.digest} "
            f"(choices: {_choices_text(prompt)}); {nothing}"
        )
    return prompt, choice


def answer(
    conn: Connection,
    settings: Settings,
    member_id: int,
    wanted: str,
    *,
    prompt_id: str | None = None,
    clock: Clock | None = None,
) -> Answered:
    """Answer the member's prompt with ``wanted`` (see the module docstring)."""
    problem = choice_problem(wanted)
    if problem is not None:
        raise WorkflowUsageError(f"{problem}; nothing was typed")
    clock = clock or Clock()
    member = active_member(conn, member_id)
    placement = concrete_placement(member, "nothing to answer")
    refuse_elsewhere(conn, member)
    _refuse_director(conn, member)
    pane_id = placement.mux_pane_id
    assert pane_id is not None
    mux = backend_for(placement.backend, placement.mux_socket)
    agent = placement.coding_agent
    with _lock_pane(settings, placement, member_id, f"answer member {member_id}"):
        # Re-read under the lock: a respawn may have moved the member meanwhile.
        fresh = active_member(conn, member_id).placement
        if fresh is None or fresh.pane_key != placement.pane_key:
            raise AnswerRefused(
                f"member {member_id}'s placement changed; nothing was typed (retry)"
            )
        problem = probe_for_typing(mux, pane_id, owner_of(placement))
        if problem == MSG_NOT_OURS.format(pane_id=pane_id):
            raise AnswerRefused(f"{problem}; nothing was typed")
        if problem is not None:
            raise AnswerRefused(f"typing into pane {pane_id} failed: {problem}")
        mux = OwnedPane(mux, owner_of(placement))  # each key: still ours (docs/runtime.md §1.8)
        try:
            screen = mux.screen(pane_id)
            prompt, choice = _check(
                read_prompt(agent, screen), member_id, pane_id, wanted, prompt_id,
                classify(agent, screen, spawned=True),
            )  # fmt: skip
            _press(mux, pane_id, choice, clock)
            after = _verify(mux, pane_id, agent, prompt, choice, clock)
            if choice.confirm is not None:
                after = _confirm(mux, pane_id, agent, choice, after, clock)
        except MultiplexerError as exc:
            raise WorkflowError(f"typing into pane {pane_id} failed: {exc}") from exc
    return Answered(member, pane_id, prompt, choice, after)


def _verify(
    mux: Multiplexer, pane_id: str, agent: str, prompt: Prompt, choice: Choice, clock: Clock
) -> Prompt | None:
    """Wait until ``prompt`` has left the screen; the prompt shown then (None: none)."""
    deadline = clock.now() + VERIFY_SECONDS
    while True:
        now_showing = read_prompt(agent, mux.screen(pane_id))
        if now_showing is None or now_showing.digest != prompt.digest:
            return now_showing
        if clock.now() >= deadline:
            raise WorkflowError(
                f"chose {choice.number}. {choice.label} in pane {pane_id}, but prompt "
                f"{prompt.digest} is still on screen after {VERIFY_SECONDS:g} s"
            )
        clock.sleep(VERIFY_STEP)


def _confirm(
    mux: Multiplexer,
    pane_id: str,
    agent: str,
    choice: Choice,
    after: Prompt | None,
    clock: Clock,
) -> Prompt | None:
    """Confirm ``choice`` in the dialog it opened (``choice.confirm``: its question and the
    confirming choice); the prompt shown then. No such dialog within `CONFIRM_SECONDS`: as is."""
    assert choice.confirm is not None
    question, label = choice.confirm
    deadline = clock.now() + CONFIRM_SECONDS
    while after is None and clock.now() < deadline:
        clock.sleep(VERIFY_STEP)
        after = read_prompt(agent, mux.screen(pane_id))
    if after is None or after.question != question:
        return after
    confirming = after.pick(label)
    if confirming is None:
        return after
    _press(mux, pane_id, confirming, clock)
    return _verify(mux, pane_id, agent, after, confirming, clock)


__all__ = ["AnswerRefused", "Answered", "Showing", "answer", "choice_problem", "showing"]
