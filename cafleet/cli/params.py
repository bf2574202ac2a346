"""Shared parameters and input rules (docs/cli.md §1.3, §1.5, §1.9).

- `id_argument("fleet_id", "…")`: a required positional id, `1 … 9223372036854775807`.
- `id_option("--from-member-id", "…")`: a required id option.
- `json_option`: the trailing `--json` flag (parameter name `as_json`).
- `name_option` / `description_option`: option callbacks with the name/description rules.
- `body_argument` + `file_option` + `read_body(...)`: exactly one of TEXT and `--file` (checked by
  `check_body_choice` while parsing), positional checks while parsing (exit 2), file/stdin checks
  when the body is read after the guard (exit 1).
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from cafleet.config import MAX_ID
from cafleet.text import BODY_LIMIT, check_inline_body


class IdRange(click.IntRange):
    """An id, `1 … MAX_ID`, refused in words (`'abc' is not an id: …`), not as Click's
    "not a valid integer range" (docs/cli.md §1.5)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        else:
            try:
                number = int(str(value).strip(), 10)
            except ValueError:
                self.fail(f"{str(value)!r} is not an id: {ID_RULE}", param, ctx)
        if not 1 <= number <= MAX_ID:
            self.fail(f"{number} is not an id: {ID_RULE}", param, ctx)
        return number


ID_RULE = f"ids are whole numbers from 1 to {MAX_ID}"
ID = IdRange(1, MAX_ID)

NAME_LIMIT = 100
DESCRIPTION_LIMIT = 2000

F = TypeVar("F", bound=Callable[..., Any])


# The permission profiles (docs/permissions.md), for Click's choices at import time; the same
# names as cafleet.agents.permissions.PROFILES (a test keeps them equal).
PERMISSION_PROFILES: tuple[str, ...] = ("workspace", "ask", "readonly", "full")


def id_argument(name: str, help: str, metavar: str | None = None) -> Callable[[F], F]:
    """A required positional id (docs/cli.md §1.5), e.g. `id_argument("member_id", "Member ID.")`.
    A fleet id (``fleet_id``) may come as `--fleet-id ID` instead, everywhere (`fleet_id_param`)."""
    if name == "fleet_id":
        return fleet_id_param(help)
    return click.argument(name, type=ID, help=help, metavar=metavar or name.upper())


def fleet_id_param(help: str, *, then: str | None = None) -> Callable[[F], F]:
    """The fleet as a positional `FLEET_ID` or as `--fleet-id ID`, exactly one (docs/cli.md
    §1.5); the command receives ``fleet_id``. ``then`` names an optional positional that follows
    (`member create`'s ``prompt``): with `--fleet-id` given, the one positional is that one."""
    import functools

    def decorate(f: F) -> F:
        @functools.wraps(f)
        def merged(*args: Any, fleet_id_arg: Any, fleet_id_opt: int | None, **kwargs: Any) -> Any:
            ctx = click.get_current_context()
            if fleet_id_opt is not None and fleet_id_arg is not None:
                if then is None or kwargs[then] is not None:
                    raise click.UsageError("give either FLEET_ID or --fleet-id, not both", ctx)
                try:
                    check_inline_body(fleet_id_arg)  # the rules the positional body follows
                except ValueError as exc:
                    raise click.UsageError(str(exc), ctx) from None
                kwargs[then], fleet_id_arg = fleet_id_arg, None
            if fleet_id_opt is None and fleet_id_arg is None:
                raise click.UsageError("missing FLEET_ID or --fleet-id", ctx)
            if fleet_id_opt is None:
                fleet_id_opt = ID.convert(fleet_id_arg, _fleet_argument(ctx), ctx)
            return f(*args, fleet_id=fleet_id_opt, **kwargs)

        click.argument(
            "fleet_id_arg",
            required=False,
            type=None if then else ID,  # before --fleet-id it may be the prompt: checked above
            metavar="FLEET_ID",
            help=f"{help.rstrip('.')} (or give --fleet-id ID).",
        )(merged)
        click.option(
            "--fleet-id",
            "fleet_id_opt",
            type=ID,
            default=None,
            metavar="ID",
            help=f"{help.rstrip('.')} (instead of FLEET_ID).",
        )(merged)
        return merged  # type: ignore[return-value]

    return decorate


def _fleet_argument(ctx: click.Context) -> click.Parameter | None:
    return next((p for p in ctx.command.params if p.name == "fleet_id_arg"), None)


def id_option(flag: str, help: str, *, required: bool = True) -> Callable[[F], F]:
    """A role-labelling id option such as `--from-member-id`."""
    return click.option(flag, type=ID, required=required, help=help, metavar="ID")


json_option = click.option("--json", "as_json", is_flag=True, help="Output in JSON format.")


def agent_choice() -> click.Choice[str]:
    """`--coding-agent`'s choice, from the agents registry (imported only by the commands that
    spawn, when they register)."""
    from cafleet.agents.registry import agent_names

    return click.Choice(agent_names())


# --- names and descriptions (docs/cli.md §1.9) ----------------------------------------------------


def _is_control(ch: str) -> bool:
    code = ord(ch)
    return code < 0x20 or 0x7F <= code <= 0x9F


def _has_surrogates(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def check_label(value: str, option: str, limit: int) -> str:
    """The name/description rules, in order; `option` is the flag as shown (`--name`)."""
    if _has_surrogates(value):
        raise click.BadParameter(f"{option} is not valid UTF-8")
    if any(_is_control(ch) for ch in value):
        raise click.BadParameter(f"{option} may not contain control characters")
    if value.strip() == "":
        raise click.BadParameter(f"{option} may not be empty")
    if len(value) > limit:
        raise click.BadParameter(
            f"{option} is too long ({len(value)} characters; the limit is {limit})"
        )
    return value


def _label_callback(
    option: str, limit: int
) -> Callable[[click.Context, click.Parameter, Any], Any]:
    def callback(ctx: click.Context, _param: click.Parameter, value: Any) -> Any:
        if value is None:
            return value
        try:
            return check_label(value, option, limit)
        except click.BadParameter as exc:
            # cafleet-authored usage messages are exact: no "Invalid value for" prefix
            raise click.UsageError(exc.message, ctx) from None

    return callback


def name_option(help: str, *, required: bool = True) -> Callable[[F], F]:
    return click.option(
        "--name",
        required=required,
        help=help,
        callback=_label_callback("--name", NAME_LIMIT),
    )


def description_option(help: str, *, required: bool = True) -> Callable[[F], F]:
    return click.option(
        "--description",
        required=required,
        help=help,
        callback=_label_callback("--description", DESCRIPTION_LIMIT),
    )


# --- bodies (docs/cli.md §1.9) --------------------------------------------------------------------


def _positional_body_callback(ctx: click.Context, _param: click.Parameter, value: Any) -> Any:
    if value is None:
        return value
    try:
        check_inline_body(value)
    except ValueError as exc:
        raise click.UsageError(str(exc), ctx) from None
    return value


def body_argument(name: str = "text", help: str = "Message text.") -> Callable[[F], F]:
    """The optional positional body (`[TEXT]`, or `[PROMPT]` with name="prompt")."""
    return click.argument(
        name,
        required=False,
        help=help,
        callback=_positional_body_callback,
        metavar=f"[{name.upper()}]",
    )


def file_option(
    flag: str = "--file", help: str = "Read the text from PATH ('-' reads stdin)."
) -> Callable[[F], F]:
    return click.option(flag, "file", metavar="PATH", default=None, help=help)


def check_body_choice(text: str | None, file: str | None, arg: str = "TEXT") -> None:
    """Exactly one of the positional and `--file` (exit 2)."""
    if text is not None and file is not None:
        raise click.UsageError(
            f"give either {arg} or --file, not both", click.get_current_context(silent=True)
        )
    if text is None and file is None:
        raise click.UsageError(f"missing {arg} or --file", click.get_current_context(silent=True))


def read_body_file(path: str, flag: str = "--file") -> str:
    """Read a `--file`/`--monitor-file` body; raises ClickException (exit 1) with the exact text.

    `-` reads stdin to EOF. The file is opened first (non-blocking, so a FIFO never hangs), then
    inspected; directories, FIFOs and `/dev/stdin` are not regular files.
    """
    src = f"{flag} {path}"
    if path == "-":
        what = "stdin"
        data = _read_limited(sys.stdin.buffer)
    else:
        what = "file"
        data = _read_regular_file(path, src)
    if len(data) > BODY_LIMIT:
        raise click.ClickException(f"{src}: {what} is too long (more than {BODY_LIMIT} bytes)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise click.ClickException(f"{src}: {what} is not valid UTF-8") from None
    if "\x00" in text:
        raise click.ClickException(f"{src}: {what} contains NUL characters")
    if text.strip() == "":
        raise click.ClickException(f"{src}: {what} is empty")
    return text


def _read_limited(stream: Any) -> bytes:
    chunks: list[bytes] = []
    remaining = BODY_LIMIT + 1
    while remaining > 0:
        chunk = stream.read(remaining)
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def _read_regular_file(path: str, src: str) -> bytes:
    not_regular = f"{src}: file does not exist or is not a regular file"
    if os.path.abspath(path) in ("/dev/stdin", "/proc/self/fd/0"):
        raise click.ClickException(not_regular)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except PermissionError:
        raise click.ClickException(f"{src}: file is not readable") from None
    except OSError:
        raise click.ClickException(not_regular) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise click.ClickException(not_regular)
        with os.fdopen(fd, "rb", closefd=False) as stream:
            try:
                return _read_limited(stream)
            except OSError:
                raise click.ClickException(f"{src}: file is not readable") from None
    finally:
        os.close(fd)


def read_body(text: str | None, file: str | None, flag: str = "--file") -> str:
    """The accepted body: the (already checked) positional, or the file/stdin contents."""
    if text is not None:
        return text
    assert file is not None
    return read_body_file(file, flag)


# `member create` and `member respawn` (docs/runtime.md §1.11).
window_option = click.option(
    "--window",
    type=click.Choice(["new", "current"]),
    default=None,
    help=(
        "Where the pane goes: 'current' splits the root Director's window whatever the pane "
        "sizes, 'new' opens a new window (default: the Director's window while panes stay "
        "usable, then the fleet's window)."
    ),
)


# A spending ceiling (docs/cli.md §2.36): `member create|budget|resume`, `fleet create|budget`.
budget_tokens = click.option(
    "--budget-tokens", type=click.IntRange(1), default=None, metavar="N", help="Token ceiling."
)
budget_usd = click.option(
    "--budget-usd", type=float, default=None, metavar="X", help="Dollar ceiling."
)
