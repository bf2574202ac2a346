"""Cost estimates from token counts (docs/runtime.md §9.6).

A built-in table of list prices in US dollars per million tokens (input, output, cache read,
cache write), per model; a model matches an entry by its name with any provider prefix
(``anthropic/``) removed, exactly or followed by a dated or other suffix (``claude-sonnet-4-5``
matches ``claude-sonnet-4-5-20250929``), the longest entry winning. The user's file
``$XDG_CONFIG_HOME/cafleet/prices.json`` (default ``~/.config/cafleet/prices.json``) adds or
replaces entries: ``{"<model>": {"input": 3, "output": 15, "cache_read": 0.3, "cache_write":
3.75}}`` (a missing rate is 0). A model in neither has no price: its tokens are shown, its cost
is not.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping

from cafleet.errors import CafleetError
from cafleet.files import read_regular
from cafleet.sessions import Tally

Rates = tuple[float, float, float, float]

# Public list prices (USD per 1M tokens) as published by Anthropic, OpenAI and Google (Gemini
# at up to 200k prompt tokens), late 2025.
BUILTIN: dict[str, Rates] = {
    "claude-opus-4-5": (5.0, 25.0, 0.5, 6.25),
    "claude-opus-4-1": (15.0, 75.0, 1.5, 18.75),
    "claude-opus-4": (15.0, 75.0, 1.5, 18.75),
    "claude-sonnet-4-5": (3.0, 15.0, 0.3, 3.75),
    "claude-sonnet-4": (3.0, 15.0, 0.3, 3.75),
    "claude-3-7-sonnet": (3.0, 15.0, 0.3, 3.75),
    "claude-haiku-4-5": (1.0, 5.0, 0.1, 1.25),
    "claude-3-5-haiku": (0.8, 4.0, 0.08, 1.0),
    "gpt-5": (1.25, 10.0, 0.125, 0.0),
    "gpt-5-codex": (1.25, 10.0, 0.125, 0.0),
    "gpt-5-mini": (0.25, 2.0, 0.025, 0.0),
    "gpt-5-nano": (0.05, 0.4, 0.005, 0.0),
    "gpt-4.1": (2.0, 8.0, 0.5, 0.0),
    "o4-mini": (1.1, 4.4, 0.275, 0.0),
    "gemini-3-pro": (2.0, 12.0, 0.2, 0.0),
    "gemini-2.5-pro": (1.25, 10.0, 0.125, 0.0),
    "gemini-2.5-flash": (0.3, 2.5, 0.03, 0.0),
    "gemini-2.5-flash-lite": (0.1, 0.4, 0.01, 0.0),
}


# The price file is a small table: a bigger one is refused rather than read into memory.
FILE_LIMIT = 1_048_576
# The largest rate (US dollars per million tokens): keeps every estimate a finite number.
RATE_LIMIT = 1_000_000_000


class PriceFileError(CafleetError):
    """The user's price file exists but is not a valid table."""


def user_file(env: Mapping[str, str]) -> str | None:
    base = env.get("XDG_CONFIG_HOME")
    if not base:
        home = env.get("HOME")
        if not home:
            return None
        base = os.path.join(home, ".config")
    return os.path.join(base, "cafleet", "prices.json")


def _rate(value: object, where: str) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not 0 <= value <= RATE_LIMIT  # NaN fails this too
    ):
        raise PriceFileError(f"{where} must be a non-negative number of at most {RATE_LIMIT}")
    return float(value)


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not a number JSON allows")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is out of range")
    return value


def load(env: Mapping[str, str] | None = None) -> dict[str, Rates]:
    """The built-in table with the user's file over it (a bad file raises `PriceFileError`)."""
    table = dict(BUILTIN)
    path = user_file(os.environ if env is None else env)
    if path is None or not os.path.exists(path):
        return table
    try:
        # A regular file of bounded size only: a FIFO or device there would block the read.
        raw = read_regular(path, FILE_LIMIT)
        data = json.loads(raw, parse_constant=_no_constant, parse_float=_finite)
    except (OSError, ValueError, RecursionError) as exc:
        raise PriceFileError(f"cannot read the price file {path}: {exc}") from None
    if not isinstance(data, dict):
        raise PriceFileError(f"the price file {path} must hold a JSON object of models")
    for model, rates in data.items():
        if not isinstance(rates, dict):
            raise PriceFileError(f"{path}: the entry for {model!r} must be an object")
        unknown = set(rates) - {"input", "output", "cache_read", "cache_write"}
        if unknown:
            raise PriceFileError(f"{path}: unknown key {sorted(unknown)[0]!r} for {model!r}")
        table[str(model)] = (
            _rate(rates.get("input", 0), f"{path}: {model}.input"),
            _rate(rates.get("output", 0), f"{path}: {model}.output"),
            _rate(rates.get("cache_read", 0), f"{path}: {model}.cache_read"),
            _rate(rates.get("cache_write", 0), f"{path}: {model}.cache_write"),
        )
    return table


def rates_for(model: str, table: Mapping[str, Rates]) -> Rates | None:
    name = model.rsplit("/", 1)[-1]
    if name in table:
        return table[name]
    best: str | None = None
    for entry in table:
        if name.startswith(entry + "-") and (best is None or len(entry) > len(best)):
            best = entry
    return None if best is None else table[best]


def cost(tally: Tally, table: Mapping[str, Rates]) -> float | None:
    """The estimate in US dollars; None when a model with tokens has no price."""
    total = 0.0
    for model, counts in tally.by_model.items():
        if not any(counts):
            continue
        rates = rates_for(model, table)
        if rates is None:
            return None
        total += sum(c * r for c, r in zip(counts, rates, strict=True)) / 1_000_000
    return total
