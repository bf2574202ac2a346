"""A pane is the member's only while its server is the one the placement was made on
(docs/runtime.md §1.8): a tmux server started again on the same socket, with the same session
name, hands out the same window and pane ids, and nothing cafleet types, captures or kills may
reach those panes. A pane respawned in place (same id, another process) is not the member's
either. One agent per member whatever runs at once (docs/runtime.md §5.11).

Real private tmux servers (killed and started again on the same socket), fake agents that log
every line that reaches them.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.fleet_helpers import FleetIds, create_fleet, create_member, ok, start_loop, stop_loop
from tests.harness.fixtures import SESSION, TmuxHarness
from tests.harness.util import (
    SHIM_LOG,
    fake_log,
    line_records,
    pane_stem,
    pid_alive,
    read_jsonl,
    retry_until,
    start_record,
)

pytestmark = pytest.mark.tmux


@pytest.fixture
def fleet(tmux_db: TmuxHarness) -> FleetIds:
    ids = create_fleet(tmux_db)
    stop_loop(tmux_db, ids.fleet_id)
    return ids


def new_server(h: Any, panes: int) -> tuple[list[str], dict[str, str]]:
    """Kill ``h``'s tmux server and start a new one on the same socket with the same session
    name and ``panes`` fake-agent panes in its first window (they take the old ids: `%0`,
    `%1`, …). The old fakes' logs are removed, so what the new panes log is theirs alone.
    Returns the new pane ids and the CLI environment of a command run in the first one."""
    h.tmux("kill-server", check=False)
    retry_until(lambda: not pid_alive(h.server_pid), timeout=10, message="old server alive")
    for log in h.fake_dir.glob("*.jsonl"):
        log.unlink()
    started = subprocess.run(
        [h.real_tmux, "-S", h.socket_path, "-f", "/dev/null", "new-session", "-d", "-s",
         h.session_name, "-x", "400", "-y", "200", "-c", str(h.project_dir),
         str(h.bin_dir / "claude")],
        env=h.server_env, capture_output=True, text=True, timeout=15,
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    first = h.tmux("display-message", "-p", "-t", f"={h.session_name}:", "#{pid}|#{pane_id}")
    pid, pane = first.strip().split("|")
    ids = [pane]
    for _ in range(panes - 1):
        ids.append(
            h.tmux(
                "split-window", "-d", "-P", "-F", "#{pane_id}", "-t", f"={h.session_name}:",
                "--", str(h.bin_dir / "claude"),
            ).strip()
        )  # fmt: skip
    for new in ids:
        started_in(h, new)
    return ids, {"TMUX": f"{h.socket_path},{pid},0", "TMUX_PANE": pane}


def started_in(h: Any, pane: str) -> dict[str, Any]:
    """The start record of the fake agent running in ``pane`` of ``h``'s server now (a new
    server reuses pane ids; each harness has its own fake directory)."""
    path = h.fake_dir / f"{pane_stem(pane)}.jsonl"

    def record() -> dict[str, Any] | None:
        pid = int(h.pane_format(pane, "#{pane_pid}"))
        starts = [r for r in read_jsonl(path) if r.get("kind") == "start" and r.get("pid") == pid]
        return starts[-1] if starts else None

    return dict(retry_until(record, timeout=15, message=f"no start record in {pane}"))


def agents(h: Any) -> dict[str, list[str]]:
    """The panes of ``h``'s server running a fake agent spawned for a member, by its `--name`
    (the root Director's pane, started by hand, has none)."""
    found: dict[str, list[str]] = {}
    for pane in sorted(h.live_panes()):
        argv = started_in(h, pane)["argv"]
        if "--name" in argv:
            found.setdefault(argv[argv.index("--name") + 1], []).append(pane)
    return found


def set_faults(h: Any, rules: list[dict[str, Any]]) -> None:
    """The tmux shim's fault rules of ``h`` (tests/harness/tmux_shim.py), counters reset."""
    path = Path(h.env["CAFLEET_TMUX_FAULTS"])
    Path(f"{path}.counts").unlink(missing_ok=True)
    path.write_text(json.dumps(rules), encoding="utf-8")


def calls(h: Any, command: str, pid: int) -> int:
    """How many ``command`` calls process ``pid`` made through ``h``'s tmux shim."""
    log = read_jsonl(h.dir / SHIM_LOG)
    return sum(1 for c in log if c.get("command") == command and c.get("ppid") == pid)


def lock_waiter(pid: int) -> bool:
    """Whether ``pid`` waits for a `flock` (a blocked request in /proc/locks)."""
    with open("/proc/locks", encoding="ascii") as fh:
        for line in fh:
            fields = line.split()
            if (
                "->" in fields
                and str(pid) in fields[fields.index("->") + 4 : fields.index("->") + 5]
            ):
                return True
    return False


def refusal(pane: str) -> str:
    return f"Error: pane {pane} belongs to another tmux server or was reused\n"


def test_a_new_server_on_the_same_socket_never_gets_a_members_keystroke(
    tmux_db: TmuxHarness, fleet: FleetIds
) -> None:
    """The fleet's server is killed and a new one started on its socket, with the same session
    name and panes taking the old ids (the Director's, the monitor's, the member's). The
    running loop stops (the Director's pane is gone); prompt, ping, answer and capture are
    refused; a send stores the message and types nothing; `member list` reads the member's pane
    gone and `member delete` kills nothing. No line reaches any pane of the new server."""
    h = tmux_db
    f, d = fleet.fleet_id, fleet.director_id
    member, pane = create_member(h, f, "alpha")
    assert h.session_name == SESSION
    loop = start_loop(h, f, "--tick", "1", "--interval", "1")
    loop.wait_line(r"wake monitor", timeout=20)  # it wakes the monitor on the old server

    panes, here = new_server(h, 3)
    assert panes == [h.director_pane, fleet.monitor_pane, pane]
    # The loop sees its Director's pane gone and stops; it never wakes the new %1.
    loop.wait_line(rf"director pane {h.director_pane} is gone; stopping", timeout=20)
    retry_until(lambda: loop.proc.poll() is not None, timeout=10, message="loop still running")

    for args in (
        ("member", "prompt", str(member), "hello"),
        ("member", "ping", str(member)),
        ("member", "capture", str(member)),
    ):
        r = h.cli(*args, env=here)
        assert (r.returncode, r.stderr) == (1, refusal(pane)), args
    r = h.cli("member", "answer", str(member), "1", env=here)
    assert (r.returncode, r.stderr) == (1, refusal(pane).replace("\n", "; nothing was typed\n"))
    sent = h.cli(
        "message", "send", "--from-member-id", str(d), "--to-member-id", str(member),
        "are you there?", "--json", env=here,
    )  # fmt: skip
    assert sent.returncode == 0, sent.stderr
    assert json.loads(sent.stdout)["notification_sent"] is False
    listed = json.loads(ok(h.cli("member", "list", str(f), "--json", env=here)).stdout)
    states = {m["member_id"]: m["pane_state"] for m in listed}
    assert states[member] == states[fleet.monitor_id] == "gone", states
    gone = json.loads(ok(h.cli("member", "delete", str(member), "--json", env=here)).stdout)
    assert gone["pane_status"] == "already_gone"
    # Nor is a member split into the new server's window with the Director's old id.
    for args in (
        ("member", "create", "--fleet-id", str(f), "--name", "b", "--description", "d", "hi"),
        ("member", "respawn", str(fleet.monitor_id)),
    ):
        r = h.cli(*args, env=here)
        assert (r.returncode, r.stderr) == (1, refusal(h.director_pane)), args

    assert set(panes) <= h.live_panes()  # nothing killed
    assert {p: line_records(p) for p in panes} == {p: [] for p in panes}  # nothing typed


def test_a_server_restarted_while_a_line_is_typed_never_gets_its_enter(
    tmux_db: TmuxHarness, fleet: FleetIds
) -> None:
    """The server is restarted between a line's text and its Enter (a line is typed, settled and
    verified over seconds): each key is pressed only while the pane is still the member's, so
    the Enter never reaches the new server's pane with the member's id."""
    h = tmux_db
    member, pane = create_member(h, fleet.fleet_id, "alpha")
    start_record(pane)
    release = h.dir / "release-typing"
    set_faults(
        h,
        [{"command": "send-keys", "arg": "-l", "action": "pause_until", "path": str(release),
          "times": 1}],
    )  # fmt: skip
    typing = h.popen_cli("member", "prompt", str(member), "hello")
    retry_until(lambda: calls(h, "send-keys", typing.pid) == 1, timeout=30, message="not typing")
    panes, _here = new_server(h, 3)
    release.write_text("go", encoding="utf-8")
    assert typing.wait(timeout=60) == 1
    assert typing.stderr is not None and typing.stderr.read() == refusal(pane)
    assert {p: line_records(p) for p in panes} == {p: [] for p in panes}  # no Enter reached


def test_a_pane_respawned_in_place_is_not_the_members(
    tmux_db: TmuxHarness, fleet: FleetIds
) -> None:
    """Same server, same pane id, another process (`respawn-pane -k`): the process cafleet
    spawned is gone, so the pane is not the member's; nothing is typed into it."""
    h = tmux_db
    member, pane = create_member(h, fleet.fleet_id, "alpha")
    start_record(pane)
    before = int(h.pane_format(pane, "#{pane_pid}"))
    h.tmux("respawn-pane", "-k", "-t", pane, "--", str(h.bin_dir / "claude"))
    retry_until(lambda: int(h.pane_format(pane, "#{pane_pid}")) != before, timeout=10)
    retry_until(
        lambda: any(r.get("kind") == "start" and r.get("pid") != before for r in fake_log(pane)),
        timeout=15,
    )
    lines = len(line_records(pane))
    r = h.cli("member", "prompt", str(member), "hello")
    assert (r.returncode, r.stderr) == (1, refusal(pane))
    listed = json.loads(ok(h.cli("member", "list", str(fleet.fleet_id), "--json")).stdout)
    assert {m["member_id"]: m["pane_state"] for m in listed}[member] == "gone"
    assert len(line_records(pane)) == lines


# --- one agent per member (docs/runtime.md §5.11) -------------------------------------------------


def test_a_killed_restore_rerun_leaves_one_agent_per_member(
    tmux_db: TmuxHarness, fleet: FleetIds
) -> None:
    """`fleet restore` is killed (-9) right after tmux spawned a member's agent, before the
    pane was recorded; the rerun ends that agent and gives every member exactly one."""
    h = tmux_db
    create_member(h, fleet.fleet_id, "alpha")
    _panes, here = new_server(h, 1)
    set_faults(h, [{"command": "split-window", "action": "kill_caller_after", "times": 1}])
    killed = h.cli("fleet", "restore", str(fleet.fleet_id), env=here, timeout=120)
    assert killed.returncode == -9, (killed.stdout, killed.stderr)
    set_faults(h, [])
    ok(h.cli("fleet", "restore", str(fleet.fleet_id), env=here, timeout=120))
    found = agents(h)
    assert {name: len(panes) for name, panes in found.items()} == {"monitor": 1, "alpha": 1}, found


def race_restores(h: Any, fleet_id: int, here: dict[str, str], blocked: Any) -> list[Any]:
    """Two `fleet restore` at once in the same pane of ``h``: the first pauses in its first
    split-window (holding what it holds); the second starts and runs until ``blocked(pid)``
    says it waits; then the first goes on. Returns both finished processes (text output)."""
    release = h.dir / "release-restore"
    set_faults(
        h,
        [{"command": "split-window", "action": "pause_until", "path": str(release), "times": 1}],
    )
    first = h.popen_cli("fleet", "restore", str(fleet_id), env=here)
    retry_until(
        lambda: calls(h, "split-window", first.pid) == 1, timeout=30, message="first not paused"
    )
    second = h.popen_cli("fleet", "restore", str(fleet_id), env=here)
    retry_until(lambda: blocked(second.pid), timeout=30, message="second never waited")
    release.write_text("go", encoding="utf-8")
    for proc in (first, second):
        proc.wait(timeout=120)
    set_faults(h, [])
    return [first, second]


def member_lines(proc: Any) -> dict[str, str]:
    """A finished restore's `member <M> (<name>): …` lines, by name."""
    out = proc.stdout.read()
    return {
        line.split("(", 1)[1].split(")", 1)[0]: line.split("): ", 1)[1]
        for line in out.splitlines()
        if line.startswith("member ")
    }


def assert_one_agent_each(h: Any, procs: list[Any], names: list[str]) -> None:
    """Each member has one agent; one restore re-created it, the other reports that pane."""
    found = agents(h)
    assert {n: len(found.get(n, [])) for n in names} == {n: 1 for n in names}, found
    lines = [member_lines(p) for p in procs]
    for name in names:
        pane = found[name][0]
        said = sorted(lines[0][name].split(" in ")[0:1] + lines[1][name].split(" in ")[0:1])
        assert f"alive in pane {pane}, left alone" in (lines[0][name], lines[1][name]), lines
        assert said[0] in ("resumed session", "started afresh") or said[1] in (
            "resumed session",
            "started afresh",
        ), lines


def test_two_restores_at_once_give_each_member_one_agent(
    tmux_db: TmuxHarness, fleet: FleetIds
) -> None:
    """On the Director's host (SQLite): the second restore waits for the member the first one
    is re-creating, then reports its pane; no member gets two agents."""
    h = tmux_db
    create_member(h, fleet.fleet_id, "alpha")
    _panes, here = new_server(h, 1)

    def blocked(pid: int) -> bool:
        # This command waits for the member (its lock), or (without one) has reached the pane
        # lock of the member's old pane, after the respawn's own server check.
        return lock_waiter(pid) or calls(h, "list-sessions", pid) >= 3

    procs = race_restores(h, fleet.fleet_id, here, blocked)
    assert [p.returncode for p in procs] == [0, 0], [p.stderr.read() for p in procs]
    assert_one_agent_each(h, procs, ["monitor", "alpha"])


@pytest.mark.parametrize("dialect", ["postgresql"], indirect=True)
def test_two_restores_at_once_on_a_member_host_give_one_agent(
    monkeypatch: pytest.MonkeyPatch, dialect: str, request: pytest.FixtureRequest
) -> None:
    """PostgreSQL, two hosts: bee's host B restarts its tmux server; two `fleet restore` at once
    on B give bee one agent (the member's row lock queues them), and the loser names it."""
    import contextlib

    from tests.test_hosts import _ok, _two_hosts, _use_dialect

    _use_dialect(dialect, monkeypatch, request)
    server = request.getfixturevalue("pg_server")
    with contextlib.ExitStack() as stack:
        a, b, fleet_id, _director, _monitor = _two_hosts(stack, monkeypatch)
        member = ["member", "create", "--fleet-id", str(fleet_id), "--description", "d"]
        _ok(b.cli(*member, "--name", "bee", "hello {member_id}"))
        _ok(b.cli("monitor", "host", "stop"))
        _panes, here = new_server(b, 1)

        def blocked(pid: int) -> bool:
            # Waits for bee's row lock (a cafleet session waiting on a lock), or (without one)
            # has reached the pane lock of bee's old pane.
            import psycopg

            with psycopg.connect(server.url("postgres"), autocommit=True) as pg:
                row = pg.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'cafleet' "
                    "AND wait_event_type = 'Lock'"
                ).fetchone()
            return (row is not None and row[0] > 0) or calls(b, "list-sessions", pid) >= 2

        procs = race_restores(b, fleet_id, here, blocked)
        assert [p.returncode for p in procs] == [0, 0], [p.stderr.read() for p in procs]
        assert_one_agent_each(b, procs, ["bee"])


@pytest.mark.parametrize("dialect", ["postgresql"], indirect=True)
def test_a_member_hosts_new_server_never_gets_its_lines(
    monkeypatch: pytest.MonkeyPatch, dialect: str, request: pytest.FixtureRequest
) -> None:
    """PostgreSQL, two hosts: member bee's host B restarts its tmux server (same socket, same
    session name, panes taking the old ids) while B's delivery loop runs. A's message to bee is
    stored and held; B's loop ticks on and types it nowhere; a prompt run on B is refused."""
    import contextlib

    from tests.test_hosts import _ok, _two_hosts, _use_dialect

    _use_dialect(dialect, monkeypatch, request)
    with contextlib.ExitStack() as stack:
        a, b, fleet_id, director, _monitor = _two_hosts(stack, monkeypatch)
        member = ["member", "create", "--fleet-id", str(fleet_id), "--description", "d"]
        out = _ok(b.cli(*member, "--name", "bee", "hello {member_id}")).stdout.split()
        bee, bee_pane = int(out[0]), out[3].removeprefix("pane=")
        panes, here = new_server(b, 2)
        assert bee_pane in panes
        sent = _ok(
            a.cli(
                "message", "send", "--from-member-id", str(director), "--to-member-id", str(bee),
                "for bee", "--json",
            )
        )  # fmt: skip
        assert json.loads(sent.stdout)["notification_sent"] is False

        def tick() -> Any:
            rows = a.sqlite("SELECT last_tick_at FROM host_loops WHERE host_id = 'host-b'")
            return rows[0][0] if rows else None

        first = tick()
        retry_until(lambda: tick() not in (None, first), timeout=30, message="B's loop is gone")
        second = tick()
        retry_until(lambda: tick() != second, timeout=30, message="B's loop stopped ticking")
        r = b.cli("member", "prompt", str(bee), "hello", env=here)
        assert (r.returncode, r.stderr) == (1, refusal(bee_pane))
        lines = {p: [r for r in read_jsonl(b.fake_dir / f"{pane_stem(p)}.jsonl")
                     if r.get("kind") == "line"] for p in panes}  # fmt: skip
        assert lines == {p: [] for p in panes}
