"""The `cafleet` entry point (cli.md §1.1, §1.4).

`main(argv)` is a plain function: it installs the signal recorders, makes stdout/stderr UTF-8,
runs the root Click group with ``standalone_mode=False`` and maps what comes back to an exit code
itself, so Click's own handling (`Aborted!`, its exit calls) is never in play.

This module stays import-light: `--version`, help and parse failures import Click and cafleet's
own light modules only (cli.md §1.8); command bodies import the storage and mux layers lazily.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

__all__ = ["main", "run", "signal_stop_is_clean"]

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_BROKEN_PIPE = 141

_clean_signal_stop = False


def signal_stop_is_clean() -> None:
    """For the monitor loop: a signal is its normal way to stop, so keep its exit code."""
    global _clean_signal_stop
    _clean_signal_stop = True


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """Run one invocation and exit with its code."""
    sys.exit(run(argv))


def run(argv: Sequence[str] | None = None) -> int:
    """Run one invocation and return its exit code (cli.md §1.4)."""
    global _clean_signal_stop
    _clean_signal_stop = False
    from cafleet import signals

    signals.install()
    _utf8_streams()
    code = _invoke(list(sys.argv[1:] if argv is None else argv))
    code = _final_flush(code)
    signal_code = signals.exit_code_for_signal()
    if signal_code is not None and code in (EXIT_OK, EXIT_ERROR) and not _clean_signal_stop:
        code = signal_code
    return code


def _invoke(args: list[str]) -> int:
    import click

    from cafleet.errors import error_text
    from cafleet.output import BrokenStdout, OutputFailed, err
    from cafleet.signals import Interrupted

    try:
        from cafleet.cli.app import cli

        rv = cli.main(args=args, prog_name="cafleet", standalone_mode=False)
    except click.UsageError as exc:
        _show_usage_error(exc)
        return EXIT_USAGE
    except click.ClickException as exc:
        err(f"Error: {exc.format_message()}")
        return exc.exit_code
    except click.exceptions.Exit as exc:  # pragma: no cover - main returns it as a value
        return exc.exit_code
    except click.Abort:
        # Click raises it for EOF/KeyboardInterrupt; our handlers only record signals.
        return EXIT_ERROR
    except Interrupted:
        return EXIT_ERROR  # replaced by 130/143 in run()
    except BrokenStdout:
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except OutputFailed as exc:
        err(f"Error: {exc}")
        return EXIT_ERROR
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except Exception as exc:
        err(f"Error: {error_text(exc)}")
        return EXIT_ERROR
    if isinstance(rv, bool) or not isinstance(rv, int):
        return EXIT_OK
    return rv


def _show_usage_error(exc: object) -> None:
    from cafleet.output import BrokenStdout

    with contextlib.suppress(OSError, BrokenStdout):
        exc.show()  # type: ignore[attr-defined]


def _final_flush(code: int) -> int:
    from cafleet.output import err

    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except OSError as exc:
        import errno

        if exc.errno == errno.EPIPE:
            _silence_stdout()
            return EXIT_BROKEN_PIPE
        _silence_stdout()  # the interpreter's final flush would fail again
        err(f"Error: cannot write output: {exc.strerror or exc}")
        return EXIT_ERROR if code == EXIT_OK else code
    except ValueError:  # stdout already closed
        pass
    return code


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail (cli.md §1.4)."""
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
    """Write both streams as UTF-8 whatever the locale (cli.md §1.3)."""
    for stream in (sys.stdout, sys.stderr):
        encoding = (getattr(stream, "encoding", None) or "").lower().replace("-", "")
        if encoding != "utf8" and hasattr(stream, "reconfigure"):
            with contextlib.suppress(OSError, ValueError):
                stream.reconfigure(encoding="utf-8")
