"""Rough edges of the command line, one test each (docs/cli.md §1.1, §1.5, §1.10, §2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli_helpers import call_main


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
