"""TmuxBackend (docs/runtime.md §1.3–§1.10).

Every call runs ``[tmux_bin, "-u", "-S", <socket>, <command>, <args...>]`` through one timed
runner; no shell is involved. cafleet never imports libtmux (only the test harness uses it).
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple, Protocol

from cafleet.delivery.policy import SUBMIT_SETTLE
from cafleet.mux import (
    MSG_NO_PANE_ID,
    MSG_TMUX_NOT_FOUND,
    MSG_TMUX_PANE_UNSET,
    MSG_TMUX_UNSET,
    SPAWN_LIMIT_BYTES,
    Listing,
    MultiplexerError,
    MultiplexerUnavailable,
    MuxCommandFailed,
    MuxTimeout,
    PaneContext,
    PaneGone,
    PaneStatus,
    Places,
    ServerId,
    msg_spawn_too_long,
    msg_tmux_too_old,
    msg_unreachable,
)
from cafleet.mux.layout import WindowGeometry
from cafleet.mux.tmux_args import (
    CHUNK_BYTES,
    chunk_utf8,
    command_argv,
    format_literal,
    spawn_command,
    typed_keys,
    typed_text,
)
from cafleet.text import window_capture

SPLIT_TIMEOUT = 10.0
DEFAULT_TIMEOUT = 5.0
ESCAPE_SETTLE = 0.1
SUBMIT_KEY = "Enter"
KEYS = (SUBMIT_KEY, "Escape", "C-u", "Right")  # the only named keys cafleet presses
CAPTURE_OVERFETCH = 1000
MIN_VERSION = (3, 0)

_PANE_ID_RE = re.compile(r"^%[0-9]+$")
_NEW_WINDOW_RE = re.compile(r"^(@[0-9]+) (%[0-9]+)$")
_VERSION_RE = re.compile(r"(\d+)\.(\d+)")
_PANE_GONE_MARKERS = ("can't find pane", "no such pane")
_UNREACHABLE_MARKERS = ("no server running", "error connecting to", "server exited unexpectedly")


def find_executable(name: str, path: str | None) -> str | None:
    """`shutil.which(name, path=path)` for a plain command name, without importing shutil
    (which loads its archive modules: several ms of every short command's start)."""
    if path is None:
        path = os.environ.get("PATH", os.defpath)
    for directory in path.split(os.pathsep) if path else ():
        candidate = os.path.join(directory, name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


class RunResult(NamedTuple):
    returncode: int
    stdout: str
    stderr: str


class Runner(Protocol):
    def __call__(self, argv: list[str], timeout: float) -> RunResult: ...


def subprocess_runner(argv: list[str], timeout: float) -> RunResult:
    """The production runner: no shell, stdin from /dev/null, UTF-8 with replacement.

    ``subprocess.TimeoutExpired`` propagates (``subprocess.run`` has killed the child).
    """
    proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
    return RunResult(
        proc.returncode,
        proc.stdout.decode("utf-8", errors="replace"),
        proc.stderr.decode("utf-8", errors="replace"),
    )


# `tmux -V` is read once per process and binary.
_version_checked: dict[str, str] = {}


def parse_version(output: str) -> tuple[int, int] | None:
    """`major.minor` from `tmux -V` output; None when unparsable (accepted)."""
    match = _VERSION_RE.search(output)
    if match is None:
        return None
    return int(match.group(1)), int(match.group(2))


def socket_path_from(tmux_env: str | None) -> str | None:
    """The socket path: the part of TMUX before its first comma (None when TMUX is unset)."""
    if not tmux_env:
        return None
    return tmux_env.split(",", 1)[0]


def _refuse_empty_listing(result: RunResult, found_any: bool) -> None:
    """A server in the middle of kill-server answers `list-panes` with exit 0, no panes and
    "no current target". A live server always has a pane (tmux exits with its last session),
    so that is an unreachable server, not "every pane is gone": treating it as an empty live
    set would stop a monitor loop as if the Director's pane had closed."""
    if not found_any and (result.stderr or "").strip():
        raise MuxCommandFailed("list-panes", _first_nonempty_line(result.stderr) or "no panes")


# What names the server and the pane's process, ahead of fields that may hold `|`
# (docs/runtime.md §1.8).
IDENTITY = "#{pid}|#{start_time}|#{pane_pid}"


def server_of(pid: str, start: str) -> ServerId | None:
    """The server's identity from `#{pid}` and `#{start_time}` (None: not printed)."""
    pid, start = pid.strip(), start.strip()
    return ServerId(int(pid), int(start)) if pid.isdigit() and start.isdigit() else None


def _pid(text: str) -> int | None:
    return int(text.strip()) if text.strip().isdigit() else None


def _places(result: RunResult, rows: list[list[str]]) -> Places:
    """`pane_places` from the listing's ``[pane_id, window_id, pid, start_time, pane_pid,
    session_name]`` rows."""
    found: dict[str, set[tuple[str, str]]] = {}
    server = None
    pids: dict[str, int] = {}
    for parts in rows:
        if len(parts) == 6 and parts[0].strip():
            pane = parts[0].strip()
            found.setdefault(pane, set()).add((parts[5], parts[1].strip()))
            server = server or server_of(parts[2], parts[3])
            pid = _pid(parts[4])
            if pid is not None:
                pids[pane] = pid
    _refuse_empty_listing(result, bool(found))
    return Places({pane: frozenset(where) for pane, where in found.items()}, server, pids)


def _first_nonempty_line(text: str) -> str | None:
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return None


def _target_of(args: Sequence[str]) -> str:
    for i, arg in enumerate(args[:-1]):
        if arg == "-t":
            return args[i + 1]
    return ""


class TmuxBackend:
    """The wave-1 multiplexer backend (docs/runtime.md §1.3)."""

    name = "tmux"

    def __init__(
        self,
        *,
        env: Mapping[str, str] | None = None,
        runner: Runner | Callable[[list[str], float], RunResult] | None = None,
        sleep: Callable[[float], Any] | None = None,
        tmux_bin: str | None = None,
    ) -> None:
        self._env: Mapping[str, str] = os.environ if env is None else env
        self._runner = runner if runner is not None else subprocess_runner
        self._sleep = sleep if sleep is not None else time.sleep
        if tmux_bin is None:
            tmux_bin = find_executable("tmux", self._env.get("PATH"))
        self.tmux_bin: str | None = tmux_bin
        self.socket_path: str | None = socket_path_from(self._env.get("TMUX"))

    # ------------------------------------------------------------------ plumbing

    def _require_bin(self) -> str:
        if not self.tmux_bin:
            raise MultiplexerUnavailable(MSG_TMUX_NOT_FOUND)
        return self.tmux_bin

    def _require_socket(self) -> str:
        if not self.socket_path:
            raise MultiplexerUnavailable(MSG_TMUX_UNSET)
        return self.socket_path

    def argv(self, args: Sequence[str]) -> list[str]:
        """The whole argv; every command argument passes the one argument rule
        (docs/tmux-arguments.md §1), so none can end a command."""
        return [self._require_bin(), "-u", "-S", self._require_socket(), *command_argv(args)]

    def _run(self, args: Sequence[str], timeout: float | None = None) -> str:
        """Run one tmux command; map failures to the error tree; return stdout."""
        return self._run_result(args, timeout).stdout

    def _run_result(self, args: Sequence[str], timeout: float | None = None) -> RunResult:
        """:meth:`_run`, returning the whole result of a successful command."""
        if timeout is None:
            timeout = SPLIT_TIMEOUT if args and args[0] == "split-window" else DEFAULT_TIMEOUT
        argv = self.argv(args)
        command = args[0] if args else ""
        try:
            result = self._runner(argv, timeout)
        except subprocess.TimeoutExpired as exc:
            raise MuxTimeout(command, timeout) from exc
        except FileNotFoundError as exc:
            raise MultiplexerUnavailable(MSG_TMUX_NOT_FOUND) from exc
        except OSError as exc:
            raise MuxCommandFailed(command, str(exc)) from exc
        if result.returncode != 0:
            raise self._map_failure(args, command, result)
        return result

    @staticmethod
    def _map_failure(args: Sequence[str], command: str, result: RunResult) -> MultiplexerError:
        stderr = result.stderr or ""
        lowered = stderr.lower()
        detail = _first_nonempty_line(stderr) or f"exit status {result.returncode}"
        if any(marker in lowered for marker in _PANE_GONE_MARKERS):
            return PaneGone(_target_of(args))
        if any(marker in lowered for marker in _UNREACHABLE_MARKERS):
            return MultiplexerUnavailable(msg_unreachable(detail))
        return MuxCommandFailed(command, detail)

    # ------------------------------------------------------------------------- docs/runtime.md §1.4

    def ensure_available(self) -> None:
        self._require_bin()
        self._require_socket()
        self._check_version()

    def _check_version(self) -> None:
        binary = self._require_bin()
        if binary in _version_checked:
            return
        output = self._run(["-V"]).strip()
        version = parse_version(output)
        if version is not None and version < MIN_VERSION:
            raise MultiplexerUnavailable(msg_tmux_too_old(output))
        _version_checked[binary] = output

    # ------------------------------------------------------------------------- docs/runtime.md §1.5

    def discover_context(self) -> PaneContext:
        pane = self._env.get("TMUX_PANE")
        if not pane:
            raise MultiplexerUnavailable(MSG_TMUX_PANE_UNSET)
        out = self._run(
            [
                "display-message",
                "-p",
                "-t",
                pane,
                f"{IDENTITY}|#{{session_name}}|#{{window_id}}|#{{pane_id}}",
            ]
        )
        line = out.split("\n", 1)[0]
        head = line.split("|", 3)
        parts = head[-1].rsplit("|", 2)
        if len(head) != 4 or len(parts) != 3 or parts[2] != pane:
            raise MuxCommandFailed("display-message", f"unexpected output '{line}'")
        return PaneContext(
            session=parts[0],
            window_id=parts[1],
            pane_id=parts[2],
            server=server_of(head[0], head[1]),
            pane_pid=_pid(head[2]),
        )

    # ------------------------------------------------------------------------- docs/runtime.md §1.6

    @staticmethod
    def split_args(
        *, window_id: str, argv: Sequence[str], cwd: str, env: Mapping[str, str]
    ) -> list[str]:
        """The command before the argument rule: `-c` is a format (docs/tmux-arguments.md
        §2), `-e` values and the agent's argv are not (§3)."""
        args = ["split-window", "-d", "-P", "-F", "#{pane_id}", "-t", window_id]
        args += ["-c", format_literal(cwd)]
        for name, value in env.items():
            args += ["-e", f"{name}={value}"]
        args.append("--")
        args.extend(spawn_command(argv))
        return args

    @staticmethod
    def command_size(args: Sequence[str]) -> int:
        """Bytes tmux packs for a command: sum of len(arg) + 1 after `-S <socket>`, counted
        as sent (after the argument rule)."""
        return sum(len(arg.encode("utf-8", "surrogateescape")) + 1 for arg in command_argv(args))

    def split_window(
        self,
        *,
        window_id: str,
        argv: Sequence[str],
        cwd: str,
        env: Mapping[str, str],
        layout: str = "main-vertical",
    ) -> str:
        args = self.split_args(window_id=window_id, argv=argv, cwd=cwd, env=env)
        size = self.command_size(args)
        if size > SPAWN_LIMIT_BYTES:
            raise MultiplexerError(msg_spawn_too_long(size))
        out = self._run(args, SPLIT_TIMEOUT)
        first = out.split("\n", 1)[0].strip()
        if not _PANE_ID_RE.match(first):
            raise MuxCommandFailed("split-window", MSG_NO_PANE_ID)
        self._select_layout(window_id, layout)
        return first

    def _select_layout(self, window_id: str, layout: str) -> None:
        try:
            self._run(["select-layout", "-t", window_id, layout])
        except MultiplexerError as exc:
            import logging  # only here: logging costs every short command ~3 ms to import

            logging.getLogger(__name__).debug(
                "select-layout %s failed for %s: %s", layout, window_id, exc
            )

    def new_window(
        self,
        *,
        after_window_id: str,
        name: str,
        argv: Sequence[str],
        cwd: str,
        env: Mapping[str, str],
    ) -> tuple[str, str]:
        """A new window right after ``after_window_id`` in its session, named ``name``, its one
        pane running ``argv``; focus stays where it was. Returns (window id, pane id)."""
        # `-n` and `-c` are formats (docs/tmux-arguments.md §2); `argv()` applies the
        # argument rule (§1), so a name ending in `;` cannot end the command.
        args = ["new-window", "-d", "-a", "-P", "-F", "#{window_id} #{pane_id}"]
        args += ["-t", after_window_id, "-n", format_literal(name), "-c", format_literal(cwd)]
        for key, value in env.items():
            args += ["-e", f"{key}={value}"]
        args += ["--", *spawn_command(argv)]
        size = self.command_size(args)
        if size > SPAWN_LIMIT_BYTES:
            raise MultiplexerError(msg_spawn_too_long(size))
        out = self._run(args, SPLIT_TIMEOUT)
        match = _NEW_WINDOW_RE.match(out.split("\n", 1)[0].strip())
        if match is None:
            raise MuxCommandFailed("new-window", MSG_NO_PANE_ID)
        return match.group(1), match.group(2)

    def window_geometry(self, window_id: str) -> WindowGeometry:
        """The window's size, pane count and `main-pane-width` (docs/runtime.md §1.11)."""
        fmt = "#{window_id}|#{window_width}|#{window_height}|#{window_panes}|#{main-pane-width}"
        out = self._run(["display-message", "-p", "-t", window_id, fmt])
        parts = out.split("\n", 1)[0].strip().split("|")
        if len(parts) != 5 or parts[0] != window_id or not all(p.isdigit() for p in parts[1:4]):
            raise MuxCommandFailed("display-message", f"unexpected output '{out.strip()}'")
        return WindowGeometry(parts[0], int(parts[1]), int(parts[2]), int(parts[3]), parts[4])

    # ------------------------------------------------------------------------- docs/runtime.md §1.7

    def type_line(
        self,
        pane_id: str,
        line: str,
        *,
        settle: float | None = None,
        paste: bool = False,
        before_enter: Callable[[], object] | None = None,
    ) -> None:
        """The text (typed, or with ``paste`` one bracketed paste), ``settle`` seconds (default
        SUBMIT_SETTLE), ``before_enter`` (a check that may raise: `OwnedPane`), Enter. No
        Escape first (docs/runtime.md §1.7): Escape interrupts a working Claude Code or Codex,
        and ESC before a line starting with `[` can parse as a control sequence (`ESC [ c` is a
        terminal query)."""
        if "\r" in line or "\n" in line:
            raise ValueError("type_line: the line may not contain CR or LF")
        if paste:
            self.paste_text(pane_id, line)
        else:
            self.type_text(pane_id, line)
        self._sleep(SUBMIT_SETTLE if settle is None else settle)
        if before_enter is not None:
            before_enter()
        self._run(["send-keys", "-t", pane_id, SUBMIT_KEY])

    def paste_text(self, pane_id: str, text: str) -> None:
        """Paste ``text`` (`typed_text`: TAB as a space) as one bracketed paste, without Enter:
        `set-buffer` (then `set-buffer -a`) per chunk of at most CHUNK_BYTES into a buffer of
        this process and thread, then `paste-buffer -p -d`, which wraps it in the bracketed
        paste markers when the program asked for them and deletes the buffer
        (docs/runtime.md §1.7, docs/tmux-arguments.md §4)."""
        if "\r" in text or "\n" in text:
            raise ValueError("paste_text: the text may not contain CR or LF")
        import threading

        buffer = f"cafleet-{os.getpid()}-{threading.get_ident()}"
        for index, chunk in enumerate(chunk_utf8(typed_text(text))):
            append = ["-a"] if index else []
            self._run(["set-buffer", *append, "-b", buffer, "--", chunk])
        self._run(["paste-buffer", "-p", "-d", "-b", buffer, "-t", pane_id])

    def type_text(self, pane_id: str, text: str) -> None:
        """Type ``text`` literally, in chunks, without Enter."""
        if "\r" in text or "\n" in text:
            raise ValueError("type_text: the text may not contain CR or LF")
        for keys in typed_keys(text):  # docs/tmux-arguments.md §4
            self._run(["send-keys", "-t", pane_id, *keys])

    def send_key(self, pane_id: str, key: str) -> None:
        """Press one named key (`KEYS`: Enter, Escape, C-u, Right)."""
        if key not in KEYS:
            raise ValueError(f"send_key: {key!r} is not one of {', '.join(KEYS)}")
        self._run(["send-keys", "-t", pane_id, key])

    # ------------------------------------------------------------------------- docs/runtime.md §1.8

    def pane_status(self, pane_id: str) -> PaneStatus:
        # The session name goes last: it is the only field that may itself contain `|`.
        fields = "#{pane_id}|#{pane_in_mode}|#{pane_mode}|#{pane_dead}|#{window_id}"
        out = self._run(
            ["display-message", "-p", "-t", pane_id, f"{fields}|{IDENTITY}|#{{session_name}}"]
        )
        parts = out.split("\n", 1)[0].split("|", 8)
        if len(parts) != 9 or parts[0].strip() != pane_id:
            raise PaneGone(pane_id)
        in_mode = parts[1].strip() not in ("", "0")
        mode = (parts[2].strip() or "a mode") if in_mode else None
        return PaneStatus(
            pane_id=pane_id,
            mode=mode,
            dead=parts[3].strip() == "1",
            session=parts[8],
            window_id=parts[4].strip(),
            server=server_of(parts[5], parts[6]),
            pane_pid=_pid(parts[7]),
        )

    # ------------------------------------------------------------------------- docs/runtime.md §1.9

    def capture(self, pane_id: str, lines: int, *, ansi: bool = False) -> str:
        if lines < 1:
            raise ValueError(f"capture: lines must be positive, got {lines}")
        args = ["capture-pane", "-p", "-t", pane_id, "-S", f"-{lines + CAPTURE_OVERFETCH}"]
        if ansi:
            args.append("-e")
        return window_capture(self._run(args), lines, ansi=ansi)

    def screen(self, pane_id: str) -> str:
        """The pane's visible screen as plain text (`capture-pane -p`, no history, no ANSI):
        what the pane-state classifier reads (cafleet.delivery.screens)."""
        return self._run(["capture-pane", "-p", "-t", pane_id]).rstrip("\n")

    def screens(self, pane_ids: Sequence[str]) -> dict[str, str]:
        """Several panes' visible screens (as `screen` reads them) in one tmux call: per pane a
        `display-message` printing a marker line with its id, then its `capture-pane -p`,
        chained with `;` (docs/runtime.md §1.9). tmux stops a chain at its first failing
        command, so a pane missing from the answer (gone meanwhile, or after the failure) is
        simply absent: the caller captures it alone. Never raises for a pane; a tmux that
        cannot be run raises as any call does."""
        if not pane_ids:
            return {}
        marker = f"cafleet-screen-{os.getpid()}-{time.monotonic_ns()}"
        argv = self.argv([])
        for index, pane in enumerate(pane_ids):
            if index:
                argv.append(";")
            argv += command_argv(["display-message", "-p", "-t", pane, f"{marker} #{{pane_id}}"])
            argv += [";", *command_argv(["capture-pane", "-p", "-t", pane])]
        try:
            result = self._runner(argv, DEFAULT_TIMEOUT)
        except subprocess.TimeoutExpired as exc:
            raise MuxTimeout("capture-pane", DEFAULT_TIMEOUT) from exc
        except FileNotFoundError as exc:
            raise MultiplexerUnavailable(MSG_TMUX_NOT_FOUND) from exc
        except OSError as exc:
            raise MuxCommandFailed("capture-pane", str(exc)) from exc
        found: dict[str, list[str]] = {}
        current: list[str] | None = None
        last: str | None = None
        for line in result.stdout.split("\n"):
            if line.startswith(marker + " "):
                last = line[len(marker) + 1 :].strip()
                current = found.setdefault(last, []) if last in pane_ids else None
                continue
            if current is not None:
                current.append(line)
        if result.returncode != 0 and last is not None:
            found.pop(last, None)  # the chain stopped at this pane: its capture may be missing
        return {pane: "\n".join(lines).rstrip("\n") for pane, lines in found.items()}

    # ------------------------------------------------------------------------ docs/runtime.md §1.10

    def list_panes(self) -> Listing:
        """Every live pane's id, with the server and each pane's process (`Listing`)."""
        args = ["list-panes", "-a", "-F", f"#{{pane_id}}|{IDENTITY}"]
        result = self._run_result(args)
        server = None
        pids: dict[str, int] = {}
        panes = set()
        for line in result.stdout.splitlines():
            parts = line.strip().split("|")
            if not parts[0]:
                continue
            panes.add(parts[0])
            if len(parts) == 4:
                server = server or server_of(parts[1], parts[2])
                pid = _pid(parts[3])
                if pid is not None:
                    pids[parts[0]] = pid
        _refuse_empty_listing(result, bool(panes))
        return Listing(panes, server, pids)

    def pane_places(self) -> Places:
        """Every live pane's id and each ``(session, window_id)`` it is in, in one call:
        `list_panes` plus what `owner_problem` would ask each pane for. A pane is listed once
        per session its window is in (a session group, a linked window), so it may have
        several places."""
        # The session name goes last: it is the only field that may itself contain `|`.
        args = [
            "list-panes",
            "-a",
            "-F",
            f"#{{pane_id}}|#{{window_id}}|{IDENTITY}|#{{session_name}}",
        ]
        result = self._run_result(args)
        return _places(result, [line.split("|", 5) for line in result.stdout.splitlines()])

    def available_places(self) -> Places:
        """`ensure_available` then `pane_places`, in one tmux call once the binary and socket
        are known (docs/runtime.md §1.4, §1.10): the listing also prints the server's
        ``#{version}``, which stands in for `tmux -V` (the same binary, run as the server). A
        listing that fails, or one without a version that parses, runs the `-V` check first,
        so what is refused, and with which message, is what the two calls said."""
        binary = self._require_bin()
        self._require_socket()
        if binary in _version_checked:
            return self.pane_places()
        fmt = f"#{{version}}|#{{pane_id}}|#{{window_id}}|{IDENTITY}|#{{session_name}}"
        args = ["list-panes", "-a", "-F", fmt]
        try:
            result = self._run_result(args)
        except MultiplexerError:
            self._check_version()
            raise
        rows = [line.split("|", 6) for line in result.stdout.splitlines()]
        version = rows[0][0].strip() if rows and len(rows[0]) == 7 else ""
        parsed = parse_version(version) if version else None
        if parsed is None:
            self._check_version()
        elif parsed < MIN_VERSION:
            raise MultiplexerUnavailable(msg_tmux_too_old(f"tmux {version}"))
        else:
            _version_checked[binary] = f"tmux {version}"
        return _places(result, [row[1:] for row in rows if len(row) == 7])

    def pane_pids(self) -> dict[str, int]:
        """Every live pane's id and the pid of the process tmux started in it."""
        args = ["list-panes", "-a", "-F", "#{pane_id} #{pane_pid}"]
        pids: dict[str, int] = {}
        for line in self._run(args).splitlines():
            pane, _, pid = line.strip().partition(" ")
            if pane and pid.isdigit():
                pids[pane] = int(pid)
        return pids

    def server_started_at(self) -> float | None:
        """When this tmux server started (epoch seconds, `#{start_time}`), None when it does
        not say. A placement made before then names a pane of an earlier server on this socket
        (after a reboot the new server hands out the same ids again)."""
        out = self._run(["list-sessions", "-F", "#{start_time}"])
        first = _first_nonempty_line(out)
        return float(first) if first is not None and first.strip().isdigit() else None

    def server_id(self) -> ServerId | None:
        """This server's identity (`ServerId`), None when it does not say."""
        out = self._run(["list-sessions", "-F", "#{pid}|#{start_time}"])
        first = _first_nonempty_line(out)
        parts = (first or "").split("|")
        return server_of(parts[0], parts[1]) if len(parts) == 2 else None

    def kill_pane(self, pane_id: str, *, ignore_missing: bool = True) -> bool:
        try:
            self._run(["kill-pane", "-t", pane_id])
        except PaneGone:
            if ignore_missing:
                return False
            raise
        return True


def reset_version_cache() -> None:
    """For tests only."""
    _version_checked.clear()


__all__ = [
    "CHUNK_BYTES",
    "DEFAULT_TIMEOUT",
    "ESCAPE_SETTLE",
    "KEYS",
    "SPLIT_TIMEOUT",
    "SUBMIT_KEY",
    "SUBMIT_SETTLE",
    "RunResult",
    "Runner",
    "TmuxBackend",
    "chunk_utf8",
    "parse_version",
    "reset_version_cache",
    "socket_path_from",
    "subprocess_runner",
]
