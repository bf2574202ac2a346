"""Section 15 (opt-in, real agents): a fleet round trip.

Per agent mix, real members spawned with `cafleet member create` (default profile: workspace),
driven by the scripted model (tests/harness/scripted_model.py), which answers at once. The
Director (the harness's CLI, from the Director pane's environment) sends N tasks round-robin,
each "write a file, run a command"; measured from the first send to the last "done" reply in
the Director's inbox. Each task is split into its two parts, from the database's stamps:
*delivery* (the message's `created_at` to its `notified_at`: the monitor loop's gate waits for
a ready screen, then types the line) and *agent* (`notified_at` to the reply's `created_at`: the
agent's turn of poll, write, run, send, each a model request and a tool call).
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

MIXES: dict[str, tuple[str, ...]] = {
    "claude": ("claude", "claude", "claude"),
    "codex": ("codex", "codex", "codex"),
    "opencode": ("opencode", "opencode", "opencode"),
    "mixed": ("claude", "codex", "opencode"),
}


@contextmanager
def _private_tmux() -> Iterator[Any]:
    import pytest

    from tests.harness.fixtures import private_tmux

    with pytest.MonkeyPatch.context() as mp, private_tmux(mp) as h:
        yield h


def _ts(value: str | None) -> float | None:
    from cafleet.db.timefmt import parse_ts

    parsed = None if value is None else parse_ts(value)
    return None if parsed is None else parsed.timestamp()


def _stats(values: list[float]) -> dict[str, float]:
    if not values:
        return {"n": 0}
    ordered = sorted(values)
    return {
        "n": len(values),
        "median": round(statistics.median(ordered), 3),
        "min": round(ordered[0], 3),
        "max": round(ordered[-1], 3),
    }


def roundtrip(h: Any, agents: tuple[str, ...], tasks: int, timeout: float = 900) -> dict[str, Any]:
    """One fleet of ``agents`` (one member each) in harness ``h``: N tasks, the figures."""
    from tests.fleet_helpers import create_fleet, ok
    from tests.harness.real_member import RealMember
    from tests.harness.scripted_model import scripted_model
    from tests.harness.util import retry_until

    assert h.cli("setup").returncode == 0
    ids = create_fleet(h)  # the Director and monitor are the harness's fakes
    d = ids.director_id
    members: list[RealMember] = []
    with scripted_model() as model:
        try:
            for i, agent in enumerate(agents):
                member = RealMember(h, agent, f"m{i}-{agent}", model_url=model.base_url(f"m{i}"))
                members.append(member.create(ids.fleet_id, None, all_assets=True))

            def inbox() -> list[tuple[Any, ...]]:
                return list(
                    h.sqlite(
                        "SELECT message_id, from_member_id, text, created_at FROM messages "
                        "WHERE to_member_id = ? ORDER BY message_id",
                        d,
                    )
                )

            want = {m.member_id for m in members}
            retry_until(
                lambda: want <= {r[1] for r in inbox() if r[2] == "ready"},
                timeout=timeout,
                interval=0.5,
                message=lambda: f"members not ready: {inbox()}",
            )
            sent: dict[int, tuple[int, RealMember]] = {}
            t0 = time.time()
            for n in range(tasks):
                member = members[n % len(members)]
                r = ok(
                    h.cli(
                        "message",
                        "send",
                        "--from-member-id",
                        str(d),
                        "--to-member-id",
                        str(member.member_id),
                        f"write task-{n}.txt: task {n} ; run: true",
                        "--json",
                    )  # fmt: skip
                )
                sent[int(json.loads(r.stdout)["message"]["message_id"])] = (n, member)

            def replies() -> dict[int, float]:
                out: dict[int, float] = {}
                for _, _, text, created in inbox():
                    if text.startswith("done "):
                        mid = int(text.split(" ", 2)[1].rstrip(":"))
                        if mid in sent:
                            out[mid] = _ts(created) or 0.0
                return out

            retry_until(
                lambda: len(replies()) == tasks,
                timeout=timeout,
                interval=0.2,
                message=lambda: f"replies {sorted(replies())} of {sorted(sent)}",
            )
            got = replies()
            stamps = {
                int(r[0]): (_ts(r[1]), _ts(r[2]))
                for r in h.sqlite(
                    f"SELECT message_id, created_at, notified_at FROM messages WHERE message_id IN "
                    f"({','.join('?' * len(sent))})",
                    *sent,
                )
            }
            delivery = [(n - c) for c, n in stamps.values() if c is not None and n is not None]
            agent_part = [got[m] - n for m, (_, n) in stamps.items() if n is not None and m in got]
            per_task = [got[m] - (stamps[m][0] or t0) for m in sent]
            files = sum((m.real.cwd / f"task-{n}.txt").exists() for n, m in sent.values())
            requests = {label: len(model.client_requests(label)) for label in model.usage_totals()}
            return {
                "agents": list(agents),
                "tasks": tasks,
                "first_send_to_last_reply_s": round(max(got.values()) - t0, 3),
                "per_task_s": _stats(per_task),
                "delivery_s": _stats(delivery),
                "agent_turn_s": _stats(agent_part),
                "files_written": files,
                "model_requests": sum(requests.values()),
                "output_tokens": sum(t["output_tokens"] for t in model.usage_totals().values()),
            }
        finally:
            for member in members:
                member.stop()


def run(tmp: Path, mixes: list[str], task_counts: list[int]) -> dict[str, Any]:
    from tests.harness.real_agents import binary

    out: dict[str, Any] = {"rows": [], "skipped": []}
    for mix in mixes:
        agents = MIXES[mix]
        missing = sorted({a for a in agents if binary(a) is None})
        if missing:
            out["skipped"].append(f"{mix}: {', '.join(missing)} not installed")
            continue
        for tasks in task_counts:
            with _private_tmux() as h:
                row = roundtrip(h, agents, tasks)
            row["mix"] = mix
            out["rows"].append(row)
    return out


def render(r: dict[str, Any]) -> list[str]:
    lines = ["## 15. fleet round trip: N tasks to real members, scripted model (s)"]
    lines.append(
        "  mix       N  first send->last reply  per task med  delivery med  agent turn med  files"
    )
    for row in r["rows"]:
        lines.append(
            f"  {row['mix']:<8} {row['tasks']:>2}  {row['first_send_to_last_reply_s']:>21.1f}"
            f"  {row['per_task_s'].get('median', 0):>12.1f}  {row['delivery_s'].get('median', 0):>12.1f}"
            f"  {row['agent_turn_s'].get('median', 0):>14.1f}  {row['files_written']:>3}/{row['tasks']}"
        )  # fmt: skip
    lines += [f"  skipped: {s}" for s in r["skipped"]]
    return lines


__all__ = ["MIXES", "render", "roundtrip", "run"]
