"""Each aggregate's statements live with its repository module: `db/statements/X.py` holds the
statements `broker/X.py` runs and nothing else, so a change to an aggregate is one pair of files
(docs/architecture.md). The statements stay in `db/` because they are compiled ahead of time:
SQLAlchemy never loads on a command's path."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STATEMENTS = REPO / "cafleet" / "db" / "statements"
BROKER = REPO / "cafleet" / "broker"

# Reads across aggregates, each named: (repository module, catalog module) -> statements.
SHARED = {
    ("_common", "fleets"): {"FLEET_DIRECTED_FROM"},
    # the board: the tasks aggregate's read, apart so `task list` imports only it
    ("board", "tasks"): {"BOARD", "FLEET", "FLEET_DEPS"},
    ("tasks", "members"): {"ACTIVE_MONITOR_MEMBER"},
    ("tasks", "messages"): {"MESSAGE_BY_TOKEN", "SEND"},
}
CATALOG_IMPORT = re.compile(r"from cafleet\.db\.catalog import (\w+) as (\w+)")


def catalog_names(module: str) -> set[str]:
    text = (REPO / "cafleet" / "db" / "catalog" / f"{module}.py").read_text(encoding="utf-8")
    return set(re.findall(r"^([A-Z][A-Z0-9_]*) = Statement\(", text, re.M))


def used(text: str, alias: str, names: set[str]) -> set[str]:
    """The statements `text` runs through `alias`: `alias.NAME`, or a name built from a prefix
    (`getattr(alias, f"EXPORT_{table}")`)."""
    direct = set(re.findall(rf"\b{alias}\.([A-Z][A-Z0-9_]*)", text))
    prefixes = re.findall(rf'getattr\({alias}, f"([A-Z_]+)\{{', text)
    return direct | {n for n in names if any(n.startswith(p) for p in prefixes)}


def aggregates() -> list[str]:
    return sorted(p.stem for p in STATEMENTS.glob("*.py") if p.stem != "__init__")


def test_every_statements_module_has_its_repository_module() -> None:
    assert len(aggregates()) >= 10
    assert [a for a in aggregates() if not (BROKER / f"{a}.py").exists()] == []


def test_repositories_read_only_their_own_statements_or_named_shared_ones() -> None:
    seen = 0
    for path in sorted(BROKER.glob("*.py")):
        text = path.read_text(encoding="utf-8")
        for module, alias in CATALOG_IMPORT.findall(text):
            seen += 1
            if module == path.stem:
                continue
            runs = used(text, alias, catalog_names(module))
            assert runs == SHARED.get((path.stem, module)), (
                f"broker/{path.name} runs {sorted(runs)} of catalog.{module}: move them to"
                f" statements/{path.stem}.py or name them in SHARED"
            )
    assert seen >= len(aggregates())
    outside = [
        str(p.relative_to(REPO))
        for p in (REPO / "cafleet").rglob("*.py")
        if "catalog" not in p.parts
        and p.parent != BROKER
        and CATALOG_IMPORT.search(p.read_text(encoding="utf-8"))
    ]
    assert outside == []  # only the repository runs statements


def test_every_statement_is_run_by_its_repository_module() -> None:
    for aggregate in aggregates():
        names = catalog_names(aggregate)
        assert names, aggregate
        runs: set[str] = set()
        for path in BROKER.glob("*.py"):
            text = path.read_text(encoding="utf-8")
            for module, alias in CATALOG_IMPORT.findall(text):
                if module == aggregate:
                    runs |= used(text, alias, names)
        assert names - runs == set(), f"statements/{aggregate}.py holds statements nobody runs"
