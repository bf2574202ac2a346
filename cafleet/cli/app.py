"""The Click command tree (docs/cli.md §1.1).

Groups live here; commands live in their own modules, which register themselves on these groups.
Each group names, in help order, the module that registers each of its commands
(`command_modules`), and imports a module only when one of its commands is looked up: a run of
`cafleet message ack` compiles and imports the message commands, not the fleet, member and
monitor ones (an editable checkout under PYTHONDONTWRITEBYTECODE=1 recompiles every module it
imports, on every run). A new command module:

    from cafleet.cli.app import fleet_group
    from cafleet.cli.context import invocation
    from cafleet.cli.params import id_argument, json_option

    @fleet_group.command("show", help="…")
    @id_argument("fleet_id", "Fleet ID.")
    @json_option
    def fleet_show(fleet_id: int, as_json: bool) -> None: ...

and gets an entry in its group's `command_modules`. Every command gets `CafleetCommand` (cafleet
errors become `Error: <text>`, exit 1). The monitor loop form registers itself with
`monitor_loop_command`.
"""

from __future__ import annotations

import errno
import importlib
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import click

from cafleet import __version__
from cafleet.cli.context import CafleetCommand, PlainHelpOption
from cafleet.output import BrokenStdout, out

ROOT_HELP = "cafleet — message broker and member registry for fleets of coding agents in tmux."
CONTEXT_SETTINGS: dict[str, Any] = {"help_option_names": ["-h", "--help"]}

# Hidden name of the monitor loop form. No output ever shows it (docs/cli.md §1.1).
LOOP_COMMAND_NAME = "__monitor_loop__"


_T = TypeVar("_T")


def _no_epipe(call: Callable[[], _T]) -> _T:
    """Click's main turns an EPIPE OSError into its own exit; raise ours instead (exit 141)."""
    try:
        return call()
    except OSError as exc:
        if exc.errno == errno.EPIPE:
            raise BrokenStdout() from exc
        raise


class CafleetGroup(PlainHelpOption, click.Group):
    """A group whose commands are `CafleetCommand`s and whose subgroups are `CafleetGroup`s.

    `command_modules` maps each command name, in help order, to the module that registers it;
    the module is imported the first time one of its commands is looked up.
    """

    command_class = CafleetCommand

    def __init__(
        self, *args: Any, command_modules: Mapping[str, str] | None = None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.command_modules: dict[str, str] = dict(command_modules or {})

    def load_command(self, name: str) -> click.Command | None:
        module = self.command_modules.get(name)
        if module is not None and name not in self.commands:
            importlib.import_module(module)
            if name not in self.commands:  # the map and the module disagree: a bug here
                raise RuntimeError(f"{module} did not register the command {name!r}")
        return self.commands.get(name)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return self.load_command(cmd_name)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name = click.utils.make_str(args[0])
        if not name.startswith("-") and self.load_command(name) is None:
            # Click suggests from the commands loaded so far; ours load lazily, so offer every
            # visible name of the map (`cafleet fleet lst`: "Did you mean 'list'?").
            visible = [n for n in self.command_modules if n != LOOP_COMMAND_NAME]
            visible += [n for n, c in self.commands.items() if not c.hidden and n not in visible]
            raise click.exceptions.NoSuchCommand(name, possibilities=visible, ctx=ctx)
        return super().resolve_command(ctx, args)

    def list_commands(self, ctx: click.Context) -> list[str]:
        for name in self.command_modules:
            self.load_command(name)
        # Help order: the declared order, then anything registered without an entry.
        return list(self.command_modules) + [
            n for n in self.commands if n not in self.command_modules
        ]


CafleetGroup.group_class = CafleetGroup


ROOT_ORDER = (
    "setup",
    "doctor",
    "fleet",
    "member",
    "worktree",
    "message",
    "task",
    "search",
    "notify",
    "monitor",
    "server",
)


class RootGroup(CafleetGroup):
    def list_commands(self, ctx: click.Context) -> list[str]:
        names = super().list_commands(ctx)
        return sorted(
            names, key=lambda n: ROOT_ORDER.index(n) if n in ROOT_ORDER else len(ROOT_ORDER)
        )

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        return _no_epipe(
            lambda: super(RootGroup, self).make_context(info_name, args, parent, **extra)
        )

    def invoke(self, ctx: click.Context) -> Any:
        return _no_epipe(lambda: super(RootGroup, self).invoke(ctx))


def _modules(*entries: tuple[str, ...]) -> dict[str, str]:
    """`("module", "cmd", "cmd2"), …` → {"cmd": "module", "cmd2": "module", …}, in order."""
    return {name: module for module, *names in entries for name in names}


def _print_help_if_bare(ctx: click.Context) -> None:
    """Bare groups print their help on stdout and exit 0 (docs/cli.md §1.1)."""
    if ctx.invoked_subcommand is None:
        out(ctx.get_help())


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    out(f"cafleet {__version__}")
    ctx.exit(0)


@click.group(
    cls=RootGroup,
    name="cafleet",
    help=ROOT_HELP,
    context_settings=CONTEXT_SETTINGS,
    invoke_without_command=True,
    command_modules={
        "setup": "cafleet.cli.setup_cmd",
        "doctor": "cafleet.cli.doctor",
        "server": "cafleet.cli.server_cmd",
        "export": "cafleet.cli.transfer_cmd",
        "import": "cafleet.cli.transfer_cmd",
        "search": "cafleet.cli.search_cmd",
        "hook": "cafleet.cli.hook_cmd",
    },
)
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Show the version and exit.",
)
@click.pass_context
def cli(ctx: click.Context) -> None:
    _print_help_if_bare(ctx)


@cli.group(
    "fleet",
    invoke_without_command=True,
    help="Create, list, show, delete, adopt and restore fleets.",
    command_modules=_modules(
        ("cafleet.cli.fleet_create", "create"),
        ("cafleet.cli.fleet", "list"),
        ("cafleet.cli.fleet_show", "show"),
        ("cafleet.cli.fleet_delete", "delete"),
        ("cafleet.cli.recovery", "adopt", "restore"),
        ("cafleet.cli.notify_cmd", "budget"),
    ),
)
@click.pass_context
def fleet_group(ctx: click.Context) -> None:
    _print_help_if_bare(ctx)


@cli.group(
    "member",
    invoke_without_command=True,
    help=(
        "Create, list, inspect, prompt, answer, respawn and delete the members of a fleet, and "
        "show what each has used."
    ),
    command_modules=_modules(
        ("cafleet.cli.member_panes", "create", "delete", "capture", "prompt", "ping", "answer"),
        ("cafleet.cli.recovery", "respawn"),
        ("cafleet.cli.member", "list", "show"),
        ("cafleet.cli.hook_cmd", "explain"),
        ("cafleet.cli.usage", "usage"),
        ("cafleet.cli.notify_cmd", "budget", "resume"),
        ("cafleet.cli.review_cmd", "diff"),
    ),
)
@click.pass_context
def member_group(ctx: click.Context) -> None:
    _print_help_if_bare(ctx)


@cli.group(
    "worktree",
    invoke_without_command=True,
    help="List the git worktrees cafleet made for members, and remove one left behind.",
    command_modules=_modules(("cafleet.cli.worktree_cmd", "list", "remove")),
)
@click.pass_context
def worktree_group(ctx: click.Context) -> None:
    _print_help_if_bare(ctx)


@cli.group(
    "message",
    invoke_without_command=True,
    help="Send, read, acknowledge and wait for messages.",
    command_modules={
        "send": "cafleet.cli.message_delivery",
        "broadcast": "cafleet.cli.message_delivery",
        "poll": "cafleet.cli.message",
        "ack": "cafleet.cli.message",
        "show": "cafleet.cli.message",
        "history": "cafleet.cli.message_inbox",
        "wait": "cafleet.cli.message_inbox",
        "stream": "cafleet.cli.message_inbox",
        "thread": "cafleet.cli.task_cmd",
    },
)
@click.pass_context
def message_group(ctx: click.Context) -> None:
    _print_help_if_bare(ctx)


@cli.group(
    "task",
    invoke_without_command=True,
    help=(
        "The fleet's work: create, assign, claim, finish, block, reopen and cancel tasks; "
        "review and merge their branches."
    ),
    command_modules=_modules(
        (
            "cafleet.cli.task_cmd",
            "create",
        ),
        ("cafleet.cli.task_list_cmd", "list"),
        (
            "cafleet.cli.task_cmd",
            "show",
            "assign",
            "claim",
            "done",
            "block",
            "reopen",
            "cancel",
        ),
        ("cafleet.cli.review_cmd", "diff", "merge", "gate"),
    ),
)
@click.pass_context
def task_group(ctx: click.Context) -> None:
    _print_help_if_bare(ctx)


@cli.group(
    "notify",
    invoke_without_command=True,
    help="Send a fleet's events to webhooks, ntfy, Slack or the desktop.",
    command_modules=_modules(("cafleet.cli.notify_cmd", "add", "list", "remove", "test")),
)
@click.pass_context
def notify_group(ctx: click.Context) -> None:
    _print_help_if_bare(ctx)


# --- the two-form `monitor` group --------------------------------------------------------------


class MonitorLoopCommand(CafleetCommand):
    """The hidden loop form of `cafleet monitor`.

    Its context takes the monitor group's place in the chain (same info name, the group's parent
    as parent), so usage errors read `Usage: cafleet monitor [OPTIONS] FLEET_ID` and the `Try`
    line names `cafleet monitor`.
    """

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        if parent is not None:
            info_name, parent = parent.info_name, parent.parent
        return super().make_context(info_name, args, parent=parent, **extra)


class MonitorGroup(CafleetGroup):
    """`cafleet monitor FLEET_ID …` (loop form) and `cafleet monitor scan FLEET_ID …`.

    When the first argument is neither a visible subcommand (`scan`) nor a help option, the
    hidden loop command is put in front of the arguments, so options may come before or after
    FLEET_ID. Fleet ids are integers, so `scan` is never ambiguous.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("no_args_is_help", False)
        super().__init__(*args, **kwargs)

    @property
    def loop_command(self) -> click.Command | None:
        return self.load_command(LOOP_COMMAND_NAME)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if self.loop_command is not None and (
            not args
            or (args[0] not in ctx.help_option_names and not self._is_visible_subcommand(args[0]))
        ):
            if args and self._near_subcommands(args[0]):
                # `cafleet monitor sacn 1` is a typo of `scan`, not a fleet id named "sacn".
                raise click.exceptions.NoSuchCommand(
                    args[0], possibilities=self._near_subcommands(args[0]), ctx=ctx
                )
            args = [LOOP_COMMAND_NAME, *args]
        return super().parse_args(ctx, args)

    def _near_subcommands(self, word: str) -> list[str]:
        if word.startswith("-") or word.strip().isdigit():
            return []
        import difflib  # only on this error path: keeps it off every command's start-up

        visible = [n for n in self.command_modules if n != LOOP_COMMAND_NAME]
        visible += [n for n, c in self.commands.items() if not c.hidden and n not in visible]
        return difflib.get_close_matches(word, visible)

    def _is_visible_subcommand(self, name: str) -> bool:
        cmd = self.load_command(name)
        return cmd is not None and not cmd.hidden

    def _loop_context(self, ctx: click.Context) -> click.Context:
        loop = self.loop_command
        assert loop is not None
        return click.Context(loop, info_name=ctx.info_name, parent=ctx.parent)

    def format_usage(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        loop = self.loop_command
        if loop is None:
            super().format_usage(ctx, formatter)
            return
        loop_ctx = self._loop_context(ctx)
        formatter.write_usage(ctx.command_path, " ".join(loop.collect_usage_pieces(loop_ctx)))
        for name in self.list_commands(ctx):
            cmd = self.commands[name]
            if cmd.hidden:
                continue
            sub_ctx = click.Context(cmd, info_name=name, parent=ctx)
            formatter.write_usage(
                f"{ctx.command_path} {name}",
                " ".join(cmd.collect_usage_pieces(sub_ctx)),
                prefix="       ",
            )

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        loop = self.loop_command
        if loop is None:
            super().format_help(ctx, formatter)
            return
        loop_ctx = self._loop_context(ctx)
        self.format_usage(ctx, formatter)
        self.format_help_text(ctx, formatter)
        loop.format_arguments(loop_ctx, formatter)
        loop.format_options(loop_ctx, formatter)
        self.format_commands(ctx, formatter)
        self.format_epilog(ctx, formatter)


@cli.group(
    "monitor",
    cls=MonitorGroup,
    short_help="Run, start or stop a fleet's monitor loop, or scan its panes once.",
    command_modules={
        LOOP_COMMAND_NAME: "cafleet.cli.monitor_cmd",
        "scan": "cafleet.cli.monitor_cmd",
        "start": "cafleet.cli.monitor_cmd",
        "stop": "cafleet.cli.monitor_cmd",
    },
    help=(
        "Run a fleet's monitor loop (cafleet monitor FLEET_ID), start or stop it in the "
        "background (cafleet monitor start|stop FLEET_ID), scan its panes once "
        "(cafleet monitor scan FLEET_ID), or run this host's delivery loop (cafleet monitor "
        "host)."
    ),
)
def monitor_group() -> None:
    pass


@monitor_group.group(
    "host",
    invoke_without_command=True,
    short_help="Run, start, stop or show this host's delivery loop.",
    help=(
        "This host's delivery loop (a fleet across machines): it types the pending lines for "
        "panes on this host in fleets whose root Director is on another host."
    ),
    command_modules=_modules(("cafleet.cli.host_cmd", "run", "start", "stop", "status")),
)
@click.pass_context
def monitor_host_group(ctx: click.Context) -> None:
    _print_help_if_bare(ctx)


def monitor_loop_command(**attrs: Any) -> Callable[[Callable[..., Any]], click.Command]:
    """Register the monitor loop form: `@monitor_loop_command(help=…)` on its callback."""
    attrs.setdefault("cls", MonitorLoopCommand)
    attrs["hidden"] = True
    return monitor_group.command(LOOP_COMMAND_NAME, **attrs)
