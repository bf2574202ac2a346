"""A real coding agent spawned as a cafleet member (`cafleet member create`), and the agent's own
record of what reached it, with times: for the real-client delivery tests and the delivery
benchmark (docs/performance.md §13).

`RealMember` prepares a `RealAgent` (private HOME, no-dialog configuration, dummy keys, API
URLs that go nowhere) but lets cafleet spawn it: a wrapper named like the agent, first on the
``PATH`` of the `member create` run, execs the real binary with that environment, so the pane
runs exactly the argv cafleet builds. `arrivals` reads the agent's own record (Claude's session
jsonl, Codex's rollout jsonl, ``opencode export``, Gemini's chat jsonl) as (text, epoch seconds)
pairs.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import socket
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from tests.harness.real_agents import UNSET, RealAgent, binary


@contextlib.contextmanager
def hanging_api() -> Iterator[str]:
    """A local HTTP endpoint that accepts requests and never answers: an agent pointed at it
    stays ``working`` (opencode gives up on a refused connection within seconds)."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    server.settimeout(0.2)
    stop = threading.Event()
    held: list[socket.socket] = []

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            held.append(conn)  # read nothing, answer nothing, keep it open

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(timeout=5)
        for conn in held:
            with contextlib.suppress(OSError):
                conn.close()
        server.close()


class RealMember:
    """One real agent to be spawned by `cafleet member create` in ``harness``'s server."""

    def __init__(
        self,
        harness: Any,
        agent: str,
        name: str,
        api_url: str | None = None,
        model_url: str | None = None,
        extra_env: dict[str, str] | None = None,
        claude_config: dict[str, Any] | None = None,
        cwd: Path | None = None,
    ) -> None:
        """``api_url``: an endpoint for opencode only (e.g. `hanging_api`); ``model_url``: a
        scripted model's base URL for any agent (tests/harness/scripted_model.py);
        ``extra_env``: more variables for the agent."""
        opencode_config = None
        if agent == "opencode" and api_url is not None:
            opencode_config = {"provider": {"anthropic": {"options": {"baseURL": api_url + "/v1"}}}}
        self.harness = harness
        self.name = name
        self.real = RealAgent(
            harness,
            agent,
            name=name,
            opencode_config=opencode_config,
            model_url=model_url,
            extra_env=extra_env,
            claude_config=claude_config,
            cwd=cwd,
        )
        self.real.prepare()
        self.bin_dir = self.real.root / "bin"
        self.bin_dir.mkdir(parents=True, exist_ok=True)
        real = binary(agent)
        assert real is not None
        wrapper = self.bin_dir / agent
        unset = " ".join(f"-u {name}" for name in UNSET)
        assign = " ".join(shlex.quote(f"{k}={v}") for k, v in self.real.env.items())
        wrapper.write_text(
            f'#!/bin/sh\nexec env {unset} {assign} {shlex.quote(str(real))} "$@"\n',
            encoding="utf-8",
        )
        wrapper.chmod(0o755)
        self.member_id = 0
        self.pane = ""
        self.created_at = 0.0  # time.time() when `member create` returned

    @property
    def agent(self) -> str:
        return self.real.agent

    def _share_installed_assets(self, every_agent: bool = False) -> None:
        """opencode and Gemini CLI run with a private config dir, but `cafleet setup` installed
        what they load into the harness's: copy it in, as a user's own agent finds it. opencode:
        the agent preset (`--agent cafleet`; without it an `Agent not found` toast covers its
        first screens), skill and hooks plugin; Gemini: the hooks extension (its policy files
        are passed by path). Claude Code and Codex need nothing from there to start.

        ``every_agent``: a member that runs `cafleet` commands itself needs what `cafleet setup`
        installs for every agent in its own configuration directories (Codex's rules file; the
        stale-assets guard of its `message send` checks the recipient's agent there), so run
        `cafleet setup` with the member's environment, as its user would."""
        import shutil

        if every_agent:
            result = self.harness.cli("setup", env=self.real.env, cwd=self.real.cwd)
            assert result.returncode == 0, (result.stdout, result.stderr)
            return
        shared = {"opencode": ("agents", "skills", "plugins"), "gemini": ("extensions",)}
        if self.agent not in shared:
            return

        from cafleet.assets.targets import resolve_target

        installed = Path(resolve_target(self.agent, self.harness.env).path)
        private = Path(resolve_target(self.agent, self.real.env).path)
        for sub in shared[self.agent]:
            if (installed / sub).is_dir():
                shutil.copytree(installed / sub, private / sub, dirs_exist_ok=True)

    def create(
        self, fleet_id: int, prompt: str | None, *extra: str, all_assets: bool = False
    ) -> RealMember:
        """`cafleet member create` with the wrapper first on PATH, from the agent's project;
        ``prompt`` None: the bundled member prompt. ``extra``: more options; ``all_assets``:
        copy what `cafleet setup` installed for every agent, not only opencode."""
        h = self.harness
        self._share_installed_assets(all_assets)
        env = {"PATH": os.pathsep.join([str(self.bin_dir), h.env["PATH"]])}
        result = h.cli(
            "member", "create", "--fleet-id", str(fleet_id), "--name", self.name,
            "--description", f"real {self.agent}", "--coding-agent", self.agent, *extra,
            *([] if prompt is None else [prompt]),
            env=env, cwd=self.real.cwd, timeout=120,
        )  # fmt: skip
        self.created_at = time.time()
        assert result.returncode == 0, (result.stdout, result.stderr)
        m = re.fullmatch(r"(\d+) .+ agent=\w+ pane=(%\d+)\n", result.stdout)
        assert m, result.stdout
        self.member_id, self.pane = int(m.group(1)), m.group(2)
        self.real.pane = self.pane
        self.real.spawned_at = time.monotonic()
        return self

    def stop(self) -> None:
        """Kill the pane and every process started for the agent (by its private marker)."""
        if self.pane:
            self.harness.tmux("kill-pane", "-t", self.pane, check=False)
        self.real.pane = None
        self.real.stop()


# --------------------------------------------------------------------------- the agent's record


def _epoch(value: Any) -> float | None:
    if isinstance(value, int | float):
        return value / 1000 if value > 1e11 else float(value)
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(p.get("text", ""))
            for p in content
            if isinstance(p, dict) and p.get("type") in ("text", "input_text")
        )
    return ""


def _jsonl(path: Path) -> list[dict[str, Any]]:
    out = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        with contextlib.suppress(ValueError):
            rec = json.loads(line)
            if isinstance(rec, dict):
                out.append(rec)
    return out


def arrivals(member: RealMember) -> list[tuple[str, float | None, bool]]:
    """(text, epoch seconds, queued) for every user message in the agent's own record, in
    record order. ``queued``: Claude's enqueue record of a line submitted while it worked (its
    later user record of the same line is the same arrival, see `arrived_count`)."""
    a = member.real
    out: list[tuple[str, float | None, bool]] = []
    if a.agent == "claude":
        for path in sorted((a.claude_config / "projects").glob("*/*.jsonl")):
            for rec in _jsonl(path):
                when = _epoch(rec.get("timestamp"))
                if rec.get("type") == "queue-operation" and rec.get("operation") == "enqueue":
                    out.append((str(rec.get("content", "")), when, True))
                elif rec.get("type") == "user" and not rec.get("isMeta"):
                    text = _text((rec.get("message") or {}).get("content"))
                    if text:
                        out.append((text, when, False))
    elif a.agent == "codex":
        for path in sorted((a.codex_home / "sessions").glob("*/*/*/rollout-*.jsonl")):
            for rec in _jsonl(path):
                payload = rec.get("payload") or {}
                item = payload.get("item") or {}
                if payload.get("type") == "item_completed" and item.get("type") == "UserMessage":
                    out.append((_text(item.get("content")), _epoch(rec.get("timestamp")), False))
    elif a.agent == "gemini":
        from tests.harness.real_agents import gemini_chats

        for path in gemini_chats(a.home):
            for rec in _jsonl(path):  # its own lines: a `$set` only repeats earlier messages
                if rec.get("type") != "user":
                    continue
                text = "".join(str(p.get("text", "")) for p in rec.get("content") or []
                               if isinstance(p, dict))  # fmt: skip
                if not text or text.startswith("<session_context>"):
                    continue  # a tool result's record, or Gemini's own context
                # Lines queued while it worked are sent as one message, joined by a blank
                # line: each is one arrival.
                for part in re.split(r"\n\n(?=\[cafleet msg )", text):
                    out.append((part, _epoch(rec.get("timestamp")), False))
    else:
        for message in a._opencode_messages():
            info = message.get("info") or {}
            if info.get("role") != "user":
                continue
            text = "".join(
                str(p.get("text", ""))
                for p in message.get("parts", [])
                if p.get("type") == "text" and not p.get("synthetic")
            )
            out.append((text, _epoch((info.get("time") or {}).get("created")), False))
    return out


def arrived_count(records: list[tuple[str, float | None, bool]], text: str) -> int:
    """How many times ``text`` reached the agent: Claude records a line queued while it works
    twice (enqueue, then the user message when its turn comes), so queued and direct records
    are counted apart and the larger count is the number of arrivals."""
    queued = sum(1 for t, _, q in records if t == text and q)
    direct = sum(1 for t, _, q in records if t == text and not q)
    return max(queued, direct)


def first_arrival(records: list[tuple[str, float | None, bool]], text: str) -> float | None:
    times = [w for t, w, _ in records if t == text and w is not None]
    return min(times) if times else None


__all__ = ["RealMember", "arrivals", "arrived_count", "first_arrival", "hanging_api"]
