"""16. Reading a member's usage from its agent's record (docs/runtime.md §9.5).

One Claude Code session record of N replies (~0.6 KB a line, the size of a short reply with its
usage) under a private HOME: the first `read_usage` (the whole file, in 8 MiB chunks), one after
10 more replies were appended (only those lines), and one with nothing new (a stat and the
cache file).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from benchmarks.common import median

PAD = "x" * 400


def _reply(i: int) -> str:
    message = {
        "id": f"m{i}",
        "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": PAD}],
        "usage": {"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 100,
                  "cache_creation_input_tokens": 1},
    }  # fmt: skip
    return json.dumps({"type": "assistant", "requestId": f"r{i}", "message": message}) + "\n"


def run(tmp: Path, replies: int, runs: int) -> dict[str, Any]:
    from cafleet.sessions.usage import Subject, cache_path, read_usage

    root = tmp / "usage"
    db_dir = root / "db"
    db_dir.mkdir(parents=True)
    folder = root / "home" / ".claude" / "projects" / "-w"
    folder.mkdir(parents=True)
    record = folder / "s.jsonl"
    with record.open("w", encoding="utf-8") as fh:
        fh.write(json.dumps({"type": "user", "cwd": "/w", "message": {"content": "p"}}) + "\n")
        for i in range(replies):
            fh.write(_reply(i))
    env = {"HOME": str(root / "home")}
    subject = [Subject(1, "claude", "s")]
    first, appended, idle = [], [], []
    n = replies
    for _ in range(runs):
        Path(cache_path(str(db_dir))).unlink(missing_ok=True)
        start = time.perf_counter()
        got = read_usage(str(db_dir), subject, env)[0]
        first.append(time.perf_counter() - start)
        with record.open("a", encoding="utf-8") as fh:
            for i in range(n, n + 10):
                fh.write(_reply(i))
        n += 10
        start = time.perf_counter()
        got = read_usage(str(db_dir), subject, env)[0]
        appended.append(time.perf_counter() - start)
        start = time.perf_counter()
        read_usage(str(db_dir), subject, env)
        idle.append(time.perf_counter() - start)
        assert got.tally is not None and got.tally.totals()[1] == n * 5
    return {
        "replies": replies,
        "record_mb": record.stat().st_size / 1e6,
        "first_read_ms": median(first) * 1e3,
        "after_10_more_ms": median(appended) * 1e3,
        "nothing_new_ms": median(idle) * 1e3,
    }


def render(r: dict[str, Any]) -> list[str]:
    return [
        f"16. usage from a {r['record_mb']:.1f} MB Claude Code record ({r['replies']} replies): "
        f"first read {r['first_read_ms']:.0f} ms, after 10 more replies "
        f"{r['after_10_more_ms']:.2f} ms, nothing new {r['nothing_new_ms']:.2f} ms (medians)"
    ]
