"""Blocked members (docs/runtime.md §5.12, docs/cli.md §2.26): what a prompting pane asks, the
monitor loop's one report per prompt to the Director's inbox, `member answer`, and how `member
list` / `fleet show` show a waiting member.

The reader runs on the real captured screens (tests/data/screens); the loop and `member answer`
run against screen-mode fakes (Claude Code's, Codex's and opencode's prompts as their cue tables
draw them) and against real captured screens shown in a real tmux pane.
"""

from __future__ import annotations

import json
import re
import shlex
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from cafleet import broker
from cafleet.delivery.screens.prompts import clean, read_prompt
from tests.factories import connect
from tests.fleet_helpers import (
    FleetIds,
    create_fleet,
    create_member,
    ok,
    sql_write,
    start_loop,
    stop_loop,
)
from tests.harness.fixtures import TmuxHarness
from tests.harness.util import fake_log, line_records, retry_until, start_record

SCREENS = Path(__file__).parent / "data" / "screens"


def screen(agent: str, name: str) -> str:
    return (SCREENS / agent / name).read_text(encoding="utf-8")


# --------------------------------------------------------------------------- the reader


def test_claude_s_real_permission_prompt_reads_as_question_details_and_numbered_choices() -> None:
    prompt = read_prompt("claude", screen("claude", "permission-1.txt"))
    assert prompt is not None and prompt.readable
    assert prompt.question == "Do you want to proceed?"
    assert prompt.details == (
        "Bash command",
        "cafleet message ack 12",
        "Acknowledge message 12",
        "This command requires approval",
    )
    assert [(c.number, c.label, c.keys) for c in prompt.choices] == [
        (1, "Yes", ("1",)),
        (2, "Yes, and don\u2019t ask again for: cafleet message *", ("2",)),
        (3, "No", ("3",)),
    ]
    assert prompt.pick("1") is prompt.choices[0]
    assert prompt.pick("  no ") is prompt.choices[2]
    assert prompt.pick("4") is None and prompt.pick("Maybe") is None
    assert re.fullmatch(r"[0-9a-f]{8}", prompt.digest)


def test_opencode_s_real_permission_dialog_reads_with_its_three_buttons() -> None:
    prompt = read_prompt("opencode", screen("opencode", "permission-1.txt"))
    assert prompt is not None and prompt.readable
    assert prompt.question == "Permission required"
    assert prompt.details == ("# Shell command", "$ cafleet message ack 12")
    assert [(c.label, c.keys) for c in prompt.choices] == [
        ("Allow once", ("Enter",)),
        ("Allow always", ("Right", "Enter")),
        ("Reject", ("Right", "Right", "Enter")),
    ]


def test_codex_s_real_approval_prompt_reads_with_its_shortcut_keys() -> None:
    """A command the model asked to run outside Codex's read-only sandbox (the `ask` profile)."""
    prompt = read_prompt("codex", screen("codex", "permission-1.txt"))
    assert prompt is not None and prompt.readable
    assert prompt.question == "Would you like to run the following command?"
    assert prompt.details[0] == "Environment: local"
    assert prompt.details[-1].startswith("$ printf '%s' 'approved by the Director' > ")
    assert [(c.number, c.keys) for c in prompt.choices] == [
        (1, ("y",)), (2, ("p",)), (3, ("Escape",)),
    ]  # fmt: skip
    assert prompt.choices[0].label == "Yes, proceed"
    assert prompt.choices[1].label.startswith("Yes, and don't ask again for commands that start")
    assert prompt.choices[2].label == "No, and tell Codex what to do differently"
    assert all(c.confirm is None for c in prompt.choices)


def test_opencode_s_allow_always_is_confirmed_in_a_second_dialog() -> None:
    """ "Allow always" opens a confirmation (Confirm selected); its reader drops the session
    sidebar a wide pane draws at the right."""
    first = read_prompt("opencode", screen("opencode", "permission-1.txt"))
    assert first is not None
    assert [c.confirm for c in first.choices] == [None, ("Always allow", "Confirm"), None]
    prompt = read_prompt("opencode", screen("opencode", "permission-always-1.txt"))
    assert prompt is not None and prompt.readable
    assert prompt.question == "Always allow"
    assert prompt.details == ("This will allow edit until OpenCode is restarted.",)
    assert [(c.label, c.keys) for c in prompt.choices] == [
        ("Confirm", ("Enter",)),
        ("Cancel", ("Right", "Enter")),
    ]


def test_the_digest_names_the_prompt_not_the_screen_around_it() -> None:
    """The cursor's row, spacing and what scrolls above the prompt do not change the digest;
    another command does."""
    text = screen("claude", "permission-1.txt")
    base = read_prompt("claude", text)
    moved = text.replace(" \u276f 1. Yes", "   1. Yes").replace("   3. No", " \u276f 3. No")
    scrolled = text.replace("\u276f run the ack command", "\u276f another earlier line")
    other = text.replace("   cafleet message ack 12", "   rm -rf build")
    assert base is not None
    assert moved != text and scrolled != text and other != text
    assert read_prompt("claude", moved).digest == base.digest  # type: ignore[union-attr]
    assert read_prompt("claude", scrolled).digest == base.digest  # type: ignore[union-attr]
    assert read_prompt("claude", other).digest != base.digest  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("agent", "name"),
    [
        ("claude", "menu-1.txt"),
        ("claude", "dialog-trust-1.txt"),
        ("codex", "menu-1.txt"),
        ("codex", "dialog-sign-in-1.txt"),
        ("opencode", "menu-1.txt"),
    ],
)
def test_a_prompt_the_reader_cannot_take_apart_keeps_its_raw_last_lines(
    agent: str, name: str
) -> None:
    text = screen(agent, name)
    prompt = read_prompt(agent, text)
    assert prompt is not None and not prompt.readable
    assert prompt.question is None and prompt.choices == ()
    nonblank = [clean(line) for line in text.splitlines() if line.strip()]
    assert list(prompt.raw) == nonblank[-15:] and len(prompt.raw) == min(15, len(nonblank))


@pytest.mark.parametrize(
    ("agent", "name"),
    [("claude", "ready-1.txt"), ("claude", "working-2.txt"), ("codex", "ready-1.txt"),
     ("opencode", "working-1.txt")],
)  # fmt: skip
def test_a_screen_without_a_prompt_has_none(agent: str, name: str) -> None:
    assert read_prompt(agent, screen(agent, name)) is None


def test_the_report_names_member_question_details_choices_and_the_answer_command() -> None:
    from cafleet.monitor.escalate import escalation_text
    from cafleet.records import Member

    member = Member(
        member_id=7, fleet_id=1, name="coder\x1b[2J", description="d", kind="member",
        status="active", registered_at="t", deregistered_at=None, skills=[], placement=None,
    )  # fmt: skip
    prompt = read_prompt("claude", screen("claude", "permission-1.txt"))
    assert prompt is not None
    text = escalation_text(member, "%9", prompt, 31.7)
    assert text.splitlines() == [
        f"[cafleet] member 7 prompt {prompt.digest}: member 7 (coder\x1b[2J) has been waiting "
        "for an answer for 31s in pane %9.",
        "  Bash command",
        "  cafleet message ack 12",
        "  Acknowledge message 12",
        "  This command requires approval",
        "  Do you want to proceed?",
        "  1. Yes",
        "  2. Yes, and don\u2019t ask again for: cafleet message *",
        "  3. No",
        f"Answer with: cafleet member answer 7 <choice> --prompt {prompt.digest}  "
        "(<choice>: 1, 2 or 3)",
    ]
    raw = read_prompt("claude", screen("claude", "menu-1.txt"))
    assert raw is not None
    text = escalation_text(member, "%9", raw, 40)
    assert "cafleet cannot read its prompt" in text
    assert text.splitlines()[1:16] == [f"  {line}" for line in raw.raw]
    assert "Answer with" not in text


# Each real agent's captured prompt: its question, what it asks about, its numbered choices.
REAL_PROMPTS = [
    (
        "claude", "permission-1.txt", "Do you want to proceed?",
        ["Bash command", "cafleet message ack 12"],
        ["1. Yes", "2. Yes, and don\u2019t ask again for: cafleet message *", "3. No"],
    ),
    (
        "claude", "permission-write-1.txt", "Do you want to create approved.txt?",
        ["Create file", "approved.txt", "1 approved by the Director"],
        ["1. Yes", "2. Yes, allow all edits during this session (shift+tab)", "3. No"],
    ),
    (
        "codex", "permission-1.txt", "Would you like to run the following command?",
        ["$ printf '%s' 'approved by the Director' > "
         "/tmp/cft7zgl5bg7/agents/real-codex/project/approved.txt"],
        ["1. Yes, proceed", "3. No, and tell Codex what to do differently"],
    ),
    (
        "opencode", "permission-1.txt", "Permission required",
        ["# Shell command", "$ cafleet message ack 12"],
        ["1. Allow once", "2. Allow always", "3. Reject"],
    ),
]  # fmt: skip


@pytest.mark.parametrize(
    ("agent", "name", "question", "subject", "choices"),
    REAL_PROMPTS,
    ids=[f"{a}-{n}" for a, n, *_ in REAL_PROMPTS],
)
def test_a_report_reads_like_the_real_prompt_it_reports(
    agent: str, name: str, question: str, subject: list[str], choices: list[str]
) -> None:
    """The report carries the question, the command or file the prompt asks about, each choice
    with its number and the exact answer command; no decoration (the dashed rules around Claude
    Code's diff of a file)."""
    from cafleet.monitor.escalate import escalation_text
    from cafleet.records import Member

    member = Member(
        member_id=4, fleet_id=1, name="nc", description="d", kind="member", status="active",
        registered_at="t", deregistered_at=None, skills=[], placement=None,
    )  # fmt: skip
    prompt = read_prompt(agent, screen(agent, name))
    assert prompt is not None and prompt.readable
    lines = escalation_text(member, "%5", prompt, 30).splitlines()
    assert lines[0].startswith(f"[cafleet] member 4 prompt {prompt.digest}: member 4 (nc) ")
    body = lines[1:-1]
    # In the screen's order: Claude Code asks below the details, Codex and opencode above.
    at = body.index(f"  {question}")
    assert at == (body.index(f"  {choices[0]}") - 1 if agent == "claude" else 0), body
    assert [f"  {x}" for x in subject] == [d for d in body if d.strip() in subject], body
    assert all(f"  {c}" in body for c in choices), body
    assert [x for x in body if re.fullmatch(r"\s*[\u2500-\u259f\u2026]+", x)] == []
    assert lines[-1] == (
        f"Answer with: cafleet member answer 4 <choice> --prompt {prompt.digest}  "
        "(<choice>: 1, 2 or 3)"
    )


def test_screen_lines_lose_control_characters_and_are_cut() -> None:
    from cafleet.delivery.screens.prompts import LINE_LIMIT, clean

    assert clean("  a\x07b\x1b[31mc\u00a0 ") == "ab[31mc"
    long = clean("x" * (LINE_LIMIT + 50))
    assert len(long) == LINE_LIMIT and long.endswith("\u2026")


# --------------------------------------------------------------------------- the loop (tmux)


@pytest.fixture
def fleet(tmux_db: TmuxHarness) -> FleetIds:
    ids = create_fleet(tmux_db)
    stop_loop(tmux_db, ids.fleet_id)
    return ids


def prompting_member(h: TmuxHarness, fleet_id: int, agent: str = "claude") -> tuple[int, str]:
    """A screen-mode fake that opens a permission prompt on its next turn, given one."""
    member, pane = create_member(
        h, fleet_id, f"{agent}-coder", "#fake screen permission work=600\nhello",
        "--coding-agent", agent,
    )  # fmt: skip
    start_record(pane)
    retry_until(
        lambda: any(r.get("state") == "ready" for r in fake_log(pane)),
        timeout=30,
        message="the fake never drew its ready screen",
    )
    ok(h.cli("member", "prompt", str(member), "run the tests"))
    retry_until(
        lambda: any(r.get("state") == "awaiting_user" for r in fake_log(pane)),
        timeout=20,
        message="the fake never opened its permission prompt",
    )
    return member, pane


def director_inbox(h: TmuxHarness, director: int) -> list[dict[str, object]]:
    got = json.loads(ok(h.cli("message", "poll", str(director), "--json")).stdout)
    assert isinstance(got, list)
    return got


def ticks(h: TmuxHarness, fleet_id: int) -> str:
    row = h.sqlite("SELECT last_tick_at FROM monitor_runtime WHERE fleet_id = ?", fleet_id)
    return str(row[0][0])


def wait_ticks(h: TmuxHarness, fleet_id: int, n: int) -> None:
    seen = {ticks(h, fleet_id)}
    retry_until(
        lambda: seen.add(ticks(h, fleet_id)) or len(seen) > n,  # type: ignore[func-returns-value]
        timeout=30,
        message=f"the loop did not tick {n} more times",
    )


def read_whole(h: TmuxHarness, fleet_id: int, director: int, member: int) -> str:
    """The Director's report of ``member``'s prompt, as stored; `message poll` and `message
    wait` print it whole in text mode, and the WebUI's inbox holds it whole."""
    from tests.web_helpers import client, fleet_headers, make_app

    text = next(
        str(m["text"])
        for m in director_inbox(h, director)
        if f"member {member} prompt" in m["text"]
    )
    assert len(text) > 200  # longer than any cut
    for command in (["poll", str(director)], ["wait", str(director), "--timeout", "0"]):
        shown = ok(h.cli("message", *command)).stdout
        assert f"\n{text}\n" in shown, shown
    with client(make_app(h.db_path)) as api:
        got = api.get(f"/api/members/{director}/inbox", headers=fleet_headers(fleet_id))
    assert text in [m["text"] for m in got.json()]
    return text


def pane_cell(h: TmuxHarness, fleet_id: int, member: int) -> str:
    rows = json.loads(ok(h.cli("member", "list", str(fleet_id), "--json")).stdout)
    row = next(r for r in rows if r["member_id"] == member)
    return f"{row['pane_state']}/{row['agent_state']}"


def test_a_blocked_member_is_reported_once_then_answered(
    tmux_db: TmuxHarness, fleet: FleetIds
) -> None:
    h = tmux_db
    f, d = fleet.fleet_id, fleet.director_id
    member, pane = prompting_member(h, f)
    # member list and fleet show tell the waiting member.
    table = ok(h.cli("member", "list", str(f))).stdout
    row = next(x for x in table.splitlines() if x.split()[:2] == [str(member), "claude-coder"])
    assert "waiting (permission)" in row, table
    shown = ok(h.cli("fleet", "show", str(f))).stdout
    assert f"1 waiting (permission) (member {member})" in shown, shown

    # An old hook report says the turn ended: the loop logs, once, that the screen wins.
    with connect(h.db_path) as conn:
        an_hour_ago = datetime.now(UTC) - timedelta(hours=1)
        broker.record_hook(conn, member, state="ready", event="stop", text="", now=an_hour_ago)
    loop = start_loop(h, f, "--tick", "1", "--interval", "0", env={"CAFLEET_ESCALATE_AFTER": "2"})
    loop.wait_line(
        rf"tick -> member {member}: its hook said ready at .* shows a prompt", timeout=30
    )
    logged = loop.wait_line(rf"tick -> escalated: member {member} waits at prompt", timeout=30)
    digest = re.search(r"at prompt ([0-9a-f]{8}) ", logged[-1]).group(1)  # type: ignore[union-attr]
    wait_ticks(h, f, 3)  # the same prompt, three more ticks: no second report
    assert loop.count(r"tick -> escalated") == 1
    assert loop.count(r"its hook said ready") == 1
    inbox = director_inbox(h, d)
    assert len(inbox) == 1, inbox
    report = inbox[0]
    assert report["from_member_id"] == fleet.monitor_id
    text = read_whole(h, f, d, member)
    assert f"member {member} ({'claude-coder'})" in text
    assert "  Bash command\n  cafleet message ack 12\n  Do you want to proceed?\n  1. Yes" in text
    assert "  3. No, and tell Claude what to do differently (esc)" in text
    assert text.endswith(
        f"\nAnswer with: cafleet member answer {member} <choice> --prompt {digest}  "
        "(<choice>: 1, 2 or 3)"
    )

    # Refusals type nothing: an unknown choice, a stale prompt id.
    keys_before = [r for r in fake_log(pane) if r.get("kind") == "prompt-key"]
    r = h.cli("member", "answer", str(member), "7")
    assert (r.returncode, r.stdout) == (1, "")
    assert r.stderr == (
        f"Error: '7' is not a choice of member {member}'s prompt {digest} (choices: 1. Yes, "
        "2. Yes, and don't ask again for: cafleet message *, 3. No, and tell Claude what to do "
        "differently (esc)); nothing was typed\n"
    )
    r = h.cli("member", "answer", str(member), "1", "--prompt", "0badcafe")
    assert (r.returncode, r.stderr) == (
        1,
        f"Error: prompt 0badcafe is no longer on member {member}'s screen (it shows prompt "
        f"{digest}); nothing was typed\n",
    )
    assert [r for r in fake_log(pane) if r.get("kind") == "prompt-key"] == keys_before == []

    r = ok(h.cli("member", "answer", str(member), "yes", "--prompt", digest))
    assert r.stdout == (
        f"Answered prompt {digest} of member claude-coder ({member}, pane {pane}): 1. Yes\n"
    )
    assert [(k["key"], k["text"]) for k in fake_log(pane) if k.get("kind") == "prompt-key"] == [
        ("text", "1")
    ]
    assert [x["text"] for x in line_records(pane)] == ["run the tests"]  # the turn went on
    assert pane_cell(h, f, member) == "alive/working"
    # No prompt now: refused, nothing typed.
    r = h.cli("member", "answer", str(member), "1")
    assert (r.returncode, r.stderr) == (
        1,
        f"Error: member {member}'s pane {pane} shows no prompt (it is working); nothing was "
        "typed\n",
    )
    assert len([k for k in fake_log(pane) if k.get("kind") == "prompt-key"]) == 1
    wait_ticks(h, f, 2)
    assert loop.count(r"tick -> escalated") == 1
    loop.stop()


@pytest.mark.parametrize("agent", ["codex", "opencode"])
def test_codex_and_opencode_prompts_are_reported_and_answered(
    tmux_db: TmuxHarness, fleet: FleetIds, agent: str
) -> None:
    h = tmux_db
    f, d = fleet.fleet_id, fleet.director_id
    member, pane = prompting_member(h, f, agent)
    loop = start_loop(h, f, "--tick", "1", "--interval", "0", env={"CAFLEET_ESCALATE_AFTER": "0"})
    loop.wait_line(rf"tick -> escalated: member {member} waits at prompt", timeout=30)
    text = read_whole(h, f, d, member)
    question = {"codex": "Would you like to run the following command?",
                "opencode": "Permission required"}[agent]  # fmt: skip
    first = {"codex": "1. Yes, proceed", "opencode": "1. Allow once"}[agent]
    assert f"  {question}\n  $ cafleet message ack 12\n  {first}\n" in text, text
    assert re.search(r"\nAnswer with: cafleet member answer \d+ <choice> --prompt [0-9a-f]{8}  "
                     r"\(<choice>: 1, 2 or 3\)$", text), text  # fmt: skip
    r = ok(h.cli("member", "answer", str(member), "1", "--json"))
    answered = json.loads(r.stdout)
    assert answered["choice"]["number"] == 1 and answered["next_prompt"] is None
    pressed = [(k["key"], k["text"]) for k in fake_log(pane) if k.get("kind") == "prompt-key"]
    assert pressed == {"codex": [("text", "y")], "opencode": [("enter", "")]}[agent]
    assert [x["text"] for x in line_records(pane)] == ["run the tests"]
    loop.stop()


def test_a_prompt_cafleet_cannot_read_is_reported_raw_and_never_answered(
    tmux_db: TmuxHarness, fleet: FleetIds
) -> None:
    """A real captured screen (Claude Code's /model picker) shown in the member's own pane."""
    h = tmux_db
    f, d = fleet.fleet_id, fleet.director_id
    member, pane = create_member(h, f, "picker")
    shown = SCREENS / "claude" / "menu-1.txt"
    h.tmux("respawn-pane", "-k", "-t", pane, f"cat {shlex.quote(str(shown))}; exec sleep 600")
    retry_until(
        lambda: "Select model" in h.tmux("capture-pane", "-p", "-t", pane),
        timeout=10,
        message="the captured screen never showed",
    )
    # The process shown is the member's (a pane respawned in place is another's otherwise,
    # docs/runtime.md §1.8).
    shown_pid = int(h.pane_format(pane, "#{pane_pid}"))
    sql_write(
        h, "UPDATE member_placements SET mux_pane_pid = ? WHERE member_id = ?", shown_pid, member
    )
    loop = start_loop(h, f, "--tick", "1", "--interval", "0", env={"CAFLEET_ESCALATE_AFTER": "0"})
    loop.wait_line(rf"tick -> escalated: member {member} waits at prompt", timeout=30)
    text = str(director_inbox(h, d)[0]["text"])
    assert "cafleet cannot read its prompt" in text
    assert (
        "  Enter to set as default \u00b7 s to use this session only \u00b7 Esc to cancel" in text
    )
    calls = len(h.shim_calls())
    r = h.cli("member", "answer", str(member), "1")
    assert r.returncode == 1 and "cafleet cannot read member" in r.stderr, r.stderr
    assert r.stderr.endswith("nothing was typed\n")
    sent = [c for c in h.shim_calls()[calls:] if c.get("command") == "send-keys"]
    assert sent == []
    loop.stop()


def test_member_explain_names_the_screen_cue_and_its_line(
    tmux_db: TmuxHarness, fleet: FleetIds
) -> None:
    """docs/cli.md §2.39: the screen's signal says which cue matched on which line; with an
    older hook report that disagrees, the screen wins and the text says so."""
    h = tmux_db
    member, _pane = prompting_member(h, fleet.fleet_id)
    got = json.loads(ok(h.cli("member", "explain", str(member), "--json")).stdout)
    (screen,) = [s for s in got["signals"] if s["source"] == "screen"]
    assert screen["state"] == "awaiting_user" and screen["at"] is not None
    assert re.fullmatch(r"cue '.+' on line '.+'", screen["detail"]), screen["detail"]
    with connect(h.db_path) as conn:
        an_hour_ago = datetime.now(UTC) - timedelta(hours=1)
        broker.record_hook(conn, member, state="ready", event="stop", text="", now=an_hour_ago)
    got = json.loads(ok(h.cli("member", "explain", str(member), "--json")).stdout)
    assert (got["state"], got["source"]) == ("awaiting_user", "screen")
    assert [s["source"] for s in got["signals"]] == ["hook", "screen"]
