"""What a prompting pane asks, and which keys pick each answer (docs/runtime.md §5.12).

``read_prompt(agent, capture)`` -> None when the screen is not ``awaiting_user``
(`cafleet.delivery.screens.classify`), else a `Prompt`: the question as the screen shows it, the
lines that go with it (the command, the file), the numbered choices and the keys that pick
each one, and a short digest that names this prompt. A screen the reader cannot take apart (a
picker, a dialog without a question) is still a `Prompt`, with ``readable`` False, no choices
and the raw last lines: it is reported as it stands and never answered by guessing.

The digest hashes the prompt's words, not the screen: the selection cursor (``❯``/``›``),
spacing and whatever scrolls above the prompt do not change it, so a monitor tick and a later
``member answer`` agree on "the same prompt" while it stays on screen.

Pure functions, standard library only.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from cafleet.delivery.screens import classify, table_of
from cafleet.delivery.screens.choice import Choice
from cafleet.delivery.screens.layout import lines_of

RAW_LINES = 15  # the last non-blank lines kept for a prompt that cannot be read
LINE_LIMIT = 240  # characters kept of one line (a long command is cut, with an ellipsis)
DIGEST_LEN = 8

_NUMBERED = re.compile(r"^(?:[❯›>]\s*)?(\d{1,2})\.\s+(\S.*)$")
_CURSOR = re.compile(r"^[❯›>]\s*")
HINT = re.compile(
    r"^(Esc to (cancel|exit)|Enter to |Press enter to |enter select|ctrl\+|Tab to )", re.I
)
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# A choice's number as `member answer` takes it: ASCII digits, no leading zero (`01`, `١` and
# `²` are not numbers here, so they never pick choice 1 by Python's reading of them).
CHOICE_NUMBER = re.compile(r"[1-9][0-9]{0,2}", re.ASCII)
# A line drawn only of box-drawing and block characters (the dashed rules around Claude Code's
# diff of a file, clean()'s ellipsis when cut): decoration, never what the prompt asks about.
_DECORATION = re.compile("^[\u2500-\u259f\u2026\\s]+$")


@dataclass(frozen=True, slots=True)
class Prompt:
    agent: str
    question: str | None  # None: the reader could not find one (see ``readable``)
    details: tuple[str, ...]  # the lines that go with the question (command, file, title)
    choices: tuple[Choice, ...]
    raw: tuple[str, ...]  # the last non-blank lines of the screen, trimmed and sanitised
    digest: str

    @property
    def readable(self) -> bool:
        return self.question is not None and bool(self.choices)

    @property
    def question_first(self) -> bool:
        """The screen draws the question above its details (Codex's and opencode's title), not
        below them (Claude Code's)."""
        table = table_of(self.agent)
        return table is not None and table.question_first

    def pick(self, wanted: str) -> Choice | None:
        """The choice ``wanted`` names: its number, or its label (case and spacing ignored)."""
        text = " ".join(wanted.split()).casefold()
        if CHOICE_NUMBER.fullmatch(text):
            return next((c for c in self.choices if c.number == int(text)), None)
        return next((c for c in self.choices if " ".join(c.label.split()).casefold() == text), None)

    def as_dict(self) -> dict[str, object]:
        return {
            "prompt_id": self.digest,
            "readable": self.readable,
            "question": self.question,
            "details": list(self.details),
            "choices": [{"number": c.number, "label": c.label} for c in self.choices],
            "raw": list(self.raw),
        }


def clean(line: str) -> str:
    """One screen line for a message: control characters dropped, spaces squeezed at the ends,
    cut at `LINE_LIMIT` characters."""
    text = _CONTROL.sub("", line).replace("\u00a0", " ").strip()
    if len(text) > LINE_LIMIT:
        text = text[: LINE_LIMIT - 1] + "…"
    return text


def _digest(agent: str, parts: list[str]) -> str:
    words = "\n".join(" ".join(p.split()) for p in [agent, *parts])
    return hashlib.sha256(words.encode("utf-8", "surrogatepass")).hexdigest()[:DIGEST_LEN]


def numbered(lines: list[str]) -> tuple[int, list[tuple[int, str]]] | None:
    """The first run of choices numbered 1, 2, … in ``lines`` (already cleaned): the index of
    choice 1 and (number, text) pairs; a description line between two choices is skipped."""
    found: list[tuple[int, str]] = []
    start = -1
    for i, line in enumerate(lines):
        m = _NUMBERED.match(line)
        if m and int(m.group(1)) == len(found) + 1:
            if not found:
                start = i
            found.append((int(m.group(1)), m.group(2)))
        elif found and HINT.match(line):
            break
    return (start, found) if found else None


def question_before(lines: list[str], end: int) -> int | None:
    """The index of the last line before ``end`` that ends with `?`."""
    for i in range(end - 1, -1, -1):
        if lines[i].endswith("?"):
            return i
    return None


def read_prompt(agent: str, capture: str, *, spawned: bool = True) -> Prompt | None:
    """The prompt on ``capture`` (see the module docstring); None when there is none."""
    if classify(agent, capture, spawned=spawned) != "awaiting_user":
        return None
    lines = [line for line in lines_of(capture)]
    raw = tuple(clean(x) for x in lines if x.strip())[-RAW_LINES:]
    table = table_of(agent)
    read = table.read_prompt(lines) if table is not None and table.read_prompt else None
    if read is None:
        return Prompt(agent, None, (), (), raw, _digest(agent, ["raw", *raw]))
    question, details, choices = read
    details = [
        d
        for d in (_CURSOR.sub("", x) for x in details)
        if not HINT.match(d) and not _DECORATION.match(d)
    ]
    parts = [question, *details, *(f"{c.number}. {c.label}" for c in choices)]
    return Prompt(agent, question, tuple(details), tuple(choices), raw, _digest(agent, parts))


__all__ = [
    "DIGEST_LEN",
    "HINT",
    "Choice",
    "Prompt",
    "clean",
    "numbered",
    "question_before",
    "read_prompt",
]
