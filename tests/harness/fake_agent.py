"""Fake coding agent (docs/runtime.md §6.2). Installed as bin/claude, bin/codex and bin/opencode.

Standalone: standard library only, because copies run under a generated shebang. (Screen mode,
below, is the exception: it imports tests.harness.fake_screens and cafleet.delivery.screens, both on
the PYTHONPATH the test session sets.)

- Raw tty; prints ``fake-<agent> ready (<pane>)`` and a ``> `` prompt, then appends the start
  record ``{"kind":"start","agent","argv","cwd","pane","db_url","pid"}`` to
  ``$CAFLEET_FAKE_DIR/<pane with % replaced by p>.jsonl`` (screen mode: the record first);
  reads with os.read.
- Each CR closes one line record ``{"kind":"line","bytes_b64","text","t"}`` holding every byte
  since the previous CR (ESC included, CR excluded), written with one os.write (O_APPEND). Echoes
  ``got: <text>`` (ESC shown as ``^[``) and a new prompt.
- Directives: lines of the argv (the rendered spawn prompt) starting with ``#fake ``:
  ``run <command>``, ``auto-ack``, ``stall <s>``, ``exit-on <text>``, ``screen <options>``,
  ``daemon`` (at start, leave two sleepers as a real agent's helpers would: a child that ignores
  SIGHUP and a double-forked ``setsid`` daemon outside the pane's process tree, both with the
  pane's environment; logged as ``{"kind":"daemon","pids":[child, daemon]}``).
- ``--version`` alone prints ``fake-<agent> 0.0.0`` and exits (what `cafleet doctor` asks).
- Screen mode (opt-in: ``#fake screen <options>`` or ``CAFLEET_FAKE_SCREEN=<options>``, even
  empty): instead of the prompt above, the fake draws the real agent's screens (starting, ready,
  working, a permission prompt ...) and logs only submitted lines; see tests/harness/fake_screens.py.
- Control directory ``$CAFLEET_FAKE_DIR/<pane>.cmd/``, polled every 50 ms; each ``*.json`` file is
  ``{"argv": [...], "id"?, "env"?, "unset"?, "cwd"?}`` (run a command, log it),
  ``{"print": "<text>"}`` (write raw text to the terminal) or ``{"stall": <seconds>}``
  (stop reading the tty for that long). Files are deleted once handled.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import select
import shlex
import subprocess
import sys
import threading
import time

POLL = 0.05
ACK_RE = re.compile(rb"\[cafleet msg ([0-9]+) ")


def pane_file_stem(pane: str) -> str:
    return pane.replace("%", "p")


class Fake:
    def __init__(self) -> None:
        self.agent = os.path.basename(sys.argv[0])
        self.pane = os.environ.get("TMUX_PANE", "")
        self.fake_dir = os.environ.get("CAFLEET_FAKE_DIR") or os.getcwd()
        stem = pane_file_stem(self.pane or f"pid{os.getpid()}")
        self.log_path = os.path.join(self.fake_dir, stem + ".jsonl")
        self.cmd_dir = os.path.join(self.fake_dir, stem + ".cmd")
        os.makedirs(self.cmd_dir, exist_ok=True)
        self.log_fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self.out_lock = threading.Lock()
        self.runs: list[str] = []
        self.auto_ack = False
        self.stall_start = 0.0
        self.exit_on: list[str] = []
        self.stalled_until = 0.0
        self.screen: str | None = os.environ.get("CAFLEET_FAKE_SCREEN")
        self.daemon = False
        self._parse_directives()

    # ------------------------------------------------------------------ output

    def record(self, obj: dict) -> None:
        data = (json.dumps(obj, ensure_ascii=False) + "\n").encode("utf-8", "surrogateescape")
        os.write(self.log_fd, data)

    def tty_write(self, text: str) -> None:
        data = text.encode("utf-8", "surrogateescape")
        with self.out_lock:
            try:
                while data:
                    n = os.write(1, data)
                    data = data[n:]
            except OSError:
                pass

    # ------------------------------------------------------------------ directives

    def _parse_directives(self) -> None:
        for arg in sys.argv[1:]:
            for line in arg.splitlines():
                if not line.startswith("#fake "):
                    continue
                rest = line[len("#fake ") :]
                word, _, value = rest.partition(" ")
                if word == "run" and value.strip():
                    self.runs.append(value)
                elif word == "auto-ack":
                    self.auto_ack = True
                elif word == "stall":
                    with contextlib.suppress(ValueError):
                        self.stall_start += float(value.strip())
                elif word == "exit-on" and value:
                    self.exit_on.append(value)
                elif word == "screen":
                    self.screen = value
                elif word == "daemon":
                    self.daemon = True

    # ------------------------------------------------------------------ commands

    def run_command(
        self,
        argv: list[str],
        *,
        source: str,
        cmd_id: str | None = None,
        env_over: dict | None = None,
        unset: list | None = None,
        cwd: str | None = None,
    ) -> None:
        env = dict(os.environ)
        for name in unset or ():
            env.pop(name, None)
        env.update({str(k): str(v) for k, v in (env_over or {}).items()})
        started = time.time()
        try:
            proc = subprocess.run(
                argv,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                env=env,
                cwd=cwd,
                timeout=300,
            )
            rc, out, err = (
                proc.returncode,
                proc.stdout.decode("utf-8", "replace"),
                proc.stderr.decode("utf-8", "replace"),
            )
        except (OSError, subprocess.SubprocessError) as exc:
            rc, out, err = 127, "", f"{type(exc).__name__}: {exc}"
        self.record(
            {
                "kind": "command",
                "argv": argv,
                "rc": rc,
                "stdout": out,
                "stderr": err,
                "source": source,
                "id": cmd_id,
                "t": started,
                "t_end": time.time(),
            }
        )

    def _startup_runs(self) -> None:
        for command in self.runs:
            try:
                argv = shlex.split(command)
            except ValueError as exc:
                self.record({"kind": "command", "argv": command, "rc": 2, "stdout": "",
                             "stderr": f"bad #fake run: {exc}", "source": "run", "id": None,
                             "t": time.time(), "t_end": time.time()})  # fmt: skip
                continue
            self.run_command(argv, source="run")

    def _spawn(self, target, *args, **kwargs) -> None:
        threading.Thread(target=target, args=args, kwargs=kwargs, daemon=True).start()

    # ------------------------------------------------------------------ control dir

    def poll_control(self) -> None:
        try:
            names = sorted(n for n in os.listdir(self.cmd_dir) if n.endswith(".json"))
        except OSError:
            return
        for name in names:
            path = os.path.join(self.cmd_dir, name)
            try:
                with open(path, encoding="utf-8") as fh:
                    spec = json.load(fh)
            except (OSError, ValueError):
                continue
            try:
                os.unlink(path)
            except OSError:
                continue
            if "print" in spec:
                self.tty_write(str(spec["print"]))
                self.record({"kind": "printed", "text": spec["print"], "id": spec.get("id")})
            elif "stall" in spec:
                self.stalled_until = max(
                    self.stalled_until, time.monotonic() + float(spec["stall"])
                )
                self.record({"kind": "stalled", "seconds": spec["stall"], "id": spec.get("id")})
            elif "argv" in spec:
                self._spawn(
                    self.run_command,
                    list(spec["argv"]),
                    source="cmd",
                    cmd_id=spec.get("id"),
                    env_over=spec.get("env"),
                    unset=spec.get("unset"),
                    cwd=spec.get("cwd"),
                )

    # ------------------------------------------------------------------ main loop

    def handle_record(self, raw: bytes) -> bool:
        """Log one line record; return True when the fake should exit."""
        text = raw.decode("utf-8", "backslashreplace")
        self.record(
            {
                "kind": "line",
                "bytes_b64": base64.b64encode(raw).decode("ascii"),
                "text": text,
                "t": time.time(),
            }
        )
        self.tty_write("got: " + text.replace("\x1b", "^[") + "\r\n> ")
        return self.after_line(raw)

    def after_line(self, raw: bytes) -> bool:
        """Auto-ack the messages a received line names; True when the fake should exit."""
        if self.auto_ack:
            ids = dict.fromkeys(m.group(1).decode() for m in ACK_RE.finditer(raw))
            for msg_id in ids:
                self._spawn(
                    self.run_command, ["cafleet", "message", "ack", msg_id], source="auto-ack"
                )
        text = raw.decode("utf-8", "backslashreplace")
        return any(needle in text for needle in self.exit_on)

    def start(self) -> None:
        self.record(
            {
                "kind": "start",
                "agent": self.agent,
                "argv": sys.argv,
                "cwd": os.getcwd(),
                "pane": os.environ.get("TMUX_PANE"),
                "db_url": os.environ.get("CAFLEET_DATABASE_URL"),
                "pid": os.getpid(),
            }
        )

    def leave_daemons(self) -> None:
        """A SIGHUP-ignoring child and a double-forked setsid daemon (see the module doc)."""
        child = subprocess.Popen(
            [sys.executable, "-c", _SLEEPER], stdin=subprocess.DEVNULL, close_fds=True
        )
        proc = subprocess.run(
            [sys.executable, "-c", _DAEMONIZE],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=30,
        )
        daemon = int(proc.stdout.decode().strip())
        self.record({"kind": "daemon", "pids": [child.pid, daemon]})

    def main(self) -> int:
        if self.daemon:
            self.leave_daemons()
        if self.screen is not None:
            self.start()
        restore = None
        if os.isatty(0):
            import termios
            import tty

            restore = termios.tcgetattr(0)
            tty.setraw(0)
        try:
            if self.runs:
                self._spawn(self._startup_runs)
            if self.screen is not None:
                from tests.harness.fake_screens import Screens

                return Screens(self, self.screen).run()
            # Drawn before the start record: a test that waited for the record finds a screen,
            # not the blank one the delivery gate holds as "starting".
            self.tty_write(f"fake-{self.agent} ready ({self.pane})\r\n> ")
            self.start()
            if self.stall_start > 0:
                self.stalled_until = time.monotonic() + self.stall_start
            return self.loop()
        finally:
            if restore is not None:
                import termios

                with contextlib.suppress(Exception):
                    termios.tcsetattr(0, termios.TCSANOW, restore)

    def loop(self) -> int:
        buf = b""
        while True:
            self.poll_control()
            if time.monotonic() < self.stalled_until:
                time.sleep(POLL)
                continue
            try:
                ready, _, _ = select.select([0], [], [], POLL)
            except InterruptedError:
                continue
            if not ready:
                continue
            try:
                data = os.read(0, 65536)
            except OSError:
                return 0
            if not data:
                return 0
            buf += data
            while b"\r" in buf:
                raw, buf = buf.split(b"\r", 1)
                if self.handle_record(raw):
                    time.sleep(0.05)
                    return 0


_SLEEPER = "import signal, time\nsignal.signal(signal.SIGHUP, signal.SIG_IGN)\ntime.sleep(600)\n"
# The classic daemon: fork, setsid, fork again; the grandchild prints its pid and sleeps with
# stdio closed, reparented away from the pane's process tree.
_DAEMONIZE = """
import os, signal, sys, time
r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.close(r)
        os.write(w, str(os.getpid()).encode())
        os.close(w)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        time.sleep(600)
    os._exit(0)
os.close(w)
print(os.read(r, 64).decode())
"""


def main() -> int:
    if sys.argv[1:] == ["--version"]:
        print(f"fake-{os.path.basename(sys.argv[0])} 0.0.0")
        return 0
    return Fake().main()


if __name__ == "__main__":
    sys.exit(main())
