"""Fleets across machines (docs/runtime.md §10): host ids, the only-own-host rule, each host's
delivery loop. The unit tests need no tmux; the two-host test simulates two machines on this
one: two private tmux servers, two `CAFLEET_HOST_ID` values, one database.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
from pathlib import Path
from typing import Any

import pytest

from cafleet.hosts import HostIdError, effective_host, host_id_of, is_local, valid_host_id
from tests.cli_helpers import run_cli
from tests.delivery_helpers import message_row, sql_write
from tests.factories import build_world, connect

OTHER = "gpu-box.lab"


# --- host ids (docs/cli.md §1.6) -----------------------------------------------------------------


@pytest.mark.parametrize("value", ["laptop", "gpu-box.lab", "A1_b-2.c", "x" * 253, "9host"])
def test_a_valid_host_id_is_taken_as_given(value: str) -> None:
    assert valid_host_id(value)
    assert host_id_of({"CAFLEET_HOST_ID": value}) == value


@pytest.mark.parametrize(
    "value", ["bad host", "-lead", ".dot", "a/b", "x" * 254, "tab\there", "ünïcode", "a:b"]
)
def test_an_unusable_host_id_is_refused_with_the_rule(value: str) -> None:
    assert not valid_host_id(value)
    with pytest.raises(HostIdError) as caught:
        host_id_of({"CAFLEET_HOST_ID": value})
    assert str(caught.value) == (
        "CAFLEET_HOST_ID must be a host id (letters, digits, '.', '_' and '-', starting with a "
        f"letter or digit, at most 253); got {value!r}"
    )


def test_the_default_is_the_hostname_or_its_first_label(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    import cafleet.hosts

    assert cafleet.hosts._hostname() == socket.gethostname()
    monkeypatch.setattr(cafleet.hosts, "_hostname", lambda: "box7.example.org")
    assert host_id_of({}) == host_id_of({"CAFLEET_HOST_ID": ""}) == "box7.example.org"
    monkeypatch.setattr(cafleet.hosts, "_hostname", lambda: "box 7.example")
    with pytest.raises(HostIdError, match="the hostname 'box 7.example' is not a usable host id"):
        host_id_of({})
    monkeypatch.setattr(cafleet.hosts, "_hostname", lambda: "box7.ex ample")
    assert host_id_of({}) == "box7"  # the whole name is not usable; its first label is


def test_a_bad_host_id_stops_every_command_before_it_writes(head_db: Path) -> None:
    """Validated with the other CAFLEET_* variables (exit 1, `Error:`), before anything is
    written: a send under an unusable id stores nothing."""
    from tests.storage_helpers import dump

    w = build_world(head_db, members=("alice", "bob"))
    before = dump(head_db)
    code, out, err = run_cli(
        "message", "send", "--from-member-id", str(w.members["alice"]),
        "--to-member-id", str(w.members["bob"]), "hi",
        env={"CAFLEET_HOST_ID": "two words"},
    )  # fmt: skip
    assert (code, out) == (1, "")
    assert err == (
        "Error: CAFLEET_HOST_ID must be a host id (letters, digits, '.', '_' and '-', starting "
        "with a letter or digit, at most 253); got 'two words'\n"
    )
    assert dump(head_db) == before


def test_the_only_own_host_rule() -> None:
    """A placement's host is its own, else its root Director's; nowhere recorded: any host's."""
    assert effective_host("b", "a") == "b" and effective_host(None, "a") == "a"
    assert effective_host(None, None) is None
    assert is_local("a", "b", "a") and not is_local("b", "a", "a")
    assert is_local(None, "a", "a") and not is_local(None, "b", "a")
    assert is_local(None, None, "anyone")


def test_a_loops_liveness_window_is_three_ticks_never_below_the_verification_wait() -> None:
    """docs/runtime.md §10.4's decision: seen from another host a loop is live while its
    heartbeat is at most max(3 x tick, 15) s old; the floor is the delivery's verification
    wait, during which a live loop writes no heartbeat."""
    from datetime import timedelta

    from cafleet import broker
    from cafleet.db.timefmt import format_ts, utcnow
    from cafleet.delivery.policy import VERIFY_TIMEOUT
    from cafleet.monitor.runtime import MIN_STALE_SECONDS, stale_after
    from cafleet.records import HostLoop

    assert MIN_STALE_SECONDS >= VERIFY_TIMEOUT
    now = utcnow()

    def live_at(age: float, tick: int) -> bool:
        beat = format_ts(now - timedelta(seconds=age))
        return broker.host_loop_live(HostLoop(OTHER, 2**22 + 7, beat, beat, tick), "here", now)

    for tick, window in ((1, 15), (5, 15), (20, 60)):
        assert stale_after(tick) == window
        assert live_at(window - 0.5, tick) and not live_at(window + 0.5, tick), tick


# --- drains leave other hosts' panes alone (docs/runtime.md §10.2) ------------------------------


def _world_with_one_member_elsewhere(db: Path) -> Any:
    """Alice on this host, Bob on OTHER (his placement says so), one pending line each."""
    w = build_world(db, members=("alice", "bob"))
    alice, bob = w.members["alice"], w.members["bob"]
    sql_write(db, "UPDATE member_placements SET host_id = ? WHERE member_id = ?", OTHER, bob)
    with connect(db) as conn:
        from cafleet import broker

        to_alice = broker.send_message(conn, from_member_id=bob, to_member_id=alice, text="hi")
        to_bob = broker.send_message(conn, from_member_id=alice, to_member_id=bob, text="yo")
    return w, to_alice.message_id, to_bob.message_id


def test_a_send_never_reaches_for_another_hosts_pane(head_db: Path) -> None:
    """The recipient on another host: no tmux call (the attempt before it would have needed
    TMUX, which this process lacks), the line stays pending, reported as held for that host's
    loop; the local one is attempted (and fails here for want of tmux)."""
    from cafleet.delivery.drains import drain_recipients, held_line

    w, to_alice, to_bob = _world_with_one_member_elsewhere(head_db)
    alice, bob = w.members["alice"], w.members["bob"]
    with connect(head_db) as conn:
        report = drain_recipients(
            conn, [alice, bob], attempted=set(), lock_timeout=1.0, env={}, workers=1
        )
    by_recipient = {f.recipient_id: f for f in report.failures}
    assert by_recipient[bob].remote == OTHER and by_recipient[bob].message_id == to_bob
    assert by_recipient[alice].remote is None
    assert by_recipient[alice].reason == "not inside a tmux session (TMUX is not set)"
    assert report.notified == []
    assert held_line(by_recipient[bob]) == (
        f"Held: message {to_bob} for member {bob} waits for host {OTHER}'s delivery loop "
        f"(pane {w.panes[bob]} is on host {OTHER}, not this one)"
    )
    assert message_row(head_db, to_bob)["notified_at"] is None
    assert message_row(head_db, to_alice)["notified_at"] is None


def test_the_fleet_drain_skips_and_the_host_drain_takes_another_hosts_lines(head_db: Path) -> None:
    from cafleet import broker
    from cafleet.delivery.drains import drain_fleet
    from cafleet.hosts import current_host

    w, to_alice, to_bob = _world_with_one_member_elsewhere(head_db)
    alice, bob = w.members["alice"], w.members["bob"]
    with connect(head_db) as conn:
        # The fleet drain (a loop tick, `message wait`): Bob's pane is even "live" here (a pane
        # id can repeat across servers), yet his line is never attempted.
        live = frozenset(p for p in w.panes.values() if p is not None)
        seen: set[int] = set()
        report = drain_fleet(
            conn,
            w.fleet_id,
            attempted=seen,
            blocked=set(),
            lock_timeout=1.0,
            live_panes=live,
            env={},
            workers=1,
        )
        assert seen == {to_alice}
        assert [f.recipient_id for f in report.failures] == [alice]
        # The host drain's selection: OTHER's loop gets Bob's line; this host's loop nothing
        # (its Director is here, so its fleet loop serves this host).
        heads = broker.oldest_pending_by_recipient(conn, host_id=OTHER)
        assert [(h.recipient.member_id, h.message.message_id) for h in heads] == [(bob, to_bob)]
        assert heads[0].host == OTHER and heads[0].director_host == current_host()
        assert broker.oldest_pending_by_recipient(conn, host_id=current_host()) == []
        assert broker.host_serves(conn, OTHER) and not broker.host_serves(conn, current_host())


def test_rows_written_before_hosts_are_this_hosts(head_db: Path) -> None:
    """NULL everywhere (an upgraded database): every host types into every pane, as before."""
    from cafleet import broker
    from cafleet.delivery.drains import drain_recipients

    w, _to_alice, to_bob = _world_with_one_member_elsewhere(head_db)
    bob = w.members["bob"]
    sql_write(head_db, "UPDATE member_placements SET host_id = NULL")
    with connect(head_db) as conn:
        report = drain_recipients(conn, [bob], attempted=set(), lock_timeout=1.0, env={})
        assert [(f.message_id, f.remote) for f in report.failures] == [(to_bob, None)]
        assert broker.oldest_pending_by_recipient(conn, host_id=OTHER) == []


# --- two hosts, one database (docs/runtime.md §10) -----------------------------------------------


def _lines(h: Any, pane: str) -> list[str]:
    """What reached the fake agent in ``pane`` of harness ``h`` (its own fake dir: the other
    harness's panes have the same ids)."""
    from tests.harness import util

    path = h.fake_dir / f"{util.pane_stem(pane)}.jsonl"
    return [
        util.record_bytes(r).decode("utf-8", "replace")
        for r in util.read_jsonl(path)
        if r.get("kind") == "line"
    ]


def _typed(h: Any, pane: str, message_id: int) -> int:
    return sum(1 for line in _lines(h, pane) if f"[cafleet msg {message_id} from" in line)


def _ok(result: Any) -> Any:
    if result.returncode != 0 and "see /" in result.stderr:  # a loop's log says why
        log = result.stderr.rsplit("see ", 1)[1].strip()
        with contextlib.suppress(OSError):
            result.stderr += Path(log).read_text(encoding="utf-8", errors="replace")
    assert result.returncode == 0, (result.returncode, result.stdout, result.stderr)
    return result


def _host_row(h: Any, host: str) -> tuple[Any, ...] | None:
    rows = h.sqlite("SELECT pid, last_tick_at FROM host_loops WHERE host_id = ?", host)
    return rows[0] if rows else None


def _use_dialect(
    dialect: str, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    """On PostgreSQL both hosts share a fresh database of the session's server."""
    if dialect == "postgresql":
        from tests.pg_server import PgDb

        server = request.getfixturevalue("pg_server")
        monkeypatch.setenv("CAFLEET_DATABASE_URL", PgDb(server, server.new_database()).url)


def _two_hosts(stack: contextlib.ExitStack, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, ...]:
    """Two simulated hosts on this machine (host-a, host-b: each its own private tmux server,
    bin directory, fake agents and tmux shim; one database) and a fleet created on host-a:
    ``(a, b, fleet_id, director, monitor)``. Teardowns are on ``stack``."""
    from tests.harness.fixtures import private_tmux

    path = os.environ.get("PATH", "")
    a = stack.enter_context(private_tmux(monkeypatch))
    # A's teardown runs after B's: with A's TMUX_TMPDIR again, so it finds its own server.
    stack.callback(lambda: monkeypatch.setenv("TMUX_TMPDIR", str(a.dir)))
    # B's harness must find the real tmux, not A's shim (first on PATH now): each host has
    # its own bin directory, fake agents and shim, as two machines would.
    monkeypatch.setenv("PATH", path)
    b = stack.enter_context(private_tmux(monkeypatch))
    a.env["CAFLEET_HOST_ID"], b.env["CAFLEET_HOST_ID"] = "host-a", "host-b"
    _ok(a.cli("setup"))
    created = _ok(a.cli("fleet", "create", "--name", "wide", "--coding-agent", "claude"))
    fleet_id, director, monitor = (
        int(x)
        for x in re.match(r"(\d+) director=(\d+) monitor=(\d+)", created.stdout).groups()  # type: ignore[union-attr]
    )
    stack.callback(lambda: a.cli("monitor", "stop", str(fleet_id)))
    stack.callback(lambda: b.cli("monitor", "host", "stop"))  # runs before A's loop stops
    return a, b, fleet_id, director, monitor


@pytest.mark.tmux
@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"], indirect=True)
def test_a_fleet_across_two_hosts(
    monkeypatch: pytest.MonkeyPatch, dialect: str, request: pytest.FixtureRequest
) -> None:
    """Host A runs the Director, the monitor and member alpha; host B member bee, created from
    a pane on B. A's message to bee is typed by B's loop, never by A (each harness's tmux shim
    refuses, and its teardown fails on, any call to the other server); with B's loop killed the
    line waits through A's loop ticks and A's commands, and a command run on B heals the loop,
    which then types it. The Director on A sees both hosts."""
    from tests.harness import util

    _use_dialect(dialect, monkeypatch, request)
    with contextlib.ExitStack() as stack:
        a, b, fleet_id, director, _monitor = _two_hosts(stack, monkeypatch)
        member = ["member", "create", "--fleet-id", str(fleet_id), "--description", "d"]
        alpha_out = _ok(a.cli(*member, "--name", "alpha", "hello {member_id}")).stdout
        alpha = int(alpha_out.split()[0])
        bee_out = _ok(b.cli(*member, "--name", "bee", "hello {member_id}")).stdout.splitlines()
        bee, bee_pane = int(bee_out[0].split()[0]), bee_out[0].rsplit("pane=", 1)[1]
        loop_pid = int(re.fullmatch(r"delivery loop for host host-b: pid (\d+)", bee_out[1])[1])  # type: ignore[index]
        placements = dict(
            a.sqlite(
                "SELECT member_id, host_id || ' ' || mux_socket FROM member_placements "
                "WHERE member_id IN (?, ?, ?)",
                director,
                alpha,
                bee,
            )
        )
        assert placements == {
            director: f"host-a {a.socket_path}",
            alpha: f"host-a {a.socket_path}",
            bee: f"host-b {b.socket_path}",  # B's pane, on B's tmux server
        }
        assert bee_pane in b.live_panes()

        # 1. A sends to bee: held for B's loop (not a failure), typed by B's loop.
        sent = a.cli(
            "message", "send", "--from-member-id", str(alpha), "--to-member-id", str(bee),
            "first", "--json",
        )  # fmt: skip
        _ok(sent)
        first = json.loads(sent.stdout)["message"]["message_id"]
        assert json.loads(sent.stdout)["notification_sent"] is False
        assert f"Held: message {first} for member {bee} waits for host host-b's delivery loop" in (
            sent.stderr
        )
        assert "Warning" not in sent.stderr
        util.retry_until(lambda: _typed(b, bee_pane, first) == 1, timeout=30, message="not typed")
        util.retry_until(
            lambda: message_row(a.db_path, first)["notified_at"] is not None, timeout=10
        )
        log = Path(f"{a.db_path}.host-host-b.log") if dialect == "sqlite" else None
        if log is not None:  # written once the drain returns
            util.retry_until(
                lambda: f"host -> notify msg {first} member {bee}" in log.read_text("utf-8"),
                timeout=10,
            )

        # 2. B's loop killed: the next line waits, through A's loop ticks and A's commands.
        os.kill(loop_pid, signal.SIGKILL)
        util.retry_until(lambda: not util.pid_alive(loop_pid), timeout=10)
        sent = _ok(
            a.cli(
                "message", "send", "--from-member-id", str(alpha), "--to-member-id", str(bee),
                "second", "--json",
            )
        )  # fmt: skip
        second = json.loads(sent.stdout)["message"]["message_id"]
        assert f"Held: message {second} for member {bee}" in sent.stderr
        beat = a.sqlite("SELECT last_tick_at FROM monitor_runtime WHERE fleet_id = ?", fleet_id)
        util.retry_until(  # two more ticks of A's fleet loop after the send
            lambda: (
                a.sqlite("SELECT last_tick_at FROM monitor_runtime WHERE fleet_id = ?", fleet_id)[
                    0
                ][0]
                > beat[0][0]
            ),
            timeout=20,
        )
        listed = _ok(a.cli("member", "list", str(fleet_id)))  # A's command heals only A's
        assert message_row(a.db_path, second)["notified_at"] is None
        assert _typed(b, bee_pane, second) == 0
        assert _host_row(a, "host-b")[0] == loop_pid  # type: ignore[index]

        # The Director on A sees both hosts: a host column and each host's delivery.
        count, header, _rule, *rows = listed.stdout.splitlines()[:7]
        assert count == "4 members:" and header.split()[-1] == "host"
        hosts = {int(r.split()[0]): r.split()[-1] for r in rows}
        assert "on host host-b" in rows[-1]  # B's pane is not asked from A
        assert hosts == {director: "host-a", alpha: "host-a", _monitor: "host-a", bee: "host-b"}
        assert (
            f"host host-a: members {director}, {_monitor}, {alpha}; the root Director's host"
            in (listed.stdout)
        )
        assert f"host host-b: member {bee}; delivery loop" in listed.stdout
        shown = json.loads(_ok(a.cli("member", "list", str(fleet_id), "--json")).stdout)
        assert {m["member_id"]: m["host_id"] for m in shown} == hosts

        # 3. Any command on B heals B's loop, which types the waiting line.
        _ok(b.cli("fleet", "list"))
        util.retry_until(lambda: _typed(b, bee_pane, second) == 1, timeout=30, message="waits")
        util.retry_until(
            lambda: message_row(a.db_path, second)["notified_at"] is not None, timeout=10
        )
        healed = _host_row(a, "host-b")
        assert healed is not None and healed[0] not in (None, loop_pid)
        assert _typed(b, bee_pane, first) == 1  # at least once, and here exactly once
        status = _ok(b.cli("monitor", "host", "status")).stdout
        assert f"host host-b (this host): live (pid {healed[0]}" in status

        # The WebUI on A: each pane's host, B's pane not asked from A, both hosts' delivery.
        from tests.web_helpers import client, fleet_headers, make_app

        for name in ("CAFLEET_HOST_ID", "PATH", "TMUX_TMPDIR"):  # this process is on A now
            monkeypatch.setenv(name, a.env[name])
        with client(make_app(a.db_path)) as web:
            panes = web.get("/api/members/panes", headers=fleet_headers(fleet_id)).json()
        for name in ("PATH", "TMUX_TMPDIR"):  # and on B again (B's teardown comes first)
            monkeypatch.setenv(name, b.env[name])
        monkeypatch.delenv("CAFLEET_HOST_ID")
        assert {p["member_id"]: p["host_id"] for p in panes["panes"]} == hosts
        assert [p["state"] for p in panes["panes"] if p["member_id"] == bee] == ["unknown"]
        assert [(h["host_id"], h["director"], h["live"]) for h in panes["hosts"]] == [
            ("host-a", True, True),
            ("host-b", False, True),
        ]

        # 4. New work wakes the loop at once (PostgreSQL: LISTEN; SQLite: data_version): a loop
        # whose tick is an hour still types a line sent after its first pass.
        stopped = _ok(b.cli("monitor", "host", "stop")).stdout
        assert stopped.startswith(f"delivery loop for host host-b stopped (pid {healed[0]})")
        run = b.popen_cli("monitor", "host", "run", "--tick", "3600")
        util.retry_until(
            lambda: (row := _host_row(a, "host-b")) is not None and row[0] == run.pid,
            timeout=20,
            message="the foreground loop did not claim the slot",
        )
        first_pass = run.stdout.readline()  # type: ignore[union-attr]
        assert first_pass.startswith("host loop started (host host-b, tick 3600s, pid ")
        sent = _ok(
            a.cli(
                "message", "send", "--from-member-id", str(alpha), "--to-member-id", str(bee),
                "third", "--json",
            )
        )  # fmt: skip
        third = json.loads(sent.stdout)["message"]["message_id"]
        util.retry_until(lambda: _typed(b, bee_pane, third) == 1, timeout=30, message="no wake")
        run.send_signal(signal.SIGTERM)
        assert run.wait(timeout=20) == 0
        assert _host_row(a, "host-b")[0] is None  # type: ignore[index]  # released

        # 5. A never reads, types into or kills B's pane: the same id names another pane on A.
        for command in (["prompt", str(bee), "hi"], ["capture", str(bee)]):
            refused = a.cli("member", *command)
            assert (refused.returncode, refused.stdout) == (1, ""), command
            assert refused.stderr == (
                f"Error: member {bee}'s pane {bee_pane} is on host host-b, not this host "
                "(host-a); run this command on host host-b\n"
            )
        scanned = json.loads(_ok(a.cli("monitor", "scan", str(fleet_id), "--json")).stdout)
        assert [e["error"] for e in scanned if e["member_id"] == bee] == [
            "capture failed: the pane is on host host-b"
        ]
        assert all(e["error"] is None for e in scanned if e["member_id"] != bee)
        deleted = _ok(a.cli("member", "delete", str(bee)))
        assert f"{bee_pane} (on another host; not killed)" in deleted.stdout
        assert bee_pane in b.live_panes() and _typed(b, bee_pane, third) == 1


def _roster(h: Any) -> list[tuple[Any, ...]]:
    """Every member and its placement: what a refused command must leave as it was."""
    return h.sqlite(
        "SELECT m.member_id, m.status, p.host_id, p.mux_socket, p.mux_session, p.mux_window_id, "
        "p.mux_pane_id FROM members m LEFT JOIN member_placements p USING (member_id) "
        "ORDER BY m.member_id"
    )


@pytest.mark.tmux
@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"], indirect=True)
def test_a_member_on_another_host_is_created_respawned_and_restored_only_there(
    monkeypatch: pytest.MonkeyPatch, dialect: str, request: pytest.FixtureRequest
) -> None:
    """docs/runtime.md §10.3: bee's pane is on host B, its Director on A. From a plain shell
    on B (no tmux pane) `member create` and `member respawn` are refused naming what to do;
    from A `member respawn` is refused naming B; each leaves the database as it was. Run in a
    pane on B, `member respawn` re-creates bee's lost pane next to that pane, on B's server
    (recorded as B's), starts B's delivery loop, and A's message reaches the new pane. With
    bee's pane lost again, `fleet restore` on A restores A's members and names B for bee
    (untouched, exit 0); on B it leaves the Director alone, names A for the monitor and
    re-creates bee's pane on B's server."""
    from tests.harness import util

    _use_dialect(dialect, monkeypatch, request)
    with contextlib.ExitStack() as stack:
        a, b, fleet_id, director, _monitor = _two_hosts(stack, monkeypatch)
        member = ["member", "create", "--fleet-id", str(fleet_id), "--description", "d"]
        plain = ("TMUX", "TMUX_PANE")  # a shell on B outside tmux
        before = _roster(a)
        refused = b.cli(*member, "--name", "cee", "hi", unset=plain)
        assert (refused.returncode, refused.stdout) == (1, ""), refused.stderr
        assert refused.stderr == (
            "Error: the fleet's root Director is on host host-a, not this host (host-b): run "
            "'cafleet member create' in a tmux pane on this host (not inside a tmux session "
            "(TMUX is not set))\n"
        )
        assert _roster(a) == before

        bee_out = _ok(b.cli(*member, "--name", "bee", "hello {member_id}")).stdout.splitlines()
        bee, bee_pane = int(bee_out[0].split()[0]), bee_out[0].rsplit("pane=", 1)[1]
        b.tmux("kill-pane", "-t", bee_pane)
        util.retry_until(lambda: bee_pane not in b.live_panes(), timeout=10)
        before = _roster(a)
        refused = a.cli("member", "respawn", str(bee))
        assert (refused.returncode, refused.stdout) == (1, "")
        assert refused.stderr == (
            f"Error: member {bee}'s pane {bee_pane} is on host host-b, not this host (host-a); "
            "run this command on host host-b\n"
        )
        refused = b.cli("member", "respawn", str(bee), unset=plain)
        assert (refused.returncode, refused.stdout) == (1, "")
        assert refused.stderr == (
            "Error: the fleet's root Director is on host host-a, not this host (host-b): run "
            f"'cafleet member respawn {bee}' in a tmux pane on this host (not inside a tmux "
            "session (TMUX is not set))\n"
        )
        assert _roster(a) == before

        # `--window current`: split the window of the pane it runs in, whatever its size.
        done = _ok(b.cli("member", "respawn", str(bee), "--window", "current")).stdout.splitlines()
        new_pane = re.fullmatch(
            rf"Respawned member bee \({bee}\) in pane (%\d+) \(was {bee_pane}; agent claude\)\.",
            done[0],
        )
        assert new_pane is not None, done
        pane = new_pane[1]
        assert re.fullmatch(r"delivery loop for host host-b: pid \d+", done[1]), done
        assert pane in b.live_panes()
        # Next to the pane it ran in (B's Director-like pane), on B's server, recorded as B's.
        assert b.pane_format(pane, "#{session_name} #{window_id}") == (
            f"{b.session_name} {b.window_id}"
        )
        assert a.sqlite(
            "SELECT host_id, mux_socket, mux_pane_id FROM member_placements WHERE member_id = ?",
            bee,
        ) == [("host-b", b.socket_path, pane)]
        sent = _ok(
            a.cli(
                "message", "send", "--from-member-id", str(director), "--to-member-id", str(bee),
                "after the respawn", "--json",
            )
        )  # fmt: skip
        message = json.loads(sent.stdout)["message"]["message_id"]
        util.retry_until(lambda: _typed(b, pane, message) == 1, timeout=30, message="not typed")

        # `fleet restore` (docs/cli.md §2.27) on each host restores that host's members only.
        b.tmux("kill-pane", "-t", pane)
        util.retry_until(lambda: pane not in b.live_panes(), timeout=10)
        before = _roster(a)
        restored = _ok(a.cli("fleet", "restore", str(fleet_id))).stdout.splitlines()
        monitor_pane = a.sqlite(
            "SELECT mux_pane_id FROM member_placements WHERE member_id = ?", _monitor
        )[0][0]
        assert restored[:3] == [
            f"Director: pane {a.director_pane} (already this pane).",
            f"member {_monitor} (monitor): alive in pane {monitor_pane}, left alone",
            f"member {bee} (bee): on host host-b; run 'cafleet fleet restore {fleet_id}' there",
        ], restored
        assert re.fullmatch(r"monitor loop: pid \d+", restored[3]) and len(restored) == 4
        assert _roster(a) == before  # nothing tried or written for B's member

        done = json.loads(_ok(b.cli("fleet", "restore", str(fleet_id), "--json")).stdout)
        assert (done["director_pane_id"], done["director_host_id"], done["adopted_from"]) == (
            None,
            "host-a",
            None,
        )
        assert done["monitor_loop"] is None
        outcomes = {m["member_id"]: (m["outcome"], m["detail"]) for m in done["members"]}
        assert outcomes.pop(_monitor) == ("elsewhere", "host-a")
        (state, detail), *_ = outcomes.values()
        assert list(outcomes) == [bee] and state == "afresh", done
        pane = detail.removeprefix("pane ")
        assert pane in b.live_panes()
        assert b.pane_format(pane, "#{session_name}") == b.session_name
        assert done["host_loop"]["host_id"] == "host-b"
        assert util.pid_alive(done["host_loop"]["pid"])
        after = _roster(a)
        assert [r for r in after if r[0] != bee] == [r for r in before if r[0] != bee]
        assert a.sqlite(
            "SELECT host_id, mux_socket, mux_pane_id FROM member_placements WHERE member_id = ?",
            bee,
        ) == [("host-b", b.socket_path, pane)]
        again = _ok(b.cli("fleet", "restore", str(fleet_id))).stdout.splitlines()
        assert again == [
            f"Director: on host host-a; run 'cafleet fleet restore {fleet_id}' there.",
            f"member {_monitor} (monitor): on host host-a; run 'cafleet fleet restore "
            f"{fleet_id}' there",
            f"member {bee} (bee): alive in pane {pane}, left alone",
            f"delivery loop for host host-b: pid {done['host_loop']['pid']}",
        ]
        assert _roster(a) == after


@pytest.mark.tmux
def test_a_director_adopted_on_another_host_leaves_the_monitor_to_that_hosts_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """docs/runtime.md §10.3, §10.4: `fleet adopt` on B is refused while A's fleet loop beats
    (A's Director pane is open; B never asks A's tmux: the shim). With that pane gone and the
    loop stopped, B adopts the fleet: the Director and its fleet loop are on B, the monitor's
    pane stays on A. A requested wake is left due by B's loop and typed by A's delivery loop
    into the monitor's pane on A, recorded in the fleet loop's row."""
    from cafleet.broker.monitor import request_monitor_wake
    from tests.harness import util

    with contextlib.ExitStack() as stack:
        a, b, fleet_id, director, monitor = _two_hosts(stack, monkeypatch)
        stack.callback(lambda: a.cli("monitor", "host", "stop"))
        stack.callback(lambda: b.cli("monitor", "stop", str(fleet_id)))
        before = _roster(a)
        refused = b.cli("fleet", "adopt", str(fleet_id))
        assert (refused.returncode, refused.stdout) == (1, "")
        assert refused.stderr.startswith(
            f"Error: fleet {fleet_id}'s root Director pane {a.director_pane} is on host host-a, "
            "whose monitor loop for the fleet is live (pid "
        ), refused.stderr
        assert _roster(a) == before

        a.tmux("kill-pane", "-t", a.director_pane)
        util.retry_until(
            lambda: (
                a.sqlite("SELECT pid FROM monitor_runtime WHERE fleet_id = ?", fleet_id)
                == [(None,)]
            ),
            timeout=30,
            message="A's fleet loop did not stop",
        )
        adopted = _ok(b.cli("fleet", "adopt", str(fleet_id))).stdout.splitlines()
        assert adopted[0] == (
            f"Adopted fleet {fleet_id}: its root Director (member {director}) is now pane "
            f"{b.director_pane} (was {a.director_pane})."
        )
        assert re.fullmatch(r"monitor loop: pid \d+", adopted[1]), adopted
        monitor_pane = a.sqlite(
            "SELECT mux_pane_id FROM member_placements WHERE member_id = ?", monitor
        )[0][0]
        assert a.sqlite(
            "SELECT member_id, host_id FROM member_placements WHERE member_id IN (?, ?) "
            "ORDER BY member_id",
            director, monitor,
        ) == [(director, "host-b"), (monitor, "host-a")]  # fmt: skip

        with connect(a.db_path) as conn:
            requested = request_monitor_wake(conn, fleet_id=fleet_id)
        assert requested is not None

        def row() -> list[tuple[Any, ...]]:
            return a.sqlite(
                "SELECT last_wake_at, wake_requested_at FROM monitor_runtime WHERE fleet_id = ?",
                fleet_id,
            )

        def woken() -> list[str]:
            return [
                line
                for line in _lines(a, monitor_pane)
                if line.startswith(f"[cafleet] tick: fleet {fleet_id}")
            ]

        # B's fleet loop leaves the wake due (no delivery loop runs on A yet).
        fleet_log = Path(f"{a.db_path}.monitor-{fleet_id}.log")
        skipped = (
            f"tick -> wake skipped: monitor pane {monitor_pane} is on host host-a (its delivery "
            "loop wakes it)"
        )
        util.retry_until(lambda: skipped in fleet_log.read_text("utf-8"), timeout=20)
        assert row() == [(None, requested)] and woken() == []

        started = _ok(a.cli("monitor", "host", "start")).stdout
        assert started.startswith("delivery loop for host host-a: pid "), started
        util.retry_until(lambda: len(woken()) == 1, timeout=30, message="monitor not woken")
        assert f"Director: {director} (Director;" in woken()[0], woken()
        assert re.search(r"\[wake [^\]]+\]$", woken()[0].rstrip()), woken()
        util.retry_until(
            lambda: row()[0][0] is not None and row()[0][1] is None,
            timeout=10,
            message="the wake was not recorded",
        )
        host_log = Path(f"{a.db_path}.host-host-a.log")
        util.retry_until(
            lambda: f"host -> forced wake monitor {monitor} (" in host_log.read_text("utf-8"),
            timeout=10,
        )


def test_the_webui_judges_another_hosts_fleet_loop_by_its_heartbeat(head_db: Path) -> None:
    """`/api/monitor` and `/api/monitor/wake` (docs/runtime.md §10.5): a fleet loop with a fresh
    heartbeat and a pid this host has not got is dead here when the root Director is on this
    host, and live (woken through the database) when it is on another host, which alone can
    ask its pid."""
    from cafleet.db.timefmt import now_ts
    from tests.web_helpers import client, fleet_headers, make_app

    w = build_world(head_db, members=("alice",))
    not_here = 2**22 + 7  # above every pid_max: no process of this host has it
    sql_write(
        head_db,
        "INSERT INTO monitor_runtime (fleet_id, pid, started_at, last_tick_at, tick_seconds) "
        "VALUES (?, ?, ?, ?, 5)",
        w.fleet_id, not_here, now_ts(), now_ts(),
    )  # fmt: skip
    headers = fleet_headers(w.fleet_id)

    def wake_requested() -> Any:
        with connect(head_db) as conn:
            from cafleet import broker

            runtime = broker.get_monitor_runtime(conn, w.fleet_id)
        return None if runtime is None else runtime.wake_requested_at

    with client(make_app(head_db)) as web:
        status = web.get("/api/monitor", headers=headers).json()
        assert (status["live"], status["runtime"]["pid"]) == (False, None)
        woken = web.post("/api/monitor/wake", headers=headers)
        assert (woken.status_code, woken.json()["detail"]) == (
            404,
            f"monitor loop for fleet {w.fleet_id} is not running",
        )
        assert wake_requested() is None
        sql_write(
            head_db,
            "UPDATE member_placements SET host_id = ? WHERE member_id = ?",
            OTHER,
            w.director,
        )
        status = web.get("/api/monitor", headers=headers).json()
        assert (status["live"], status["runtime"]["pid"]) == (True, not_here)
        woken = web.post("/api/monitor/wake", headers=headers)
        assert woken.status_code == 200, woken.text
        requested = wake_requested()
        assert requested is not None and woken.json()["wake_requested_at"] == requested


# --- cafleet monitor host start | stop | status (docs/cli.md §2.29) ------------------------------


def test_monitor_host_start_status_stop(head_db: Path) -> None:
    from tests.harness.util import pid_alive, retry_until

    env = {"CAFLEET_HOST_ID": "h1"}
    assert run_cli("monitor", "host", "status", env=env) == (
        0,
        "this host: h1\nno host delivery loop has run\n",
        "",
    )
    code, out, err = run_cli("monitor", "host", "start", env=env)
    assert (code, err) == (0, ""), out
    match = re.fullmatch(r"delivery loop for host h1: pid (\d+) \(log: (.+)\)\n", out)
    assert match is not None, out
    pid = int(match[1])
    try:
        assert Path(match[2]) == Path(f"{head_db}.host-h1.log")
        assert run_cli("monitor", "host", "start", env=env)[1] == (
            f"delivery loop for host h1: pid {pid} (already running)\n"
        )
        status = json.loads(run_cli("monitor", "host", "status", "--json", env=env)[1])
        assert status["host_id"] == "h1"
        assert [
            (s["host_id"], s["live"], s["pid"], s["held"], s["this_host"]) for s in status["loops"]
        ] == [("h1", True, pid, False, True)]
        # Seen from another host: live by its heartbeat alone, held unknown there.
        other = json.loads(
            run_cli("monitor", "host", "status", "--json", env={"CAFLEET_HOST_ID": "h2"})[1]
        )
        assert [(s["live"], s["held"], s["this_host"]) for s in other["loops"]] == [
            (True, None, False)
        ]
        refused = run_cli("monitor", "host", "run", env=env)
        assert refused == (1, "", f"Error: delivery loop already running for host h1 (pid {pid})\n")
    finally:
        code, out, err = run_cli("monitor", "host", "stop", env=env)
    assert (code, err) == (0, "")
    assert out == (
        f"delivery loop for host h1 stopped (pid {pid}); it stays stopped until 'cafleet monitor "
        "host start'\n"
    )
    retry_until(lambda: not pid_alive(pid), timeout=10)
    assert run_cli("monitor", "host", "status", env=env)[1] == (
        "this host: h1\nhost h1 (this host): stopped by 'cafleet monitor host stop'\n"
    )
    log = Path(f"{head_db}.host-h1.log").read_text(encoding="utf-8")
    assert log.startswith(f"host loop started (host h1, tick 5s, pid {pid})\n")
    assert log.endswith(f"received SIGTERM; stopping\nhost loop stopped (host h1, pid {pid})\n")
