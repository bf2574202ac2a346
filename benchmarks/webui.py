"""8. The WebUI on the scale database (section 5's 100,000 messages plus a few broadcasts):
`GET /api/timeline` through the real `cafleet server`, its server time (the `Server-Timing`
header: routing, the handler in its worker thread with its own connection, rendering) and the
client's round trip over one keep-alive connection; the query alone in process; and the cost of
one page refresh (the six requests the page makes every 5 s)."""

from __future__ import annotations

import http.client
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.common import base_env, connect, make_fleet, median, setup_db
from benchmarks.scale import _fill

BROADCASTS = 20
REFRESH = (
    "/api/fleets",
    "/api/members",
    "/api/members/activity",
    "/api/members/panes",
    "/api/timeline",
    "/api/monitor",
)
_TIMING = re.compile(r"app;dur=([0-9.]+)")


TOKEN = "benchmark-token"  # every request carries it, as the page's do (its cookie)


def _serve(db_path: Path) -> tuple[subprocess.Popen[str], int]:
    """The real server on a port the OS picks (bound here, so no port can be taken between
    picking and listening): `--port` needs 1-65535, so the benchmark asks for a free one first."""
    import socket

    for _ in range(5):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        proc = subprocess.Popen(
            [sys.executable, "-m", "cafleet", "server", "--port", str(port), "--token", TOKEN],
            env=base_env(db_path),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if line.startswith("cafleet server: "):
            return proc, port
        proc.wait(timeout=10)
    raise RuntimeError(f"cafleet server did not start: {line}")


def _get(conn: http.client.HTTPConnection, path: str, fleet_id: int) -> tuple[float, float, int]:
    """One GET: (server ms from Server-Timing, round trip ms, body bytes)."""
    headers = {"Authorization": f"Bearer {TOKEN}"}
    if path != "/api/fleets":
        headers["X-Fleet-Id"] = str(fleet_id)
    t0 = time.perf_counter()
    conn.request("GET", path, headers=headers)
    response = conn.getresponse()
    body = response.read()
    total = (time.perf_counter() - t0) * 1000
    assert response.status == 200, (path, response.status, body[:200])
    match = _TIMING.search(response.getheader("server-timing") or "")
    assert match, "no Server-Timing header"
    return float(match.group(1)), total, len(body)


def run(tmp: Path, total: int, runs: int) -> dict[str, Any]:
    from cafleet import broker
    from cafleet.broker.views import timeline
    from cafleet.db.runtime import close_connection
    from cafleet.web.app import TIMELINE_LIMIT
    from cafleet.web.timeline import group

    db_path = tmp / "webui" / "cafleet.db"
    setup_db(db_path)
    conn = connect(db_path)
    try:
        fleet = make_fleet(conn, 8, placed=True)
        _fill(conn, fleet, total)
        for i in range(BROADCASTS):
            broker.broadcast_message(conn, from_member_id=fleet.member_ids[i % 8], text=f"cast {i}")
        query, grouping = [], []
        for _ in range(max(runs, 5) * 4):
            t0 = time.perf_counter()
            rows = timeline(conn, fleet_id=fleet.fleet_id, limit=TIMELINE_LIMIT)
            t1 = time.perf_counter()
            group(rows)
            t2 = time.perf_counter()
            query.append((t1 - t0) * 1000)
            grouping.append((t2 - t1) * 1000)
    finally:
        close_connection(conn)
    proc, port = _serve(db_path)
    try:
        http_conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        for _ in range(3):  # warm-up: first imports, first connection
            _get(http_conn, "/api/timeline", fleet.fleet_id)
        samples = [
            _get(http_conn, "/api/timeline", fleet.fleet_id) for _ in range(max(runs, 5) * 4)
        ]
        refresh_server, refresh_total = [], []
        per_route: dict[str, list[float]] = {p: [] for p in REFRESH}
        for _ in range(max(runs, 5)):
            server_sum = 0.0
            t0 = time.perf_counter()
            for path in REFRESH:
                server_ms, _rt, _n = _get(http_conn, path, fleet.fleet_id)
                per_route[path].append(server_ms)
                server_sum += server_ms
            refresh_total.append((time.perf_counter() - t0) * 1000)
            refresh_server.append(server_sum)
        http_conn.close()
    finally:
        proc.terminate()
        proc.wait(timeout=15)
    return {
        "messages": total + BROADCASTS * 10,
        "timeline_rows": len(rows),
        "timeline_bytes": samples[-1][2],
        "timeline_server_ms": median([s[0] for s in samples]),
        "timeline_round_trip_ms": median([s[1] for s in samples]),
        "timeline_query_ms": median(query),
        "timeline_group_ms": median(grouping),
        "refresh_server_ms": median(refresh_server),
        "refresh_round_trip_ms": median(refresh_total),
        "refresh_route_server_ms": {p: median(v) for p, v in per_route.items()},
        "samples": len(samples),
    }


def render(r: dict[str, Any]) -> list[str]:
    routes = ", ".join(
        f"{p.removeprefix('/api/')} {v:.2f}" for p, v in r["refresh_route_server_ms"].items()
    )
    return [
        f"## 8. WebUI: GET /api/timeline on {r['messages']} messages ({r['timeline_rows']} rows, "
        f"{r['timeline_bytes']} bytes)",
        f"  server time median {r['timeline_server_ms']:.2f} ms (target <= 20 ms); round trip "
        f"{r['timeline_round_trip_ms']:.2f} ms; query alone {r['timeline_query_ms']:.2f} ms, "
        f"grouping {r['timeline_group_ms']:.2f} ms ({r['samples']} requests)",
        f"  one page refresh (6 requests): server {r['refresh_server_ms']:.2f} ms, round trips "
        f"{r['refresh_round_trip_ms']:.2f} ms; per route (ms): {routes}",
    ]
