"""10. What the stale-assets guard costs a command (docs/cli.md §3.2).

In process, on one database with every agent's assets recorded and a fleet of placed members:

- `require_assets` for each way a command names its agents (a member, a member's fleet, a fleet,
  agents given directly): its one read transaction, resolving three paths and comparing versions;
- `send_message` beside it, the write a `message send` does anyway;
- compiling the modules the guard adds to a guarded command's imports, which is what the guard
  costs a run without cached bytecode (PYTHONDONTWRITEBYTECODE=1, the machine default).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from benchmarks.common import base_env, connect, make_fleet, median, setup_db

GUARD_MODULES = (
    "cafleet/assets/guard.py",
    "cafleet/assets/__init__.py",
    "cafleet/assets/targets.py",
    "cafleet/broker/assets.py",
)


def _timed(call: Any, count: int) -> dict[str, float]:
    for _ in range(max(1, count // 10)):
        call()
    times = []
    for _ in range(count):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return {"median_us": median(times) * 1e6, "min_us": min(times) * 1e6}


def run(tmp: Path, count: int) -> dict[str, Any]:
    import os

    import cafleet
    from cafleet.assets.guard import require_assets
    from cafleet.broker import send_message
    from cafleet.db.runtime import close_connection

    db_path = tmp / "assets_guard" / "cafleet.db"
    setup_db(db_path)
    saved = os.environ.get("HOME")
    os.environ["HOME"] = base_env(db_path)["HOME"]  # the guard resolves the paths setup used
    conn = connect(db_path)
    try:
        fleet = make_fleet(conn, 20, placed=True)
        member = fleet.member_ids[0]
        scopes = {
            "member (send, ping, prompt)": {"member_id": member},
            "fleet of member (broadcast, wait)": {"fleet_of_member": fleet.director_id},
            "fleet (monitor loop)": {"fleet_id": fleet.fleet_id},
            "agents (fleet/member create)": {"agents": ["codex"]},
        }
        results: dict[str, Any] = {"count": count, "calls": {}}
        for label, kwargs in scopes.items():
            results["calls"][label] = _timed(lambda kw=kwargs: require_assets(conn, **kw), count)
        results["calls"]["reference: send_message"] = _timed(
            lambda: send_message(conn, from_member_id=fleet.director_id, to_member_id=member,
                                 text="x"),
            count,
        )  # fmt: skip
    finally:
        close_connection(conn)
        if saved is None:
            os.environ.pop("HOME", None)
        else:
            os.environ["HOME"] = saved
    root = Path(cafleet.__file__).parent.parent
    compile_ms = []
    for _ in range(max(3, count // 100)):
        start = time.perf_counter()
        for rel in GUARD_MODULES:
            compile((root / rel).read_text(encoding="utf-8"), rel, "exec")
        compile_ms.append((time.perf_counter() - start) * 1e3)
    results["compile_guard_modules_ms"] = {"median": median(compile_ms), "min": min(compile_ms)}
    return results


def render(results: dict[str, Any]) -> list[str]:
    lines = [
        f"## 10. the stale-assets guard (in process, {results['count']} calls each)",
        "  call                                     median us     min us",
    ]
    for label, row in results["calls"].items():
        lines.append(f"  {label:<38} {row['median_us']:>10.0f} {row['min_us']:>10.0f}")
    c = results["compile_guard_modules_ms"]
    lines.append(
        f"  compiling the guard's {len(GUARD_MODULES)} modules (a run without bytecode): "
        f"median {c['median']:.2f} ms, min {c['min']:.2f} ms"
    )
    return lines
