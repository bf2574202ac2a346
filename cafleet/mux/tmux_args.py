"""How cafleet hands text to tmux: the one rule for every argument (docs/tmux-arguments.md).

tmux reads its command-line arguments with rules of its own (docs/tmux-arguments.md §1–§3):

- any argument ending in `;` separates commands (§1) and a trailing `\\;` becomes `;`;
- the start directory (`-c`) and window names (`-n`) are expanded as formats, where `#(...)`
  runs a shell command and `#{...}`, `#S`, ... are replaced (§2);
- a spawn command of exactly one argument is run by a shell (§3).

Every tmux call cafleet makes goes through :func:`command_argv` (in ``TmuxBackend.argv``), user
text in a format position goes through :func:`format_literal` first, and typed text is split by
:func:`typed_keys` (§4). Standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

CHUNK_BYTES = 1024
SEMICOLON_HEX = "3b"  # `;` sent with `send-keys -H`, never as the end of a literal argument
# A word no shell reads as anything but a command name: no blanks, quotes, `$`, `#`, globs,
# redirections, `;`, no `=` (an assignment) and no leading `-` (an option of `sh` itself).
_SHELL_INERT = re.compile(r"[A-Za-z0-9_./][A-Za-z0-9_./,:+@-]*")


def command_arg(arg: str) -> str:
    """One argument as tmux must receive it to read back exactly ``arg`` (§1).

    tmux drops a final `;` as a command separator unless a `\\` precedes it, in which case it
    keeps `;` and drops that `\\`. So an argument ending in `;` gets one `\\` inserted before
    its final `;`; every other argument is passed unchanged.
    """
    if arg.endswith(";"):
        return arg[:-1] + "\\;"
    return arg


def command_argv(args: Sequence[str]) -> list[str]:
    """:func:`command_arg` applied to every argument of one tmux command (§1)."""
    return [command_arg(arg) for arg in args]


def format_literal(text: str) -> str:
    """Text that a format-expanded argument (`-c`, `-n`) turns back into ``text`` (§2):
    every `#` doubled, so no `#(`, `#{` or `#S` survives expansion as anything but itself."""
    return text.replace("#", "##")


def spawn_command(argv: Sequence[str]) -> list[str]:
    """The spawn command's arguments (§3). tmux executes two or more arguments directly but
    runs a single one through ``sh -c``, so a single argument must be a plain word, which a
    shell runs exactly as tmux would have executed it."""
    if not argv:
        raise ValueError("a spawn command needs at least one argument")
    if len(argv) == 1 and not _SHELL_INERT.fullmatch(argv[0]):
        raise ValueError(
            "a one-argument spawn command would be read by a shell; pass the arguments apart"
        )
    return list(argv)


def chunk_utf8(text: str, limit: int = CHUNK_BYTES) -> list[str]:
    """Consecutive slices of at most ``limit`` UTF-8 bytes, cut at code point boundaries."""
    chunks: list[str] = []
    current: list[str] = []
    size = 0
    for ch in text:
        width = len(ch.encode("utf-8", "surrogatepass"))
        if current and size + width > limit:
            chunks.append("".join(current))
            current, size = [], 0
        current.append(ch)
        size += width
    if current:
        chunks.append("".join(current))
    return chunks


def typed_text(line: str) -> str:
    """What is typed for ``line`` (§4): TAB becomes a space (agent TUIs bind TAB to a key)."""
    return line.replace("\t", " ")


def typed_keys(line: str, limit: int = CHUNK_BYTES) -> Iterator[list[str]]:
    """The `send-keys` arguments (after `-t <pane>`) that type ``line`` exactly (§4).

    :func:`typed_text`, cut into chunks of at most ``limit`` UTF-8 bytes. A chunk never ends a
    literal argument on `;`: its trailing run of `;` is sent as hex keys (`-H 3b ...`), so
    the separator rule of §1 never applies to typed text. Everything else goes as
    ``-l -- <text>``: `-l` keeps key names such as `Enter` literal, `--` a leading `-`.
    """
    for chunk in chunk_utf8(typed_text(line), limit):
        body = chunk.rstrip(";")
        if body:
            yield ["-l", "--", body]
        tail = len(chunk) - len(body)
        if tail:
            yield ["-H", *([SEMICOLON_HEX] * tail)]


__all__ = [
    "CHUNK_BYTES",
    "chunk_utf8",
    "command_arg",
    "command_argv",
    "format_literal",
    "spawn_command",
    "typed_keys",
    "typed_text",
]
