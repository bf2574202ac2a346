"""`cafleet.errors.error_text`: the one rendering of an exception as user-facing text."""

from __future__ import annotations

import sqlite3

from sqlalchemy.exc import OperationalError

from cafleet.errors import CafleetError, error_text


def test_sqlalchemy_errors_quote_the_sqlite_error_only() -> None:
    wrapped = OperationalError("INSERT ...", {}, sqlite3.OperationalError("disk I/O error"))
    assert "INSERT" in str(wrapped)  # what the user must not see
    assert error_text(wrapped) == "disk I/O error"


def test_other_errors_read_as_str_or_their_type_name() -> None:
    assert error_text(CafleetError("fleet 3 not found")) == "fleet 3 not found"
    assert error_text(ValueError()) == "ValueError"
    assert error_text(KeyError("k")) == "'k'"


def test_an_orig_that_is_no_exception_is_ignored() -> None:
    class Odd(Exception):
        orig = "not an exception"

    assert error_text(Odd("shown")) == "shown"
