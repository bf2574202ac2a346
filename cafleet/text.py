"""Text rules, one implementation each: ANSI stripping and capture windowing (docs/runtime.md §1.9),
the notification normaliser (docs/runtime.md §4.2), the wake-line sanitiser (docs/runtime.md §5.7), and
docs/cli.md §1.3's display sanitizers and truncation.

Standard library only and outside `cafleet.mux`, so the output module every command loads does
not pull in the multiplexer package.
"""

from __future__ import annotations

import re

ELLIPSIS = "\u2026"
NULL_CELL = "-"  # a table cell with no value
RETURN_SYMBOL = "\u23ce"  # ⏎

# Patterns, compiled on first use by `re`'s cache: the commands that only print never pay for them.
# ESC [ , parameter bytes 0x30-0x3F, intermediate bytes 0x20-0x2F, one final byte 0x40-0x7E.
_CSI = r"\x1b\[[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]"
# ESC ] through BEL or ESC \ (docs/runtime.md §1.9 Decision: hyperlinks appear in captures).
_OSC = r"(?s)\x1b\].*?(?:\x07|\x1b\\)"


# --------------------------------------------------------------------------- captures


def strip_ansi_line(line: str) -> str:
    """CSI, then OSC removal, then keep only the text after the last CR."""
    line = re.sub(_CSI, "", line)
    line = re.sub(_OSC, "", line)
    cut = line.rfind("\r")
    return line[cut + 1 :] if cut >= 0 else line


def strip_ansi(text: str) -> str:
    """`strip_ansi_line` applied to each `\\n`-separated line."""
    return "\n".join(strip_ansi_line(line) for line in text.split("\n"))


def window_capture(raw: str, lines: int, *, ansi: bool = False) -> str:
    """docs/runtime.md §1.9's windowing of a `capture-pane -p` output.

    Split on LF; drop the trailing run of lines that are blank after ANSI stripping; return the
    last ``lines`` lines joined with LF, no trailing newline. Default mode returns the stripped
    text; ``ansi`` mode keeps the original lines (stripping only judges blankness).
    """
    if lines < 1:
        raise ValueError(f"capture: lines must be positive, got {lines}")
    original = raw.split("\n")
    stripped = [strip_ansi_line(line) for line in original]
    end = len(stripped)
    while end > 0 and not stripped[end - 1].strip():
        end -= 1
    if end == 0:
        return ""
    chosen = (original if ansi else stripped)[:end]
    return "\n".join(chosen[-lines:])


# --------------------------------------------------------------------------- shared pieces


def _is_removed_control(ch: str) -> bool:
    code = ord(ch)
    return (code < 0x20 and ch != "\t") or code == 0x7F or 0x80 <= code <= 0x9F


def _fix_surrogates(text: str) -> str:
    if not any(0xD800 <= ord(ch) <= 0xDFFF for ch in text):
        return text
    return "".join("\ufffd" if 0xD800 <= ord(ch) <= 0xDFFF else ch for ch in text)


# The bidirectional embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069): in a line
# typed into an agent's pane they would reorder how the rest of it reads (U+202E shows what
# follows backwards), so a typed line shows U+FFFD in their place.
_BIDI = "[\u202a-\u202e\u2066-\u2069]"


def _fix_bidi(text: str) -> str:
    return re.sub(_BIDI, "\ufffd", text)


def truncate(text: str, limit: int) -> str:
    """Keep the first ``limit`` code points and append `…` only if something was cut.

    With limit 0 any non-empty text becomes `…` (docs/cli.md §1.3).
    """
    if limit < 0:
        raise ValueError("limit must not be negative")
    if len(text) <= limit:
        return text
    return text[:limit] + ELLIPSIS


def cut_naming_the_rest(text: str, limit: int, message_id: int) -> str:
    """`truncate`, and a cut says how much is left and how to read it whole
    (`… (+1,277 characters: cafleet message show 41)`), so a reader never takes the start of a
    message for all of it."""
    if len(text) <= limit:
        return text
    rest = len(text) - max(limit, 0)
    return (
        f"{truncate(text, limit)} (+{rest:,} character{'' if rest == 1 else 's'}: "
        f"cafleet message show {message_id})"
    )


# --------------------------------------------------------------------------- notification


def normalize_notification_text(text: str) -> str:
    """docs/runtime.md §4.2's normaliser (body and sender name of a notification line).

    1. CRLF, then each remaining CR, LF, U+2028 and U+2029 becomes `⏎`;
    2. other controls are removed (C0 except TAB, U+007F, C1);
    3. lone surrogates and bidirectional controls (U+202A-U+202E, U+2066-U+2069) become U+FFFD.
    """
    text = text.replace("\r\n", RETURN_SYMBOL)
    text = re.sub("[\r\n\u2028\u2029]", RETURN_SYMBOL, text)
    text = "".join(ch for ch in text if not _is_removed_control(ch))
    return _fix_bidi(_fix_surrogates(text))


def sanitize_wake_field(text: str) -> str:
    """docs/runtime.md §5.7's sanitiser for NAME and AGENT in the wake line."""
    text = text.replace("\r\n", RETURN_SYMBOL)
    text = re.sub("[\r\n\t\u2028\u2029]", RETURN_SYMBOL, text)
    text = "".join(ch for ch in text if not _is_removed_control(ch))
    text = _fix_bidi(_fix_surrogates(text))
    text = text.replace("`", "\u02cb")
    return text.replace("$(", "$\ufe59")


# --------------------------------------------------------------------------- display (docs/cli.md §1.3)


def _display_char(ch: str, keep: frozenset[str]) -> str:
    code = ord(ch)
    if code < 0x20:
        return ch if ch in keep else chr(0x2400 + code)
    if code == 0x7F:
        return "\u2421"
    if 0x80 <= code <= 0x9F or 0xD800 <= code <= 0xDFFF:
        return "\ufffd"
    return ch


_MULTI_KEEP = frozenset("\n\t")
_SINGLE_KEEP: frozenset[str] = frozenset()
_NEEDS_WORK = "[\x00-\x1f\x7f-\x9f\ud800-\udfff]"


def _needs_work(text: str) -> bool:
    # isprintable() is False for every character the pattern finds, so a printable text (most
    # names and cells) never needs the pattern: commands that print them never compile it.
    return not text.isprintable() and re.search(_NEEDS_WORK, text) is not None


def sanitize_multiline(text: str) -> str:
    """Display sanitizer for multi-line fields (bodies): keeps LF and TAB.

    Other C0 controls become control pictures (U+2400 + code), U+007F becomes `␡`, C1 controls
    (and lone surrogates) become U+FFFD. One code point maps to one.
    """
    if not _needs_work(text):
        return text
    return "".join(_display_char(ch, _MULTI_KEEP) for ch in text)


def sanitize_single_line(text: str) -> str:
    """Display sanitizer for single-line fields (names, descriptions, cells, scan headers):
    as `sanitize_multiline`, but LF and TAB become `␊` and `␉` too."""
    if not _needs_work(text):
        return text
    return "".join(_display_char(ch, _SINGLE_KEEP) for ch in text)


__all__ = [
    "BODY_LIMIT",
    "check_inline_body",
    "ELLIPSIS",
    "LINE_ID_LEN",
    "id_tag",
    "line_id",
    "NULL_CELL",
    "idle_text",
    "RETURN_SYMBOL",
    "normalize_notification_text",
    "sanitize_multiline",
    "sanitize_single_line",
    "sanitize_wake_field",
    "strip_ansi",
    "strip_ansi_line",
    "truncate",
    "window_capture",
]


# A message body: the CLI and the WebUI apply the same rules (docs/cli.md §1.9).
BODY_LIMIT = 1_048_576


def check_inline_body(text: str) -> str:
    """The positional checks, first failure wins; raises ValueError with the exact message."""
    try:
        size = len(text.encode("utf-8", "surrogateescape"))
    except UnicodeEncodeError:
        size = len(text.encode("utf-8", "surrogatepass"))
    if size > BODY_LIMIT:
        raise ValueError(f"text is too long ({size} bytes; the limit is {BODY_LIMIT})")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("text is not valid UTF-8") from None
    if "\x00" in text:
        raise ValueError("text may not contain NUL characters")
    if text.strip() == "":
        raise ValueError("text may not be empty")
    return text


# --- the id a wake or ping line ends with (docs/runtime.md §5.7) -----------------------------

LINE_ID_CHARS = "0123456789abcdefghijklmnopqrstuvwxyz"
LINE_ID_LEN = 4


def line_id() -> str:
    """A fresh 4-character id (base 36, random): every wake and ping line typed carries its own,
    so the screen check recognises this line, not an older copy of the same text."""
    import secrets

    return "".join(secrets.choice(LINE_ID_CHARS) for _ in range(LINE_ID_LEN))


def id_tag(kind: str, ident: str) -> str:
    """`[wake k3f9]` / `[ping k3f9]`: the end of the line, and what verifying it looks for."""
    return f"[{kind} {ident}]"


def idle_text(seconds: int | None) -> str:
    """`-`, `<n>s` below 60, `<n div 60>m` below 3600, else `<n div 3600>h`."""
    if seconds is None:
        return NULL_CELL
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h"
