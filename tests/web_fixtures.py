"""The browser fixtures every WebUI page test uses (a plugin of tests/conftest.py): one Debian
chromium per test module, a fresh context and page per test whose script must never throw."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.web_helpers import browser


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    with browser() as b:
        yield b


@pytest.fixture
def page(chromium: Any) -> Iterator[Any]:
    context = chromium.new_context(viewport={"width": 1400, "height": 900})
    p = context.new_page()
    p.set_default_timeout(20_000)
    errors: list[str] = []
    p.on("pageerror", lambda exc: errors.append(str(exc)))
    yield p
    context.close()
    assert errors == []  # the page's script never threw
