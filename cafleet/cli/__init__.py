"""The `cafleet` entry point (docs/cli.md §1.1, §1.4).

`main(argv)` is a plain function: it installs the signal recorders, makes stdout/stderr UTF-8,
runs the root Click group with ``standalone_mode=False`` and maps what comes back to an exit code
itself, so Click's own handling (`Aborted!`, its exit calls) is never in play.

This module stays import-light: `--version`, help and parse failures import Click and cafleet's
own light modules only (docs/cli.md §1.8); command bodies import the storage and mux layers lazily.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from cafleet import signals, status
from cafleet.errors import error_text
from cafleet.output import BrokenStdout, OutputFailed, dumps_json, err
from cafleet.signals import Interrupted

__all__ = [
    "main",
    "report_error",
    "report_internal",
    "run",
    "run_started",
    "signal_stop_is_clean",
    "wants_json",
]

HOOK_COMMAND = "hook"  # run by the agents' hooks, before Click is imported (cafleet.hook)

_clean_signal_stop = False
_started: float | None = None
_whole_process = False  # main() is this process's entry point: its start is the invocation's


def run_started() -> float:
    """When this process started, on the `time.monotonic()` clock: deadlines (`message wait
    --timeout`) count from here, so the interpreter's and cafleet's start-up are inside them.
    Linux tells the process's start time (/proc/self/stat, in clock ticks since boot); elsewhere
    it is when `run` began, and so it is for an in-process `run` (a test, an embedding program),
    whose process started long before this invocation."""
    import time

    fallback = time.monotonic() if _started is None else _started
    if not _whole_process:
        return fallback
    try:
        with open("/proc/self/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        started_after_boot = int(fields[19]) / os.sysconf("SC_CLK_TCK")
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - started_after_boot
    except (OSError, ValueError, IndexError, AttributeError):
        return fallback
    if not 0 <= age < 3600:  # a clock that disagrees: trust run() instead
        return fallback
    return min(fallback, time.monotonic() - age)


def signal_stop_is_clean() -> None:
    """For the monitor loop: a signal is its normal way to stop, so keep its exit code."""
    global _clean_signal_stop
    _clean_signal_stop = True


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """Run one invocation and exit with its code."""
    global _whole_process
    # Only the console script and `python -m cafleet` read sys.argv: then this process is the
    # invocation. A caller passing argv (a test calling main in process) is not, and the flag
    # must not outlive the call.
    _whole_process = argv is None
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == [HOOK_COMMAND] and not {"-h", "--help"} & set(args):
        # The agents' hooks: no Click, nothing on stdout, exit 0 (docs/cli.md §2.38).
        from cafleet.hook import run_hook

        _whole_process = False
        _exit(run_hook(args[1:]), whole_process=argv is None)
    try:
        code = run(argv)
    finally:
        _whole_process = False
    _exit(code, whole_process=argv is None)


def _exit(code: int, *, whole_process: bool) -> NoReturn:
    if whole_process:
        # The process ends here. Shutdown would run the cycle collector over every object of
        # every module loaded (~7 ms of a ~70 ms command); frozen, they are skipped
        # (docs/performance.md §1.2). atexit, flushing and threads run as before; only objects
        # in reference cycles are not finalized, and nothing here needs that: files and
        # connections are closed explicitly, and locks end with the process.
        gc.freeze()
    sys.exit(code)


def run(argv: Sequence[str] | None = None) -> int:
    """Run one invocation and return its exit code (docs/cli.md §1.4)."""
    global _clean_signal_stop, _started
    import time

    _started = time.monotonic()
    _clean_signal_stop = False
    signals.install()
    _utf8_streams()
    code = _invoke(list(sys.argv[1:] if argv is None else argv))
    code = _final_flush(code)
    signal_code = signals.exit_code_for_signal()
    if signal_code is not None and code in (status.OK, status.ERROR) and not _clean_signal_stop:
        code = signal_code
    return code


def _invoke(args: list[str]) -> int:
    import click

    from cafleet.cli.app import cli

    as_json = wants_json(args)
    try:
        rv = cli.main(args=args, prog_name="cafleet", standalone_mode=False)
    except click.UsageError as exc:
        if as_json:
            return report_error(status.CODE_USAGE, exc.format_message(), as_json=True)
        _show_usage_error(exc)
        return status.USAGE
    except click.ClickException as exc:
        code = getattr(exc, "error_code", None) or status.CODE_ERROR
        message = exc.format_message() or None
        return report_error(code, message, as_json=as_json, cleanup=getattr(exc, "cleanup", ()))
    except click.exceptions.Exit as exc:  # pragma: no cover - main returns it as a value
        return exc.exit_code
    except click.Abort:
        # Click raises it for EOF/KeyboardInterrupt; our handlers only record signals.
        return status.ERROR
    except Interrupted:
        return status.ERROR  # replaced by 130/143 in run()
    except BrokenStdout:
        _silence_stdout()
        return status.BROKEN_PIPE
    except OutputFailed as exc:
        return report_error(status.CODE_OUTPUT, str(exc), as_json=as_json)
    except BrokenPipeError:
        _silence_stdout()
        return status.BROKEN_PIPE
    except OSError as exc:
        return report_error(status.CODE_OS, status.os_error_text(exc), as_json=as_json)
    except Exception as exc:
        code = status.error_code(exc)
        if code == status.CODE_INTERNAL:
            return report_internal(exc, as_json=as_json)
        return report_error(code, error_text(exc), as_json=as_json)
    if isinstance(rv, bool) or not isinstance(rv, int):
        return status.OK
    return rv


def wants_json(args: Sequence[str]) -> bool:
    """`--json` among the arguments before a `--`: errors are then one JSON object on stderr,
    even a usage error Click raised before the option was parsed."""
    for arg in args:
        if arg == "--":
            return False
        if arg == "--json":
            return True
    return False


def report_error(
    code: str, message: str | None, *, as_json: bool, cleanup: Sequence[str] = ()
) -> int:
    """Print one failure on stderr and return its exit status (`cafleet.status`).

    Text: `Error: <message>`, then each cleanup line. JSON: one line
    `{"error": {"code": …, "message": …}}` (plus `"cleanup": [...]` when there is any).
    A failure without a message (a signal during a compensated creation) prints only the
    cleanup lines.
    """
    if as_json:
        body: dict[str, object] = {"code": code, "message": message or code}
        if cleanup:
            body["cleanup"] = list(cleanup)
        err(dumps_json({"error": body}))
    else:
        if message is not None:
            err(f"Error: {message}")
        for line in cleanup:
            err(line)
    return status.exit_status(code)


DEBUG_VARIABLE = "CAFLEET_DEBUG"  # set (not 0): a bug's traceback is printed (docs/cli.md §1.4)
BUG_HINT = (
    "This is a bug in cafleet; run the command again with CAFLEET_DEBUG=1 to see its traceback."
)


def report_internal(exc: BaseException, *, as_json: bool) -> int:
    """An exception nothing maps is a bug, not a user error (docs/cli.md §1.4): print
    `internal error: <type>: <text>` and how to see the traceback (under CAFLEET_DEBUG, the
    traceback itself, first); exit 70. Under --json the hint is the message's tail."""
    debug = os.environ.get(DEBUG_VARIABLE, "") not in ("", "0")
    if debug:
        import traceback

        err("".join(traceback.format_exception(exc)).rstrip("\n"))
    kind = type(exc)
    name = kind.__qualname__
    if kind.__module__ != "builtins":
        name = f"{kind.__module__}.{name}"
    text = str(exc)
    message = f"internal error: {name}: {text}" if text else f"internal error: {name}"
    if as_json:
        tail = "" if debug else " (a bug in cafleet; CAFLEET_DEBUG=1 prints its traceback)"
        return report_error(status.CODE_INTERNAL, message + tail, as_json=True)
    err(message)
    if not debug:
        err(BUG_HINT)
    return status.INTERNAL


def _show_usage_error(exc: object) -> None:
    with contextlib.suppress(OSError, BrokenStdout):
        exc.show()  # type: ignore[attr-defined]


def _final_flush(code: int) -> int:
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()
        return status.BROKEN_PIPE
    except OSError as exc:
        import errno

        if exc.errno == errno.EPIPE:
            _silence_stdout()
            return status.BROKEN_PIPE
        _silence_stdout()  # the interpreter's final flush would fail again
        err(f"Error: cannot write output: {exc.strerror or exc}")
        return status.ERROR if code == status.OK else code
    except ValueError:  # stdout already closed
        pass
    return code


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail (docs/cli.md §1.4)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


def _utf8_streams() -> None:
    """Write both streams as UTF-8 whatever the locale (docs/cli.md §1.3)."""
    for stream in (sys.stdout, sys.stderr):
        encoding = (getattr(stream, "encoding", None) or "").lower().replace("-", "")
        if encoding != "utf8" and hasattr(stream, "reconfigure"):
            with contextlib.suppress(OSError, ValueError):
                stream.reconfigure(encoding="utf-8")
