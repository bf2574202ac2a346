"""The repository's documents stay true to the code: the generated CLI reference is current and
every test id `docs/seed-trace.md` cites is collected by pytest."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

from cafleet.cli import reference
from tests.cli_helpers import call_run

REPO = Path(__file__).resolve().parent.parent
SEED_TRACE = REPO / "docs" / "seed-trace.md"


# --- the generated CLI reference ---------------------------------------------------------------


def test_cli_reference_is_current() -> None:
    checked_in = reference.DEFAULT_OUTPUT.read_text(encoding="utf-8")
    assert checked_in == reference.render(), (
        "docs/cli-reference.md is stale; run: python -m cafleet.cli.reference --write"
    )


def test_cli_reference_is_each_commands_own_help() -> None:
    """Each section is exactly what `cafleet <path> --help` prints in a wide terminal."""
    paths = [path for path, _ctx in reference.command_paths()]
    assert ("monitor", "scan") in paths and ("message", "stream") in paths
    rendered = reference.render()
    for path in paths:
        result = call_run(*path, "--help", env={"COLUMNS": "120"})
        assert result.returncode == 0, path
        title = " ".join(("cafleet", *path))
        assert f"## {title}\n\n```text\n{result.stdout}```\n" in rendered, path


def test_reference_check_fails_on_a_stale_file(tmp_path: Path) -> None:
    target = tmp_path / "cli-reference.md"
    assert reference.main(["--check", "--output", str(target)]) == 1  # absent
    assert reference.main(["--write", "--output", str(target)]) == 0
    assert reference.main(["--check", "--output", str(target)]) == 0
    target.write_text(target.read_text(encoding="utf-8").replace("Fleet ID.", "Fleet id."))
    assert reference.main(["--check", "--output", str(target)]) == 1


# --- test ids cited by docs/seed-trace.md ------------------------------------------------------

_TEST_ID = re.compile(r"`(tests/[\w/]+\.py::\w+)`")


def cited_test_ids(markdown: str) -> set[str]:
    """The test ids in the table rows of a seed-trace document."""
    return {
        match.group(1)
        for line in markdown.splitlines()
        if line.startswith("|")
        for match in _TEST_ID.finditer(line)
    }


def collected_ids(lines: Iterable[str]) -> set[str]:
    """`path::name` of every item in `pytest --collect-only -q` output (parameters dropped)."""
    found = set()
    for line in lines:
        if "::" in line and not line.startswith(" "):
            found.add(line.strip().split("[", 1)[0])
    return found


def uncollected(cited: set[str], collected: set[str]) -> list[str]:
    return sorted(cited - collected)


def test_cited_ids_are_parsed_from_table_rows_only() -> None:
    text = (
        "- test ids (`tests/test_x.py::test_name`) go in the table\n"
        "| 1 | a | b | `tests/test_a.py::test_one`<br>`tests/test_b.py::test_two` | |\n"
    )
    assert cited_test_ids(text) == {"tests/test_a.py::test_one", "tests/test_b.py::test_two"}


def test_a_renamed_test_is_reported() -> None:
    listing = ["tests/test_a.py::test_one[x-1]", "tests/test_a.py::test_one[y-2]", "", "2 tests"]
    cited = {"tests/test_a.py::test_one", "tests/test_a.py::test_renamed"}
    assert uncollected(cited, collected_ids(listing)) == ["tests/test_a.py::test_renamed"]


def test_every_test_id_cited_by_seed_trace_is_collected() -> None:
    cited = cited_test_ids(SEED_TRACE.read_text(encoding="utf-8"))
    assert len(cited) > 100  # the parse itself found the table
    files = sorted({test_id.split("::", 1)[0] for test_id in cited})
    missing_files = [f for f in files if not (REPO / f).is_file()]
    assert missing_files == []
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *files],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert uncollected(cited, collected_ids(proc.stdout.splitlines())) == []
