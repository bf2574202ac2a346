"""`cafleet hook` and the state it records (docs/cli.md §2.38, docs/runtime.md §4.12,
docs/storage.md §3.16): receipts, state, session ids; never failing or blocking its agent; the
hooks installed in the agents' argv; `member explain` and the rule that picks a state."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from cafleet import broker
from cafleet.agents import get_agent
from cafleet.agents.claude import profile_args
from cafleet.workflows.explain import HOOK_FRESH, choose
from tests.cli_helpers import cli_env, run_cli
from tests.factories import make_fleet


def _fleet(conn: Any) -> tuple[int, int, int]:
    """A fleet and one spawned member (placed, with its `member_spawns` row)."""
    from cafleet.records import PlacementSpec, SpawnSpec

    boot = make_fleet(conn)
    member = broker.register_member(
        conn,
        fleet_id=boot.fleet.fleet_id,
        name="worker",
        description="works",
        role="member",
        placement=PlacementSpec("s", "@1", "claude"),
        require_monitor=False,
        spawn=SpawnSpec(None, None, None),
    )
    return boot.fleet.fleet_id, boot.director.member_id, member.member_id


def _received(conn: Any, message_id: int) -> str | None:
    return broker.received_at(conn, message_id)


def test_prompt_hook_stamps_only_its_own_messages_and_prints_nothing(
    conn: Any, head_db: Path
) -> None:
    _fleet_id, director, member = _fleet(conn)
    mine = broker.send_message(conn, from_member_id=director, to_member_id=member, text="hi")
    other = broker.send_message(conn, from_member_id=member, to_member_id=director, text="yo")
    prompt = (
        f"[cafleet msg {mine.message_id} from director ({director})] hi\n"
        f"[cafleet msg {other.message_id} from worker ({member})] yo"
    )
    payload = json.dumps({"session_id": "sess-1", "prompt": prompt})
    code, out, err = run_cli("hook", "prompt", "--member-id", str(member), input=payload)
    assert (code, out, err) == (0, "", "")
    assert _received(conn, mine.message_id) is not None
    assert _received(conn, other.message_id) is None  # not its recipient's hook
    shown = json.loads(run_cli("message", "show", str(mine.message_id), "--json")[1])
    assert shown["message"]["received_at"] == _received(conn, mine.message_id)
    signal = broker.hook_signal(conn, member)
    assert signal is not None and (signal.state, signal.event) == ("working", "prompt")
    assert broker.session_id(conn, member) is None  # no record file named: nothing learned
    first = _received(conn, mine.message_id)
    run_cli("hook", "prompt", "--member-id", str(member), input=payload)
    assert _received(conn, mine.message_id) == first  # stamped once


def test_a_claude_prompt_hook_names_the_members_session_and_its_record(
    conn: Any, head_db: Path, tmp_path: Path
) -> None:
    """docs/runtime.md §9.4: the payload's session id and transcript path, stored as `/proc`
    learning stores them, so `respawn --resume` and usage find the record; never a file named
    otherwise, never another member's session, never over a session already known."""
    from cafleet.config import db_dir_of
    from cafleet.sessions.usage import cache_path
    from tests.test_sessions import claude_session, claude_user

    _fleet_id, _director, member = _fleet(conn)
    home = tmp_path / "agent-home"
    record = claude_session(home, "/p", "sess-a", [claude_user("hi", "/p")])

    def hook(sid: str, path: Path) -> None:
        payload = json.dumps({"session_id": sid, "transcript_path": str(path), "prompt": "hi"})
        assert run_cli("hook", "prompt", "--member-id", str(member), input=payload) == (0, "", "")

    hook("sess-other", record)  # the file is not that session's
    assert broker.session_id(conn, member) is None
    hook("sess-a", record)
    assert broker.session_id(conn, member) == "sess-a"
    cached = json.loads(Path(cache_path(db_dir_of(conn.info["cafleet.path"]))).read_text())
    assert cached["members"][str(member)]["sessions"]["sess-a"]["path"] == str(record)
    second = claude_session(home, "/p", "sess-b", [claude_user("hi", "/p")])
    hook("sess-b", second)
    assert broker.session_id(conn, member) == "sess-a"  # a known session stays


def test_codex_notify_payload_is_the_last_argument(conn: Any) -> None:
    _fleet_id, director, member = _fleet(conn)
    sent = broker.send_message(conn, from_member_id=director, to_member_id=member, text="x")
    payload = {
        "type": "agent-turn-complete",
        "thread-id": "th-9",
        "input-messages": [f"[cafleet msg {sent.message_id} from director ({director})] x"],
        "last-assistant-message": "done",
    }
    code, out, _err = run_cli("hook", "turn", "--member-id", str(member), json.dumps(payload))
    assert (code, out) == (0, "")
    assert _received(conn, sent.message_id) is not None
    signal = broker.hook_signal(conn, member)
    assert signal is not None and signal.state == "ready"


@pytest.mark.parametrize(
    "args",
    [
        ["stop"],  # no member id
        ["nonsense", "--member-id", "2"],
        ["stop", "--member-id", "999"],  # no such member
        ["permission", "--member-id", "2", "{not json"],
    ],
)
def test_hook_never_fails(conn: Any, args: list[str]) -> None:
    code, out, err = run_cli("hook", *args, input="garbage")
    assert (code, out, err) == (0, "", "")


def test_hook_skips_a_missing_or_foreign_database(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "x.db"
    env = {"CAFLEET_DATABASE_URL": f"sqlite:///{missing}"}
    assert run_cli("hook", "stop", "--member-id", "1", env=env) == (0, "", "")
    assert not missing.exists() and not missing.parent.exists()
    foreign = tmp_path / "foreign.db"
    foreign.write_bytes(b"not a database")
    env = {"CAFLEET_DATABASE_URL": f"sqlite:///{foreign}"}
    assert run_cli("hook", "stop", "--member-id", "1", env=env) == (0, "", "")
    assert foreign.read_bytes() == b"not a database"


def test_hook_skips_a_locked_database(conn: Any, head_db: Path) -> None:
    """A writer holding the database: the hook gives up after its bounded wait (the run's
    timeout is a deadline, never a measured duration) and records nothing."""
    from cafleet.db import tx

    _fleet_id, _director, member = _fleet(conn)
    with tx.write(conn):
        code, out, err = run_cli("hook", "stop", "--member-id", str(member), timeout=30)
    assert (code, out, err) == (0, "", "")
    assert broker.hook_signal(conn, member) is None


BOUND_PROBE = """
import os
from cafleet.config import resolve_database_path
from cafleet.db.guard import open_validated_connection
from cafleet.db.runtime import bound_waits
bound_waits(0.2)
conn = open_validated_connection(resolve_database_path(os.environ))
sql = "SHOW lock_timeout" if conn.dialect == "postgresql" else "PRAGMA busy_timeout"
print(conn.driver.execute(sql).fetchone()[0])
"""


def test_hook_bounds_every_wait_on_either_database(conn: Any) -> None:
    """`HOOK_WAIT` reaches the connection the hook opens: SQLite's busy wait, PostgreSQL's
    lock_timeout (the writer lock and row locks wait on it)."""
    proc = subprocess.run(
        [sys.executable, "-c", BOUND_PROBE], capture_output=True, text=True, env=cli_env(None),
        timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() in ("200ms", "200")
    assert proc.stdout.strip() == ("200ms" if conn.dialect == "postgresql" else "200")


@pytest.mark.sqlite_only  # a file named by the pane's marker
def test_hook_uses_its_panes_database(conn: Any, head_db: Path, tmp_path: Path) -> None:
    """The pane's `CAFLEET_MEMBER=<id>@<P>` names the database even when the environment's
    URL points elsewhere (a hook run under another HOME)."""
    _fleet_id, _director, member = _fleet(conn)
    env = {
        "CAFLEET_DATABASE_URL": f"sqlite:///{tmp_path / 'other.db'}",
        "CAFLEET_MEMBER": f"{member}@{head_db}",
    }
    assert run_cli("hook", "permission", "--member-id", str(member), env=env)[0] == 0
    signal = broker.hook_signal(conn, member)
    assert signal is not None and signal.state == "awaiting_user"


def test_hook_help_goes_through_click() -> None:
    code, out, _err = run_cli("hook", "--help")
    assert code == 0 and "--member-id" in out


# --- installed hooks --------------------------------------------------------------------------


def _settings(argv: list[str]) -> dict[str, Any]:
    assert argv.count("--settings") == 1
    return dict(json.loads(argv[argv.index("--settings") + 1]))


@pytest.mark.parametrize("profile", ["workspace", "ask", "readonly", "full"])
def test_claude_hooks_merge_into_the_one_settings(profile: str) -> None:
    agent = get_agent("claude")
    plain = agent.build_argv(
        binary_path="/bin/claude", prompt="p", display_name="w", model=None, effort=None,
        monitor=False, permissions=profile,
    )  # fmt: skip
    hooked = agent.with_hooks(plain, 7)
    settings = _settings(hooked)
    if "--settings" in plain:
        before = json.loads(plain[plain.index("--settings") + 1])
        assert {k: v for k, v in settings.items() if k != "hooks"} == before
    commands = {
        name: [h["command"] for entry in entries for h in entry["hooks"]]
        for name, entries in settings["hooks"].items()
    }
    assert commands["UserPromptSubmit"] == ["cafleet hook prompt --member-id 7"]
    assert commands["Stop"] == ["cafleet hook stop --member-id 7"]
    assert "cafleet hook permission --member-id 7" in commands["Notification"]
    assert hooked[-3:] == plain[-3:]  # --name, its value and the prompt stay last
    assert profile_args(profile) == plain[1 : 1 + len(profile_args(profile))]


def test_codex_notify_is_toml_and_names_the_member() -> None:
    agent = get_agent("codex")
    for argv in (
        agent.build_argv(binary_path="/bin/codex", prompt="p", display_name="w", model=None,
                         effort=None, monitor=False, db_dir="/tmp/a ;'\" b"),
        agent.build_resume_argv(binary_path="/bin/codex", session_id="s", display_name="w",
                                model=None, effort=None, monitor=False, db_dir="/tmp/x"),
    ):  # fmt: skip
        hooked = agent.with_hooks(argv, 12)
        at = hooked.index("-c")
        assert at == len(argv) - 1  # just before the prompt or the session id
        assert hooked[:at] == argv[:at] and hooked[at + 2 :] == argv[at:]
        parsed = tomllib.loads(hooked[at + 1])
        assert parsed["notify"] == ["cafleet", "hook", "turn", "--member-id", "12"]


# --- choosing a state ---------------------------------------------------------------------------


def _signal(state: str, at: datetime) -> broker.HookSignal:
    return broker.HookSignal(1, state, at.isoformat(), "", "stop")


def test_choose_freshest_signal() -> None:
    now = datetime(2026, 12, 4, tzinfo=UTC)
    fresh = _signal("ready", now - timedelta(seconds=1))
    stale = _signal("ready", now - timedelta(seconds=HOOK_FRESH + 1))
    assert choose(None, "working", now=now) == ("working", "screen", False)
    assert choose(fresh, None, now=now) == ("ready", "hook", False)
    assert choose(fresh, "unknown", now=now) == ("ready", "hook", False)
    assert choose(stale, "ready", now=now) == ("ready", "hook", False)  # agree: the hook
    assert choose(fresh, "working", now=now) == ("ready", "hook", False)
    assert choose(stale, "working", now=now) == ("working", "screen", True)
    working = _signal("working", now - timedelta(seconds=1))
    assert choose(working, "awaiting_user", now=now) == ("awaiting_user", "screen", False)
    assert choose(_signal("awaiting_user", now), "working", now=now).source == "hook"
    changed = now - timedelta(seconds=30)
    assert choose(stale, "working", screen_changed_at=changed, now=now).source == "hook"
    later = now - timedelta(seconds=1)
    assert choose(stale, "working", screen_changed_at=later, now=now).source == "screen"


def test_the_loop_names_a_hook_report_its_screen_contradicts() -> None:
    from cafleet.monitor.escalate import disagreement

    now = datetime(2026, 12, 4, tzinfo=UTC)
    old = now - timedelta(seconds=HOOK_FRESH + 1)
    said = disagreement(_signal("ready", old), True, now)
    assert said == (
        f"its hook said ready at {old.isoformat()} but its screen shows a prompt: the screen wins"
    )
    assert "shows no prompt" in str(disagreement(_signal("awaiting_user", old), False, now))
    assert disagreement(_signal("ready", now - timedelta(seconds=1)), True, now) is None  # fresh
    assert disagreement(_signal("awaiting_user", old), True, now) is None  # agree
    assert disagreement(_signal("working", old), True, now) is None  # the tool's hook came first
    assert disagreement(None, True, now) is None


def test_member_explain_json_without_a_pane(conn: Any, head_db: Path) -> None:
    _fleet_id, _director, member = _fleet(conn)
    code, out, _err = run_cli("member", "explain", str(member), "--json")
    assert code == 0
    pending = {"source": "screen", "state": "unknown", "at": None, "detail": "pane pending"}
    assert json.loads(out) == {
        "member_id": member, "state": None, "source": None, "signals": [pending],
    }  # fmt: skip
    run_cli("hook", "permission", "--member-id", str(member), input='{"message": "Needs  you"}')
    code, out, _err = run_cli("member", "explain", str(member), "--json")
    found = json.loads(out)
    assert (found["state"], found["source"]) == ("awaiting_user", "hook")
    signal, screen = found["signals"]
    assert signal["source"] == "hook" and signal["detail"] == "permission: Needs you"
    assert screen == pending
    code, out, _err = run_cli("member", "explain", str(member))
    assert code == 0 and "source:  hook" in out
    assert run_cli("member", "explain", "999")[0] == 1


def test_hook_entry_imports_no_click() -> None:
    """The console script's fast path (`cafleet.cli.main`): no Click, no SQLAlchemy."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "sys.argv = ['cafleet', 'hook', 'stop', '--member-id', '1']\n"
        "from cafleet.cli import main\n"
        "try:\n    main()\nexcept SystemExit as e:\n    assert e.code == 0\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('click', 'sqlalchemy'))\n"
        "print(bad)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ),
        check=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert out.stdout.strip() == "[]"


def test_escalation_times_a_prompt_from_the_hooks_report() -> None:
    """A prompt the screen shows is timed from the hook's awaiting_user (docs/runtime.md
    §4.12), so `CAFLEET_ESCALATE_AFTER` counts from when the agent said it waits."""
    from cafleet.monitor.escalate import hook_waited

    now = datetime.now(UTC)
    assert hook_waited(None) == 0.0
    assert hook_waited(_signal("working", now - timedelta(seconds=30))) == 0.0
    assert 29 < hook_waited(_signal("awaiting_user", now - timedelta(seconds=30))) < 60
    assert hook_waited(_signal("awaiting_user", now + timedelta(seconds=30))) == 0.0
    assert hook_waited(_signal("awaiting_user", now - timedelta(hours=2))) == 0.0


def test_member_list_and_fleet_show_show_receipts(conn: Any, head_db: Path) -> None:
    """Each member's newest receipt: a `received` column and `last_received_at` in `member
    list`, a `received` line and list in `fleet show`; none before any hook reported one."""
    fleet_id, director, member = _fleet(conn)
    text = run_cli("member", "list", str(fleet_id))[1]
    assert "received" not in text.splitlines()[1]
    assert "received" not in run_cli("fleet", "show", str(fleet_id))[1]
    sent = broker.send_message(conn, from_member_id=director, to_member_id=member, text="hi")
    payload = json.dumps({"prompt": f"[cafleet msg {sent.message_id} from director ({director})]"})
    run_cli("hook", "prompt", "--member-id", str(member), input=payload)
    at = _received(conn, sent.message_id)
    assert at is not None
    rows = {
        r["member_id"]: r for r in json.loads(run_cli("member", "list", str(fleet_id), "--json")[1])
    }
    assert rows[member]["last_received_at"] == at
    assert rows[director]["last_received_at"] is None
    lines = run_cli("member", "list", str(fleet_id))[1].splitlines()
    assert lines[1].split()[-1] == "received"
    assert [line for line in lines[2:] if line.split()[:1] == [str(member)]][0].endswith(at)
    shown = json.loads(run_cli("fleet", "show", str(fleet_id), "--json")[1])
    assert shown["received"] == [{"member_id": member, "received_at": at}]
    assert f"member {member} at {at}" in run_cli("fleet", "show", str(fleet_id))[1]


NODE = shutil.which("node")
PLUGIN_STEP = """
const mod = await import(process.argv[2]);
const hooks = await mod.CafleetHooks({});
const [step, text] = [process.argv[3], process.argv[4]];
if (step === "none") { if (Object.keys(hooks).length) throw new Error("hooks outside a pane"); }
if (step === "prompt")
  await hooks["chat.message"]({ sessionID: "s1" }, { message: {}, parts: [{ type: "text", text }] });
if (step === "child") {
  await hooks.event({ event: { type: "session.created", properties: { info: { id: "s2", parentID: "s1" } } } });
  await hooks.event({ event: { type: "session.idle", properties: { sessionID: "s2" } } });
  await hooks["tool.execute.before"]({ tool: "bash", sessionID: "s1" }, { args: {} });
}
if (step === "permission")
  await hooks.event({ event: { type: "permission.asked", properties: { sessionID: "s1", permission: "bash", patterns: ["curl x"] } } });
if (step === "idle") await hooks.event({ event: { type: "session.idle", properties: { sessionID: "s1" } } });
"""


@pytest.mark.skipif(NODE is None, reason="needs node")
def test_opencode_plugin_reports_through_cafleet_hook(conn: Any, tmp_path: Path) -> None:
    """The installed plugin (`plugins/cafleet.js`) run by a real JS runtime: a user message's
    text stamps its receipt, a tool use reads working, a permission awaiting_user, the
    session's idle ready; a subagent's idle is not the member's; outside a member's pane
    (no `CAFLEET_HOOK_MEMBER`) it hooks nothing; a `cafleet` missing from PATH fails nothing."""
    import subprocess
    import sys

    from cafleet.agents.opencode import HOOK_VARIABLE, PLUGIN
    from cafleet.assets.bundle import preset
    from tests.cli_helpers import REPO_ROOT
    from tests.harness.util import retry_until

    assert PLUGIN == "plugins/cafleet.js"
    _fleet_id, director, member = _fleet(conn)
    plugin = tmp_path / "cafleet.mjs"
    plugin.write_bytes(preset("opencode-plugin.js", "9.9.9"))
    script = tmp_path / "step.mjs"
    script.write_text(PLUGIN_STEP, encoding="utf-8")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "cafleet"
    shim.write_text(
        f'#!/bin/sh\necho "$2" >> "{tmp_path}/events"\n'
        f'PYTHONPATH="{REPO_ROOT}" exec "{sys.executable}" -m cafleet "$@"\n',
        encoding="utf-8",
    )
    shim.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", HOOK_VARIABLE: str(member)}

    def step(name: str, text: str = "", environ: dict[str, str] = env) -> None:
        assert NODE is not None
        argv = [NODE, str(script), plugin.as_uri(), name, text]
        done = subprocess.run(argv, env=environ, capture_output=True, text=True, timeout=30)
        assert (done.returncode, done.stdout, done.stderr) == (0, "", ""), done

    def state() -> tuple[str, str] | None:
        signal = broker.hook_signal(conn, member)
        return None if signal is None else (signal.state, signal.event)

    step("none", environ={k: v for k, v in env.items() if k != HOOK_VARIABLE})
    step("prompt", environ={**env, "PATH": str(tmp_path / "nowhere")})  # no cafleet: no error
    sent = broker.send_message(conn, from_member_id=director, to_member_id=member, text="hi")
    step("prompt", f"[cafleet msg {sent.message_id} from director ({director})] hi")
    retry_until(lambda: _received(conn, sent.message_id), timeout=20)
    assert state() == ("working", "prompt")
    step("permission")
    retry_until(lambda: state() == ("awaiting_user", "permission"), timeout=20)
    signal = broker.hook_signal(conn, member)
    assert signal is not None and signal.text == "bash curl x"
    step("child")  # the child's idle is skipped; the tool use after it is reported
    retry_until(lambda: state() == ("working", "tool"), timeout=20)
    step("idle")
    retry_until(lambda: state() == ("ready", "idle"), timeout=20)
    events = (tmp_path / "events").read_text(encoding="utf-8").split()
    assert events == ["prompt", "permission", "tool", "idle"]


def test_gemini_hooks_file_runs_cafleet_hook_for_the_panes_member(
    conn: Any, tmp_path: Path
) -> None:
    """The extension's `hooks/hooks.json` as Gemini CLI runs it (`sh -c COMMAND`, the payload
    on stdin): `BeforeAgent`'s prompt stamps the receipt; `Notification` reads awaiting_user;
    without `CAFLEET_HOOK_MEMBER` (not a member's pane) `cafleet` is not even run."""
    import subprocess
    import sys

    from cafleet.agents.gemini import hooks_file
    from tests.cli_helpers import REPO_ROOT

    _fleet_id, director, member = _fleet(conn)
    hooks = json.loads(hooks_file())["hooks"]
    assert sorted(hooks) == ["AfterAgent", "BeforeAgent", "BeforeTool", "Notification"]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "cafleet"
    shim.write_text(
        f'#!/bin/sh\nPYTHONPATH="{REPO_ROOT}" exec "{sys.executable}" -m cafleet "$@"\n',
        encoding="utf-8",
    )
    shim.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    env["CAFLEET_HOOK_MEMBER"] = str(member)

    def run(name: str, payload: dict[str, Any]) -> None:
        command = hooks[name][0]["hooks"][0]["command"]
        done = subprocess.run(["sh", "-c", command], input=json.dumps(payload), env=env,
                              capture_output=True, text=True, timeout=30)  # fmt: skip
        assert (done.returncode, done.stdout) == (0, "")  # Gemini parses stdout as JSON

    sent = broker.send_message(conn, from_member_id=director, to_member_id=member, text="hi")
    run("BeforeAgent", {"prompt": f"[cafleet msg {sent.message_id} from director ({director})]"})
    assert _received(conn, sent.message_id) is not None
    run("Notification", {"notification_type": "ToolPermission", "message": "Allow curl?"})
    signal = broker.hook_signal(conn, member)
    assert signal is not None and (signal.state, signal.text) == ("awaiting_user", "Allow curl?")
    run("AfterAgent", {"prompt_response": "done"})
    signal = broker.hook_signal(conn, member)
    assert signal is not None and signal.state == "ready"
    assert get_agent("gemini").hook_env(member) == {"CAFLEET_HOOK_MEMBER": str(member)}
    shim.write_text("#!/bin/sh\nexit 3\n", encoding="utf-8")  # a run would fail
    del env["CAFLEET_HOOK_MEMBER"]
    run("AfterAgent", {})
