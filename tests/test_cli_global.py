"""docs/cli.md §1: entry point, --version, help, bare groups, imports, --json placement, ids,
environment variables, exit-code mapping (§4 items 1–7, 11–14, 21, 76)."""

from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path

import click
import pytest

import cafleet
from cafleet.cli.app import LOOP_COMMAND_NAME, cli
from cafleet.db.shapes import HEAD_VERSION
from tests.cli_helpers import (
    FORBIDDEN_ALWAYS,
    assert_unchanged,
    call_main,
    call_run,
    imported_after,
    run_cli,
    snapshot,
)
from tests.factories import Db


def walk(
    cmd: click.Command, path: tuple[str, ...] = ()
) -> list[tuple[tuple[str, ...], click.Command]]:
    found = [(path, cmd)]
    if isinstance(cmd, click.Group):
        ctx = click.Context(cmd)
        for name in cmd.list_commands(ctx):
            sub = cmd.get_command(ctx, name)
            assert sub is not None, (path, name)
            if sub.hidden:
                continue
            found += walk(sub, (*path, name))
    return found


ALL_PATHS = [path for path, _ in walk(cli)]


def _loop_registered() -> bool:
    from cafleet.cli.app import monitor_group

    return monitor_group.loop_command is not None  # type: ignore[attr-defined]


needs_loop = pytest.mark.skipif(
    not _loop_registered(), reason="the monitor loop form is registered by a later issue"
)


# --- 1. --version -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "env",
    [
        {},
        {"CAFLEET_MAX_TEXT_LEN": "abc"},
        {"CAFLEET_DATABASE_URL": "mysql://x"},
    ],
)
def test_version(env: dict[str, str], db_path: Path) -> None:
    code, out, err = run_cli("--version", env=env)
    assert (code, out, err) == (0, f"cafleet {cafleet.__version__}\n", "")
    assert not db_path.parent.exists()


def test_version_in_process() -> None:
    assert call_main(["--version"]) == (0, f"cafleet {cafleet.__version__}\n", "")


def test_no_version_command() -> None:
    code, _out, err = call_main(["version"])
    assert code == 2
    assert "version" in err


# --- 2. help everywhere, bare groups ------------------------------------------------------------


@pytest.mark.parametrize("flag", ["-h", "--help"])
def test_help_everywhere(flag: str, db_path: Path) -> None:
    for path in ALL_PATHS:
        code, out, err = call_main([*path, flag])
        assert code == 0, (path, err)
        assert out.startswith("Usage: cafleet"), (path, out)
        assert err == ""
    assert not db_path.parent.exists()


def test_help_walk_every_parameter_has_help() -> None:
    for path, cmd in walk(cli):
        assert cmd.help, path
        # The root's settings (help options -h/--help): Click caches a command's help option
        # on first use, so a bare Context here would leave `-h` unknown for later in-process
        # tests in this worker.
        ctx = click.Context(cmd, info_name=" ".join(("cafleet", *path)), **cli.context_settings)
        for param in cmd.get_params(ctx):
            assert getattr(param, "help", None), (path, param.name)


def test_help_lists_positional_arguments() -> None:
    """76: every command's --help lists its positional arguments with their help."""
    for path, cmd in walk(cli):
        arguments = [p for p in cmd.params if isinstance(p, click.Argument)]
        if not arguments:
            continue
        code, out, _ = call_main([*path, "--help"])
        assert code == 0
        for argument in arguments:
            metavar = argument.human_readable_name
            assert any(
                line.strip().startswith(metavar) and argument.help in " ".join(out.split())
                for line in out.splitlines()
            ), (path, metavar, out)


def test_root_help_summary() -> None:
    code, out, _ = call_main(["--help"])
    assert code == 0
    flat = " ".join(out.split())
    assert (
        "cafleet — message broker and member registry for fleets of coding agents in tmux." in flat
    )
    for name in ("setup", "doctor", "fleet", "member", "message", "monitor"):
        assert f"\n  {name} " in out


@pytest.mark.parametrize("group", [(), ("fleet",), ("member",), ("message",)])
def test_bare_groups_print_help_on_stdout(group: tuple[str, ...], db_path: Path) -> None:
    code, out, err = run_cli(*group)
    assert code == 0
    assert err == ""
    assert out.startswith("Usage: cafleet")
    assert "Commands:" in out
    _, help_out, _ = run_cli(*group, "--help")
    assert out == help_out
    assert not db_path.parent.exists()


@needs_loop
def test_bare_monitor_is_usage_error() -> None:
    code, out, err = run_cli("monitor")
    assert code == 2
    assert out == ""
    assert err.startswith("Usage: cafleet monitor [OPTIONS] FLEET_ID\n")
    assert "FLEET_ID" in err.splitlines()[-1]


@needs_loop
@pytest.mark.parametrize(
    "args",
    [("monitor",), ("monitor", "x"), ("monitor", "--tick", "0", "3"), ("monitor", "3", "4")],
)
def test_monitor_loop_form_usage_errors(args: tuple[str, ...]) -> None:
    """76: the loop form's usage line and Try line name `cafleet monitor`, never the hidden
    command."""
    code, out, err = call_main(list(args))
    assert code == 2
    lines = err.splitlines()
    assert lines[0] == "Usage: cafleet monitor [OPTIONS] FLEET_ID"
    assert lines[1].startswith("Try 'cafleet monitor ")
    assert LOOP_COMMAND_NAME not in out + err


@needs_loop
def test_monitor_help_shows_both_forms() -> None:
    for args in (["monitor", "--help"], ["monitor", "-h"]):
        code, out, _ = call_main(args)
        assert code == 0
        lines = out.splitlines()
        assert lines[0] == "Usage: cafleet monitor [OPTIONS] FLEET_ID"
        assert lines[1].strip().startswith("cafleet monitor scan [OPTIONS] FLEET_ID")
        assert "--tick" in out and "scan" in out
        assert LOOP_COMMAND_NAME not in out
    code, out, _ = call_main(["monitor", "3", "--help"])
    assert code == 0
    assert out.startswith("Usage: cafleet monitor [OPTIONS] FLEET_ID\n")
    assert LOOP_COMMAND_NAME not in out


# --- 3, 4. imports ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [["--version"], ["fleet", "--help"], ["message", "poll", "abc"], ["--help"], ["fleet"]],
)
def test_light_paths_import_nothing_heavy(argv: list[str]) -> None:
    code, found = imported_after(argv)
    assert code in (0, 2)
    assert found == []


@pytest.mark.parametrize(
    "argv",
    [
        ["message", "poll", "1"],
        ["message", "ack", "1"],
        ["message", "show", "1"],
        ["fleet", "list"],
        ["fleet", "show", "1"],
        ["fleet", "delete", "1", "--keep-panes"],
        ["member", "list", "1"],
        ["member", "show", "1"],
        ["setup"],
    ],
)
def test_database_commands_import_neither_alembic_nor_libtmux(
    head_db: Path, argv: list[str]
) -> None:
    with Db(head_db) as db:
        fleet = db.fleet()
        worker = db.member(fleet.fleet.fleet_id)
        db.send(fleet.director.member_id, worker.member_id, "hi")
    code, found = imported_after(argv, modules=(*FORBIDDEN_ALWAYS, "cafleet.db.runtime"))
    assert code == 0, argv
    assert "cafleet.db.runtime" in found  # sanity: the command did run against the database
    assert [
        m for m in found if m in ("alembic", "libtmux", "fastapi", "uvicorn", "starlette")
    ] == []


@pytest.mark.parametrize("argv", [["message", "poll", "{member}"], ["fleet", "list"]])
def test_short_read_commands_load_no_agent_monitor_or_locale(
    head_db: Path, argv: list[str]
) -> None:
    """The read path stays short (docs/performance.md §1.2): no agent package, no monitor module,
    and no `locale` (the help option is built without gettext)."""
    with Db(head_db) as db:
        fleet = db.fleet()
        worker = db.member(fleet.fleet.fleet_id)
        db.send(fleet.director.member_id, worker.member_id, "hi")
    real = [str(worker.member_id) if a == "{member}" else a for a in argv]
    code, found = imported_after(
        real, modules=("cafleet.db.runtime", "cafleet.agents", "cafleet.monitor", "locale")
    )
    assert code == 0, real
    assert found == ["cafleet.db.runtime"]  # it did read the database, and loaded none of them


# The short commands (docs/architecture.md §2): the runtime runs the catalog's compiled statements on the
# standard library's sqlite3, so neither SQLAlchemy nor Alembic is imported.
SHORT_COMMANDS = [
    ["message", "poll", "{worker}"],
    ["message", "ack", "{message}"],
    ["message", "show", "{message}"],
    ["message", "send", "--from-member-id", "{director}", "--to-member-id", "{worker}", "x"],
    ["member", "list", "{fleet}"],
    ["fleet", "list"],
    ["message", "wait", "{worker}", "--timeout", "0"],
]


@pytest.mark.parametrize("argv", SHORT_COMMANDS)
def test_short_commands_import_neither_sqlalchemy_nor_alembic(
    head_db: Path, argv: list[str]
) -> None:
    with Db(head_db) as db:
        fleet = db.fleet()
        worker = db.member(fleet.fleet.fleet_id)
        sent = db.send(fleet.director.member_id, worker.member_id, "hi")
    ids = {
        "fleet": fleet.fleet.fleet_id,
        "worker": worker.member_id,
        "director": fleet.director.member_id,
        "message": sent.message_id,
    }
    code, found = imported_after(
        [a.format(**ids) for a in argv],
        modules=("sqlalchemy", "alembic", "logging", "cafleet.db.runtime"),
    )
    assert code == 0, argv
    # It ran against the database, without either, nor logging (~3 ms, docs/performance.md).
    assert found == ["cafleet.db.runtime"]


# Every module under cafleet/cli that registers a command, found from the source: a module the
# groups' `command_modules` maps forgot would never be imported, and its commands would vanish.
_REGISTERS = re.compile(r"^@((cli|\w+_group)\.command|monitor_loop_command)\(", re.M)
ALL_COMMAND_MODULES = tuple(
    sorted(
        f"cafleet.cli.{path.stem}"
        for path in (Path(cafleet.__file__).parent / "cli").glob("*.py")
        if _REGISTERS.search(path.read_text(encoding="utf-8"))
    )
)


def test_every_group_maps_each_command_to_the_module_that_registers_it() -> None:
    from cafleet.cli.app import CafleetGroup

    groups = [(p, c) for p, c in walk(cli) if isinstance(c, CafleetGroup)]
    seen: set[str] = set()
    for path, group in groups:
        ctx = click.Context(group)
        group.list_commands(ctx)  # loads every mapped module
        for name, module in group.command_modules.items():
            command = group.commands[name]
            assert command.callback is not None
            assert command.callback.__module__ == module, (path, name)
            seen.add(module)
        for name, command in group.commands.items():
            if isinstance(command, click.Group):
                assert name not in group.command_modules  # groups are built in app.py
            else:
                assert name in group.command_modules, (path, name)
    assert len(ALL_COMMAND_MODULES) == 24  # the scan itself found the modules
    assert sorted(seen) == list(ALL_COMMAND_MODULES)


@pytest.mark.parametrize(
    ("argv", "loaded"),
    [
        (["message", "ack", "1"], ["cafleet.cli.message"]),
        (["message", "send", "--from-member-id", "1", "--to-member-id", "2", "x"],
         ["cafleet.cli.message_delivery"]),
        (["fleet", "list"], ["cafleet.cli.fleet"]),
        (["member", "list", "1"], ["cafleet.cli.member"]),
        (["member", "respawn", "1"], ["cafleet.cli.recovery"]),
        (["setup"], ["cafleet.cli.setup_cmd"]),
        (["--version"], []),
        (["message", "--help"],
         ["cafleet.cli.message", "cafleet.cli.message_delivery", "cafleet.cli.message_inbox",
          "cafleet.cli.task_cmd", "cafleet.cli.task_list_cmd"]),
        (["task", "list", "--fleet-id", "1"], ["cafleet.cli.task_list_cmd"]),
        (["search", "x"], ["cafleet.cli.search_cmd"]),
    ],
)  # fmt: skip
def test_a_command_imports_only_its_own_command_module(
    head_db: Path, argv: list[str], loaded: list[str]
) -> None:
    """Command modules are imported on first lookup (start-up cost, docs/cli.md §1.8)."""
    code, found = imported_after(argv, modules=ALL_COMMAND_MODULES)
    assert code in (0, 1), argv  # 1: the ids name nothing; the command still ran
    assert found == sorted(loaded)


def test_task_list_imports_neither_the_send_path_nor_the_task_changes(head_db: Path) -> None:
    """The board is one read: `task list` of 1,000 tasks is measured against the floor
    (docs/performance.md §22)."""
    heavy = ("cafleet.broker.messages", "cafleet.broker.tasks", "cafleet.workflows.messaging")
    code, found = imported_after(["task", "list", "--fleet-id", "1"], modules=heavy)
    assert code in (0, 1)
    assert found == []


def test_doctor_never_imports_alembic(head_db: Path) -> None:
    code, found = imported_after(["doctor"])
    assert code == 1  # outside tmux
    assert "alembic" not in found
    assert "fastapi" not in found and "uvicorn" not in found


def test_setup_on_missing_file_may_import_alembic(db_path: Path) -> None:
    code, found = imported_after(["setup"])
    assert code == 0
    assert "alembic" in found  # sanity check of the probe itself
    assert "libtmux" not in found


def test_import_cafleet_is_stdlib_only() -> None:
    code, found = imported_after(["--version"], modules=(*FORBIDDEN_ALWAYS, "click"))
    assert code == 0
    assert found == ["click"]


# --- 5, 6, 7. --json placement, ids, role options --------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["--json", "fleet", "list"],
        pytest.param(["monitor", "1", "--json"], marks=needs_loop),
    ],
)
def test_json_in_the_wrong_place(argv: list[str], db_path: Path) -> None:
    code, out, err = call_main(argv)
    assert code == 2
    assert out == ""
    assert "--json" in err
    assert not db_path.parent.exists()


def test_fleet_list_json_is_an_array(head_db: Path) -> None:
    code, out, err = call_main(["fleet", "list", "--json"])
    assert (code, out, err) == (0, "[]\n", "")


@pytest.mark.parametrize("command", [["member", "show"], ["message", "ack"], ["fleet", "show"]])
@pytest.mark.parametrize("value", [None, "abc", "0", "-1", "9223372036854775808"])
def test_bad_ids_are_usage_errors(command: list[str], value: str | None, db_path: Path) -> None:
    argv = command if value is None else [*command, value]
    code, out, err = call_main(argv)
    assert code == 2, err
    assert out == ""
    lines = err.splitlines()
    assert lines[0].startswith(f"Usage: cafleet {' '.join(command)} ")
    assert lines[-1].startswith("Error: ")
    named = "-1" if value == "-1" else command_argument(command)
    assert named in lines[-1]
    assert not db_path.parent.exists()


def command_argument(command: list[str]) -> str:
    return {"member": "MEMBER_ID", "message": "MESSAGE_ID", "fleet": "FLEET_ID"}[command[0]]


def test_largest_id_is_accepted(head_db: Path) -> None:
    code, _out, err = call_main(["member", "show", "9223372036854775807"])
    assert (code, err) == (1, "Error: member 9223372036854775807 not found\n")


def test_extra_argument_is_usage_error(db_path: Path) -> None:
    code, _out, err = call_main(["message", "poll", "3", "4"])
    assert code == 2
    assert "4" in err.splitlines()[-1]


@pytest.mark.parametrize(
    "argv",
    [
        ["member", "list", "--fleet-id", "1", "1"],
        ["message", "send", "--fleet-id", "1"],
        ["fleet", "show", "--fleet-id", "1", "1"],
        ["member", "show", "--member-id", "1"],
        ["message", "poll", "--member-id", "1"],
        ["fleet", "list", "--member-id", "1"],
    ],
)
def test_role_id_options_elsewhere_are_unknown(argv: list[str], db_path: Path) -> None:
    if tuple(argv[:2]) not in ALL_PATHS:
        pytest.skip(f"'{' '.join(argv[:2])}' is built by a later issue")
    code, _out, err = call_main(argv)
    assert code == 2
    assert ("--fleet-id" in err) or ("--member-id" in err)


def test_usage_error_precedes_the_guard(db_path: Path) -> None:
    """21: a usage error with no database exits 2 (parse precedes the guard)."""
    code, _out, err = run_cli("fleet", "show", "zero")
    assert code == 2
    assert "no cafleet database" not in err
    assert not db_path.parent.exists()


def test_unknown_later_wave_commands_are_usage_errors() -> None:
    for argv in (["member", "exec", "1"], ["version"]):
        assert call_main(argv)[0] == 2


# --- 11–14. environment variables ---------------------------------------------------------------


@pytest.mark.parametrize("value", ["abc", "-1", "1.5", " 5"])
def test_bad_max_text_len(value: str, head_db: Path) -> None:
    before = snapshot(head_db)
    code, out, err = run_cli("message", "poll", "1", env={"CAFLEET_MAX_TEXT_LEN": value})
    assert (code, out) == (1, "")
    assert err == f"Error: CAFLEET_MAX_TEXT_LEN must be a non-negative integer (got '{value}')\n"
    assert_unchanged(before, head_db)


def test_empty_max_text_len_is_unset(head_db: Path) -> None:
    with Db(head_db) as db:
        fleet = db.fleet()
        db.send(fleet.director.member_id, fleet.director.member_id, "x" * 300)
    code, out, err = run_cli("message", "ack", "1", env={"CAFLEET_MAX_TEXT_LEN": ""})
    assert code == 0, err
    assert out.splitlines()[2] == "x" * 200 + "… (+100 characters: cafleet message show 1)"


@pytest.mark.parametrize("name", ["CAFLEET_MONITOR_WAKE_INTERVAL", "CAFLEET_PANE_LOCK_TIMEOUT"])
def test_bad_integer_variables(name: str, head_db: Path) -> None:
    code, out, err = run_cli("fleet", "list", env={name: "x"})
    assert (code, out) == (1, "")
    assert err == f"Error: {name} must be a non-negative integer (got 'x')\n"


def test_first_invalid_variable_in_table_order(head_db: Path) -> None:
    code, _out, err = run_cli(
        "fleet",
        "list",
        env={"CAFLEET_PANE_LOCK_TIMEOUT": "y", "CAFLEET_MAX_TEXT_LEN": "x"},
    )
    assert code == 1
    assert err == "Error: CAFLEET_MAX_TEXT_LEN must be a non-negative integer (got 'x')\n"


@pytest.mark.parametrize("value", ["screen", "herdr"])
def test_multiplexer_variable_is_not_read(value: str, head_db: Path) -> None:
    with Db(head_db) as db:
        db.fleet("alpha")
    plain = run_cli("fleet", "list")
    assert plain[0] == 0
    assert run_cli("fleet", "list", env={"CAFLEET_MULTIPLEXER": value}) == plain


@pytest.mark.parametrize(
    ("url", "message"),
    [
        (
            "mysql:///x",
            "database URL must use the sqlite scheme (sqlite:///<absolute path>) or postgresql "
            "(postgresql://<host>/<database>); got 'mysql:///x'",
        ),
        (
            "sqlite://",
            "database URL must use the sqlite scheme (sqlite:///<absolute path>) or postgresql "
            "(postgresql://<host>/<database>); got 'sqlite://'",
        ),
        ("sqlite:///", "database URL has no file path"),
        (
            "sqlite:///rel.db",
            "database URL must name an absolute file path; got 'sqlite:///rel.db'",
        ),
        (
            "sqlite:///~/x.db",
            "database URL must name an absolute file path; got 'sqlite:///~/x.db'",
        ),
    ],
)
def test_bad_database_urls(url: str, message: str) -> None:
    code, out, err = run_cli("fleet", "list", env={"CAFLEET_DATABASE_URL": url})
    assert (code, out, err) == (1, "", f"Error: {message}\n")


def test_home_unset(tmp_path: Path) -> None:
    code, out, err = run_cli(
        "member", "list", "1", env={"CAFLEET_DATABASE_URL": None, "HOME": None}
    )
    assert (code, out) == (1, "")
    assert err == "Error: HOME is not set; cannot derive the default database path\n"
    code, _out, err = run_cli("setup", env={"CAFLEET_DATABASE_URL": "", "HOME": ""})
    assert err == "Error: HOME is not set; cannot derive the default database path\n"


def test_default_path_under_home(tmp_path: Path) -> None:
    home = tmp_path / "home"
    code, out, _ = run_cli("setup", env={"CAFLEET_DATABASE_URL": "", "HOME": str(home)})
    path = home / ".local" / "share" / "cafleet" / "cafleet.db"
    assert code == 0
    assert out.split("\n")[0] == (
        f"Created {path} and applied migrations to head ({HEAD_VERSION})."
    )
    assert f"claude: {home / '.claude'} (default ~/.claude): installed cafleet" in out


# --- main's mapping (docs/cli.md §1.4) ------------------------------------------------------------


@pytest.fixture
def test_commands():
    """Temporarily add hidden commands to the real root group to exercise main's mapping."""
    added: list[str] = []

    def add(name: str, callback, params: tuple[click.Parameter, ...] = ()) -> None:
        cli.add_command(click.Command(name, callback=callback, hidden=True, params=list(params)))
        added.append(name)

    yield add
    for name in added:
        cli.commands.pop(name, None)


def test_an_unexpected_exception_is_a_bug_not_a_user_error(test_commands) -> None:
    """docs/cli.md §1.4: anything unmapped prints `internal error: <type>: <text>` and how to get
    the traceback, exit 70; CAFLEET_DEBUG=1 prints the traceback."""

    def lookup() -> None:
        row: dict[str, int] = {}
        row["member_id"] += 1  # the bug

    def boom() -> None:
        raise RuntimeError("boom happened")

    test_commands("_lookup", lookup)
    test_commands("_boom", boom)
    json_flag = click.Option(["--json", "as_json"], is_flag=True)
    test_commands("_lookup_json", lambda as_json: lookup(), (json_flag,))
    hint = (
        "This is a bug in cafleet; run the command again with CAFLEET_DEBUG=1 to see its "
        "traceback.\n"
    )
    assert call_main(["_lookup"]) == (70, "", "internal error: KeyError: 'member_id'\n" + hint)
    assert call_main(["_boom"]) == (70, "", "internal error: RuntimeError: boom happened\n" + hint)
    code, out, err = call_main(["_lookup_json", "--json"])
    assert (code, out) == (70, "")
    assert json.loads(err) == {
        "error": {
            "code": "internal",
            "message": "internal error: KeyError: 'member_id' (a bug in cafleet; CAFLEET_DEBUG=1 "
            "prints its traceback)",
        }
    }
    debug = call_run("_lookup", env={"CAFLEET_DEBUG": "1"})
    assert (debug.returncode, debug.stdout) == (70, "")
    lines = debug.stderr.splitlines()
    assert lines[0] == "Traceback (most recent call last):"
    assert 'row["member_id"] += 1  # the bug' in debug.stderr
    assert lines[-2:] == ["KeyError: 'member_id'", "internal error: KeyError: 'member_id'"]


def test_mapped_failures_keep_their_texts_and_codes(test_commands) -> None:
    """The exceptions §1.4 maps are not bugs: an OSError, an SQLite error, EPIPE."""
    import sqlite3

    def missing_file() -> None:
        open("/nonexistent-dir/x")  # noqa: SIM115

    def locked() -> None:
        raise sqlite3.OperationalError("database is locked")

    def epipe() -> None:
        raise BrokenPipeError(32, "Broken pipe")

    test_commands("_missing_file", missing_file)
    test_commands("_locked", locked)
    test_commands("_epipe", epipe)
    code, _out, err = call_main(["_missing_file"])
    assert (code, err) == (
        1,
        "Error: cannot use /nonexistent-dir/x: no such file or directory; create the missing "
        "directory or fix the path\n",
    )
    assert call_main(["_locked"]) == (1, "", "Error: database is locked\n")
    assert call_main(["_epipe"])[0] == 141


def test_cafleet_errors_print_their_text(test_commands) -> None:
    from cafleet.broker.errors import MemberNotFound

    def missing() -> None:
        raise MemberNotFound(5)

    test_commands("_missing", missing)
    assert call_main(["_missing"]) == (1, "", "Error: member 5 not found\n")


@pytest.mark.parametrize(("signum", "expected"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_replaces_exit_code(test_commands, signum: int, expected: int) -> None:
    def finishes() -> None:
        os.kill(os.getpid(), signum)
        click.echo("done")

    def interrupted() -> None:
        from cafleet import signals

        os.kill(os.getpid(), signum)
        signals.check()
        click.echo("never")

    test_commands("_finishes", finishes)
    test_commands("_interrupted", interrupted)
    assert call_main(["_finishes"]) == (expected, "done\n", "")
    assert call_main(["_interrupted"]) == (expected, "", "")


def test_usage_error_keeps_exit_2_after_signal(test_commands) -> None:
    def bad() -> None:
        os.kill(os.getpid(), signal.SIGINT)
        raise click.UsageError("nope")

    test_commands("_bad", bad)
    code, _out, err = call_main(["_bad"])
    assert code == 2
    assert err.endswith("Error: nope\n")
    assert "Aborted!" not in err and "Traceback" not in err


# --- the two-form monitor group, independent of the loop module ---------------------------------


def _toy_tree(calls: list[tuple[str, dict[str, object]]]) -> click.Group:
    from cafleet.cli.app import MonitorGroup, MonitorLoopCommand, RootGroup

    root = RootGroup("cafleet", context_settings={"help_option_names": ["-h", "--help"]})
    monitor = MonitorGroup("monitor", help="Loop or scan.")
    root.add_command(monitor)

    def loop(**kw: object) -> None:
        calls.append(("loop", kw))

    def scan(**kw: object) -> None:
        calls.append(("scan", kw))

    monitor.add_command(
        MonitorLoopCommand(
            LOOP_COMMAND_NAME,
            hidden=True,
            help="The loop.",
            callback=loop,
            params=[
                click.Argument(["fleet_id"], type=click.IntRange(1), help="Fleet ID."),
                click.Option(["--tick"], type=click.IntRange(1, 3600), help="Tick."),
            ],
        )
    )
    monitor.add_command(
        click.Command(
            "scan",
            help="Scan.",
            callback=scan,
            params=[click.Argument(["fleet_id"], type=int, help="Fleet ID.")],
        )
    )
    return root


def _run_toy(root: click.Group, args: list[str]) -> tuple[int, str]:
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stderr(buf), contextlib.redirect_stdout(buf):
        try:
            rv = root.main(args, prog_name="cafleet", standalone_mode=False)
        except click.UsageError as exc:
            exc.show()
            return 2, buf.getvalue()
    return (rv if isinstance(rv, int) else 0), buf.getvalue()


def test_monitor_group_machinery() -> None:
    calls: list[tuple[str, dict[str, object]]] = []
    root = _toy_tree(calls)
    assert _run_toy(root, ["monitor", "--tick", "2", "3"])[0] == 0
    assert _run_toy(root, ["monitor", "3", "--tick", "2"])[0] == 0
    assert _run_toy(root, ["monitor", "scan", "4"])[0] == 0
    assert calls == [
        ("loop", {"fleet_id": 3, "tick": 2}),
        ("loop", {"fleet_id": 3, "tick": 2}),
        ("scan", {"fleet_id": 4}),
    ]
    for args in (["monitor"], ["monitor", "x"], ["monitor", "--tick", "0", "3"]):
        code, text = _run_toy(root, args)
        assert code == 2
        lines = text.splitlines()
        assert lines[0] == "Usage: cafleet monitor [OPTIONS] FLEET_ID"
        assert lines[1].startswith("Try 'cafleet monitor ")
        assert LOOP_COMMAND_NAME not in text
    code, text = _run_toy(root, ["monitor", "-h"])
    assert code == 0
    assert text.splitlines()[:2] == [
        "Usage: cafleet monitor [OPTIONS] FLEET_ID",
        "       cafleet monitor scan [OPTIONS] FLEET_ID",
    ]
    assert "--tick" in text and LOOP_COMMAND_NAME not in text


@pytest.mark.parametrize("unbuffered", ["1", None])
@pytest.mark.parametrize("args", [("--version",), ("fleet",)])
def test_other_output_failures_are_runtime_errors(
    unbuffered: str | None, args: tuple[str, ...]
) -> None:
    import subprocess
    import sys

    from tests.cli_helpers import REPO_ROOT, cli_env

    with open("/dev/full", "wb") as full:
        proc = subprocess.run(
            [sys.executable, "-m", "cafleet", *args],
            stdout=full,
            stderr=subprocess.PIPE,
            env=cli_env({"PYTHONUNBUFFERED": unbuffered}),
            cwd=str(REPO_ROOT),
            timeout=60,
        )
    assert proc.returncode == 1
    assert proc.stderr == b"Error: cannot write output: No space left on device\n"


@pytest.mark.parametrize(
    ("value", "problem"),
    [("0", "a positive"), ("00", "a positive"), ("x", "a non-negative"), ("-1", "a non-negative")],
)
def test_bad_delivery_workers(value: str, problem: str, head_db: Path) -> None:
    """docs/cli.md §1.6: CAFLEET_DELIVERY_WORKERS is a positive integer; nothing is written."""
    before = snapshot(head_db)
    code, out, err = run_cli("fleet", "list", env={"CAFLEET_DELIVERY_WORKERS": value})
    assert (code, out) == (1, "")
    assert err == f"Error: CAFLEET_DELIVERY_WORKERS must be {problem} integer (got '{value}')\n"
    assert_unchanged(before, head_db)


def test_delivery_workers_setting() -> None:
    from cafleet.config import DEFAULT_DELIVERY_WORKERS, load_settings

    base = {"HOME": "/nonexistent"}
    assert load_settings(base).delivery_workers == DEFAULT_DELIVERY_WORKERS == 8
    assert load_settings({**base, "CAFLEET_DELIVERY_WORKERS": ""}).delivery_workers == 8
    assert load_settings({**base, "CAFLEET_DELIVERY_WORKERS": "1"}).delivery_workers == 1
