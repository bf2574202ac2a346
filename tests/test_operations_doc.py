"""docs/operations.md documents every CAFLEET_* setting the code and the tests read (docs/operations.md §1;
item 9): a name read anywhere but missing from its tables fails here."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OPERATIONS = REPO / "docs" / "operations.md"
_NAME = re.compile(r"\bCAFLEET_[A-Z][A-Z0-9_]*\b")


def _names_read() -> set[str]:
    names: set[str] = set()
    for root in ("cafleet", "tests", "benchmarks"):
        for path in (REPO / root).rglob("*.py"):
            names.update(_NAME.findall(path.read_text(encoding="utf-8")))
    return names


def _names_documented() -> set[str]:
    rows = [
        line for line in OPERATIONS.read_text(encoding="utf-8").splitlines() if line[:3] == "| `"
    ]
    return {m for line in rows for m in _NAME.findall(line.split("|")[1])}


def test_every_setting_is_documented_with_its_default() -> None:
    # @CAFLEET_VERSION@ is the bundled skills' version placeholder, not a variable
    missing = _names_read() - _names_documented() - {"CAFLEET_MULTIPLEXER", "CAFLEET_VERSION"}
    assert not missing, f"docs/operations.md §1 does not list: {sorted(missing)}"
    assert "CAFLEET_MULTIPLEXER" in OPERATIONS.read_text(encoding="utf-8")  # named as not read


def test_the_documented_defaults_are_the_code_s() -> None:
    from cafleet import config

    text = OPERATIONS.read_text(encoding="utf-8")
    for name, default in (
        ("CAFLEET_MAX_TEXT_LEN", config.DEFAULT_MAX_TEXT_LEN),
        ("CAFLEET_MONITOR_WAKE_INTERVAL", config.DEFAULT_MONITOR_WAKE_INTERVAL),
        ("CAFLEET_PANE_LOCK_TIMEOUT", config.DEFAULT_PANE_LOCK_TIMEOUT),
        ("CAFLEET_DELIVERY_HOLD_TIMEOUT", config.DEFAULT_DELIVERY_HOLD_TIMEOUT),
        ("CAFLEET_ESCALATE_AFTER", config.DEFAULT_ESCALATE_AFTER),
    ):
        assert f"| `{name}` | `{default}` |" in text, name
