"""The soak (docs/operations.md §1.2): a fleet of auto-ACKing fake agents under random sends, broadcasts,
member-pane kills (half of them replaced, as docs/operations.md §4 says) and SIGKILLs of the
monitor loop. Nothing may be lost: at the end every message is ACKed by its recipient's fake, or
still pending with a reason (its recipient's pane is gone, or the recipient was deregistered).
Then `fleet delete`, and /proc must show no loop of that fleet.

Two sizes: a smoke run (4 members, 13 scripted actions) in the default test command, and the soak
proper (16 members, CAFLEET_SOAK_MINUTES minutes, default 10), marked `slow` and `soak`; the
default command leaves `soak` out: run it with `python -m pytest -m soak -q -s tests/test_soak.py`. Both print
their figures (with `-s`); the seed is printed so a failing run can be repeated
(CAFLEET_SOAK_SEED).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import signal
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pytest

from tests.fleet_helpers import create_fleet, ok, runtime_row
from tests.harness.fixtures import TmuxHarness
from tests.harness.util import pid_alive, proc_state, retry_until

pytestmark = pytest.mark.tmux

PROMPT = "#fake auto-ack\nsoak member {member_id}"
QUIESCE_TIMEOUT = 180.0  # the loop (5 s ticks) types what waits; each line takes over 1 s


@dataclass
class Figures:
    seed: int
    members: int
    seconds: float = 0.0
    sends: int = 0
    broadcasts: int = 0
    deliveries: int = 0
    pane_kills: int = 0
    replaced: int = 0
    loop_kills: int = 0
    loop_pids: set[int] = field(default_factory=set)
    acked: int = 0
    pending: Counter[str] = field(default_factory=Counter)
    lost: list[int] = field(default_factory=list)
    lost_detail: list[str] = field(default_factory=list)
    ack_seconds: list[float] = field(default_factory=list)
    left_after_delete: dict[str, list[int]] = field(default_factory=dict)

    def line(self) -> str:
        acks = sorted(self.ack_seconds)
        median = acks[len(acks) // 2] if acks else float("nan")
        worst = acks[-1] if acks else float("nan")
        return (
            f"soak seed={self.seed} members={self.members} seconds={self.seconds:.0f} "
            f"sends={self.sends} broadcasts={self.broadcasts} deliveries={self.deliveries} "
            f"pane_kills={self.pane_kills} replaced={self.replaced} "
            f"loop_kills={self.loop_kills} loops_seen={len(self.loop_pids)} "
            f"acked={self.acked} pending={dict(self.pending)} lost={len(self.lost)} "
            f"ack_median_s={median:.1f} ack_max_s={worst:.1f} "
            f"left_after_delete={ {k: len(v) for k, v in self.left_after_delete.items()} }"
        )


class Soak:
    def __init__(self, h: TmuxHarness, members: int, seed: int) -> None:
        self.h = h
        self.rng = random.Random(seed)
        self.fig = Figures(seed=seed, members=members)
        monitor_prompt = h.dir / "monitor-prompt.txt"  # the monitor ACKs what it gets, too
        monitor_prompt.write_text("#fake auto-ack\nsoak monitor of fleet {fleet_id}")
        self.fleet = create_fleet(h, "--monitor-file", str(monitor_prompt), name="soak")
        self.fig.loop_pids.add(self.fleet.loop_pid)
        self.alive: dict[int, str] = {}  # member id -> pane, panes not killed
        self.dead: dict[int, str] = {}  # member id -> its killed pane (still registered)
        for _ in range(members):
            self._add_member()

    # --- actions ----------------------------------------------------------------------------

    def _add_member(self) -> None:
        n = len(self.alive) + len(self.dead) + self.fig.replaced
        r = ok(
            self.h.cli(
                "member", "create", "--fleet-id", str(self.fleet.fleet_id), "--name",
                f"m{n}", "--description", "soak member", "--json", PROMPT,
            )
        )  # fmt: skip
        data = json.loads(r.stdout)
        self.alive[data["member_id"]] = data["placement"]["mux_pane_id"]

    def _participants(self) -> list[int]:
        return [self.fleet.director_id, *self.alive, *self.dead]

    def send(self) -> None:
        sender = self.rng.choice(self._participants())
        targets = [m for m in (*self.alive, *self.dead) if m != sender]
        if not targets:
            return
        to = self.rng.choice(targets)
        body = f"soak {self.fig.sends} " + "x" * self.rng.randrange(0, 300)
        ok(
            self.h.cli(
                "message", "send", "--from-member-id", str(sender), "--to-member-id", str(to),
                body,
            )
        )  # fmt: skip
        self.fig.sends += 1

    def broadcast(self) -> None:
        ok(
            self.h.cli(
                "message", "broadcast", "--from-member-id", str(self.fleet.director_id),
                f"soak broadcast {self.fig.broadcasts}",
            )
        )  # fmt: skip
        self.fig.broadcasts += 1

    def kill_pane(self) -> None:
        if len(self.alive) <= 2:
            return
        member = self.rng.choice(sorted(self.alive))
        pane = self.alive.pop(member)
        self.h.tmux("kill-pane", "-t", pane, check=False)
        self.dead[member] = pane
        self.fig.pane_kills += 1
        if self.rng.random() < 0.5:  # the documented recovery: delete it, create a new one
            ok(self.h.cli("member", "delete", str(member)))
            del self.dead[member]
            self.fig.replaced += 1
            self._add_member()

    def kill_loop(self) -> None:
        row = runtime_row(self.h, self.fleet.fleet_id)
        if row is None or row["pid"] is None or not pid_alive(int(row["pid"])):
            return
        os.kill(int(row["pid"]), signal.SIGKILL)
        self.fig.loop_kills += 1

    def step(self) -> None:
        roll = self.rng.random()
        if roll < 0.75:
            self.send()
        elif roll < 0.82:
            self.broadcast()
        elif roll < 0.92:
            self.kill_pane()
        else:
            self.kill_loop()
        row = runtime_row(self.h, self.fleet.fleet_id)
        if row is not None and row["pid"] is not None:
            self.fig.loop_pids.add(int(row["pid"]))
        time.sleep(self.rng.uniform(0.0, 0.5))

    def run(self, seconds: float) -> None:
        start = time.monotonic()
        while time.monotonic() - start < seconds:
            self.step()
        self.fig.seconds = time.monotonic() - start

    def run_script(self, actions: str) -> None:
        """One action per letter (s send, b broadcast, p pane kill, l loop kill), for a smoke run
        that must see each kind however slow the machine is."""
        start = time.monotonic()
        act = {"s": self.send, "b": self.broadcast, "p": self.kill_pane, "l": self.kill_loop}
        for letter in actions:
            act[letter]()
            row = runtime_row(self.h, self.fleet.fleet_id)
            if row is not None and row["pid"] is not None:
                self.fig.loop_pids.add(int(row["pid"]))
        self.fig.seconds = time.monotonic() - start

    # --- the verdict ------------------------------------------------------------------------

    def _deliveries(self) -> list[dict[str, Any]]:
        rows = self.h.sqlite(
            "SELECT x.message_id, x.owner_member_id, x.status_state, x.created_at, "
            "x.status_timestamp, x.notified_at, m.status FROM messages AS x "
            "JOIN members AS m ON m.member_id = x.owner_member_id "
            "WHERE x.type = 'unicast' AND x.owner_member_id <> ?",
            self.fleet.director_id,
        )
        keys = ("id", "owner", "state", "created", "stamp", "notified", "member_status")
        return [dict(zip(keys, row, strict=True)) for row in rows]

    def _reason(self, d: dict[str, Any], live: set[str]) -> str | None:
        """Why an un-ACKed delivery may stay pending, or None when it must still arrive."""
        if d["member_status"] != "active":
            return "recipient deregistered"
        if d["owner"] in self.dead or self._pane_of(d["owner"]) not in live:
            return "recipient's pane gone"
        return None

    def _pane_of(self, member: int) -> str | None:
        found = self.h.sqlite(
            "SELECT mux_pane_id FROM member_placements WHERE member_id = ?", member
        )
        return found[0][0] if found else None

    def settle(self) -> None:
        """Wait until every delivery to a live pane is ACKed; `fleet show` meanwhile is any
        command: it heals a loop the last kill left dead."""

        def unsettled() -> list[int]:
            self.h.cli("fleet", "show", str(self.fleet.fleet_id))
            live = self.h.live_panes()
            return [
                d["id"]
                for d in self._deliveries()
                if d["state"] != "completed" and self._reason(d, live) is None
            ]

        left: list[int] = []

        def done() -> bool:
            nonlocal left
            left = unsettled()
            return not left

        with contextlib.suppress(AssertionError):  # what stays unsettled is reported as lost
            retry_until(done, timeout=QUIESCE_TIMEOUT, interval=2.0)
        live = self.h.live_panes()
        deliveries = self._deliveries()
        self.fig.deliveries = len(deliveries)
        for d in deliveries:
            if d["state"] == "completed":
                self.fig.acked += 1
                self.fig.ack_seconds.append(_seconds(d["created"], d["stamp"]))
            elif (reason := self._reason(d, live)) is not None:
                self.fig.pending[reason] += 1
            else:
                self.fig.lost.append(d["id"])
                self.fig.lost_detail.append(self._explain(d))

    def _explain(self, d: dict[str, Any]) -> str:
        """What the database, the recipient's fake and the loop log say about a lost one."""
        from tests.fleet_helpers import log_path
        from tests.harness.util import read_jsonl

        pane = self._pane_of(d["owner"]) or "-"
        needle = f"msg {d['id']} "
        seen = []
        for path in sorted(self.h.fake_dir.glob("*.jsonl")):
            for rec in read_jsonl(path):
                text = json.dumps(rec)
                if needle in text or f'"ack", "{d["id"]}"' in text:
                    seen.append(f"{path.stem}: {text[:300]}")
        log = [x for x in log_path(self.h, self.fleet.fleet_id).read_text().splitlines()
               if needle in x or "stopping" in x or "started" in x]  # fmt: skip
        return f"{d} pane={pane} fake={seen} loop={log[-12:]}"

    def delete_and_look(self) -> None:
        director_pane = self._pane_of(self.fleet.director_id)
        ok(self.h.cli("fleet", "delete", str(self.fleet.fleet_id)))
        loops = set(self.fig.loop_pids)

        def loop_left() -> list[int]:
            return [p for p in loops if proc_state(p) not in ("", "Z", "X")]

        with contextlib.suppress(AssertionError):  # what is left is reported
            retry_until(lambda: not loop_left(), timeout=20)
        self.fig.left_after_delete["loop"] = loop_left()
        marker = f"CAFLEET_FAKE_DIR={self.h.fake_dir}".encode()
        agents = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or proc_state(int(entry)) in ("", "Z", "X"):
                continue
            try:
                with open(f"/proc/{entry}/environ", "rb") as fh:
                    env = fh.read().split(b"\0")
                with open(f"/proc/{entry}/cmdline", "rb") as fh:
                    argv = fh.read().split(b"\0")
            except OSError:
                continue
            if (
                marker in env
                # the Director's own agent and the tmux server (whose argv names the first
                # pane's program) are not the fleet's to kill
                and f"TMUX_PANE={director_pane}".encode() not in env
                and not argv[0].endswith(b"tmux")
                and any(re.search(rb"/bin/(claude|codex|opencode)$", a) for a in argv)
            ):
                agents.append(int(entry))
        self.fig.left_after_delete["agents"] = agents


def _seconds(start: str, end: str) -> float:
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


def _seed() -> int:
    raw = os.environ.get("CAFLEET_SOAK_SEED")
    return int(raw) if raw else random.SystemRandom().randrange(1, 1_000_000)


def _soak(h: TmuxHarness, members: int, seconds: float = 0, script: str = "") -> Figures:
    soak = Soak(h, members, _seed())
    try:
        if script:
            soak.run_script(script)
        else:
            soak.run(seconds)
        soak.settle()
        soak.delete_and_look()
    finally:
        print(soak.fig.line())
    return soak.fig


def _verdict(fig: Figures) -> None:
    assert fig.lost == [], f"lost deliveries {fig.lost}: {fig.line()} {fig.lost_detail}"
    assert fig.acked + sum(fig.pending.values()) == fig.deliveries
    assert fig.sends > 0 and fig.acked > 0, fig.line()
    assert fig.left_after_delete["loop"] == [], fig.line()
    assert fig.left_after_delete["agents"] == [], fig.line()


def test_soak_smoke(tmux_db: TmuxHarness) -> None:
    """The soak in small (runs in the default test command): 4 members, 13 scripted actions
    with random parties, two loop kills and two pane kills among them."""
    fig = _soak(tmux_db, members=4, script="sslsbpsslspss")
    _verdict(fig)
    assert fig.pane_kills == 2 and fig.loop_kills >= 1, fig.line()


def test_fleet_delete_leaves_no_process_of_the_fleet(tmux_db: TmuxHarness) -> None:
    """After `fleet delete` /proc holds neither the fleet's loop nor any of its agents."""
    soak = Soak(tmux_db, 2, seed=1)
    soak.send()
    soak.delete_and_look()
    assert soak.fig.left_after_delete == {"loop": [], "agents": []}, soak.fig.line()


@pytest.mark.slow
@pytest.mark.soak
def test_soak(tmux_db: TmuxHarness) -> None:
    """16 members for CAFLEET_SOAK_MINUTES minutes (default 10)."""
    minutes = float(os.environ.get("CAFLEET_SOAK_MINUTES") or 10)
    fig = _soak(tmux_db, members=16, seconds=minutes * 60)
    _verdict(fig)
    assert fig.pane_kills > 0 and fig.loop_kills > 0, fig.line()
