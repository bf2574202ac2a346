"""The WebUI's response bodies that show a record are derived from it (`cafleet.web.models`):
no body restates a record's fields, and a field added to a record reaches its body."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import pkgutil
from pathlib import Path
from typing import Literal

import pytest

import cafleet.records
from cafleet.records.messages import Message

pytest.importorskip("pydantic")

from cafleet.web import models  # noqa: E402

MODELS = Path(models.__file__)


def _record_fields() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for info in pkgutil.iter_modules(cafleet.records.__path__):
        module = importlib.import_module(f"cafleet.records.{info.name}")
        for name, value in vars(module).items():
            fields = getattr(value, "_fields", None)  # records are NamedTuples
            if isinstance(value, type) and fields and value.__module__ == module.__name__:
                found[name] = set(fields)
    return found


def test_no_body_restates_a_record() -> None:
    """A response body whose fields are all some record's (three or more) restates that record:
    it is `from_record(...)` instead. A request body (`…In`) is exempt: it names what a client
    may set, with the limits the form checks, which no record says."""
    records = _record_fields()
    restated = []
    for node in ast.parse(MODELS.read_text()).body:
        if not isinstance(node, ast.ClassDef) or node.name.endswith("In"):
            continue
        names = {
            s.target.id
            for s in node.body
            if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
        }
        for record, fields in records.items():
            if len(names) >= 3 and names <= fields:
                restated.append((node.name, record))
    assert restated == []


def test_a_body_follows_its_record() -> None:
    # received_at comes from the receipts, beside the record (docs/runtime.md §4.12)
    assert list(models.MessageOut.model_fields) == [*Message._fields, "received_at"]

    @dataclasses.dataclass(frozen=True)
    class Probe:
        probe_id: int
        state: str
        added_later: str | None
        internal: str

    body = models.from_record(
        "ProbeOut",
        Probe,
        hidden=("internal",),
        types={"state": models.one_of(("on", "off"))},
    )
    assert list(body.model_fields) == ["probe_id", "state", "added_later"]
    assert body.model_fields["state"].annotation == Literal["on", "off"]
    assert body(probe_id=1, state="on", added_later=None).model_dump() == {
        "probe_id": 1,
        "state": "on",
        "added_later": None,
    }
    with pytest.raises(ValueError):
        body(probe_id=1, state="other", added_later=None)
