"""Permission profiles with the real agents (docs/permissions.md §3): for each agent, four real
members spawned by `cafleet member create --permissions <profile>` and driven by the scripted
model (tests/harness/scripted_model.py) get the same task, a file to write and a command to run
in their working directory; a second task asks the workspace member to write outside it.

Judged by the files on disk, the agent's screen (a permission prompt: `awaiting_user`), the
database (replies and ACKs) and the agent's own record; the expected outcome of each cell is
`EXPECTED` below, which is the table in docs/permissions.md §3 (a test checks they agree).

The `ask` column is proven by tests/test_real_escalation.py, whose member runs under `ask` and
is given the same edit task: it sees the prompt (`asks`), then answers it. One agent start
proves both, instead of one here and one there (the suite's time, docs/permissions.md §3).
"""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path

import pytest

from cafleet.delivery.screens import classify
from tests.fleet_helpers import create_fleet, ok
from tests.harness.fixtures import TmuxHarness
from tests.harness.real_agents import agent_cases, require_binary
from tests.harness.real_member import RealMember
from tests.harness.scripted_model import ScriptedModel
from tests.harness.util import retry_until

pytestmark = [pytest.mark.real_agent, pytest.mark.tmux]
REPO = Path(__file__).resolve().parents[1]
PROFILES = ("workspace", "ask", "readonly", "full")
# The profiles this module spawns; `ask` is tests/test_real_escalation.py's (module docstring).
SPAWNED = ("workspace", "readonly", "full")
AGENTS = ("claude", "codex", "opencode", "gemini")
OUTSIDE_ROOT = "/var/tmp"
# Outcome of (task, profile) per agent: "runs" (the file / the command's output is there and
# the member reported), "refused" (not there, and the member reported anyway: the agent told
# the model no), "asks" (not there; the agent shows a permission prompt and waits).
EXPECTED: dict[str, dict[str, dict[str, str]]] = {
    "claude": {
        "workspace": {"edit": "runs", "command": "runs", "edit outside": "asks"},
        "ask": {"edit": "asks"},
        "readonly": {"edit": "refused", "command": "refused"},
        "full": {"edit": "runs", "command": "runs"},
    },
    "codex": {
        "workspace": {"edit": "runs", "command": "runs", "edit outside": "asks"},
        "ask": {"edit": "asks"},
        "readonly": {"edit": "refused", "command": "refused"},
        "full": {"edit": "runs", "command": "runs"},
    },
    "opencode": {
        "workspace": {"edit": "runs", "command": "runs", "edit outside": "asks"},
        "ask": {"edit": "asks"},
        "readonly": {"edit": "refused", "command": "refused"},
        "full": {"edit": "runs", "command": "runs"},
    },
    "gemini": {
        "workspace": {"edit": "runs", "command": "runs", "edit outside": "refused"},
        "ask": {"edit": "asks"},
        "readonly": {"edit": "refused", "command": "refused"},
        "full": {"edit": "runs", "command": "runs"},
    },
}


def _inbox(h: TmuxHarness, director: int) -> list[tuple[int, int, str]]:
    rows = h.sqlite(
        "SELECT message_id, from_member_id, text FROM messages WHERE to_member_id = ? "
        "ORDER BY message_id",
        director,
    )
    return [(int(r[0]), int(r[1]), str(r[2])) for r in rows]


def _acked(h: TmuxHarness, message_id: int) -> bool:
    rows = h.sqlite("SELECT status_state FROM messages WHERE message_id = ?", message_id)
    return bool(rows) and rows[0][0] == "completed"


def _send(h: TmuxHarness, director: int, member: RealMember, body: str) -> int:
    r = ok(
        h.cli(
            "message",
            "send",
            "--from-member-id",
            str(director),
            "--to-member-id",
            str(member.member_id),
            body,
        )  # fmt: skip
    )
    m = re.search(r"^\[(\d+) \|", r.stdout, re.M)
    assert m, r.stdout
    return int(m.group(1))


def table_from_docs() -> dict[str, dict[str, dict[str, str]]]:
    """The outcome table of docs/permissions.md §3, parsed: rows `| agent | task | w | a | r | f |`."""
    text = (REPO / "docs" / "permissions.md").read_text(encoding="utf-8")
    section = text.split("## 3.", 1)[1].split("\n## ", 1)[0]
    out: dict[str, dict[str, dict[str, str]]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 6 or cells[0] not in AGENTS:
            continue
        agent, task = cells[0], cells[1]
        for profile, cell in zip(PROFILES, cells[2:], strict=True):
            if cell != "-":
                out.setdefault(agent, {}).setdefault(profile, {})[task] = cell
    return out


def test_docs_table_is_the_tested_table() -> None:
    assert table_from_docs() == EXPECTED


@pytest.mark.parametrize("agent", agent_cases("codex"))
def test_each_profile_does_what_its_table_says(
    tmux_db: TmuxHarness, model_server: ScriptedModel, agent: str
) -> None:
    require_binary(agent)
    h = tmux_db
    ids = create_fleet(h)  # fake Director and monitor; the members are real
    d = ids.director_id
    # Outside the working directory, and outside /tmp too: Codex's workspace-write sandbox lets
    # commands write /tmp and $TMPDIR (docs/permissions.md §2).
    outside = Path(tempfile.mkdtemp(prefix="cafleet-outside-", dir=OUTSIDE_ROOT))
    members: dict[str, RealMember] = {}
    try:
        for profile in SPAWNED:
            # Claude Code refuses bypassPermissions as root unless told it runs in a sandbox
            # (this container); cafleet never sets that itself.
            # It also asks once to accept that mode; this user accepted it before.
            full_claude = agent == "claude" and profile == "full"
            member = RealMember(
                h, agent, f"{agent}-{profile}", model_url=model_server.base_url(f"{agent}-{profile}"),
                extra_env={"IS_SANDBOX": "1"} if full_claude else None,
                claude_config={"bypassPermissionsModeAccepted": True} if full_claude else None,
            )  # fmt: skip
            members[profile] = member.create(
                ids.fleet_id, None, "--permissions", profile, all_assets=True
            )
        # The spawn record keeps the profile (`member respawn` reads it), and show prints it.
        for profile, member in members.items():
            shown = ok(h.cli("member", "show", str(member.member_id))).stdout
            assert f"permissions:     {profile}\n" in shown
        # Each member reports ready (the bundled prompt), with a cafleet command every profile
        # allows.
        retry_until(
            lambda: (
                {m.member_id for m in members.values()}
                <= {s for _, s, t in _inbox(h, d) if t == "ready"}
            ),
            timeout=300,
            interval=1.0,
            message=lambda: f"not all ready: {_inbox(h, d)}\n" + _screens(members),
        )
        sent: dict[str, int] = {}
        for profile, member in members.items():
            body = (
                f"write edit-{profile}.txt: edited by {profile} ; run: echo ran > ran-{profile}.txt"
            )
            sent[profile] = _send(h, d, member, body)

        def settled(profile: str) -> bool:
            member = members[profile]
            reply = any(t.startswith(f"done {sent[profile]}:") for _, _, t in _inbox(h, d))
            # The member replies, then ACKs.
            return (reply and _acked(h, sent[profile])) or member.real.state() == "awaiting_user"

        retry_until(
            lambda: all(settled(p) for p in SPAWNED),
            timeout=300,
            interval=1.0,
            message=lambda: f"not settled: {_inbox(h, d)}\n" + _screens(members),
        )
        outcome: dict[str, dict[str, str]] = {}
        for profile, member in members.items():
            cwd = member.real.cwd
            if classify(agent, member.real.capture()) == "awaiting_user":
                assert not (cwd / f"edit-{profile}.txt").exists()
                assert not _acked(h, sent[profile])
                outcome[profile] = {"edit": "asks"}
                continue
            assert _acked(h, sent[profile]), f"{profile}: message {sent[profile]} not ACKed"
            edit = (cwd / f"edit-{profile}.txt").exists()
            ran = (cwd / f"ran-{profile}.txt").exists()
            if edit:
                assert (cwd / f"edit-{profile}.txt").read_text() == f"edited by {profile}"
            if ran:
                assert (cwd / f"ran-{profile}.txt").read_text() == "ran\n"
            outcome[profile] = {
                "edit": "runs" if edit else "refused",
                "command": "runs" if ran else "refused",
            }
        # The workspace member: an edit outside its working directory.
        target = outside / "edit.txt"
        second = _send(h, d, members["workspace"], f"write {target}: outside")

        def outside_settled() -> bool:
            reply = any(t.startswith(f"done {second}:") for _, _, t in _inbox(h, d))
            done = reply and _acked(h, second)
            return done or members["workspace"].real.state() == "awaiting_user"

        retry_until(outside_settled, timeout=300, interval=1.0,
                    message=lambda: _screens(members))  # fmt: skip
        if members["workspace"].real.state() == "awaiting_user":
            assert not target.exists()
            outcome["workspace"]["edit outside"] = "asks"
        else:
            assert _acked(h, second)
            outcome["workspace"]["edit outside"] = "runs" if target.exists() else "refused"
        expected = {p: cells for p, cells in EXPECTED[agent].items() if p in SPAWNED}
        assert outcome == expected, f"{outcome}\n{_screens(members)}"
        # Every task reached the agent as its own user message (its own record).
        for profile, member in members.items():
            texts = member.real.received()
            assert any(f"[cafleet msg {sent[profile]} from" in t for t in texts), (profile, texts)
    finally:
        for member in members.values():
            member.stop()
        shutil.rmtree(outside, ignore_errors=True)


def _screens(members: dict[str, RealMember]) -> str:
    out = []
    for profile, member in members.items():
        try:
            screen = member.real.capture()
        except Exception as exc:  # a diagnostic must not hide the failure it explains
            screen = f"(capture failed: {exc})"
        out.append(f"--- {profile}:\n{screen}")
    return "\n".join(out)
