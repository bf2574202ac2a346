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

from cafleet.delivery.screens import classify
from cafleet.delivery.screens.layout import lines_of

RAW_LINES = 15  # the last non-blank lines kept for a prompt that cannot be read
LINE_LIMIT = 240  # characters kept of one line (a long command is cut, with an ellipsis)
DIGEST_LEN = 8

_RULE = re.compile(r"^\s*─{8,}( \S.* ─+)?\s*$")  # the rule may end with a session name
_NUMBERED = re.compile(r"^(?:[❯›>]\s*)?(\d{1,2})\.\s+(\S.*)$")
_SHORTCUT = re.compile(r"^(.*\S)\s+\((\w+)\)$")
_CURSOR = re.compile(r"^[❯›>]\s*")
_HINT = re.compile(
    r"^(Esc to (cancel|exit)|Enter to |Press enter to |enter select|ctrl\+|Tab to )", re.I
)
_CODEX_TITLE = re.compile(
    r"Would you like to (run the following command|make the following edits"
    r"|grant these permissions|send input to)"
)
_OPENCODE_TITLE = re.compile(r"Permission required|△ Always allow")
_OPENCODE_SIDE = "┃"
# The button rows of opencode's two dialogs: the permission dialog, and the confirmation its
# "Allow always" opens ("This will allow … until OpenCode is restarted").
_OPENCODE_ROWS = (("Allow once", "Allow always", "Reject"), ("Confirm", "Cancel"))
_OPENCODE_CONFIRM = ("Always allow", "Confirm")
# Text this far right of the dialog's left edge is the session sidebar of a wide pane.
_OPENCODE_INDENT = 12
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# A choice's number as `member answer` takes it: ASCII digits, no leading zero (`01`, `١` and
# `²` are not numbers here, so they never pick choice 1 by Python's reading of them).
CHOICE_NUMBER = re.compile(r"[1-9][0-9]{0,2}", re.ASCII)
# A line drawn only of box-drawing and block characters (the dashed rules around Claude Code's
# diff of a file, clean()'s ellipsis when cut): decoration, never what the prompt asks about.
_DECORATION = re.compile("^[\u2500-\u259f\u2026\\s]+$")


@dataclass(frozen=True, slots=True)
class Choice:
    number: int  # 1-based, as the screen numbers it
    label: str  # the choice's words, without its number or shortcut
    keys: tuple[str, ...]  # tmux send-keys key names that pick it
    # The agent asks to confirm this choice in a second dialog: (that dialog's question, the
    # label of its choice that confirms). `member answer` confirms it too.
    confirm: tuple[str, str] | None = None


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
        return self.agent in _QUESTION_ON_TOP

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


def _numbered(lines: list[str]) -> tuple[int, list[tuple[int, str]]] | None:
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
        elif found and _HINT.match(line):
            break
    return (start, found) if found else None


def _question_before(lines: list[str], end: int) -> int | None:
    for i in range(end - 1, -1, -1):
        if lines[i].endswith("?"):
            return i
    return None


def _claude(lines: list[str]) -> tuple[str, list[str], list[Choice]] | None:
    """The box below the last full-width rule: details, the question (ends with `?`), the
    numbered choices, a key hint. A number key picks a choice."""
    rules = [i for i, line in enumerate(lines) if _RULE.match(line)]
    region = lines[rules[-1] + 1 :] if rules else lines
    body = [clean(x) for x in region if x.strip()]
    run = _numbered(body)
    if run is None:
        return None
    start, found = run
    q = _question_before(body, start)
    if q is None:
        return None
    choices = [Choice(n, text.strip(), (str(n),)) for n, text in found]
    return body[q], body[:q], choices


def _codex(lines: list[str]) -> tuple[str, list[str], list[Choice]] | None:
    """From the approval title (`Would you like to …?`) down: details, then numbered choices,
    each with its shortcut key in parentheses (`(y)`; `(esc)` is the Escape key)."""
    titles = [i for i, line in enumerate(lines) if _CODEX_TITLE.search(line)]
    if not titles:
        return None
    body = [clean(x) for x in lines[titles[-1] :] if x.strip()]
    run = _numbered(body)
    if run is None:
        return None
    start, found = run
    choices = []
    for n, text in found:
        keys: tuple[str, ...] = (str(n),)
        m = _SHORTCUT.match(text)
        if m:
            text = m.group(1)
            key = m.group(2)
            keys = ("Escape",) if key.lower() == "esc" else (key,) if len(key) == 1 else keys
        choices.append(Choice(n, text.strip(), keys))
    return body[0], body[1:start], choices


def _opencode_line(line: str) -> str:
    """One row of an opencode dialog: its side bar dropped, the sidebar text that a wide pane
    draws at its right cut off; "" for a row that holds only sidebar text."""
    text = line.replace(_OPENCODE_SIDE, " ")
    indent = len(text) - len(text.lstrip())
    if indent > _OPENCODE_INDENT:
        return ""
    return clean(re.split(r"\s{8,}", text.strip())[0])


def _opencode(lines: list[str]) -> tuple[str, list[str], list[Choice]] | None:
    """The permission dialog (`△ Permission required`), its details, and the row of three
    buttons; or the confirmation "Allow always" opens (`△ Always allow`, Confirm / Cancel).
    The first button is selected when a dialog opens, → moves right, Enter confirms."""
    titles = [i for i, line in enumerate(lines) if _OPENCODE_TITLE.search(line)]
    if not titles:
        return None
    body = [x for x in (_opencode_line(x) for x in lines[titles[-1] :]) if x]
    for labels in _OPENCODE_ROWS:
        row = next((i for i, x in enumerate(body) if x.startswith(labels[0])), None)
        if row is None:
            continue
        buttons = re.split(r"\s{2,}", body[row])[: len(labels)]
        if tuple(buttons) != labels:
            return None
        choices = [
            Choice(
                i + 1,
                label,
                ("Right",) * i + ("Enter",),
                _OPENCODE_CONFIRM if label == "Allow always" else None,
            )
            for i, label in enumerate(buttons)
        ]
        question = body[0].lstrip("△ ").strip()
        return question, body[1:row], choices
    return None


_READERS = {"claude": _claude, "codex": _codex, "opencode": _opencode}
_QUESTION_ON_TOP = frozenset({"codex", "opencode"})


def read_prompt(agent: str, capture: str, *, spawned: bool = True) -> Prompt | None:
    """The prompt on ``capture`` (see the module docstring); None when there is none."""
    if classify(agent, capture, spawned=spawned) != "awaiting_user":
        return None
    lines = [line for line in lines_of(capture)]
    raw = tuple(clean(x) for x in lines if x.strip())[-RAW_LINES:]
    reader = _READERS.get(agent)
    read = reader(lines) if reader is not None else None
    if read is None:
        return Prompt(agent, None, (), (), raw, _digest(agent, ["raw", *raw]))
    question, details, choices = read
    details = [
        d
        for d in (_CURSOR.sub("", x) for x in details)
        if not _HINT.match(d) and not _DECORATION.match(d)
    ]
    parts = [question, *details, *(f"{c.number}. {c.label}" for c in choices)]
    return Prompt(agent, question, tuple(details), tuple(choices), raw, _digest(agent, parts))


__all__ = ["DIGEST_LEN", "Choice", "Prompt", "clean", "read_prompt"]
