"""Sends while PostgreSQL stops (`pg_ctl stop -m immediate`): does each `message send` report
what really happened, and is each notification line typed once?

    python scripts/send_outage_probe.py [--sends 500] [--parallel 6] [--checkout DIR]

A private PostgreSQL server (tests/pg_server.py) and a private tmux server whose members run
the fake agent (tests/harness): ``--sends`` sends (`message send --json`, each body unique), run
``--parallel`` at a time in subprocesses, while the server is stopped with `-m immediate` at
random moments and started again 0.3–2 s later. Then, with the server up for good, an agent's
retry: a send that reported failure is run again (with the `--key` its error text names, when
it names one). Finally the fleet's notifications are left to settle, and the fake agents' own
logs say what reached each pane.

Printed (and written as JSON with ``--out``): each first report (sent / failed / unknown)
against the rows stored for its body before the retry, the bodies stored twice after it, and
the notification lines typed more than once (the same message, or two copies of one body).
``--checkout`` runs another checkout's cafleet (say main) with this script.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sends", type=int, default=500)
    p.add_argument("--parallel", type=int, default=6)
    p.add_argument("--members", type=int, default=3)
    p.add_argument("--checkout", default=str(Path(__file__).resolve().parent.parent))
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--settle", type=float, default=120.0, help="seconds to wait for delivery")
    p.add_argument("--out", default=None, help="write the result as JSON here")
    return p.parse_args()


ARGS = _args()
REPO = Path(ARGS.checkout).resolve()
sys.path.insert(0, str(REPO))
os.environ["PYTHONPATH"] = str(REPO)

from tests.harness import util  # noqa: E402
from tests.harness.fixtures import private_tmux  # noqa: E402
from tests.pg_server import PASSWORD, PgDb, PgRaw, PgServer, start_server  # noqa: E402

BODY = re.compile(r"\] (probe-[0-9]+) ")
MSG_ID = re.compile(r"\[cafleet msg ([0-9]+) from")
KEY = re.compile(r"--key (\S+)")


class Outages:
    """Stops the server with `-m immediate` at random moments and starts it again."""

    def __init__(self, server: PgServer, rng: random.Random) -> None:
        self.server = server
        self.rng = rng
        self.stop_flag = threading.Event()
        self.count = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _ctl(self, *args: str) -> None:
        self.server._run("pg_ctl", "-D", str(self.server.data), *args)

    def start_server(self) -> None:
        s = self.server
        options = f"-k {s.dir} -h 127.0.0.1 -p {s.port} -c max_connections=200"
        options += " -F -c fsync=off -c full_page_writes=off"
        # A loaded machine may take a while to recover from `-m immediate`: wait up to 10 min,
        # and try again once should pg_ctl still give up.
        for attempt in range(2):
            try:
                self._ctl("-o", options, "-l", str(s.dir / "log"), "-w", "-t", "600", "start")
                return
            except subprocess.CalledProcessError:
                log = (s.dir / "log").read_text(errors="replace").splitlines()[-8:]
                print("pg_ctl start failed:", *log, sep="\n  ", file=sys.stderr)
                if attempt:
                    raise
                time.sleep(1.0)

    def _run(self) -> None:
        while not self.stop_flag.wait(self.rng.uniform(1.0, 4.0)):
            self._ctl("-m", "immediate", "-w", "stop")
            self.count += 1
            time.sleep(self.rng.uniform(0.3, 2.0))
            self.start_server()


SENDER_PANE: dict[str, str] = {}  # the sender's own pane, read once before any outage


def _send(h: Any, frm: int, to: int, body: str, key: str | None = None) -> subprocess.Popen[str]:
    extra = ["--key", key] if key else []
    # Named here, so the harness does not read it from the database (down during an outage).
    if "pane" not in SENDER_PANE:
        SENDER_PANE["pane"] = h._own_pane(frm) or ""
    pane = SENDER_PANE["pane"]
    env, unset = ({"TMUX_PANE": pane}, ()) if pane else (None, ("TMUX_PANE",))
    return h.popen_cli(
        "message", "send", "--from-member-id", str(frm), "--to-member-id", str(to), body,
        "--json", *extra, env=env, unset=unset,
    )  # fmt: skip


def _report(rc: int) -> str:
    return {0: "sent", 1: "failed", 75: "unknown"}.get(rc, f"exit {rc}")


def _stored(db: PgDb) -> Counter[str]:
    raw = PgRaw(db)
    try:
        rows = raw.execute("SELECT text FROM messages WHERE text LIKE 'probe-%'").fetchall()  # type: ignore[attr-defined]
    finally:
        raw.close()
    return Counter(r[0] for r in rows)


def _pending(db: PgDb) -> int:
    raw = PgRaw(db)
    try:
        row = raw.execute(  # type: ignore[attr-defined]
            "SELECT count(*) FROM messages WHERE text LIKE 'probe-%' AND notified_at IS NULL"
        ).fetchone()
    finally:
        raw.close()
    return int(row[0])


def main() -> int:
    import pytest

    from tests.factories import build_world

    rng = random.Random(ARGS.seed)
    server = start_server()
    if server is None:
        print("PostgreSQL server binaries not installed", file=sys.stderr)
        return 1
    try:
        db = PgDb(server, server.new_database())
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("CAFLEET_DATABASE_URL", db.url)
            with private_tmux(mp) as h:
                setup = h.cli("setup")
                assert setup.returncode == 0, setup.stderr
                names = [f"m{i}" for i in range(ARGS.members)]
                world = build_world(db, harness=h, members=names)
                ids = [world.members[n] for n in names]
                return _probe(h, db, server, world, ids, rng)
    finally:
        server.stop()


def _probe(
    h: Any, db: PgDb, server: PgServer, world: Any, ids: list[int], rng: random.Random
) -> int:
    SENDER_PANE["pane"] = h._own_pane(world.director) or ""
    outages = Outages(server, rng)
    first: dict[str, dict[str, Any]] = {}
    running: list[tuple[str, int, subprocess.Popen[str]]] = []
    started = time.monotonic()
    outages.thread.start()
    n = 0
    while n < ARGS.sends or running:
        while n < ARGS.sends and len(running) < ARGS.parallel:
            body = f"probe-{n}"
            to = ids[n % len(ids)]
            running.append((body, to, _send(h, world.director, to, body)))
            n += 1
        still = []
        for body, to, proc in running:
            if proc.poll() is None:
                still.append((body, to, proc))
                continue
            out, err = proc.communicate()
            first[body] = {"to": to, "rc": proc.returncode, "stdout": out, "stderr": err}
        running = still
        time.sleep(0.02)
    outages.stop_flag.set()
    outages.thread.join()
    send_seconds = time.monotonic() - started
    stored_before = _stored(db)

    # The agent's retry, with the server up: every send that did not report `sent`.
    retried = 0
    for body, r in first.items():
        if r["rc"] == 0:
            continue
        key = KEY.search(r["stderr"])
        proc = _send(h, world.director, r["to"], body, key.group(1) if key else None)
        proc.communicate()
        retried += 1
    stored_after = _stored(db)

    # Delivery settles: the fleet's loop (started again by a send or `monitor start`) types
    # what is still pending.
    h.cli("monitor", "start", str(world.fleet_id))
    deadline = time.monotonic() + ARGS.settle
    while _pending(db) and time.monotonic() < deadline:
        time.sleep(0.5)
    time.sleep(3)  # a line typed but not yet stamped reaches the log first

    typed_msgs: Counter[int] = Counter()
    typed_bodies: Counter[str] = Counter()
    for member in ids:
        for rec in util.line_records(world.pane(member)):
            text = rec.get("text", "")
            m, b = MSG_ID.search(text), BODY.search(text)
            if m and b:
                typed_msgs[int(m.group(1))] += 1
                typed_bodies[b.group(1)] += 1

    reports = Counter(_report(r["rc"]) for r in first.values())
    lies = {
        "failed_but_stored": sum(
            1 for b, r in first.items() if r["rc"] == 1 and stored_before[b] > 0
        ),
        "sent_but_not_stored": sum(
            1 for b, r in first.items() if r["rc"] == 0 and stored_before[b] == 0
        ),
    }
    unknown_stored = sum(1 for b, r in first.items() if r["rc"] == 75 and stored_before[b] > 0)
    leaked = sum(1 for r in first.values() if PASSWORD in r["stderr"] + r["stdout"])
    named_db = sum(1 for r in first.values() if r["rc"] != 0 and str(db) in r["stderr"])
    result = {
        "checkout": str(REPO),
        "sends": ARGS.sends,
        "parallel": ARGS.parallel,
        "outages": outages.count,
        "send_seconds": round(send_seconds, 1),
        "reports": dict(reports),
        **lies,
        "unknown_and_stored": unknown_stored,
        "errors_naming_database": named_db,
        "errors_with_password": leaked,
        "retried": retried,
        "bodies_stored_twice_after_retry": sum(1 for c in stored_after.values() if c > 1),
        "bodies_never_stored": sum(1 for b in first if stored_after[b] == 0),
        "messages_typed_more_than_once": sum(1 for c in typed_msgs.values() if c > 1),
        "max_times_one_message_typed": max(typed_msgs.values(), default=0),
        "bodies_typed_more_than_once": sum(1 for c in typed_bodies.values() if c > 1),
        "still_pending": _pending(db),
        "error_texts": sorted(
            Counter(
                re.sub(r"[0-9]+", "N", r["stderr"].strip().splitlines()[-1])[:160]
                for r in first.values()
                if r["rc"] != 0 and r["stderr"].strip()
            ).items(),
            key=lambda kv: -kv[1],
        )[:8],
    }
    print(json.dumps(result, indent=2))
    if ARGS.out:
        Path(ARGS.out).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
