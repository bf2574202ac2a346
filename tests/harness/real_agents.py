"""The real coding agents (Claude Code, Codex CLI, opencode, Gemini CLI) in a private tmux server.

``.ci/install-agents`` installs the versions pinned in ``.ci/real-agents.txt`` from the npm
registry into ``$CAFLEET_AGENT_CACHE`` (default ``~/.cache/cafleet-agents`` of the real user, not
the tests' redirected HOME). `require_binary` skips a test when an agent is missing there, or fails
it when ``CI=true`` or ``CAFLEET_REQUIRE_REAL_AGENTS=1``.

`RealAgent` starts one agent in its own session of a `TmuxHarness` server, with a private HOME,
CLAUDE_CONFIG_DIR, CODEX_HOME, GEMINI_CLI_HOME and XDG directories under the harness directory, the no-dialog
configuration of /work/shared/real-clients.md written there, and API base URLs pointing at a closed
local port or an unresolvable name (so a dummy key never reaches a real service, with or
without a network). It reads the
agent's own record of the user messages it received (Claude's session jsonl, Codex's rollout
jsonl, opencode's ``session list``/``export``, Gemini's chat jsonl) and `stop` ends every process it started, the
Codex app-server daemon included, by pid.

Also usable outside pytest (the screen-capture script does): build a `TmuxHarness` with a
``pytest.MonkeyPatch`` and call `RealAgent(...).start()`.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import re
import shlex
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cafleet.agents.registry import agent_names, load_agent
from tests.harness import util

REPO = Path(__file__).resolve().parents[2]
PINS_FILE = REPO / ".ci" / "real-agents.txt"
PACKAGES = {name: load_agent(name).npm_package for name in agent_names()}
AGENTS = tuple(PACKAGES)


def agent_cases(default: str) -> list[Any]:
    """`AGENTS` as parameters of a per-agent matrix: ``default`` runs in the default suite, the
    other agents' cases are marked `agent_matrix` (opt-in, tests/conftest.py)."""
    import pytest

    return [
        pytest.param(agent, marks=() if agent == default else pytest.mark.agent_matrix)
        for agent in AGENTS
    ]


# Dummy credentials: long enough to look like keys, useless anywhere.
ANTHROPIC_KEY = "sk-ant-api03-cafleet-test-dummy-0123456789abcdefghij"
OPENAI_KEY = "sk-proj-cafleet-test-dummy-0123456789abcdefghij"
GEMINI_KEY = "AIza-cafleet-test-dummy-0123456789abcdefghij"
# A closed local port: every API call is refused at once (Claude and Codex then retry for
# minutes: "working").
DEAD_URL = "http://127.0.0.1:9"
# A name that never resolves (RFC 2606): opencode gives up at once on a refused connection but
# retries a failed lookup for as long as the turn lasts, as it does offline.
UNRESOLVABLE_URL = "http://cafleet-offline.invalid"
# The model names agents pointed at a scripted model ask for (any name works; these are ones
# each agent knows, so it shows no unknown-model notice).
CODEX_MODEL = "gpt-5"
OPENCODE_MODEL = "anthropic/claude-sonnet-4-5"
# Variables of the caller that could point an agent at a real account or another config.
UNSET = (
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_MODEL",
    "CLAUDE_CODE_USE_BEDROCK",
    "CLAUDE_CODE_USE_VERTEX",
    "CLAUDECODE",
    "CLAUDE_CODE_ENTRYPOINT",
    "CODEX_SANDBOX",
    "CODEX_THREAD_ID",
    "OPENAI_ORG_ID",
    "OPENCODE_CONFIG",
    "OPENCODE_CONFIG_DIR",
    "OPENCODE_CONFIG_CONTENT",
    "OPENCODE",
    "GEMINI_CLI",
    "GEMINI_MODEL",
    "GEMINI_SYSTEM_MD",
    "GOOGLE_API_KEY",
    "GOOGLE_CLOUD_PROJECT",
    "GOOGLE_GENAI_USE_VERTEXAI",
    "GOOGLE_APPLICATION_CREDENTIALS",
)
# Gemini CLI's no-dialog settings (real-clients.md): API-key auth, no folder-trust dialog, no
# update checks or usage statistics.
GEMINI_SETTINGS: dict[str, Any] = {
    "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
    "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
    "privacy": {"usageStatisticsEnabled": False},
}
# Marker in every started agent's environment: how `stop` finds what this agent started.
MARKER_VAR = "CAFLEET_REAL_AGENT_HOME"


# --------------------------------------------------------------------------- installation


def pins() -> dict[str, str]:
    """Package name -> pinned version, from .ci/real-agents.txt."""
    out: dict[str, str] = {}
    for raw in PINS_FILE.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            name, _, version = line.rpartition("@")
            out[name] = version
    return out


def cache_dir() -> Path:
    """Where .ci/install-agents puts the agents (independent of the tests' HOME)."""
    value = os.environ.get("CAFLEET_AGENT_CACHE")
    if value:
        return Path(value)
    return Path(pwd.getpwuid(os.getuid()).pw_dir) / ".cache" / "cafleet-agents"


def binary(agent: str) -> Path | None:
    """The agent's executable in the cache, or None."""
    path = cache_dir() / "node_modules" / ".bin" / agent
    return path if os.access(path, os.X_OK) else None


def installed_version(agent: str) -> str | None:
    manifest = cache_dir() / "node_modules" / PACKAGES[agent] / "package.json"
    try:
        return str(json.loads(manifest.read_text(encoding="utf-8"))["version"])
    except (OSError, ValueError, KeyError):
        return None


def real_agents_required() -> bool:
    return os.environ.get("CI") == "true" or os.environ.get("CAFLEET_REQUIRE_REAL_AGENTS") == "1"


def require_binary(agent: str) -> Path:
    """The agent's binary; skip the test without it (fail in CI)."""
    import pytest

    found = binary(agent)
    if found is None:
        message = (
            f"real {agent} not installed in {cache_dir()} (run .ci/install-agents, "
            f"or set CAFLEET_AGENT_CACHE)"
        )
        if real_agents_required():
            pytest.fail(message + "; required in CI")
        pytest.skip(message)
    return found


# --------------------------------------------------------------------------- processes


def _environ(pid: int) -> list[bytes]:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            return fh.read().split(b"\0")
    except OSError:
        return []


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ")
    except OSError:
        return b""


def pids_of(root: Path) -> list[int]:
    """Live processes started for the agent home ``root``: its marker in their environment, or
    ``root`` in their command line (the Codex daemon runs a binary copied under CODEX_HOME)."""
    marker = f"{MARKER_VAR}={root}".encode()
    needle = str(root).encode()
    me = os.getpid()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        pid = int(entry)
        if (marker in _environ(pid) or needle in _cmdline(pid)) and util.pid_alive(pid):
            found.append(pid)
    return found


def kill_pids(pids: Sequence[int], grace: float = 5.0) -> list[int]:
    """SIGTERM ``pids``, SIGKILL what is left after ``grace`` s; return those still alive."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(util.pid_alive(p) for p in pids):
        time.sleep(0.05)
    for pid in pids:
        if util.pid_alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(util.pid_alive(p) for p in pids):
        time.sleep(0.05)
    return [p for p in pids if util.pid_alive(p)]


# --------------------------------------------------------------------------- records


@dataclass(frozen=True)
class Received:
    """One user message in the agent's own record. ``queued`` marks Claude's enqueue records (a
    line submitted while it works, recorded at once and run after the turn)."""

    text: str
    queued: bool = False


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return util.read_jsonl(path)


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [
            str(part.get("text", ""))
            for part in content
            if isinstance(part, dict) and part.get("type") in ("text", "input_text")
        ]
    return []


def claude_records(config_dir: Path) -> list[Received]:
    """``"type": "user"`` messages and ``queue-operation``/``enqueue`` records, in file order."""
    out: list[Received] = []
    for path in sorted((config_dir / "projects").glob("*/*.jsonl")):
        for rec in _jsonl(path):
            if rec.get("type") == "queue-operation" and rec.get("operation") == "enqueue":
                out.append(Received(str(rec.get("content", "")), queued=True))
            elif rec.get("type") == "user" and not rec.get("isMeta"):
                message = rec.get("message") or {}
                texts = _texts(message.get("content"))
                if texts:
                    out.append(Received("".join(texts)))
    return out


def codex_records(codex_home: Path) -> list[Received]:
    """The rollout's ``item_completed`` events of type ``UserMessage`` (exactly what was typed;
    the ``response_item`` user records also hold the injected environment context)."""
    out: list[Received] = []
    for path in sorted((codex_home / "sessions").glob("*/*/*/rollout-*.jsonl")):
        for rec in _jsonl(path):
            payload = rec.get("payload") or {}
            item = payload.get("item") or {}
            if (
                rec.get("type") == "event_msg"
                and payload.get("type") == "item_completed"
                and item.get("type") == "UserMessage"
            ):
                out.append(Received("".join(_texts(item.get("content")))))
    return out


def codex_interruptions(codex_home: Path) -> int:
    n = 0
    for path in sorted((codex_home / "sessions").glob("*/*/*/rollout-*.jsonl")):
        for rec in _jsonl(path):
            payload = rec.get("payload") or {}
            if payload.get("type") == "turn_aborted" and payload.get("reason") == "interrupted":
                n += 1
    return n


def gemini_chats(gemini_home: Path) -> list[Path]:
    """Gemini CLI's chat files (``.gemini/tmp/<project>/chats/session-*.jsonl``), oldest first."""
    found = (gemini_home / ".gemini" / "tmp").glob("*/chats/session-*.jsonl")
    return sorted(found, key=lambda p: (p.stat().st_mtime, p.name))


def gemini_records(gemini_home: Path) -> list[Received]:
    """The ``"type": "user"`` messages of its chats, without the ``<session_context>`` it adds
    (a record is either one message or a ``$set`` of the message list, written at start)."""
    out: list[Received] = []
    for path in gemini_chats(gemini_home):
        for rec in _jsonl(path):
            messages = (rec.get("$set") or {}).get("messages") or [rec]
            for message in messages:
                if not isinstance(message, dict) or message.get("type") != "user":
                    continue
                text = "".join(str(p.get("text", "")) for p in message.get("content") or []
                               if isinstance(p, dict))  # fmt: skip
                if not text.lstrip().startswith("<session_context>"):
                    out.append(Received(text))
    return out


def gemini_interruptions(gemini_home: Path) -> int:
    """Turns Gemini recorded as cancelled (``"type": "info"``, ``Request cancelled.``)."""
    return sum(
        1
        for path in gemini_chats(gemini_home)
        for rec in _jsonl(path)
        if rec.get("type") == "info" and "cancelled" in str(rec.get("content", "")).lower()
    )


def opencode_records(messages: Sequence[dict[str, Any]]) -> list[Received]:
    """The user messages of ``opencode export`` output (``messages[].info.role == "user"``,
    their non-synthetic text parts joined)."""
    out = []
    for message in messages:
        if (message.get("info") or {}).get("role") != "user":
            continue
        texts = [
            str(p.get("text", ""))
            for p in message.get("parts", [])
            if p.get("type") == "text" and not p.get("synthetic")
        ]
        out.append(Received("".join(texts)))
    return out


def opencode_interruptions(messages: Sequence[dict[str, Any]]) -> int:
    """Assistant messages that ended with an abort error (what an interrupt records)."""
    return sum(
        1
        for message in messages
        if (message.get("info") or {}).get("role") == "assistant"
        and "Abort" in json.dumps((message.get("info") or {}).get("error") or "")
    )


def _json_after_noise(text: str) -> Any:
    """opencode prints a line such as "Exporting session: ..." before the JSON on some paths."""
    start = min((i for i in (text.find("{"), text.find("[")) if i >= 0), default=-1)
    if start < 0:
        raise ValueError(f"no JSON in {text[:200]!r}")
    return json.loads(text[start:])


# --------------------------------------------------------------------------- the agent


class RealAgent:
    """One real agent in its own tmux session of ``harness``'s private server.

    Attributes after `start`: ``pane``, ``session``, ``root`` (its private directory), ``home``,
    ``cwd`` (its project directory), ``env`` (what it runs with), ``spawned_at`` (monotonic).
    """

    def __init__(
        self,
        harness: Any,
        agent: str,
        *,
        name: str | None = None,
        args: Sequence[str] = (),
        width: int = 120,
        height: int = 40,
        trust: bool = True,
        approve_key: bool = True,
        extra_env: Mapping[str, str] | None = None,
        login: bool = True,
        opencode_config: Mapping[str, Any] | None = None,
        model_url: str | None = None,
        start_in: str = "",
        claude_config: Mapping[str, Any] | None = None,
        cwd: Path | None = None,
    ) -> None:
        if agent not in PACKAGES:
            raise ValueError(f"unknown agent {agent!r}")
        self.harness = harness
        self.agent = agent
        self.name = name or f"real-{agent}"
        self.args = list(args)
        self.width, self.height = width, height
        self.trust, self.approve_key, self.login = trust, approve_key, login
        self.extra_env = dict(extra_env or {})
        self.opencode_config = dict(opencode_config or {})
        # A model server's base URL (tests/harness/scripted_model.py `base_url`): every API
        # call goes there instead of nowhere.
        self.model_url = model_url
        self.claude_config_extra = dict(claude_config or {})  # more keys for .claude.json
        self.binary = binary(agent)
        if self.binary is None:
            raise RuntimeError(f"real {agent} is not installed in {cache_dir()}")
        assert harness.dir is not None
        self.root = Path(harness.dir) / "agents" / self.name
        self.home = self.root / "home"
        self.cwd = cwd or self.root / "project"  # another agent's project: shared with it
        # Where the agent starts, relative to ``cwd`` (which alone is trusted): a member's
        # worktree under the project, or a directory beside it (docs/worktrees.md §1.2).
        self.start_dir = (self.cwd / start_in).resolve() if start_in else self.cwd
        self.claude_config = self.home / ".claude"
        self.codex_home = self.root / "codex"
        self.pane: str | None = None
        self.session = self.name
        self.spawned_at = 0.0
        self.env: dict[str, str] = {}

    # ------------------------------------------------------------------ set-up

    def _dirs(self) -> dict[str, Path]:
        return {
            "HOME": self.home,
            "XDG_CONFIG_HOME": self.home / ".config",
            "XDG_DATA_HOME": self.home / ".local" / "share",
            "XDG_CACHE_HOME": self.home / ".cache",
            "XDG_STATE_HOME": self.home / ".local" / "state",
            "CLAUDE_CONFIG_DIR": self.claude_config,
            "CODEX_HOME": self.codex_home,
            "GEMINI_CLI_HOME": self.home,
        }

    def prepare(self) -> None:
        """Create the private directories and write the agent's no-dialog configuration."""
        for path in [self.cwd, self.start_dir, *self._dirs().values()]:
            path.mkdir(parents=True, exist_ok=True)
        env = {name: str(path) for name, path in self._dirs().items()}
        env.update(
            {
                MARKER_VAR: str(self.root),
                "ANTHROPIC_API_KEY": ANTHROPIC_KEY,
                "ANTHROPIC_BASE_URL": DEAD_URL,
                "OPENAI_API_KEY": OPENAI_KEY,
                "OPENAI_BASE_URL": DEAD_URL + "/v1",
                "GEMINI_API_KEY": GEMINI_KEY,
                "GOOGLE_GEMINI_BASE_URL": DEAD_URL,
                "DISABLE_AUTOUPDATER": "1",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                "OPENCODE_DISABLE_AUTOUPDATE": "1",
                "NO_UPDATE_NOTIFIER": "1",
            }
        )
        if self.model_url is not None:
            env["ANTHROPIC_BASE_URL"] = self.model_url
            env["OPENAI_BASE_URL"] = self.model_url + "/v1"
            env["GOOGLE_GEMINI_BASE_URL"] = self.model_url
        env.update(self.extra_env)
        self.env = env
        getattr(self, f"_prepare_{self.agent}")()

    def _prepare_claude(self) -> None:
        config: dict[str, Any] = {"hasCompletedOnboarding": True}
        if self.approve_key:
            config["customApiKeyResponses"] = {"approved": [ANTHROPIC_KEY[-20:]], "rejected": []}
        if self.trust:
            config["projects"] = {str(self.cwd): {"hasTrustDialogAccepted": True}}
        config.update(self.claude_config_extra)
        text = json.dumps(config)
        # With CLAUDE_CONFIG_DIR set the global config lives inside it; HOME's copy covers
        # versions that still read ~/.claude.json.
        (self.claude_config / ".claude.json").write_text(text, encoding="utf-8")
        (self.home / ".claude.json").write_text(text, encoding="utf-8")

    def _prepare_codex(self) -> None:
        lines = ['preferred_auth_method = "apikey"', f'openai_base_url = "{DEAD_URL}/v1"']
        if self.model_url is not None:
            # A custom provider speaking the Responses API (real-clients.md, "A local model
            # endpoint"); its key comes from OPENAI_API_KEY, a dummy.
            lines[1:] = [
                'model_provider = "scripted"',
                f'model = "{CODEX_MODEL}"',
                "",
                "[model_providers.scripted]",
                'name = "scripted"',
                f'base_url = "{self.model_url}/v1"',
                'wire_api = "responses"',
                'env_key = "OPENAI_API_KEY"',
            ]
        if self.trust:
            lines += ["", f"[projects.{json.dumps(str(self.cwd))}]", 'trust_level = "trusted"']
        (self.codex_home / "config.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")
        if self.login:
            assert self.binary is not None
            proc = subprocess.run(
                [str(self.binary), "login", "--with-api-key"],
                input=OPENAI_KEY,
                text=True,
                capture_output=True,
                env=self._process_env(),
                cwd=self.cwd,
                timeout=120,
            )
            if proc.returncode != 0 or not (self.codex_home / "auth.json").exists():
                raise RuntimeError(f"codex login failed ({proc.returncode}): {proc.stderr[-500:]}")
            # `codex login` may leave helpers behind too.
            kill_pids(pids_of(self.root))

    def _prepare_opencode(self) -> None:
        """opencode starts without dialogs; the config only keeps it off the network (its
        Anthropic provider, picked because ANTHROPIC_API_KEY is set, at a name that never
        resolves)."""
        config: dict[str, Any] = {
            "$schema": "https://opencode.ai/config.json",
            "autoupdate": False,
            "share": "disabled",
            "provider": {"anthropic": {"options": {"baseURL": UNRESOLVABLE_URL + "/v1"}}},
        }
        if self.model_url is not None:
            config["model"] = OPENCODE_MODEL
            config["provider"] = {
                "anthropic": {"options": {"baseURL": self.model_url + "/v1", "apiKey": "dummy"}}
            }
        config.update(self.opencode_config)
        path = self.home / ".config" / "opencode" / "opencode.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(config, indent=1), encoding="utf-8")

    def _prepare_gemini(self) -> None:
        """Settings that skip its trust, sign-in and key dialogs (``trust=False`` or
        ``login=False`` leave them in)."""
        settings = json.loads(json.dumps(GEMINI_SETTINGS))
        if not self.trust:
            settings["security"]["folderTrust"]["enabled"] = True
        if not self.login:
            del settings["security"]["auth"]
        path = self.home / ".gemini" / "settings.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(settings, indent=1), encoding="utf-8")

    def _process_env(self) -> dict[str, str]:
        """The full environment of a command run for this agent outside tmux."""
        env = {k: v for k, v in os.environ.items() if k not in UNSET and not k.startswith("TMUX")}
        env.update(self.env)
        return env

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> RealAgent:
        """Prepare and start the agent in a new session ``width`` x ``height``."""
        self.prepare()
        assert self.binary is not None
        # tmux's `new-session -e PATH=…` does not reach the command (seen with tmux 3.3a), so a
        # PATH of the agent's own goes through env(1).
        path = [f"PATH={self.env['PATH']}"] if "PATH" in self.env else []
        argv = ["env", *[f"-u{name}" for name in UNSET], *path, str(self.binary), *self.args]
        cmd = ["new-session", "-d", "-P", "-F", "#{pane_id}", "-s", self.session]
        cmd += ["-x", str(self.width), "-y", str(self.height), "-c", str(self.start_dir)]
        for name, value in self.env.items():
            cmd += ["-e", f"{name}={value}"]
        self.spawned_at = time.monotonic()
        self.pane = self.harness.tmux(*cmd, "--", *argv).strip()
        return self

    def capture(self) -> str:
        """The pane's visible screen as plain text (``capture-pane -p``)."""
        assert self.pane is not None
        return str(self.harness.tmux("capture-pane", "-p", "-t", self.pane))

    def state(self) -> str:
        from cafleet.delivery.screens import classify

        return classify(self.agent, self.capture())

    def wait_state(self, *states: str, timeout: float = 90.0) -> str:
        """Poll until the classifier says one of ``states``; return the capture."""
        last = {"capture": ""}

        def check() -> tuple[str, ...]:
            from cafleet.delivery.screens import classify

            text = self.capture()
            last["capture"] = text
            return (text,) if classify(self.agent, text) in states else ()

        return util.retry_until(
            check,
            timeout=timeout,
            interval=0.2,
            message=lambda: f"{self.agent} never {'/'.join(states)}; screen:\n{last['capture']}",
        )[0]

    def wait_screen(self, pattern: str, timeout: float = 30.0) -> str:
        """Poll until the screen matches the regex ``pattern``; return the capture."""
        rx = re.compile(pattern, re.M)
        last = {"capture": ""}

        def check() -> tuple[str, ...]:
            text = self.capture()
            last["capture"] = text
            return (text,) if rx.search(text) else ()

        return util.retry_until(
            check,
            timeout=timeout,
            interval=0.2,
            message=lambda: f"{pattern!r} not on {self.agent}'s screen:\n{last['capture']}",
        )[0]

    def type_text(self, text: str) -> None:
        """Type ``text`` literally (``send-keys -l``), without Enter."""
        assert self.pane is not None
        self.harness.tmux("send-keys", "-t", self.pane, "-l", "--", text)

    def keys(self, *keys: str) -> None:
        """Send tmux key names (``Enter``, ``Escape``, ``C-u`` ...)."""
        assert self.pane is not None
        self.harness.tmux("send-keys", "-t", self.pane, *keys)

    def submit(self, text: str, settle: float = 0.3) -> None:
        """Type ``text``, wait ``settle`` s for the TUI to take it in, then Enter. No Escape."""
        self.type_text(text)
        time.sleep(settle)  # not a wait for a result: the agents merge a too-fast Enter
        self.keys("Enter")

    def alive(self) -> bool:
        return bool(pids_of(self.root))

    def pids(self) -> list[int]:
        return pids_of(self.root)

    def stop(self) -> None:
        """Kill the session and every process started for this agent; fail if one survives."""
        if self.pane is not None:
            with contextlib.suppress(Exception):
                self.harness.tmux("kill-session", "-t", f"={self.session}", check=False)
        left = kill_pids(pids_of(self.root))
        if left:
            raise AssertionError(f"{self.agent} processes survived stop(): {left}")

    # ------------------------------------------------------------------ records

    def records(self) -> list[Received]:
        """The user messages in the agent's own record, oldest first."""
        if self.agent == "claude":
            return claude_records(self.claude_config)
        if self.agent == "codex":
            return codex_records(self.codex_home)
        if self.agent == "gemini":
            return gemini_records(self.home)
        return self._opencode_records()

    def received(self) -> list[str]:
        """Texts of the user messages the agent recorded (Claude's queued lines included)."""
        return [r.text for r in self.records()]

    def interruptions(self) -> int:
        """Turns the agent recorded as interrupted by the user."""
        if self.agent == "claude":
            return sum(r.text == "[Request interrupted by user]" for r in self.records())
        if self.agent == "codex":
            return codex_interruptions(self.codex_home)
        if self.agent == "gemini":
            return gemini_interruptions(self.home)
        return opencode_interruptions(self._opencode_messages())

    def run_cli(self, *args: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
        """Run ``<agent binary> args`` with the pane's HOME/XDG and cwd (e.g. opencode export)."""
        assert self.binary is not None
        if not self.env:
            self.prepare()
        return subprocess.run(
            [str(self.binary), *args],
            capture_output=True,
            text=True,
            env=self._process_env(),
            cwd=self.cwd,
            stdin=subprocess.DEVNULL,
            timeout=timeout,
        )

    def _opencode_messages(self) -> list[dict[str, Any]]:
        listed = self.run_cli("session", "list", "--format", "json")
        if listed.returncode != 0:
            raise AssertionError(f"opencode session list failed: {listed.stderr[-500:]}")
        text = listed.stdout.strip()
        sessions = _json_after_noise(text) if text else []
        messages: list[dict[str, Any]] = []
        for session in sorted(sessions, key=lambda s: s.get("created", 0)):
            exported = self.run_cli("export", str(session["id"]))
            if exported.returncode != 0:
                raise AssertionError(f"opencode export failed: {exported.stderr[-500:]}")
            messages += _json_after_noise(exported.stdout).get("messages", [])
        kill_pids([p for p in pids_of(self.root) if not self._in_pane(p)])
        return messages

    def _in_pane(self, pid: int) -> bool:
        """Whether ``pid`` descends from the pane's process (not a leftover of a CLI run)."""
        if self.pane is None:
            return False
        try:
            pane_pid = int(self.harness.pane_format(self.pane, "#{pane_pid}"))
        except (AssertionError, ValueError):
            return False
        while pid > 1:
            if pid == pane_pid:
                return True
            try:
                with open(f"/proc/{pid}/stat", "rb") as fh:
                    pid = int(fh.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                return False
        return False

    def _opencode_records(self) -> list[Received]:
        return opencode_records(self._opencode_messages())

    def describe(self) -> str:
        return (
            f"{self.agent} {installed_version(self.agent)} in {self.pane} ({shlex.join(self.args)})"
        )


__all__ = [
    "AGENTS",
    "PACKAGES",
    "RealAgent",
    "Received",
    "binary",
    "cache_dir",
    "claude_records",
    "codex_interruptions",
    "codex_records",
    "gemini_interruptions",
    "gemini_records",
    "installed_version",
    "kill_pids",
    "opencode_interruptions",
    "opencode_records",
    "pids_of",
    "pins",
    "real_agents_required",
    "require_binary",
]
