"""Pytest plugin: the private tmux server fixture (docs/runtime.md §6.1).

Fixtures
--------
``tmux_harness`` -> `TmuxHarness`: a private tmux server (own ``-L`` socket, ``-f /dev/null``)
    under a short ``mkdtemp(prefix="cft", dir="/tmp")`` directory used as ``TMUX_TMPDIR``, with
    session ``fleet test`` (400x200) whose first pane (the Director pane) runs the fake
    ``claude``. ``PATH`` starts with ``<dir>/bin`` (fake agents, the tmux shim) and then the
    directory of ``sys.executable``. The database is the autouse fixture's
    ``CAFLEET_DATABASE_URL`` (not created). The test process never has TMUX/TMUX_PANE set.
``tmux_db`` -> the same harness with the database ``cafleet setup`` leaves.
``model_server`` -> a started scripted model (tests/harness/scripted_model.py), stopped with
    the test.
``real_agent`` -> a factory starting the real Claude Code / Codex / opencode in that server
    (tests/harness/real_agents.py); its tests get the ``real_agent`` marker.

Tests using either fixture get the ``tmux`` marker automatically. Without tmux they are skipped,
or failed when ``CAFLEET_REQUIRE_TMUX=1``.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import pytest

from cafleet.agents.registry import agent_names
from tests.harness import util

SESSION = "fleet test"
AGENTS = agent_names()  # every registered agent gets a fake binary
HARNESS_VARS = ("CAFLEET_FAKE_DIR", "CAFLEET_REAL_TMUX", "CAFLEET_TMUX_FAULTS")
_HERE = Path(__file__).resolve().parent
_counter = itertools.count()


def _require_tmux() -> str:
    real = shutil.which("tmux")
    if real is None:
        if os.environ.get("CAFLEET_REQUIRE_TMUX") == "1":
            pytest.fail("tmux is required (CAFLEET_REQUIRE_TMUX=1) but not found on PATH")
        pytest.skip("tmux not found on PATH")
    return os.path.realpath(real)


def _fast_shim() -> Path | None:
    """The shim's fast path (tests/harness/tmux_fast.c) compiled once per source text and
    shared by the run's workers; None without a C compiler (the Python shim alone then)."""
    import hashlib

    source = _HERE / "tmux_fast.c"
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    built = Path(tempfile.gettempdir()) / f"cafleet-tmux-fast-{os.getuid()}-{digest}"
    if built.exists():
        return built
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return None
    partial = built.with_name(f"{built.name}.{os.getpid()}")
    done = subprocess.run(
        [compiler, "-O2", "-o", str(partial), str(source)], capture_output=True, timeout=120
    )
    if done.returncode != 0:
        partial.unlink(missing_ok=True)
        return None
    os.replace(partial, built)  # atomic: a worker never runs a half-written binary
    return built


def _install_tmux_shim(bin_dir: Path, python: str) -> None:
    """``bin_dir/tmux``: the fast path with the Python shim beside it as ``tmux-py`` for every
    call it does not handle, or the Python shim itself. A copy, not a link: the fast path finds
    the harness directory from its own path."""
    fast = _fast_shim()
    if fast is None:
        _install_script(_HERE / "tmux_shim.py", bin_dir / "tmux", python)
        return
    _install_script(_HERE / "tmux_shim.py", bin_dir / "tmux-py", python)
    shutil.copyfile(fast, bin_dir / "tmux")
    (bin_dir / "tmux").chmod(0o755)


def _install_script(source: Path, target: Path, shebang: str) -> None:
    text = source.read_text(encoding="utf-8")
    if text.startswith("#!"):
        text = text.split("\n", 1)[1]
    target.write_text(f"#!{shebang}\n{text}", encoding="utf-8")
    target.chmod(0o755)


def _proc_has_marker(pid: int, marker: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            return marker in fh.read().split(b"\0")
    except OSError:
        return False


class TmuxHarness:
    """One test's private tmux world. Attributes after `start()`:

    ``dir`` (the TMUX_TMPDIR), ``bin_dir``, ``fake_dir``, ``project_dir`` (cwd of CLI runs),
    ``db_path``, ``db_url``, ``real_tmux``, ``socket_name``, ``socket_path``, ``server_pid``,
    ``server`` (libtmux.Server), ``session_name``, ``window_id`` and ``director_pane`` (the
    Director pane's ids), ``env`` (the CLI environment: TMUX, TMUX_PANE, CAFLEET_DATABASE_URL,
    CAFLEET_TMUX_FAULTS, PATH, ...).
    """

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.mp = monkeypatch
        self._procs: list[subprocess.Popen[Any]] = []
        self.server: Any = None
        self._dir: Path | None = None  # set by start(), cleared by the teardown
        # Teardown fails the test when the shim refused a call outside this test's server
        # (acceptance: every logged -S path lies inside TMUX_TMPDIR); guard tests opt out.
        self.allow_guard_violations = False

    @property
    def dir(self) -> Path:
        """The harness's TMUX_TMPDIR (only while started)."""
        if self._dir is None:
            raise RuntimeError("the tmux harness is not started")
        return self._dir

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> TmuxHarness:
        self.real_tmux = _require_tmux()
        for name in ("TMUX", "TMUX_PANE"):
            self.mp.delenv(name, raising=False)
        self._dir = Path(tempfile.mkdtemp(prefix="cft", dir="/tmp"))
        self.bin_dir = self.dir / "bin"
        self.fake_dir = self.dir / "fake"
        self.project_dir = self.dir / "project"
        for path in (self.bin_dir, self.fake_dir, self.project_dir):
            path.mkdir()
        self._install_bin()

        url = os.environ.get("CAFLEET_DATABASE_URL", "")
        self.db_path: Path
        if url.startswith(("postgresql://", "postgres://")):
            # a PostgreSQL test database (tests/pg_server.py): `db_path` is its `PgDb` (a str
            # whose text is P), which the test helpers read through PostgreSQL
            from tests.pg_server import PgDb

            self.db_path = cast(Path, PgDb.from_url(url))
            self.db_url = url
        else:
            if url.startswith("sqlite:///") and len(url) > len("sqlite:///"):
                self.db_path = Path(url[len("sqlite:///") :])
            else:
                self.db_path = self.dir / "db" / "cafleet.db"
            self.db_url = f"sqlite:///{self.db_path}"
        home = os.environ.get("HOME") or str(self.dir / "home")
        Path(home).mkdir(parents=True, exist_ok=True)

        exe_dir = os.path.dirname(sys.executable)
        search_path = os.pathsep.join([str(self.bin_dir), exe_dir, os.environ.get("PATH", "")])
        self.mp.setenv("PATH", search_path)
        self.mp.setenv("HOME", home)
        self.mp.setenv("TMUX_TMPDIR", str(self.dir))
        self.mp.setenv("CAFLEET_FAKE_DIR", str(self.fake_dir))
        self.mp.setenv("CAFLEET_REAL_TMUX", self.real_tmux)
        self.mp.setenv("CAFLEET_DATABASE_URL", self.db_url)
        # In-process backends and the CLI alike honour the shim's fault rules.
        self.mp.setenv("CAFLEET_TMUX_FAULTS", str(self.dir / util.FAULTS_FILE))

        # The server (and so every pane) sees PATH, HOME, TMUX_TMPDIR and the fake dir, but no
        # CAFLEET_DATABASE_URL: only cafleet's own `-e` may put it into a pane.
        server_env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("CAFLEET_") and k not in ("TMUX", "TMUX_PANE")
        }
        server_env["CAFLEET_FAKE_DIR"] = str(self.fake_dir)
        server_env["CAFLEET_REAL_TMUX"] = self.real_tmux
        self.server_env = server_env

        self.socket_name = f"cafleet-test-{os.getpid()}-{next(_counter)}"
        subprocess.run(
            [
                self.real_tmux,
                "-L",
                self.socket_name,
                "-f",
                "/dev/null",
                "new-session",
                "-d",
                "-s",
                SESSION,
                "-x",
                "400",
                "-y",
                "200",
                "-c",
                str(self.project_dir),
                str(self.bin_dir / "claude"),
            ],
            env=server_env,
            check=True,
            capture_output=True,
            timeout=15,
        )
        import libtmux

        self.server = libtmux.Server(
            socket_name=self.socket_name, config_file="/dev/null", tmux_bin=self.real_tmux
        )
        out = self.tmux(
            "display-message",
            "-p",
            "-t",
            f"={SESSION}:",
            "#{socket_path}|#{pid}|#{session_name}|#{window_id}|#{pane_id}",
        ).strip()
        socket_path, pid, session, window_id, pane_id = out.split("|")
        self.socket_path = socket_path
        self.server_pid = int(pid)
        self.session_name = session
        self.window_id = window_id
        self.director_pane = pane_id
        self.session = self.server.sessions.get(session_name=SESSION)

        self.env: dict[str, str] = dict(os.environ)
        self.env.update(
            {
                "TMUX": f"{socket_path},{pid},0",
                "TMUX_PANE": pane_id,
                "CAFLEET_DATABASE_URL": self.db_url,
                "CAFLEET_TMUX_FAULTS": str(self.dir / util.FAULTS_FILE),
            }
        )
        util.start_record(self.director_pane, timeout=15)
        return self

    def _install_bin(self) -> None:
        exe = sys.executable
        for agent in AGENTS:
            _install_script(_HERE / "fake_agent.py", self.bin_dir / agent, exe)
        _install_tmux_shim(self.bin_dir, f"{exe} -IS")
        if shutil.which("cafleet", path=os.path.dirname(exe)) is None:
            # No installed entry point: run this checkout (PYTHONPATH is set by tests/conftest).
            script = self.bin_dir / "cafleet"
            script.write_text(
                f"#!{exe}\nimport runpy\nrunpy.run_module('cafleet', run_name='__main__')\n",
                encoding="utf-8",
            )
            script.chmod(0o755)

    def close(self) -> None:
        """Teardown (docs/runtime.md §6.1): stop loops, kill the server, remove the directory."""
        if self._dir is None:
            return
        problems: list[str] = []
        marker = f"CAFLEET_FAKE_DIR={self.fake_dir}".encode()
        db_marker = f"CAFLEET_DATABASE_URL={self.db_url}".encode()
        try:
            if not self.allow_guard_violations:
                bad = [c for c in self.shim_calls() if c.get("guard") != "ok"]
                if bad:
                    problems.append(f"the tmux shim refused {len(bad)} call(s): {bad[0]['argv']}")
            pids = [
                p
                for p in self.monitor_pids()
                if _proc_has_marker(p, marker) or _proc_has_marker(p, db_marker)
            ]
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 5
            while any(util.pid_alive(p) for p in pids) and time.monotonic() < deadline:
                self._reap()
                time.sleep(0.05)
            for pid in pids:
                if util.pid_alive(pid):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
            for proc in self._procs:
                if proc.poll() is None:
                    proc.kill()
                with contextlib.suppress(Exception):
                    proc.wait(timeout=5)
            if self.server is not None:
                with contextlib.suppress(Exception):
                    self.server.kill()
                probe = subprocess.run(
                    [self.real_tmux, "-S", self.socket_path, "has-session"],
                    capture_output=True,
                    timeout=10,
                )
                if probe.returncode == 0:
                    problems.append("the private tmux server still answers has-session")
            self._sweep(marker)
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)
            if self.dir.exists():
                problems.append(f"{self.dir} was not removed")
            self._dir = None
        if problems:
            raise AssertionError("; ".join(problems))

    def _reap(self) -> None:
        for proc in self._procs:
            proc.poll()

    def _sweep(self, marker: bytes) -> None:
        """SIGKILL leftovers this test started (identified by its private fake dir)."""
        me = os.getpid()
        deadline = time.monotonic() + 5
        while True:
            found = []
            for entry in os.listdir("/proc"):
                if entry.isdigit() and int(entry) != me and _proc_has_marker(int(entry), marker):
                    pid = int(entry)
                    if util.pid_alive(pid):
                        found.append(pid)
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(pid, signal.SIGKILL)
            self._reap()
            if not found or time.monotonic() > deadline:
                return
            time.sleep(0.05)

    # ------------------------------------------------------------------ tmux access

    def tmux(self, *args: str, check: bool = True, timeout: float = 10) -> str:
        """Run the real tmux on the private server (bypassing the shim); return stdout."""
        proc = subprocess.run(
            [self.real_tmux, "-S", self.socket_path, *args]
            if hasattr(self, "socket_path")
            else [self.real_tmux, "-L", self.socket_name, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"tmux {' '.join(args)} failed: {proc.stderr.strip()}")
        return proc.stdout

    def backend(self, env: Mapping[str, str] | None = None, **kwargs: Any) -> Any:
        """A `TmuxBackend` with the CLI environment (plus ``env`` overrides)."""
        from cafleet.mux.tmux import TmuxBackend

        merged = dict(self.env)
        merged.update(env or {})
        return TmuxBackend(env=merged, **kwargs)

    def live_panes(self) -> set[str]:
        return set(self.tmux("list-panes", "-a", "-F", "#{pane_id}").split())

    def pane_format(self, pane: str, fmt: str) -> str:
        return self.tmux("display-message", "-p", "-t", pane, fmt).rstrip("\n")

    def split(
        self,
        argv: Sequence[str],
        *,
        window: str | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> str:
        """Split ``window`` (default: the Director's) running ``argv``; return the pane id."""
        args = ["split-window", "-d", "-P", "-F", "#{pane_id}", "-t", window or self.window_id]
        args += ["-c", cwd or str(self.project_dir)]
        for name, value in (env or {}).items():
            args += ["-e", f"{name}={value}"]
        args += ["--", *argv]
        pane = self.tmux(*args).strip()
        self.tmux("select-layout", "-t", window or self.window_id, "tiled", check=False)
        return pane

    def spawn_fake(
        self,
        agent: str = "claude",
        args: Sequence[str] = (),
        *,
        window: str | None = None,
        env: Mapping[str, str] | None = None,
        wait: bool = True,
    ) -> str:
        """A fresh fake agent pane (not registered anywhere); waits for its start record."""
        pane = self.split([str(self.bin_dir / agent), *args], window=window, env=env)
        if wait:
            util.start_record(pane, timeout=15)
        return pane

    # ------------------------------------------------------------------ CLI

    def _cli_env(
        self, env: Mapping[str, str] | None, unset: Sequence[str], args: Sequence[str] = ()
    ) -> dict[str, str]:
        merged = dict(self.env)
        merged.update(env or {})
        for name in unset:
            merged.pop(name, None)
        if "TMUX_PANE" not in (env or {}) and "TMUX_PANE" not in unset:
            # One identity per pane (docs/cli.md §1.5): a message command runs where the member
            # it acts as would run it, its own pane (none: a shell in no pane), not the
            # Director's. A test that names TMUX_PANE itself gets exactly that.
            member = self._acting_member(args)
            if member is not None:
                pane = self._own_pane(member)
                if pane is None:
                    merged.pop("TMUX_PANE", None)
                else:
                    merged["TMUX_PANE"] = pane
        return merged

    def env_for(self, *args: str) -> dict[str, str]:
        """The environment `cli` runs ``cafleet <args>`` with (for a test that starts it itself)."""
        return self._cli_env(None, (), args)

    def _acting_member(self, args: Sequence[str]) -> int | None:
        """The member a `message` command acts as: the sender of send and broadcast, the inbox
        owner of poll, wait and stream, the owner of the message ack takes; the `--member-id` of
        task claim, done and block."""
        if len(args) >= 3 and args[0] == "task" and args[1] in ("claim", "done", "block"):
            rest = list(args[2:])
            found = [rest[i + 1] for i, a in enumerate(rest[:-1]) if a == "--member-id"]
            return int(found[0]) if found and found[0].isdigit() else None
        if len(args) < 3 or args[0] != "message":
            return None
        verb, rest = args[1], list(args[2:])
        value: str | None = None
        if verb in ("send", "broadcast"):
            for i, arg in enumerate(rest):
                if arg == "--from-member-id" and i + 1 < len(rest):
                    value = rest[i + 1]
                elif arg.startswith("--from-member-id="):
                    value = arg.split("=", 1)[1]
        elif verb in ("poll", "wait", "stream", "ack"):
            value = next((arg for arg in rest if arg.isdigit()), None)
        if value is None or not value.isdigit():
            return None
        if verb != "ack":
            return int(value)
        owner = self.sqlite("SELECT owner_member_id FROM messages WHERE message_id = ?", int(value))
        return int(owner[0][0]) if owner else None

    def _own_pane(self, member_id: int) -> str | None:
        """The member's live pane on this server, if it has one."""
        rows = self.sqlite(
            "SELECT p.mux_pane_id, p.mux_socket FROM member_placements p JOIN members m "
            "ON m.member_id = p.member_id WHERE p.member_id = ? AND m.status = 'active' "
            "AND p.lost_at IS NULL",
            member_id,
        )
        if not rows or rows[0][0] is None:
            return None
        pane, socket = rows[0]
        if socket is not None and os.path.realpath(socket) != os.path.realpath(self.socket_path):
            return None
        return str(pane)

    def cli(
        self,
        *args: str,
        env: Mapping[str, str] | None = None,
        unset: Sequence[str] = (),
        input: str | None = None,
        cwd: str | Path | None = None,
        timeout: float = 60,
    ) -> subprocess.CompletedProcess[str]:
        """Run ``python -m cafleet <args>`` with the CLI environment from the project dir. A
        `message` command that acts as a member runs from that member's own pane (`_cli_env`)
        unless ``env`` or ``unset`` names TMUX_PANE."""
        return subprocess.run(
            [sys.executable, "-m", "cafleet", *args],
            env=self._cli_env(env, unset, args),
            cwd=str(cwd or self.project_dir),
            input=input,
            stdin=None if input is not None else subprocess.DEVNULL,
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="replace",
            timeout=timeout,
        )

    def popen_cli(
        self,
        *args: str,
        env: Mapping[str, str] | None = None,
        unset: Sequence[str] = (),
        cwd: str | Path | None = None,
        **kwargs: Any,
    ) -> subprocess.Popen[str]:
        """Start ``python -m cafleet <args>`` in the background (killed at teardown)."""
        kwargs.setdefault("stdin", subprocess.DEVNULL)
        kwargs.setdefault("stdout", subprocess.PIPE)
        kwargs.setdefault("stderr", subprocess.PIPE)
        proc: subprocess.Popen[str] = subprocess.Popen(
            [sys.executable, "-m", "cafleet", *args],
            env=self._cli_env(env, unset, args),
            cwd=str(cwd or self.project_dir),
            text=True,
            encoding="utf-8",
            errors="replace",
            **kwargs,
        )
        self._procs.append(proc)
        return proc

    def track(self, proc: subprocess.Popen[Any]) -> subprocess.Popen[Any]:
        """Kill ``proc`` at teardown if it is still running."""
        self._procs.append(proc)
        return proc

    # ------------------------------------------------------------------ database (plain sqlite3)

    def sqlite(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        """Run a read query on the test database with plain sqlite3 ([] if it is missing); on a
        PostgreSQL test database through its look-alike (errors as sqlite3's)."""
        from tests.pg_server import PgDb, PgRaw

        db: object = self.db_path
        if isinstance(db, PgDb):
            raw = PgRaw(db)
            try:
                return [tuple(r) for r in raw.execute(sql, params)]  # type: ignore[attr-defined]
            finally:
                raw.close()
        if not self.db_path.exists():
            return []
        conn = sqlite3.connect(f"file:{self.db_path}?mode=ro", uri=True, timeout=5)
        try:
            return list(conn.execute(sql, params))
        finally:
            conn.close()

    def monitor_pids(self) -> list[int]:
        try:
            rows = self.sqlite("SELECT pid FROM monitor_runtime WHERE pid IS NOT NULL")
        except sqlite3.Error:
            return []
        return [int(row[0]) for row in rows if row[0]]

    # ------------------------------------------------------------------ shortcuts

    def shim_calls(self) -> list[dict[str, Any]]:
        return util.read_jsonl(self._dir / util.SHIM_LOG) if self._dir else []

    def set_faults(self, rules: list[dict[str, Any]]) -> Path:
        return util.set_tmux_faults(rules)

    def clear_faults(self) -> None:
        util.clear_tmux_faults()


@contextlib.contextmanager
def private_tmux(monkeypatch: pytest.MonkeyPatch) -> Iterator[TmuxHarness]:
    harness = TmuxHarness(monkeypatch)
    try:
        yield harness.start()
    finally:
        harness.close()


@pytest.fixture
def tmux_harness(
    monkeypatch: pytest.MonkeyPatch, dialect: str, request: pytest.FixtureRequest
) -> Iterator[TmuxHarness]:
    """A private tmux server with the Director pane running the fake claude (no database; on
    PostgreSQL an empty database of the test server, tests/conftest.py `BOTH_DIALECTS`)."""
    if dialect == "postgresql":
        from tests.pg_server import TEMPLATE_HEAD, PgDb

        server = request.getfixturevalue("pg_server")
        # `tmux_db` wants what `cafleet setup` leaves: a copy of the set-up template database
        template = TEMPLATE_HEAD if "tmux_db" in request.fixturenames else "template0"
        db = PgDb(server, server.new_database(template))
        monkeypatch.setenv("CAFLEET_DATABASE_URL", db.url)
    with private_tmux(monkeypatch) as harness:
        yield harness


@pytest.fixture
def tmux_db(tmux_harness: TmuxHarness, request: pytest.FixtureRequest) -> TmuxHarness:
    """`tmux_harness` with the database `cafleet setup` leaves, as tests/conftest.py `head_db`
    makes it: a copy of a set-up database (the test's SQLite file, or on PostgreSQL the set-up
    template's copy `tmux_harness` made) plus setup's assets half, in process, for the same
    HOME; on any other database `cafleet setup` itself."""
    from tests.conftest import install_assets
    from tests.pg_server import PgDb

    if tmux_harness.db_path == request.getfixturevalue("db_path"):
        request.getfixturevalue("head_db")
        return tmux_harness
    db: object = tmux_harness.db_path
    if isinstance(db, PgDb) and request.getfixturevalue("dialect") == "postgresql":
        install_assets(cast(Path, db))
        return tmux_harness
    result = tmux_harness.cli("setup")
    assert result.returncode == 0, f"cafleet setup failed: {result.stderr}"
    return tmux_harness


@pytest.fixture
def fake_bin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Fake claude/codex/opencode first on PATH, without a tmux server (no tmux shim either).

    Sets ``CAFLEET_FAKE_DIR`` so a fake started by hand logs under ``<tmp>/fake``.
    """
    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir()
    for agent in AGENTS:
        _install_script(_HERE / "fake_agent.py", bin_dir / agent, sys.executable)
    fake = tmp_path / "fake"
    fake.mkdir(exist_ok=True)
    monkeypatch.setenv("CAFLEET_FAKE_DIR", str(fake))
    monkeypatch.setenv("PATH", os.pathsep.join([str(bin_dir), os.environ.get("PATH", "")]))
    return bin_dir


@pytest.fixture
def real_agent(tmux_harness: TmuxHarness) -> Iterator[Any]:
    """Factory ``real_agent(agent, **kwargs) -> RealAgent`` (tests/harness/real_agents.py): the
    real agent started in its own session of this test's private tmux server, with a private
    HOME. Skips without the binary (fails in CI); stops every agent it started at teardown."""
    from tests.harness.real_agents import RealAgent, require_binary

    started: list[RealAgent] = []

    def start(agent: str, **kwargs: Any) -> RealAgent:
        require_binary(agent)
        a = RealAgent(tmux_harness, agent, **kwargs)
        started.append(a)
        return a.start()

    yield start
    problems = []
    for a in started:
        try:
            a.stop()
        except AssertionError as exc:
            problems.append(str(exc))
    if problems:
        raise AssertionError("; ".join(problems))


@pytest.fixture
def model_server() -> Iterator[Any]:
    """A `ScriptedModel` (tests/harness/scripted_model.py) on 127.0.0.1, stopped with the test;
    point an agent at it with ``RealAgent(..., model_url=model_server.base_url(label))``."""
    from tests.harness.scripted_model import scripted_model

    with scripted_model() as model:
        yield model


_TMUX_FIXTURES = frozenset({"tmux_harness", "tmux_db", "real_agent"})


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        if _TMUX_FIXTURES & names:
            item.add_marker(pytest.mark.tmux)
        if "real_agent" in names:
            item.add_marker(pytest.mark.real_agent)
        if item.get_closest_marker("real_agent") is not None:
            # One worker runs the real agents one after another (`--dist loadgroup`,
            # pyproject.toml): two agents at once on two cores slow each other down far more
            # than the fake-agent tests the other worker runs meanwhile.
            item.add_marker(pytest.mark.xdist_group("real_agents"))


__all__ = [
    "HARNESS_VARS",
    "SESSION",
    "TmuxHarness",
    "fake_bin",
    "model_server",
    "private_tmux",
    "real_agent",
    "tmux_db",
    "tmux_harness",
]
