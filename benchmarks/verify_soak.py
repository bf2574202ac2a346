"""The verified-submit soak with real agents (docs/runtime.md §4.9): does every line a send types
into a real member verify, and how long does the send take?

One fleet in a private tmux server (the Director is the harness pane, the monitor a fake), one
real member per agent (Claude Code, Codex CLI, opencode) driven by the scripted model
(tests/harness/scripted_model.py) with the default permission profile. Each member gets
``messages`` tasks sent with `cafleet message send`, in pairs: the first (``run: sleep S``)
arrives while the member is idle and keeps it working for S seconds, the second arrives while it
works on that (sent once the model has asked for the sleep). Each pair must be ACKed before the
next one starts. The members run side by side, one thread each.

Per typed line: the send's wall time and output, whether it warned (`not verified`, busy, held),
whether the message ended stamped, and how many times the agent's own record holds its frame.
For a warned line the member's screens captured during the send (every ~0.3 s) are written to
``--out`` (`<agent>-<message id>/NN.txt`) to see what the verify read.

    python -m benchmarks.verify_soak --agents opencode --messages 8
    python -m benchmarks.verify_soak --messages 36 --out /tmp/soak   # the full 36 x 3

Outside the test suite (minutes of CPU on three real agents). Needs the agents installed
(.ci/install-agents).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import shutil
import statistics
import subprocess
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

SLEEP = 6  # s: how long the first task of a pair keeps the member working
SLOW = 4.0  # s: the screens of a send this slow are kept too
TURN_TIMEOUT = 240.0  # s: a pair's tasks must be ACKed by then


@dataclass
class Sent:
    agent: str
    message_id: int
    working: bool  # sent while the member worked on the task before
    wall: float
    rc: int
    stderr: str
    warned: bool = False
    stamped: bool = False
    records: int = -1  # times the agent's own record holds the line (-1: not read)
    screens: str = ""  # where the screens of a warned send were written


@dataclass
class Screens:
    """The member's pane, captured every ~0.3 s while ``on`` (during one send)."""

    h: Any
    pane: str
    frames: list[tuple[float, str]] = field(default_factory=list)
    on: threading.Event = field(default_factory=threading.Event)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        while not self.stop.is_set():
            if self.on.wait(0.2):
                try:
                    screen = self.h.tmux("capture-pane", "-p", "-t", self.pane, check=False)
                except Exception as exc:  # a diagnostic must not stop the soak
                    screen = f"(capture failed: {exc})"
                self.frames.append((time.time(), screen))
                time.sleep(0.3)


def _line_count(agent: str, records: list[tuple[str, float | None, bool]], mid: int) -> int:
    frame = f"[cafleet msg {mid} from"
    queued = sum(1 for t, _, q in records if frame in t and q)
    direct = sum(1 for t, _, q in records if frame in t and not q)
    return max(queued, direct)


class Driver:
    def __init__(self, h: Any, model: Any, agent: str, fleet: Any, out: Path) -> None:
        from tests.harness.real_member import RealMember

        self.h = h
        self.model = model
        self.agent = agent
        self.fleet = fleet
        self.out = out
        # The model's client label is the agent's name (its commands are told apart by it).
        self.member = RealMember(h, agent, f"real-{agent}", model_url=model.base_url(agent))
        who = {
            k: self.member.real.env[k]
            for k in ("HOME", "CLAUDE_CONFIG_DIR", "CODEX_HOME", "XDG_CONFIG_HOME")
        }
        agents = sorted({"claude", agent})
        r = h.cli("setup", *(x for a in agents for x in ("--coding-agent", a)), env=who)
        assert r.returncode == 0, r.stderr
        self.sent: list[Sent] = []
        # The sends run the real tmux, not the harness's logging shim (a Python process per
        # call): the product's own time. Every call names the private server's socket.
        real = out / "real-tmux"
        real.mkdir(parents=True, exist_ok=True)
        if not (real / "tmux").exists():
            (real / "tmux").symlink_to(h.real_tmux)
        self.send_env = {"PATH": os.pathsep.join([str(real), h.env["PATH"]])}
        self.error: str | None = None

    def _acked(self, mid: int) -> bool:
        rows = self.h.sqlite("SELECT status_state FROM messages WHERE message_id = ?", mid)
        return bool(rows) and rows[0][0] == "completed"

    def _wait(self, what: str, check: Any, timeout: float = TURN_TIMEOUT) -> None:
        from tests.harness.util import retry_until

        retry_until(check, timeout=timeout, interval=0.5, message=lambda: f"{self.agent}: {what}")

    def _send(self, body: str, working: bool, screens: Screens) -> Sent:
        d = self.fleet.director_id
        screens.frames.clear()
        screens.on.set()
        t0 = time.monotonic()
        start = time.time()
        r = self.h.cli(
            "message", "send", "--from-member-id", str(d), "--to-member-id",
            str(self.member.member_id), body, "--json", timeout=120, env=self.send_env,
        )  # fmt: skip
        wall = time.monotonic() - t0
        time.sleep(0.6)  # a frame or two after the send returned
        screens.on.clear()
        mid = int(json.loads(r.stdout)["message"]["message_id"]) if r.returncode == 0 else -1
        warned = any(
            not note.startswith("Also pending for member ") for note in r.stderr.splitlines()
        )
        sent = Sent(self.agent, mid, working, wall, r.returncode, r.stderr.strip(), warned)
        if warned or wall > SLOW:
            where = self.out / f"{self.agent}-{mid}"
            where.mkdir(parents=True, exist_ok=True)
            times = []
            for i, (at, screen) in enumerate(screens.frames):
                (where / f"{i:02d}.txt").write_text(screen, encoding="utf-8")
                times.append(f"{i:02d} {at - start:+.2f}s")
            (where / "times.txt").write_text("\n".join(times) + "\n", encoding="utf-8")
            (where / "stderr.txt").write_text(r.stderr, encoding="utf-8")
            sent.screens = str(where)
        self.sent.append(sent)
        print(
            f"{self.agent} msg {mid} working={working} wall={wall:.2f}s {r.stderr.strip()}",
            flush=True,
        )
        return sent

    def spawn(self) -> None:
        from tests.test_real_escalation import member_prompt

        if self.agent == "codex":
            # Codex runs commands in a login shell, whose /etc/profile resets PATH: give the
            # private HOME a profile that puts the pane's PATH (with `cafleet`) back.
            profile = self.member.real.home / ".bash_profile"
            profile.write_text(f"export PATH={shlex.quote(self.h.env['PATH'])}\n")
        self.member.create(self.fleet.fleet_id, member_prompt())
        me = self.member.member_id
        self._wait(
            "no ready from the member",
            lambda: self.h.sqlite(
                "SELECT 1 FROM messages WHERE from_member_id = ? AND text = 'ready'", me
            ),
            timeout=300,
        )

    def run(self, pairs: int, round_: int) -> None:
        screens: Screens | None = None
        try:
            if round_ == 0:
                self.spawn()
            screens = Screens(self.h, self.member.pane)
            threading.Thread(target=screens.run, daemon=True).start()
            for k in range(pairs):
                tag = f"{self.agent}-{round_}-{k}"
                first = self._send(f"run: sleep {SLEEP} && echo {tag}", False, screens)
                self._wait(
                    "the model never asked for the sleep",
                    lambda tag=tag: any(tag in c for c in self.model.commands(self.agent)),
                )
                second = self._send(f"run: echo while-working-{tag}", True, screens)
                for s in (first, second):
                    self._wait(
                        f"message {s.message_id} never ACKed",
                        lambda s=s: self._acked(s.message_id),
                    )
                # Idle again before the next pair (its first line must reach an idle member).
                self._wait("never idle", lambda: self.member.real.state() == "ready", timeout=90)
        except Exception as exc:  # reported with the figures
            self.error = f"{type(exc).__name__}: {exc}"
            print(f"{self.agent}: stopped: {self.error}", flush=True)
        finally:
            if screens is not None:
                screens.stop.set()

    def finish(self) -> None:
        from tests.harness.real_member import arrivals

        ids = [s.message_id for s in self.sent if s.message_id > 0]
        stamped = (
            {
                int(r[0]): r[1]
                for r in self.h.sqlite(
                    f"SELECT message_id, notified_at FROM messages WHERE message_id IN ({','.join('?' * len(ids))})",
                    *ids,
                )
            }
            if ids
            else {}
        )
        try:
            # opencode's `export` into a pipe is cut at 64 KiB: read its database instead.
            records = _opencode_arrivals(self.member) if self.agent == "opencode" else []
            records = records or arrivals(self.member)
        except Exception as exc:
            print(f"{self.agent}: record unreadable: {exc}", flush=True)
            records = []
        for s in self.sent:
            s.stamped = stamped.get(s.message_id) is not None
            s.records = _line_count(self.agent, records, s.message_id)


def _opencode_arrivals(member: Any) -> list[tuple[str, float | None, bool]]:
    """(text, None, False) of every user text part in the member's opencode database."""
    import sqlite3

    env = member.real.env
    data = env.get("XDG_DATA_HOME") or str(Path(env["HOME"]) / ".local" / "share")
    path = Path(data) / "opencode" / "opencode.db"
    if not path.is_file():
        return []
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT p.data FROM part p JOIN message m ON m.id = p.message_id "
            "WHERE json_extract(m.data, '$.role') = 'user'"
        ).fetchall()
    finally:
        conn.close()
    out: list[tuple[str, float | None, bool]] = []
    for (raw,) in rows:
        part = json.loads(raw)
        if part.get("type") == "text" and not part.get("synthetic"):
            out.append((str(part.get("text", "")), None, False))
    return out


def _p(values: list[float], pct: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(pct * len(ordered)))]


def summary(drivers: list[Driver]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for d in drivers:
        walls = [s.wall for s in d.sent]
        out[d.agent] = {
            "sent": len(d.sent),
            "warned": sum(s.warned for s in d.sent),
            "not_verified": sum("not verified" in s.stderr for s in d.sent),
            "stamped": sum(s.stamped for s in d.sent),
            "record_once": sum(s.records == 1 for s in d.sent),
            "record_other": [(s.message_id, s.records) for s in d.sent if s.records != 1],
            "wall_p50": statistics.median(walls) if walls else float("nan"),
            "wall_p90": _p(walls, 0.9),
            "wall_max": max(walls) if walls else float("nan"),
            "error": d.error,
        }
    return out


def restore(h: Any, fleet: Any, drivers: list[Driver]) -> None:
    """Kill the tmux server, start a new one (as after a reboot) and `fleet restore` there:
    each member resumes its own session in a new pane (tests/test_real_restore.py)."""
    from tests.harness.fixtures import SESSION
    from tests.harness.util import pid_alive, retry_until

    h.tmux("kill-server", check=False)
    retry_until(lambda: not pid_alive(h.server_pid), timeout=10, message="old server alive")
    subprocess.run(
        [h.real_tmux, "-S", h.socket_path, "-f", "/dev/null", "new-session", "-d", "-s",
         SESSION + "-new", "-x", "200", "-y", "50", "-c", str(h.project_dir),
         str(h.bin_dir / "claude")],
        env=h.server_env, check=True, capture_output=True, timeout=15,
    )  # fmt: skip
    out = h.tmux("display-message", "-p", "-t", f"={SESSION}-new:", "#{pid}|#{pane_id}")
    pid, pane = out.strip().split("|")
    here = {"TMUX": f"{h.socket_path},{pid},0", "TMUX_PANE": pane}
    path = os.pathsep.join([*(str(d.member.bin_dir) for d in drivers), h.env["PATH"]])
    r = h.cli("fleet", "restore", str(fleet.fleet_id), env={**here, "PATH": path}, timeout=300)
    print(r.stdout, r.stderr, flush=True)
    assert r.returncode == 0, r.stderr
    for d in drivers:
        if d.error is not None:
            continue
        rows = h.sqlite(
            "SELECT mux_pane_id FROM member_placements WHERE member_id = ?", d.member.member_id
        )
        d.member.pane = d.member.real.pane = rows[0][0]
        try:
            d.member.real.wait_state("ready", timeout=180)
        except AssertionError as exc:
            d.error = f"not ready after restore: {exc}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", default="claude,codex,opencode")
    parser.add_argument("--messages", type=int, default=36, help="per agent (pairs: even)")
    parser.add_argument(
        "--restore", action="store_true", help="send half, `fleet restore`, send the rest"
    )
    parser.add_argument("--out", type=Path, default=Path("/tmp/verify-soak"))
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)

    from benchmarks.delivery import _private_tmux
    from tests.fleet_helpers import create_fleet
    from tests.harness.real_agents import binary
    from tests.harness.scripted_model import scripted_model

    agents = [a for a in args.agents.split(",") if a]
    missing = [a for a in agents if binary(a) is None]
    if missing:
        print(f"not installed: {missing}")
        return 2
    pairs = args.messages // 2
    rounds = [pairs // 2, pairs - pairs // 2] if args.restore else [pairs]
    with _private_tmux() as h, scripted_model() as model:
        assert h.cli("setup").returncode == 0
        fleet = create_fleet(h)
        drivers = [Driver(h, model, a, fleet, args.out) for a in agents]
        try:
            for n, size in enumerate(rounds):
                if n:
                    restore(h, fleet, drivers)
                live = [d for d in drivers if d.error is None]
                threads = [
                    threading.Thread(target=d.run, args=(size, n), daemon=True) for d in live
                ]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
            for d in drivers:
                d.finish()
        finally:
            for d in drivers:
                try:
                    d.member.stop()
                except Exception as exc:
                    print(f"{d.agent}: stop: {exc}")
            with contextlib.suppress(OSError):
                shutil.copy(Path(h.dir) / "tmux-calls.jsonl", args.out / "tmux-calls.jsonl")
    figures = summary(drivers)
    (args.out / "sent.jsonl").write_text(
        "".join(json.dumps(asdict(s)) + "\n" for d in drivers for s in d.sent), encoding="utf-8"
    )
    (args.out / "summary.json").write_text(json.dumps(figures, indent=1), encoding="utf-8")
    print(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
