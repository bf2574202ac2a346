"""The hostile alphabet (docs/tmux-arguments.md §7) as hypothesis strategies, and a private tmux server shared by
the examples of one test module (docs/tmux-arguments.md).

A shared server is correct here because every example leaves it as it found it: the example's
own pane is killed again, and `server_state` (sessions, windows, panes, global options and
environment, buffers) is compared before and after, which is also how a test sees that no tmux
command ran besides the ones asked for.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import strategies as st

from tests.harness.fixtures import TmuxHarness

PWNED = Path("/tmp/cafleet-test-pwned")  # created only if a format ran `#(...)`
HOME_PWNED = "cafleet-test-pwned"  # the same, in the server's HOME (a payload without `/`)
# Pieces tmux, a shell or an agent CLI could read as something else, plus what exercises UTF-8
# chunking (multi-byte and combining characters).
PIECES = (
    ";",
    ";;",
    "\\",
    "\\;",
    "\\\\;",
    "#{pane_id}",
    "#{",
    f"#(touch {PWNED})",
    f"#(cd;touch {HOME_PWNED})",
    "#S",
    "##",
    "#",
    "'",
    '"',
    "$(id)",
    "`id`",
    "$HOME",
    "-",
    "--",
    "-x",
    "{",
    "}",
    " ",
    "😀",
    "e\u0301",
    "\u0301",
    "é",
    "שלום",
    "kill-server",
    "new-window",
)
# tmux commands an unescaped separator would hand the next argument to.
COMMANDS = ("kill-server", "new-window", "kill-session", "list-windows", "display-message")

_plain = st.text(
    alphabet=st.characters(
        codec="utf-8", exclude_categories=["Cc", "Cs", "Zl", "Zp"], exclude_characters="\x7f"
    ),
    max_size=3,
)


def hostile_text(
    *, min_size: int = 1, max_pieces: int = 8, slash: bool = True
) -> st.SearchStrategy[str]:
    """Concatenated hostile pieces and short plain runs, often ending in `;` or `\\;`.

    No control characters (cafleet refuses them in names and prompts; bodies are normalised).
    ``slash=False`` leaves out `/` (a path component).
    """
    piece = st.sampled_from(PIECES) | _plain
    base = st.lists(piece, min_size=1, max_size=max_pieces).map("".join)
    ending = st.sampled_from(["", "", ";", "\\;", ";;", " ;"])
    text = st.tuples(base, ending).map("".join)
    if not slash:
        text = text.map(lambda s: s.replace("/", "\u2215"))
    return text.filter(lambda s: len(s) >= min_size)


def label_text(limit: int = 100) -> st.SearchStrategy[str]:
    """A name or description cafleet accepts: hostile, not blank, at most ``limit`` code
    points."""
    return hostile_text().map(lambda s: s[:limit]).filter(lambda s: s.strip() != "")


def at_chunk_boundary(chunk: int = 1024) -> st.SearchStrategy[str]:
    """Hostile text placed so that its characters fall on and around a chunk boundary: padding
    of 1-, 2- and 4-byte characters ending within a few bytes of ``chunk``."""
    pad_char = st.sampled_from(["a", "é", "😀"])
    slack = st.integers(min_value=-6, max_value=3)

    def build(char: str, off: int, tail: str) -> str:
        width = len(char.encode())
        return char * max(0, (chunk + off) // width) + tail

    return st.builds(build, pad_char, slack, hostile_text())


# --------------------------------------------------------------------------- the shared server


@contextlib.contextmanager
def shared_server(tmp: Path) -> Iterator[TmuxHarness]:
    """A private tmux server for one module: HOME and the database URL point under ``tmp``
    first, so the harness never sees the real ones."""
    PWNED.unlink(missing_ok=True)
    mp = pytest.MonkeyPatch()
    try:
        home = tmp / "home"
        home.mkdir(parents=True, exist_ok=True)
        mp.setenv("HOME", str(home))
        mp.setenv("CAFLEET_DATABASE_URL", f"sqlite:///{tmp / 'db' / 'cafleet.db'}")
        harness = TmuxHarness(mp)
        try:
            yield harness.start()
        finally:
            harness.close()
    finally:
        mp.undo()


def server_state(h: TmuxHarness) -> tuple[str, ...]:
    """What any stray tmux command would change: sessions, windows, panes, the server's global
    options and environment, its paste buffers (window names are left out: tmux renames windows
    after their running command by itself)."""
    return (
        h.tmux("display-message", "-p", "#{pid}"),
        h.tmux("list-sessions", "-F", "#{session_id} #{session_name}"),
        h.tmux("list-windows", "-a", "-F", "#{window_id}"),
        h.tmux("list-panes", "-a", "-F", "#{pane_id}"),
        h.tmux("show-options", "-g"),
        h.tmux("show-environment", "-g"),
        h.tmux("list-buffers"),
    )


def no_pwned(h: TmuxHarness) -> bool:
    """No format ever ran a hostile `#(touch …)` payload."""
    home = Path(h.server_env["HOME"])
    return not PWNED.exists() and not (home / HOME_PWNED).exists()


__all__ = [
    "COMMANDS",
    "PIECES",
    "HOME_PWNED",
    "PWNED",
    "at_chunk_boundary",
    "hostile_text",
    "label_text",
    "no_pwned",
    "server_state",
    "shared_server",
]
