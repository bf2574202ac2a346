"""10. Verified, idle-aware delivery (docs/runtime.md §4.9): what the gate and the verified submit cost, and
whether lines reach freshly spawned real agents.

``run`` (section 12, in every run): the classifier's cost per capture (`classify`,
`composer_text`, `line_taken` over every real capture in tests/data/screens), the
`capture-pane -p` call it reads, and send-to-verified through the one typing path
(`type_into_pane`: gate capture, composer check, text, SUBMIT_SETTLE, Enter, captures until the
line shows taken) into a ready screen-mode fake of each agent in a private tmux server.

``run_real`` (section 13, only with ``--only delivery_real``: tens of minutes of CPU): per agent,
``trials`` real members spawned with `cafleet member create`, one message sent at a random
0-15 s after the create; the agent's own record decides received-intact, stamped-but-missing
and interruptions. Also send-to-verified into a real agent at its first ready screen (for
opencode its home screen, which a spawned member never gets lines on: the gate holds it), and
into one idle after a turn its model answered (the scripted model), each line then read back
from the agent's own record.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data" / "screens"
# Section 12's screen-mode fakes (tests/harness/fake_screens.py draws these three agents).
AGENTS = ("claude", "codex", "opencode")
EM = "\u2014"


def _line(n: int, body: str = "benchmark line") -> str:
    return f"[cafleet msg {n} from Director (1)] {body} {EM} ack with: cafleet message ack {n}"


def _stats(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    ordered = sorted(values)
    return {
        "n": len(values),
        "median": statistics.median(ordered),
        "min": ordered[0],
        "max": ordered[-1],
        "p90": ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))],
    }


@contextmanager
def _private_tmux() -> Iterator[Any]:
    import pytest

    from tests.harness.fixtures import private_tmux

    with pytest.MonkeyPatch.context() as mp:
        # The cafleet commands the harness runs (loops, CLI calls) run this checkout, as under
        # tests/conftest.py, not whatever cafleet is installed.
        existing = os.environ.get("PYTHONPATH")
        mp.setenv("PYTHONPATH", str(REPO) + (os.pathsep + existing if existing else ""))
        # Each private server gets a database of its own under its temporary directory: the
        # harness takes an inherited CAFLEET_DATABASE_URL as given (a test's, or the user's real
        # one), and every section would then share it (fleet 1 "demo" of one section refusing
        # the next section's Director pane), or write into the user's database.
        mp.delenv("CAFLEET_DATABASE_URL", raising=False)
        # And a HOME of its own: `cafleet setup` there installs the agents' skills, presets
        # and policy files, never into the user's own ~/.claude, ~/.gemini ...
        with tempfile.TemporaryDirectory(prefix="cafleet-bench-home-") as home:
            mp.setenv("HOME", home)
            for name in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "GEMINI_CLI_HOME",
                         "OPENCODE_CONFIG_DIR", "XDG_CONFIG_HOME"):  # fmt: skip
                mp.delenv(name, raising=False)
            with private_tmux(mp) as h:
                yield h


# --------------------------------------------------------------------------- section 12


def classifier_cost(rounds: int) -> dict[str, Any]:
    from cafleet.delivery.screens import classify, composer_text, line_taken, message_frame

    index = json.loads((DATA / "index.json").read_text(encoding="utf-8"))
    screens = [(name.split("/")[0], (DATA / name).read_text(encoding="utf-8")) for name in index]
    frame = message_frame(12)
    out: dict[str, Any] = {"captures": len(screens), "rounds": rounds}

    def taken(agent: str, screen: str) -> object:
        return line_taken(agent, screen, screen, frame)

    functions: list[tuple[str, Callable[[str, str], object]]] = [
        ("classify", classify),
        ("composer_text", composer_text),
        ("line_taken", taken),
    ]
    for label, fn in functions:
        per: list[float] = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            for agent, screen in screens:
                fn(agent, screen)
            per.append((time.perf_counter() - t0) / len(screens))
        out[label + "_us"] = statistics.median(per) * 1e6
    return out


def run(tmp: Path, rounds: int, sends: int) -> dict[str, Any]:
    import shutil

    result: dict[str, Any] = {"classifier": classifier_cost(rounds)}
    if shutil.which("tmux") is None:
        result["skipped"] = "tmux not installed"
        return result
    from cafleet.delivery.keys import Target, type_into_pane
    from cafleet.delivery.policy import SCROLLBACK_LINES
    from cafleet.delivery.screens import classify, message_frame
    from cafleet.mux import PaneKey
    from tests.harness.util import retry_until

    with _private_tmux() as h:
        # The real tmux, not the harness's logging shim: the product's own cost.
        backend = h.backend(tmux_bin=h.real_tmux)
        verified: dict[str, list[float]] = {}
        captures: list[float] = []
        for agent in AGENTS:
            # work=0: each submit ends its turn at once, so every line meets a ready screen.
            pane = h.spawn_fake(agent, env={"CAFLEET_FAKE_SCREEN": "work=0"})
            key = PaneKey("tmux", h.session_name, pane)

            def ready(agent: str = agent, pane: str = pane) -> bool:
                return classify(agent, backend.screen(pane)) == "ready"

            retry_until(ready, timeout=20)
            times: list[float] = []
            for i in range(sends):
                t0 = time.perf_counter()
                backend.screen(pane)
                captures.append(time.perf_counter() - t0)
                n = 1000 + i
                t0 = time.perf_counter()
                outcome = type_into_pane(
                    key,
                    _line(n),
                    backend=lambda: backend,
                    db_dir=str(tmp),
                    purpose="bench",
                    lock_timeout=5,
                    target=Target(agent=agent, frame=message_frame(n), look_back=SCROLLBACK_LINES),
                )
                times.append(time.perf_counter() - t0)
                if outcome.kind != "typed":
                    raise RuntimeError(f"{agent}: {outcome.kind} {outcome.reason}")
                retry_until(ready, timeout=20)
            verified[agent] = times
        result["send_to_verified_fake_s"] = {a: _stats(v) for a, v in verified.items()}
        result["capture_pane_ms"] = statistics.median(captures) * 1000
    return result


def render(r: dict[str, Any]) -> list[str]:
    c = r["classifier"]
    lines = [
        "## 12. delivery gate and verified submit (docs/runtime.md §4.9)",
        f"  classifier per capture ({c['captures']} real captures, median of {c['rounds']}): "
        f"classify {c['classify_us']:.0f} µs, composer_text {c['composer_text_us']:.0f} µs, "
        f"line_taken {c['line_taken_us']:.0f} µs",
    ]
    if "skipped" in r:
        return [*lines, "  send-to-verified: skipped (" + r["skipped"] + ")"]
    lines.append(f"  capture-pane -p: median {r['capture_pane_ms']:.1f} ms")
    for agent, s in r["send_to_verified_fake_s"].items():
        lines.append(
            f"  send-to-verified, ready {agent} screen (fake), n={s['n']}: median "
            f"{s['median']:.2f} s, p90 {s['p90']:.2f} s, max {s['max']:.2f} s"
        )
    return lines


# --------------------------------------------------------------------------- section 13


def _stamp(h: Any, message_id: int) -> str | None:
    rows = h.sqlite("SELECT notified_at FROM messages WHERE message_id = ?", message_id)
    return rows[0][0] if rows else None


def _fresh_trial(
    h: Any, ids: Any, agent: str, n: int, api: str, model_url: str | None = None
) -> dict[str, Any]:
    """One member spawned, one message at a random 0-15 s after the create. ``model_url``: a
    scripted model instead of the hanging API (Gemini CLI keeps a line queued while its turn
    runs in memory only: its record gets it once the turn ends)."""
    from cafleet.db.timefmt import parse_ts
    from tests.harness.real_member import RealMember, arrivals, arrived_count, first_arrival
    from tests.harness.util import retry_until

    offset = random.uniform(0, 15)
    member = RealMember(h, agent, f"bench-{agent}-{n}", api_url=api, model_url=model_url)
    trial: dict[str, Any] = {"agent": agent, "offset_s": round(offset, 2)}
    try:
        member.create(ids.fleet_id, "You are a cafleet member. Wait for messages.")
        time.sleep(max(0.0, member.created_at + offset - time.time()))
        body = f"trial {n} at +{offset:.1f} s"
        sent_at = time.time()
        r = h.cli(
            "message", "send", "--from-member-id", str(ids.director_id), "--to-member-id",
            str(member.member_id), body, "--json",
        )  # fmt: skip
        trial["send_s"] = round(time.time() - sent_at, 2)
        trial["held_note"] = r.stderr.startswith("Held: ")
        if r.returncode != 0:
            trial["send_error"] = f"exit {r.returncode}: {r.stderr.strip()[-300:]}"
            return trial
        message_id = int(json.loads(r.stdout)["message"]["message_id"])
        text = f"[cafleet msg {message_id} from Director ({ids.director_id})] {body} {EM} ack with: cafleet message ack {message_id}"  # noqa: E501
        stamp = None
        with suppress(AssertionError):  # never stamped within the deadline
            retry_until(lambda: _stamp(h, message_id), timeout=240, interval=0.5)
            stamp = parse_ts(_stamp(h, message_id))
        trial["stamped"] = stamp is not None
        if stamp is not None:
            trial["send_to_stamp_s"] = round(stamp.timestamp() - sent_at, 2)
        records: dict[str, Any] = {"all": []}

        def recorded() -> bool:
            records["all"] = arrivals(member)
            return arrived_count(records["all"], text) >= 1

        with suppress(AssertionError):  # not recorded: counted as not received below
            retry_until(recorded, timeout=30, interval=1.0)
        got = records["all"]
        trial["received_intact"] = arrived_count(got, text)
        trial["garbled"] = sum(1 for t, _, _ in got if f"msg {message_id} from" in t and t != text)
        trial["interruptions"] = member.real.interruptions()
        # What reached the pane (the harness's tmux shim logs every call): Enters pressed,
        # Escapes (there must be none) and Ctrl-U clears.
        keys = [
            c["argv"][-1]
            for c in h.shim_calls()
            if c.get("command") == "send-keys" and c.get("target") == member.pane
        ]
        trial["enters"] = keys.count("Enter")
        trial["escapes"] = keys.count("Escape")
        trial["clears"] = keys.count("C-u")
        arrived = first_arrival(got, text)
        if arrived is not None and stamp is not None:
            trial["record_after_stamp_s"] = round(arrived - stamp.timestamp(), 2)
        trial["stamped_but_missing"] = bool(trial.get("stamped")) and trial["received_intact"] == 0
    finally:
        member.stop()
        if member.member_id:
            h.cli("member", "delete", str(member.member_id))
    return trial


SETTLED_FOR = 3.0  # s: the second ready case, an agent whose ready screen has stood this long


def _ready_trial(h: Any, tmp: Path, agent: str, n: int, api: str, settle: float = 0.0) -> float:
    """Send-to-verified through the one typing path into a real agent's first ready screen
    (``settle`` 0), or into one that has been ready for ``settle`` seconds (a pane that was
    idle, not one that has just drawn its screen)."""
    from cafleet.delivery.keys import Target, type_into_pane
    from cafleet.delivery.policy import SCROLLBACK_LINES
    from cafleet.delivery.screens import message_frame
    from cafleet.mux import PaneKey
    from tests.harness.real_agents import RealAgent

    config = {"provider": {"anthropic": {"options": {"baseURL": api + "/v1"}}}}
    a = RealAgent(h, agent, name=f"ready-{agent}-{n}-{settle:g}", opencode_config=config)
    try:
        a.start()
        a.wait_state("ready", timeout=240)
        if settle:
            time.sleep(settle)
            a.wait_state("ready", timeout=30)
        assert a.pane is not None
        backend = h.backend(tmux_bin=h.real_tmux)  # the product's cost, not the test shim's
        t0 = time.perf_counter()
        outcome = type_into_pane(
            PaneKey("tmux", a.session, a.pane),
            _line(5000 + n),
            backend=lambda: backend,
            db_dir=str(tmp),
            purpose="bench",
            lock_timeout=5,
            target=Target(agent=agent, frame=message_frame(5000 + n), look_back=SCROLLBACK_LINES),
        )
        elapsed = time.perf_counter() - t0
        if outcome.kind != "typed":
            raise RuntimeError(f"{agent}: {outcome.kind} {outcome.reason}")
        return elapsed
    finally:
        a.stop()


def _answered_trials(h: Any, tmp: Path, agent: str, count: int) -> dict[str, Any]:
    """Send-to-verified through the one typing path into a real agent idle after a turn its
    model answered (tests/harness/scripted_model.py answers each line "OK." and ends the turn):
    the screen a member shows between tasks. ``count`` lines into one agent, each once the
    previous line's turn has ended; then the agent's own record must hold each exactly once."""
    from cafleet.delivery.keys import Target, type_into_pane
    from cafleet.delivery.policy import SCROLLBACK_LINES
    from cafleet.delivery.screens import composer_text, message_frame
    from cafleet.mux import PaneKey
    from tests.harness.real_agents import RealAgent
    from tests.harness.scripted_model import scripted_model

    def idle(a: Any) -> None:
        # Ready, and still ready a second later: the previous turn has ended, not just begun.
        a.wait_state("ready", timeout=180)
        time.sleep(1.0)
        a.wait_state("ready", timeout=180)

    times: list[float] = []
    lines = [_line(6000 + n) for n in range(count)]
    with scripted_model() as model:
        a = RealAgent(h, agent, name=f"answered-{agent}", model_url=model.base_url(agent))
        try:
            a.start()
            a.wait_state("ready", timeout=240)
            a.submit("hello", settle=1.0)  # the first turn (opencode leaves its home screen)
            time.sleep(3.0)
            if composer_text(agent, a.capture()) == "hello":
                a.keys("Enter")  # Gemini CLI can lose an Enter in its first seconds
            a.wait_screen(r"OK\.", timeout=180)
            backend = h.backend(tmux_bin=h.real_tmux)  # the product's cost, not the shim's
            for n, text in enumerate(lines):
                idle(a)
                assert a.pane is not None
                t0 = time.perf_counter()
                outcome = type_into_pane(
                    PaneKey("tmux", a.session, a.pane),
                    text,
                    backend=lambda: backend,
                    db_dir=str(tmp),
                    purpose="bench",
                    lock_timeout=5,
                    target=Target(
                        agent=agent, frame=message_frame(6000 + n), look_back=SCROLLBACK_LINES
                    ),
                )
                elapsed = time.perf_counter() - t0
                if outcome.kind != "typed":
                    raise RuntimeError(f"{agent}: {outcome.kind} {outcome.reason}")
                times.append(elapsed)
            idle(a)
            received = a.received()
        finally:
            a.stop()
    return {
        "send_to_verified_s": _stats(times),
        "received_once": sum(1 for text in lines if received.count(text) == 1),
        "lines": count,
    }


def run_real(tmp: Path, trials: int, ready_trials: int, agents: list[str]) -> dict[str, Any]:
    from tests.fleet_helpers import create_fleet, start_loop, stop_loop
    from tests.harness.real_agents import binary
    from tests.harness.real_member import hanging_api
    from tests.harness.scripted_model import scripted_model

    out: dict[str, Any] = {"trials": trials, "ready_trials": ready_trials, "agents": {}}
    with _private_tmux() as h, hanging_api() as api, scripted_model() as model:
        assert h.cli("setup").returncode == 0
        ids = create_fleet(h)
        stop_loop(h, ids.fleet_id)
        start_loop(h, ids.fleet_id, "--tick", "1", "--interval", "0")
        for agent in agents:
            if binary(agent) is None:
                out["agents"][agent] = {"skipped": "not installed"}
                continue
            rows = []
            answering = model.base_url(f"fresh-{agent}") if agent == "gemini" else None
            for n in range(trials):
                row = _fresh_trial(h, ids, agent, n, api, answering)
                print(json.dumps(row), flush=True)
                rows.append(row)
            ready = [_ready_trial(h, tmp, agent, n, api) for n in range(ready_trials)]
            settled = [
                _ready_trial(h, tmp, agent, n, api, settle=SETTLED_FOR) for n in range(ready_trials)
            ]
            try:
                answered = _answered_trials(h, tmp, agent, ready_trials)
            except (AssertionError, RuntimeError) as exc:  # say what failed, keep the rest
                answered = {"error": str(exc)[:2000], "send_to_verified_s": {}, "lines": 0}
                answered["received_once"] = 0
            out["agents"][agent] = {
                "rows": rows,
                "send_errors": [r["send_error"] for r in rows if "send_error" in r],
                "received_intact": sum(1 for r in rows if r.get("received_intact") == 1),
                "duplicates": sum(1 for r in rows if r.get("received_intact", 0) > 1),
                "stamped_but_missing": sum(1 for r in rows if r.get("stamped_but_missing")),
                "never_stamped": sum(1 for r in rows if not r.get("stamped")),
                "garbled": sum(r.get("garbled", 0) for r in rows),
                "escapes": sum(r.get("escapes", 0) for r in rows),
                "enters": _stats([r["enters"] for r in rows if "enters" in r]),
                "interruptions": sum(r.get("interruptions", 0) for r in rows),
                "held_at_send": sum(1 for r in rows if r["held_note"]),
                "send_to_stamp_s": _stats([r["send_to_stamp_s"] for r in rows if r.get("stamped")]),
                "record_after_stamp_s": _stats(
                    [r["record_after_stamp_s"] for r in rows if "record_after_stamp_s" in r]
                ),
                "send_to_verified_ready_s": _stats(ready),
                "send_to_verified_settled_s": _stats(settled),
                "send_to_verified_answered_s": answered["send_to_verified_s"],
                "answered_received_once": answered["received_once"],
                "answered_lines": answered["lines"],
                "answered_error": answered.get("error"),
            }
    return out


def render_real(r: dict[str, Any]) -> list[str]:
    lines = [f"## 13. delivery to freshly spawned real members ({r['trials']} trials per agent)"]
    for agent, s in r["agents"].items():
        if "skipped" in s:
            lines.append(f"  {agent}: skipped ({s['skipped']})")
            continue
        lag = s["record_after_stamp_s"]
        lines.append(
            f"  {agent}: {s['received_intact']}/{len(s['rows'])} received intact, "
            f"{s['stamped_but_missing']} stamped-but-missing, {s['duplicates']} duplicated, "
            f"{s['never_stamped']} never stamped, {s['garbled']} garbled, "
            f"{s['interruptions']} interruptions; {s['held_at_send']} held at send; send to "
            f"stamp median {s['send_to_stamp_s'].get('median', 0):.1f} s (max "
            f"{s['send_to_stamp_s'].get('max', 0):.1f} s); record after stamp max "
            f"{lag.get('max', 0):+.2f} s; send-to-verified at the first ready screen median "
            f"{s['send_to_verified_ready_s'].get('median', 0):.2f} s, ready for "
            f"{SETTLED_FOR:g} s median {s.get('send_to_verified_settled_s', {}).get('median', 0):.2f}"
            f" s (n={s['send_to_verified_ready_s'].get('n', 0)} each); idle after an answered "
            f"turn median {s.get('send_to_verified_answered_s', {}).get('median', 0):.2f} s, "
            f"{s.get('answered_received_once', 0)}/{s.get('answered_lines', 0)} in its record once"
        )
    return lines


__all__ = ["classifier_cost", "render", "render_real", "run", "run_real"]
