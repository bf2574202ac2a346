"""Rough edges of the command line, one test each (docs/cli.md §1.1, §1.5, §1.10, §2)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.cli_helpers import assert_unchanged, call_main, snapshot, stamp
from tests.factories import Db

T1 = datetime(2026, 5, 1, 12, 0, 0, tzinfo=UTC)


def test_a_non_numeric_id_is_refused_in_words(db_path: Path) -> None:
    """`member show abc` says what an id is, not Click's "not a valid integer range"."""
    code, out, err = call_main(["member", "show", "abc"])
    assert (code, out) == (2, "")
    assert err.splitlines()[-1] == (
        "Error: Invalid value for 'MEMBER_ID': 'abc' is not an id: ids are whole numbers from 1 "
        "to 9223372036854775807"
    )
    code, _out, err = call_main(["message", "send", "--from-member-id", "0", "--to-member-id", "1"])
    assert code == 2
    assert err.splitlines()[-1] == (
        "Error: Invalid value for '--from-member-id': 0 is not an id: ids are whole numbers from "
        "1 to 9223372036854775807"
    )
    assert not db_path.parent.exists()


@pytest.mark.parametrize(
    ("argv", "typo", "suggestion"),
    [
        (["fleet", "lst"], "lst", "list"),
        (["member", "shwo", "3"], "shwo", "show"),
        (["message", "pol", "3"], "pol", "poll"),
        (["monitor", "host", "stopp"], "stopp", "stop"),
        (["monitor", "sacn", "1"], "sacn", "scan"),
        (["monitor", "strat", "1"], "strat", "start"),
        (["flet"], "flet", "fleet"),
    ],
)
def test_a_mistyped_command_at_any_level_gets_a_suggestion(
    argv: list[str], typo: str, suggestion: str, db_path: Path
) -> None:
    """Below the top level too, though the group has not imported its commands yet."""
    code, out, err = call_main(argv)
    assert (code, out) == (2, "")
    assert err.splitlines()[-1] == f"Error: No such command '{typo}'. Did you mean '{suggestion}'?"


def test_monitor_still_reads_a_word_far_from_any_subcommand_as_a_bad_fleet_id(
    db_path: Path,
) -> None:
    code, _out, err = call_main(["monitor", "abc"])
    assert code == 2
    assert "'abc' is not an id" in err.splitlines()[-1]


def test_member_create_help_shows_the_prompt_as_optional() -> None:
    """PROMPT has a default (the bundled prompt), so the usage line brackets it; TEXT too."""
    for argv, usage in (
        (["member", "create"], "Usage: cafleet member create [OPTIONS] FLEET_ID [PROMPT]"),
        (["message", "send"], "Usage: cafleet message send [OPTIONS] [TEXT]"),
    ):
        code, out, _err = call_main([*argv, "--help"])
        assert (code, out.splitlines()[0]) == (0, usage)


FLEET_COMMANDS = [
    ["fleet", "show"],
    ["fleet", "delete"],
    ["fleet", "adopt"],
    ["fleet", "restore"],
    ["member", "list"],
    ["monitor", "scan"],
    ["monitor", "start"],
    ["monitor", "stop"],
    ["monitor"],
]


@pytest.mark.parametrize("command", FLEET_COMMANDS, ids=" ".join)
def test_every_command_takes_the_fleet_positionally_or_as_fleet_id(
    command: list[str], head_db: Path
) -> None:
    """`FLEET_ID` or `--fleet-id ID`, exactly one (docs/cli.md §1.5)."""
    before = snapshot(head_db)
    for form in (["999"], ["--fleet-id", "999"]):
        assert call_main([*command, *form]) == (1, "", "Error: fleet 999 not found\n"), form
    code, _out, err = call_main([*command, "--fleet-id", "999", "999"])
    assert (code, err.splitlines()[-1]) == (
        2,
        "Error: give either FLEET_ID or --fleet-id, not both",
    )
    code, _out, err = call_main(command if command != ["monitor"] else [*command, "--tick", "2"])
    assert (code, err.splitlines()[-1]) == (2, "Error: missing FLEET_ID or --fleet-id")
    assert_unchanged(before, head_db)


def test_member_create_takes_the_fleet_either_way_and_then_its_prompt(head_db: Path) -> None:
    """`member create 1 … PROMPT` and `member create --fleet-id 1 … PROMPT` read the same prompt
    (here one the placeholder check refuses, before anything is written or spawned)."""
    with Db(head_db) as db:
        fid = db.fleet("team").fleet.fleet_id
    before = snapshot(head_db)
    labels = ["--name", "w", "--description", "works"]
    refused = (
        "Error: unknown placeholder 'nope' in the spawn prompt; supported placeholders are "
        "{fleet_id}, {member_id}, {director_member_id}, {coding_agent}; write {{ and }} for "
        "literal braces"
    )
    for argv in (
        [str(fid), *labels, "{nope}"],
        ["--fleet-id", str(fid), *labels, "{nope}"],
        [*labels, "--fleet-id", str(fid), "{nope}"],
    ):
        code, _out, err = call_main(["member", "create", *argv])
        assert (code, err.splitlines()[-1]) == (2, refused), argv
    code, _out, err = call_main(["member", "create", "--fleet-id", str(fid), *labels, "1", "x"])
    assert (code, err.splitlines()[-1]) == (
        2,
        "Error: give either FLEET_ID or --fleet-id, not both",
    )
    assert call_main(["member", "create", "999", *labels]) == (
        1,
        "",
        "Error: fleet 999 not found\n",
    )
    assert_unchanged(before, head_db)


def test_message_wait_lists_oldest_first(head_db: Path) -> None:
    """What a wait prints comes in the order it arrived (poll stays newest first)."""
    with Db(head_db) as db:
        fleet = db.fleet("team")
        d = fleet.director.member_id
        w = db.member(fleet.fleet.fleet_id, "coder").member_id
        first = db.send(d, w, "first", now=T1).message_id
        second = db.send(d, w, "second", now=T1 + timedelta(seconds=1)).message_id
    code, out, err = call_main(["message", "wait", str(w), "--timeout", "0"])
    assert (code, err) == (0, "")
    assert out == (
        f"[{first} | from:Director ({d}) | {stamp(T1)}]\nfirst\n\n"
        f"[{second} | from:Director ({d}) | {stamp(T1 + timedelta(seconds=1))}]\nsecond\n"
    )
    code, out, _ = call_main(["message", "wait", str(w), "--timeout", "0", "--json"])
    assert [m["message_id"] for m in json.loads(out)] == [first, second]
    code, out, _ = call_main(["message", "poll", str(w), "--json"])
    assert [m["message_id"] for m in json.loads(out)] == [second, first]


def test_envelopes_show_the_send_time_and_the_senders_name(head_db: Path) -> None:
    """An ACKed message still shows when it was sent, and `from:` names the sender."""
    with Db(head_db) as db:
        fleet = db.fleet("team")
        w = db.member(fleet.fleet.fleet_id, "builder").member_id
        sent = db.send(w, fleet.director.member_id, "done", now=T1).message_id
    header = f"[{sent} | from:builder ({w}) | {stamp(T1)}]"
    code, out, _ = call_main(["message", "ack", str(sent)])
    assert (code, out) == (0, f"Message acknowledged.\n{header}\ndone\n")
    assert call_main(["message", "show", str(sent)]) == (0, f"{header}\ndone\n", "")


def test_a_deleted_fleets_loop_reads_stopped_not_never_started(head_db: Path) -> None:
    with Db(head_db) as db:
        fid = db.fleet("gone").fleet.fleet_id
    assert call_main(["fleet", "delete", str(fid), "--keep-panes"])[0] == 0
    code, out, _ = call_main(["fleet", "show", str(fid)])
    assert (code, [x for x in out.splitlines() if x.startswith("loop:")]) == (
        0,
        ["loop:       stopped (fleet deleted)"],
    )
    code, out, _ = call_main(["fleet", "show", str(fid), "--json"])
    assert json.loads(out)["loop"]["state"] == "stopped"
