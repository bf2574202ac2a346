"""Rewrite `docs/<file>.md §N` cites in code, tests and docs after the docs were renumbered.

    python scripts/doc_cites.py           # rewrite in place; prints each file it changed
    python scripts/doc_cites.py --check   # exit 1 when a cite still needs rewriting

MOVED maps an old section to the section that now holds its why, in the same document or
another; a `None` target drops the cite, which only works for a cite that is a whole
parenthesis ` (docs/x.md §N)`. Which document a bare `§N` means follows tests/test_docs.py's rule
(the cite it continues, else the document itself, else the last document cited above it). No
target is also a source, so a second run changes nothing. The Alembic revisions are frozen
(their hashes are pinned) and never rewritten. The lead runs it after merging any branch that
adds cites.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.test_docs import (  # noqa: E402
    _AFTER_MD,
    _CONTINUES,
    _MD,
    _SECTION,
    FROZEN_DIR,
    scanned_files,
)

Cite = tuple[str, str]  # (document file name, section number)

# Old section -> where its why is now; None drops the cite. Sections removed because they only
# pointed elsewhere or held a plan (docs/roadmap.md keeps plans).
MOVED: dict[Cite, Cite | None] = {
    ("runtime.md", "7.1"): ("runtime.md", "4.9"),
    ("runtime.md", "7.2"): ("roadmap.md", "4"),
    ("runtime.md", "7.5"): ("runtime.md", "3.1"),
    ("cli.md", "3.1"): ("roadmap.md", "4"),
    ("cli.md", "3.5"): ("runtime.md", "4.9"),
}


def _check_mapping() -> None:
    targets = {new for new in MOVED.values() if new is not None}
    assert not targets & set(MOVED), "a target is also a source: a second run would move it"


def rewrite(text: str, own_doc: str | None) -> str:
    """``text`` with every cite of a moved section pointed at its new place."""
    events = [(m.start(), m) for m in _MD.finditer(text)]
    events += [(m.start(), m) for m in _SECTION.finditer(text)]
    edits: list[tuple[int, int, str]] = []  # (start, end, replacement)
    last_cited = own_doc
    token: re.Match[str] | None = None  # the last .md token
    ref_end, ref_doc = -1, None  # the last § reference
    for pos, match in sorted(events, key=lambda e: e[0]):
        if match.re is _MD:
            token = match
            if _AFTER_MD.match(text, match.end()):
                last_cited = Path(match.group(1)).name
            continue
        right_after = token is not None and bool(_AFTER_MD.fullmatch(text, token.end(), pos + 1))
        if right_after:
            assert token is not None
            doc: str | None = Path(token.group(1)).name
        elif ref_end >= 0 and _CONTINUES.fullmatch(text, ref_end, pos):
            doc = ref_doc
        else:
            doc = own_doc or last_cited
        ref_end, ref_doc = match.end(), doc
        if doc is None or (doc, match.group(1)) not in MOVED:
            continue
        new = MOVED[(doc, match.group(1))]
        if new is None:
            start = token.start() if right_after and token is not None else pos
            span = _enclosing_parenthesis(text, start, match.end())
            if span is not None:
                edits.append((*span, ""))
            continue
        new_doc, new_section = new
        edits.append((match.start(1), match.end(1), new_section))
        if new_doc == doc:
            continue
        if right_after and token is not None:
            name = token.group(1)
            edits.append((token.start(1), token.end(1), name[: -len(doc)] + new_doc))
        else:  # a bare § of another document: name the new one
            edits.append((pos, pos, f"docs/{new_doc} "))
    for start, end, replacement in sorted(edits, reverse=True):
        text = text[:start] + replacement + text[end:]
    return text


def _enclosing_parenthesis(text: str, start: int, end: int) -> tuple[int, int] | None:
    """The span of ` (<start..end>)` when the cite is that parenthesis's whole content."""
    opening = re.search(r" ?\(`?$", text[:start])
    closing = re.match(r"`?\)", text[end:])
    if opening is None or closing is None:
        return None
    return opening.start(), end + closing.end()


def changed_files() -> dict[Path, str]:
    _check_mapping()
    changed = {}
    for path in scanned_files(REPO):
        rel = path.relative_to(REPO).as_posix()
        if rel.startswith(FROZEN_DIR + "/"):
            continue
        own = path.name if rel.startswith("docs/") and path.suffix == ".md" else None
        text = path.read_text(encoding="utf-8")
        new = rewrite(text, own)
        if new != text:
            changed[path] = new
    return changed


def main(argv: list[str]) -> int:
    changed = changed_files()
    for path, text in sorted(changed.items()):
        print(path.relative_to(REPO).as_posix())
        if argv != ["--check"]:
            path.write_text(text, encoding="utf-8")
    return 1 if changed and argv == ["--check"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
