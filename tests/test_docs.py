"""The repository's documents stay true to the code: the generated CLI reference and tables are
current, every cited section and test id exists, and `docs/*.md` stay within their words budget."""

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
    """Each section is exactly what `cafleet <path> --help` prints in a wide terminal: the root
    and every command (a group's help only lists the commands that follow it)."""
    import click

    paths = [
        path
        for path, ctx in reference.command_paths()
        if not path or not isinstance(ctx.command, click.Group)
    ]
    assert ("monitor", "scan") in paths and ("message", "stream") in paths
    assert ("monitor",) not in paths
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
    target.write_text(target.read_text(encoding="utf-8").replace("Member ID.", "Member id."))
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


# --- section references: `docs/<file>.md §N` ----------------------------------------------------

# Where references live; the landed Alembic revisions are frozen (their hashes are pinned), so they
# keep citing `storage.md §…`, read as docs/storage.md.
SCANNED_DIRS = ("cafleet", "tests", "benchmarks", "alembic", "docs", ".ci")
SCANNED_FILES = ("README.md", "alembic.ini", "pyproject.toml")
SCANNED_SUFFIXES = (".py", ".md", ".ini", ".toml", ".mako")
SKIPPED = ("tests/test_docs.py",)  # its own examples below
# The dated performance log is a record, not maintained: its cites are as they were written.
SKIPPED_DIRS = ("benchmarks/results/",)
FROZEN_DIR = "alembic/versions"
DOC_STEMS = ("README", "architecture", "cli", "cli-reference", "performance", "runtime")
DOC_STEMS += ("seed-trace", "storage")

_MD = re.compile(r"(?<![\w./<>-])((?:[\w.-]+/)*[\w-]+\.md)\b")
_AFTER_MD = re.compile(r"[`'\"]?\s*§")
_SECTION = re.compile(
    r"§(\d+(?:\.\d+)*)"  # the section
    r"(?:\s*[–-]\s*§?(\d+(?:\.\d+)*))?"  # a range's other end
    r"(?:\s+items?\s+((?:\d+(?:\s*[–-]\s*\d+)?)(?:(?:[\s#]*,[\s#]*|\s+and\s+)\d+(?:\s*[–-]\s*\d+)?)*))?"
)
_CONTINUES = re.compile(r"[\s#,;/–-]*(?:(?:and|or)[\s#]*)?")
_HEADING = re.compile(r"(#{1,6})\s+(\d+(?:\.\d+)*)[.\s]")
_ITEM = re.compile(r"(\d+)\.\s")


def scanned_files(root: Path) -> list[Path]:
    files = [root / name for name in SCANNED_FILES if (root / name).is_file()]
    for directory in SCANNED_DIRS:
        for path in sorted((root / directory).rglob("*")):
            rel = path.relative_to(root).as_posix()
            if not path.is_file() or "__pycache__" in rel or rel in SKIPPED:
                continue
            if rel.startswith(SKIPPED_DIRS):
                continue
            if path.suffix in SCANNED_SUFFIXES or rel == ".ci/run":
                files.append(path)
    return files


def outline(doc: Path) -> tuple[set[str], dict[str, set[int]]]:
    """A document's numbered headings, and the top-level numbered items under each of them."""
    headings: set[str] = set()
    items: dict[str, set[int]] = {}
    stack: list[tuple[int, str]] = []  # (level, number) of the headings enclosing the line
    fenced = False
    for line in doc.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        heading = _HEADING.match(line)
        if heading:
            level, number = len(heading.group(1)), heading.group(2)
            stack = [(lv, n) for lv, n in stack if lv < level] + [(level, number)]
            headings.add(number)
            items.setdefault(number, set())
            continue
        item = _ITEM.match(line)
        if item and stack:
            items[stack[-1][1]].add(int(item.group(1)))
    return headings, items


def _numbers(text: str | None) -> list[int]:
    found: list[int] = []
    for part in re.findall(r"\d+(?:\s*[–-]\s*\d+)?", text or ""):
        ends = [int(n) for n in re.findall(r"\d+", part)]
        found.extend(range(ends[0], ends[-1] + 1))
    return found


def reference_problems(root: Path, files: Iterable[Path] | None = None) -> list[str]:
    """Every reference to a `.md` file that is not in the repository, and every `§` section or
    acceptance item the cited document does not have, as `<file>:<line>: <problem>`.

    `doc.md §N` cites section N of doc.md (a path relative to the repository root or to a
    directory above the citing file). A `§N` right after another reference continues it
    (`§2.7, §2.10`, `§7.2; §9 items 16, 18`); any other `§N` means the document itself inside
    docs/, else the last document cited earlier in the same file.
    """
    problems: list[str] = []
    outlines: dict[Path, tuple[set[str], dict[str, set[int]]]] = {}
    for path in scanned_files(root) if files is None else files:
        rel = path.relative_to(root).as_posix()
        text = path.read_text(encoding="utf-8", errors="replace")
        search = [root, *(p for p in path.parents if root in p.parents)]
        if rel.startswith(FROZEN_DIR + "/"):
            search.append(root / "docs")
        in_docs = rel.startswith("docs/") and path.suffix == ".md"

        def where(pos: int, rel: str = rel, text: str = text) -> str:
            return f"{rel}:{text.count(chr(10), 0, pos) + 1}"

        events = [(m.start(), m) for m in _MD.finditer(text)]
        events += [(m.start(), m) for m in _SECTION.finditer(text)]
        last_cited: Path | None = path if in_docs else None
        token_end, token_doc = -1, None  # the last .md token
        ref_end, ref_doc = -1, None  # the last § reference
        for pos, match in sorted(events, key=lambda e: e[0]):
            if match.re is _MD:
                token = match.group(1)
                doc = next((d / token for d in search if (d / token).is_file()), None)
                cited = bool(_AFTER_MD.match(text, match.end()))
                # An installed file's path (`skills/cafleet/SKILL.md`) is not a reference to a document.
                if doc is None and (
                    cited or token.startswith("docs/") or Path(token).stem in DOC_STEMS
                ):
                    problems.append(f"{where(pos)}: {token} is not in the repository")
                token_end, token_doc = match.end(), doc
                if cited and doc is not None:
                    last_cited = doc
                continue
            if token_end >= 0 and _AFTER_MD.fullmatch(text, token_end, pos + 1):
                doc = token_doc
            elif ref_end >= 0 and _CONTINUES.fullmatch(text, ref_end, pos):
                doc = ref_doc
            else:
                doc = path if in_docs else last_cited
            ref_end, ref_doc = match.end(), doc
            if doc is None:
                if token_end < 0 or not _AFTER_MD.fullmatch(text, token_end, pos + 1):
                    problems.append(f"{where(pos)}: {match.group(0)} names no document")
                continue
            if doc not in outlines:
                outlines[doc] = outline(doc)
            headings, items = outlines[doc]
            shown = doc.relative_to(root).as_posix()
            for number in filter(None, (match.group(1), match.group(2))):
                if number not in headings:
                    problems.append(f"{where(pos)}: {shown} has no §{number}")
            for item in _numbers(match.group(3)):
                if item not in items.get(match.group(1), set()):
                    problems.append(f"{where(pos)}: {shown} §{match.group(1)} has no item {item}")
    return problems


def test_every_section_reference_resolves() -> None:
    assert reference_problems(REPO) == []


def test_reference_problems_are_found(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "guide.md").write_text(
        "# Guide\n\n## 1. One\n\n### 1.2 Two\n\nSee §1.2 and `docs/other.md` §3.\n\n"
        "```\n## 7. not a heading\n```\n\n## 9. Acceptance\n\n1. first\n2. second\n",
        encoding="utf-8",
    )
    code = tmp_path / "pkg" / "mod.py"
    code.parent.mkdir()
    code.write_text(
        '"""Cites docs/guide.md §1.2, §1; guide.md §1; docs/guide.md §9 items 1, 2\n'
        "and 3; §7; docs/guide.md §1–§2.\n"
        "Data, not references: tmp / 'nope.md', data/x.md, cli.md §1."
        '"""\n# §1.2 continues the last cited document\n',
        encoding="utf-8",
    )
    lone = tmp_path / "pkg" / "lone.py"
    lone.write_text("# a bare §4 with nothing cited before it\n", encoding="utf-8")
    found = reference_problems(tmp_path, [docs / "guide.md", code, lone])
    assert found == [
        "docs/guide.md:7: docs/other.md is not in the repository",
        "pkg/mod.py:1: guide.md is not in the repository",
        "pkg/mod.py:1: docs/guide.md §9 has no item 3",
        "pkg/mod.py:2: docs/guide.md has no §7",
        "pkg/mod.py:2: docs/guide.md has no §2",
        "pkg/mod.py:3: cli.md is not in the repository",
        "pkg/lone.py:1: §4 names no document",
    ]


# --- recorded benchmark results -----------------------------------------------------------------

RESULTS = REPO / "benchmarks" / "results"
RUN_OUTPUTS = ("latest.json", "smoke.json")  # what `python -m benchmarks` writes; not committed
_RESULT_REF = re.compile(r"[\w./-]*benchmark[\w./-]*\.json")


def result_references(root: Path) -> dict[str, list[str]]:
    """Every `...benchmark....json` path the docs, the README and the performance log name,
    with where each is named."""
    found: dict[str, list[str]] = {}
    logs = sorted((root / "benchmarks" / "results").glob("*.md"))
    for path in [root / "README.md", *sorted((root / "docs").glob("*.md")), *logs]:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for match in _RESULT_REF.finditer(line):
                found.setdefault(match.group(0), []).append(f"{path.name}:{number}")
    return found


def test_recorded_benchmark_results_live_in_benchmarks_results_and_are_cited() -> None:
    assert sorted(p.name for p in (REPO / "docs").glob("*.json")) == []
    refs = result_references(REPO)
    recorded = {p.name for p in RESULTS.glob("*.json")} - set(RUN_OUTPUTS)
    assert len(recorded) >= 10  # the glob found the recorded runs
    cited = {Path(ref).name for ref in refs if ref.startswith("benchmarks/results/")}
    outside = {
        ref: where for ref, where in refs.items() if not ref.startswith("benchmarks/results/")
    }
    assert outside == {}, "benchmark results are cited outside benchmarks/results/"
    missing = {ref: refs[ref] for ref in refs if Path(ref).name not in recorded | set(RUN_OUTPUTS)}
    assert missing == {}, "cited benchmark results that are not in the repository"
    assert sorted(recorded - cited) == [], "recorded results no document explains"


def test_a_run_writes_its_results_where_the_docs_say() -> None:
    from benchmarks import __main__ as bench

    source = Path(bench.__file__).read_text(encoding="utf-8")
    assert 'Path("benchmarks/results")' in source
    assert set(RUN_OUTPUTS) <= set(re.findall(r'"(\w+\.json)"', source))
    ignored = subprocess.run(
        ["git", "check-ignore", *(f"benchmarks/results/{name}" for name in RUN_OUTPUTS)],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert ignored.stdout.split() == [f"benchmarks/results/{name}" for name in RUN_OUTPUTS]
    recorded = subprocess.run(
        ["git", "check-ignore", "--no-index", *map(str, sorted(RESULTS.glob("2*.json")))],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert recorded.stdout == "", "a recorded result would be ignored by git"


# --- the schema head, as the docs state it ----------------------------------------------------

_HEAD_CLAIMS = (
    re.compile(r"\bhead \((\d+)\)"),  # `applied migrations to head (4)`, `Already at head (4)`
    re.compile(r"\bhead (\d+)\b"),  # `(schema 1, head 4)`
    re.compile(r"schema head is \*\*revision (\d{4}), schema version (\d+)\*\*"),
    re.compile(r"^#+ \d+\. Head schema \(revision (\d{4})\)", re.MULTILINE),
)


def head_claims(text: str) -> list[tuple[int, int]]:
    """(line, version) of every literal head number in a document; `<N>` placeholders pass."""
    found = []
    for pattern in _HEAD_CLAIMS:
        for match in pattern.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found += [(line, int(number)) for number in match.groups()]
    return sorted(found)


def test_head_claims_are_parsed() -> None:
    text = (
        "The schema head is **revision 0007, schema version 7** (written `<N>`).\n"
        "## 2. Head schema (revision 0007)\n"
        "`Created <P> and applied migrations to head (2).` and `(schema 1, head 3)`,\n"
        "`Already at head (<N>); nothing to do.` and `(schema <M>, head <N>)` are placeholders\n"
    )
    assert head_claims(text) == [(1, 7), (1, 7), (2, 7), (3, 2), (3, 3)]


def test_every_literal_head_number_is_this_builds_head() -> None:
    from cafleet.db.shapes import HEAD_VERSION

    wrong = [
        f"{path.relative_to(REPO)}:{line}: head {number}, but HEAD_VERSION is {HEAD_VERSION}"
        for path in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
        for line, number in head_claims(path.read_text(encoding="utf-8"))
        if number != HEAD_VERSION
    ]
    assert wrong == []


def test_every_revision_has_its_storage_section() -> None:
    """docs/storage.md §3 has one `Revision <id> `<slug>`` section per file of the chain."""
    from cafleet.db.shapes import REVISIONS

    files = sorted(p.stem for p in (REPO / "alembic" / "versions").glob("[0-9]*.py"))
    assert [name.split("_", 1)[0] for name in files] == list(REVISIONS)
    storage = (REPO / "docs" / "storage.md").read_text(encoding="utf-8")
    sections = re.findall(r"^### 3\.\d+ Revision (\d{4}) `(\w+)`$", storage, re.MULTILINE)
    assert [f"{rev}_{slug}" for rev, slug in sections] == files


# --- docs/errors.md's table of exception classes ------------------------------------------------

ERRORS_DOC = REPO / "docs" / "errors.md"
_ERROR_ROW = re.compile(r"^\| `(\w+)` \| `([\w/]+\.py)` \| (`\w+`|\(given\)) \|", re.MULTILINE)


def cafleet_error_classes() -> dict[str, tuple[str, str]]:
    """Every public CafleetError subclass defined in cafleet: name -> (file, code)."""
    import importlib
    import pkgutil

    import cafleet
    from cafleet import status
    from cafleet.errors import CafleetError

    for module in pkgutil.walk_packages(cafleet.__path__, "cafleet."):
        if not module.name.endswith("__main__"):
            importlib.import_module(module.name)
    found: dict[str, tuple[str, str]] = {}
    pending = list(CafleetError.__subclasses__())
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if cls.__name__.startswith("_") or not cls.__module__.startswith("cafleet."):
            continue
        module = sys.modules[cls.__module__]
        file = Path(module.__file__ or "").resolve().relative_to(REPO).as_posix()
        code = getattr(cls, "error_code", None)
        found[cls.__name__] = (file, code if isinstance(code, str) else status.CODE_ERROR)
    return found


def documented_errors(text: str) -> dict[str, tuple[str, str]]:
    return {name: (file, code.strip("`")) for name, file, code in _ERROR_ROW.findall(text)}


def test_errors_doc_rows_are_parsed() -> None:
    text = "| `A` | `cafleet/a.py` | `busy` | x |\n| `B` | `cafleet/b/c.py` | (given) | y |\n"
    assert documented_errors(text) == {
        "A": ("cafleet/a.py", "busy"),
        "B": ("cafleet/b/c.py", "(given)"),
    }


def test_every_error_class_has_its_row_in_errors_md() -> None:
    code = cafleet_error_classes()
    assert {"MemberNotFound", "WaitTimedOut", "GuardRefused"} <= set(code)
    docs = documented_errors(ERRORS_DOC.read_text(encoding="utf-8"))
    # A class that chooses its code per instance says `(given)`; the rest must match exactly.
    given = {name for name, (_file, c) in docs.items() if c == "(given)"}
    assert {name: (f, c) for name, (f, c) in docs.items() if name not in given} == {
        name: row for name, row in code.items() if name not in given
    }
    assert {name: docs[name][0] for name in given} == {name: code[name][0] for name in given}


# --- docs/maintaining.md §2: the test harness knows every registered agent -----------------------


def test_the_harness_lists_the_registered_agents() -> None:
    from cafleet.agents.registry import agent_names
    from tests.harness.fixtures import AGENTS as FAKE_AGENTS
    from tests.harness.real_agents import AGENTS as REAL_AGENTS

    assert agent_names() == ("claude", "codex", "opencode", "gemini")
    assert tuple(FAKE_AGENTS) == tuple(REAL_AGENTS) == agent_names()


# --- README and docs/runtime.md §1.1: who uses libtmux -----------------------------------------


def test_only_the_harness_fixture_imports_libtmux() -> None:
    importers = sorted(
        path.relative_to(REPO).as_posix()
        for directory in ("cafleet", "tests", "benchmarks", "scripts")
        for path in (REPO / directory).rglob("*.py")
        if re.search(r"^\s*(import libtmux|from libtmux\b)", path.read_text(encoding="utf-8"), re.M)
    )
    assert importers == ["tests/harness/fixtures.py"]
    fixture = (REPO / "tests" / "harness" / "fixtures.py").read_text(encoding="utf-8")
    assert "send_keys" not in fixture and ".cmd(" not in fixture  # tmux runs through self.tmux


ISSUE_NUMBER = re.compile(r"\bissues? #?\d+", re.IGNORECASE)


def issue_citations(paths: Iterable[Path]) -> list[str]:
    """`path:line` of every line that names a tracker issue by its number."""
    return [
        f"{path.relative_to(REPO)}:{number}"
        for path in paths
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if ISSUE_NUMBER.search(line)
    ]


def test_docs_cite_sections_not_issue_numbers() -> None:
    """The tracker is not in the repository: a rule is cited by the docs section that states it."""
    assert issue_citations([REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]) == []


def test_the_openings_say_what_the_storage_is_now() -> None:
    """The first paragraph of the README and of docs/architecture.md: a fleet may span machines
    and the database may be PostgreSQL (docs/runtime.md §10), so neither says "one machine" or
    "one SQLite file"."""
    for path in (REPO / "README.md", REPO / "docs" / "architecture.md"):
        opening = " ".join(path.read_text(encoding="utf-8").split("\n\n")[1].split())
        assert "PostgreSQL" in opening, path
        assert "one machine" not in opening and "One SQLite file" not in opening, path


def test_code_cites_sections_not_issue_numbers() -> None:
    """The same for code and tests (comments, docstrings, strings). The Alembic revisions are
    frozen by their checksums (tests/revision_manifest.txt) and keep their wording."""
    code = [
        path
        for directory in ("cafleet", "tests", "benchmarks", "scripts")
        for path in sorted((REPO / directory).rglob("*"))
        if path.suffix in (".py", ".js", ".html", ".css", ".md", ".sh", ".toml")
        and "__pycache__" not in path.parts
    ]
    assert REPO / "cafleet" / "cli" / "doctor.py" in code
    assert issue_citations(code) == []
    assert issue_citations([]) == [] and ISSUE_NUMBER.search(f"see Issue {24} item 3")


# --- generated reference tables and the words budget --------------------------------------------


def test_generated_tables_are_current() -> None:
    """The command tree, exit statuses and error codes in docs/cli.md and the environment
    variables in docs/operations.md are rendered from the code (`python -m tests.doc_tables
    --write`)."""
    import click

    from tests import doc_tables

    assert doc_tables.main(["--check"]) == 0, doc_tables.stale()

    tree = doc_tables.command_tree()
    for path, ctx in reference.command_paths():
        if not isinstance(ctx.command, click.Group):
            assert f"\n{' '.join(('cafleet', *path))} " in tree, path


def test_a_stale_generated_table_is_reported(tmp_path: Path) -> None:
    from tests import doc_tables

    cli = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    (tmp_path / "operations.md").write_bytes((REPO / "docs" / "operations.md").read_bytes())
    (tmp_path / "cli.md").write_text(cli.replace("| `usage` | 2 |", "| `usage` | 1 |"))
    assert doc_tables.stale(tmp_path) == ["docs/cli.md: block 'error-codes' is stale"]
    (tmp_path / "cli.md").write_text(cli.replace("<!-- end: command-tree -->", ""))
    assert "docs/cli.md: no generated block 'command-tree'" in doc_tables.stale(tmp_path)


def test_every_variable_cafleet_reads_is_in_the_generated_table() -> None:
    from cafleet.config import VARIABLES

    read = set()
    for path in (REPO / "cafleet").rglob("*.py"):
        read |= set(re.findall(r"[\"'](CAFLEET_[A-Z_]+)[\"']", path.read_text(encoding="utf-8")))
    assert read <= {name for name, _default, _what in VARIABLES}


WORDS_BUDGET = 50_000


def docs_words(root: Path = REPO) -> int:
    """Words over docs/*.md, counted as `wc -w` counts them (runs of non-whitespace)."""
    return sum(len(path.read_bytes().split()) for path in sorted((root / "docs").glob("*.md")))


def test_docs_stay_within_their_words_budget() -> None:
    """Later features document themselves within the budget: cut restatement, not the why."""
    words = docs_words()
    assert words > 10_000  # the glob found the documents
    assert words <= WORDS_BUDGET, f"docs/*.md hold {words} words; the budget is {WORDS_BUDGET}"


# --- scripts/doc_cites.py: cites follow renumbered sections ------------------------------------


def test_doc_cites_rewrites_moved_sections_once() -> None:
    sys.path.insert(0, str(REPO / "scripts"))
    import doc_cites

    moved = {
        ("runtime.md", "7.1"): ("runtime.md", "4.9"),
        ("cli.md", "3.5"): ("runtime.md", "4.9"),
        ("cli.md", "3.1"): None,
    }
    original = dict(doc_cites.MOVED)
    doc_cites.MOVED.clear()
    doc_cites.MOVED.update(moved)
    try:
        text = (
            "a (docs/runtime.md §7.1) b docs/runtime.md §5.4, §7.1; c (docs/cli.md §3.1).\n"
            "d `docs/cli.md` §3.5, runtime.md §7.10; e cli.md §2.7, §3.5\n"
        )
        once = doc_cites.rewrite(text, None)
        assert once == (
            "a (docs/runtime.md §4.9) b docs/runtime.md §5.4, §4.9; c.\n"
            "d `docs/runtime.md` §4.9, runtime.md §7.10; e cli.md §2.7, docs/runtime.md §4.9\n"
        )
        assert doc_cites.rewrite(once, None) == once
        assert doc_cites.rewrite("see §7.1", "runtime.md") == "see §4.9"
    finally:
        doc_cites.MOVED.clear()
        doc_cites.MOVED.update(original)


def test_doc_cites_has_nothing_left_to_rewrite() -> None:
    proc = subprocess.run(
        [sys.executable, "scripts/doc_cites.py", "--check"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


# --- every repository path the docs name exists ------------------------------------------------

# Named in the docs but not files of the checkout, on purpose: what a benchmark run writes, the
# wheel's own directory for the migrations, and seed-trace's example of a test id.
NOT_IN_CHECKOUT = {
    "benchmarks/results/latest.json",
    "benchmarks/results/smoke.json",
    "cafleet/_migrations",
    "tests/test_x.py",
}
_REPO_PATH = re.compile(r"(?:`|^)((?:cafleet|tests|benchmarks|alembic|scripts|\.ci)/[\w./-]*)")


def named_paths(text: str) -> list[tuple[int, str]]:
    """(line, path) of each repository path in backticks or at the start of a line (a layout
    block); placeholders (`<agent>`) and globs are left out."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for match in _REPO_PATH.finditer(line):
            path = match.group(1).rstrip("/.")
            if line[match.end() : match.end() + 1] not in ("<", "*", "{", "…"):
                found.append((number, path))
    return found


def test_named_paths_are_parsed() -> None:
    text = "see `cafleet/db/` and `tests/data/<agent>/x.txt`\ncafleet/text.py   leaves\n"
    assert named_paths(text) == [(1, "cafleet/db"), (2, "cafleet/text.py")]


def test_every_path_the_docs_name_exists() -> None:
    missing = [
        f"{doc.relative_to(REPO)}:{line}: {path}"
        for doc in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
        for line, path in named_paths(doc.read_text(encoding="utf-8"))
        if path not in NOT_IN_CHECKOUT and not (REPO / path).exists()
    ]
    assert missing == []


def test_readme_layout_names_every_top_level_module() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    layout = readme.split("## Layout", 1)[1].split("\n## ", 1)[0]
    entries = sorted(
        f"cafleet/{p.name}" + ("/" if p.is_dir() else "")
        for p in (REPO / "cafleet").iterdir()
        if p.name not in ("__init__.py", "__main__.py", "__pycache__")
    )
    assert len(entries) > 15
    assert [e for e in entries if f"`{e}`" not in layout] == []
