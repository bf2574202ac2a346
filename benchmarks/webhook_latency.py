"""Escalation drawn -> webhook received (docs/cli.md §2.35): a fleet in a private tmux server with
its monitor loop (tick 1 s, `CAFLEET_ESCALATE_AFTER=0`) and a webhook channel to a real HTTP
receiver on 127.0.0.1. Per trial a screen-mode fake Claude Code member opens its permission
prompt; the latency runs from the prompt drawn (the fake's record of its screen) to the
receiver's arrival time of the `escalation` POST; `report_to_post` from the Director's report's
`created_at` to the same arrival (the outbox and the sender thread alone).

    python -m benchmarks.webhook_latency [--trials 10]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

from benchmarks.delivery import _private_tmux
from benchmarks.escalation import TICK, _created_at, _wait_ready


def run(trials: int) -> dict[str, Any]:
    from tests.fleet_helpers import create_fleet, create_member, ok, start_loop, stop_loop
    from tests.harness.util import fake_log, retry_until, start_record
    from tests.test_notify import Receiver

    hook = Receiver()
    arrived: dict[int, float] = {}
    original = hook.bodies

    class Stamped(list):  # type: ignore[type-arg]
        def append(self, body: Any) -> None:
            if body.get("event") == "escalation":
                arrived.setdefault(int(body["member_id"]), time.time())
            super().append(body)

    hook.bodies = Stamped(original)
    drawn_to_post: list[float] = []
    report_to_post: list[float] = []
    with _private_tmux() as h:
        assert h.cli("setup").returncode == 0
        ids = create_fleet(h)
        stop_loop(h, ids.fleet_id)
        ok(h.cli("notify", "add", "--fleet-id", str(ids.fleet_id), "webhook", hook.url))
        loop = start_loop(
            h, ids.fleet_id, "--tick", str(TICK), "--interval", "0",
            env={"CAFLEET_ESCALATE_AFTER": "0"},
        )  # fmt: skip
        try:
            for n in range(trials):
                member, pane = create_member(
                    h, ids.fleet_id, f"hook-{n}", "#fake screen permission work=600\nhello"
                )
                start_record(pane)
                _wait_ready(pane)
                ok(h.cli("member", "prompt", str(member), "run the tests"))

                def drawn_at(pane: str = pane) -> Any:
                    records = fake_log(pane)
                    return next(
                        (r["t"] for r in records if r.get("state") == "awaiting_user"), None
                    )

                def arrival(member: int = member) -> float | None:
                    return arrived.get(member)

                drawn = retry_until(drawn_at, timeout=30)
                got = retry_until(arrival, timeout=60, interval=0.01)
                reported = _created_at(h, ids.director_id, member)
                drawn_to_post.append(got - float(drawn))
                if reported is not None:
                    report_to_post.append(got - reported)
                ok(h.cli("member", "answer", str(member), "1"))
                ok(h.cli("member", "delete", str(member)))
        finally:
            loop.stop()
            hook.close()
    return {
        "tick_s": TICK,
        "trials": trials,
        "drawn_to_post_median_s": statistics.median(drawn_to_post),
        "drawn_to_post_max_s": max(drawn_to_post),
        "report_to_post_median_s": statistics.median(report_to_post),
        "report_to_post_max_s": max(report_to_post),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--out", type=Path, help="also write the figures here")
    args = parser.parse_args()
    load_before = os.getloadavg()
    figures = run(args.trials)
    figures["load"] = [*load_before, *os.getloadavg()]
    text = json.dumps(figures, indent=2)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
