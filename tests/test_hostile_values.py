"""Hostile files and values (docs/operations.md §2, docs/cli.md §1.5, §1.6): a FIFO or an
oversized file where cafleet reads one, numbers JSON should not hold, choices that only look like
numbers, ids and settings the database cannot hold, URLs with passwords, control characters in
what is shown or typed. Each is a clear refusal or the ordinary answer, never a hang, a traceback
or Python's own text."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cafleet.sessions import prices
from tests.cli_helpers import run_cli
from tests.factories import Db


def _price_file() -> Path:
    path = Path(os.environ["HOME"], ".config", "cafleet", "prices.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _usage(member_id: int) -> tuple[int, str, str]:
    # A hang is a failure here, not a stuck test: the command must answer within seconds.
    return run_cli("member", "usage", str(member_id), timeout=15)


def test_price_file_fifo_is_refused_without_hanging(head_db: Path) -> None:
    with Db(head_db) as db:
        fleet = db.fleet()
    path = _price_file()
    os.mkfifo(path)
    code, out, err = _usage(fleet.monitor.member_id)
    assert (code, out) == (1, "")
    assert err == f"Error: cannot read the price file {path}: not a regular file\n"


def test_price_file_too_large_is_refused(head_db: Path) -> None:
    with Db(head_db) as db:
        fleet = db.fleet()
    path = _price_file()
    path.write_text("{" + " " * prices.FILE_LIMIT + "}", encoding="utf-8")
    code, out, err = _usage(fleet.monitor.member_id)
    assert (code, out) == (1, "")
    assert err == (
        f"Error: cannot read the price file {path}: larger than {prices.FILE_LIMIT} bytes\n"
    )


@pytest.mark.parametrize(
    ("rate", "problem"),
    [
        ("NaN", "NaN is not a number JSON allows"),
        ("Infinity", "Infinity is not a number JSON allows"),
        ("-Infinity", "-Infinity is not a number JSON allows"),
        ("1e400", "1e400 is out of range"),
    ],
)
def test_price_that_is_not_a_finite_number_is_refused(
    head_db: Path, rate: str, problem: str
) -> None:
    """`--json` printed `NaN` (not JSON) for such a price."""
    with Db(head_db) as db:
        fleet = db.fleet()
    path = _price_file()
    path.write_text('{"gpt-5": {"input": ' + rate + "}}", encoding="utf-8")
    code, out, err = _usage(fleet.monitor.member_id)
    assert (code, out) == (1, "")
    assert err == f"Error: cannot read the price file {path}: {problem}\n"


def test_price_beyond_the_largest_rate_is_refused(tmp_path: Path) -> None:
    path = tmp_path / ".config" / "cafleet" / "prices.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"m": {"output": 10**400}}), encoding="utf-8")
    with pytest.raises(prices.PriceFileError) as caught:
        prices.load({"HOME": str(tmp_path)})
    assert str(caught.value) == (
        f"{path}: m.output must be a non-negative number of at most {prices.RATE_LIMIT}"
    )
    # The largest rate and any token count still give a finite estimate.
    path.write_text(json.dumps({"m": {"output": prices.RATE_LIMIT}}), encoding="utf-8")
    from cafleet.sessions import Tally

    tally = Tally()
    tally.add("m", (0, 10**18, 0, 0))
    estimate = prices.cost(tally, prices.load({"HOME": str(tmp_path)}))
    assert estimate is not None and estimate == float(prices.RATE_LIMIT) * 10**12


def test_session_record_fifo_is_unreadable_not_a_hang(tmp_path: Path) -> None:
    from cafleet.sessions import RecordUnreadable
    from cafleet.sessions.jsonl import head_objects, new_objects

    fifo = tmp_path / "session.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(RecordUnreadable, match="not a regular file"):
        list(new_objects(str(fifo), {}))
    assert list(head_objects(str(fifo))) == []
